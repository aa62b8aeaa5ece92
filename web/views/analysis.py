import re

from flask import Blueprint, abort, request

from web.views import parse_int, range_args, run
from web.views.cached import cached_json

bp = Blueprint("analysis", __name__, url_prefix="/api")

_MAC = re.compile(r"[0-9a-f]{2}(:[0-9a-f]{2}){5}")


def _list(name: str, ok, what: str):
    """A comma-separated filter parameter as a sorted tuple (None when absent); 400 naming it
    when an element is not ``ok``."""
    raw = request.args.get(name)
    if raw is None:
        return None
    items = [v for v in raw.split(",") if v != ""]
    for v in items:
        if not ok(v):
            abort(400, description=f"parameter {name!r}: {v[:40]!r} is not {what}")
    return tuple(sorted(set(items)))


def selection_args(meta: dict):
    """``(t0, t1, stations, kinds)`` of a request's selection: the range (both or neither,
    run-relative ns) and the station / frame-kind filters (None when absent); 400 when bad."""
    t0 = t1 = None
    if "t0" in request.args or "t1" in request.args:
        t0, t1 = range_args(meta["span_ns"])
    stations = _list("sta", lambda v: _MAC.fullmatch(v) is not None, "a MAC address (aa:bb:cc:dd:ee:ff)")
    kinds = _list("kinds", lambda v: v in meta["kinds"], f"one of {', '.join(meta['kinds'])}")
    return t0, t1, stations, kinds


@bp.get("/analysis")
def analysis():
    r = run()
    t0, t1, stations, kinds = selection_args(r.meta())
    flows = _list("flows", lambda v: re.fullmatch(r"[0-9]{1,6}", v) is not None, "a flow number")
    flows = tuple(sorted(parse_int("flows", v, 0, 999_999) for v in flows)) if flows is not None else None
    # an analysis index answers with numpy columns, which the encoder writes without a list
    fast = {"arrays": True} if getattr(r._analysis, "takes_arrays", False) else {}
    if stations is None and kinds is None and flows is None:
        if t0 is None:
            return cached_json(("analysis",), r.analysis)
        return cached_json(("analysis", t0, t1), lambda: r.analysis(t0, t1, **fast))
    if not getattr(r._analysis, "takes_filters", False):
        abort(400, description="this server's analysis takes no 'sta', 'kinds' or 'flows' filters")
    return cached_json(("analysis", t0, t1, stations, kinds, flows),
                       lambda: r.analysis(t0, t1, stations=stations, kinds=kinds, flows=flows, **fast))
