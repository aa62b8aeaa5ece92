"""``/api/export.pcapng`` (the selected range and filters as a pcapng download) and
``/api/tsg`` (a flow's time-sequence graph)."""
from flask import Blueprint, Response, abort, jsonify

from web.views import int_arg, run
from web.views.analysis import selection_args

bp = Blueprint("export", __name__, url_prefix="/api")


@bp.get("/export.pcapng")
def export_pcapng():
    """Optional ``t0``, ``t1`` (both, run-relative ns), ``sta`` (colon-hex MACs), ``kinds``
    (names of ``meta.kinds``), comma-separated as for ``/api/analysis``."""
    r = run()
    pcap = getattr(r, "pcap", None)
    if pcap is None:
        abort(404)
    t0, t1, stations, kinds = selection_args(r.meta())
    body, n = pcap.export(t0, t1, stations, kinds)
    name = "sniffsync" + (f"-{t0 // 1000}-{t1 // 1000}us" if t0 is not None else "") + ".pcapng"
    resp = Response(body, mimetype="application/x-pcapng")
    resp.headers["Content-Disposition"] = f'attachment; filename="{name}"'
    resp.headers["X-Sniffsync-Packets"] = str(n)
    return resp


@bp.get("/tsg")
def tsg():
    """``flow``: a position in the whole run's ``flows``: its time-sequence graph (viz.tsg)."""
    r = run()
    if getattr(r, "tsg", None) is None:
        abort(404)
    flows = (r.analysis() or {}).get("flows") or []
    i = int_arg("flow", lo=0, hi=max(0, len(flows) - 1))
    if i >= len(flows):
        abort(400, description="parameter 'flow' out of range: the run has no flows")
    return jsonify(r.tsg.graph(flows[i]["label"]))
