from flask import Blueprint, abort, current_app, jsonify, request

from web.views import int_arg, range_args, run
from web.views.cached import cached_json

bp = Blueprint("timeline", __name__, url_prefix="/api")


@bp.get("/meta")
def meta():
    return cached_json("meta", lambda: run().meta())


@bp.get("/tile")
def tile():
    r = run()
    t0, t1 = range_args(r.meta()["span_ns"])
    px = int_arg("px", 1000, lo=1, hi=current_app.config["MAX_TILE_PX"])
    lanes = request.args.get("lanes", "station")
    if lanes not in ("station", "sniffer"):
        abort(400, description="parameter 'lanes' must be 'station' or 'sniffer'")
    # stations=1: bucketed sniffer lanes carry each bucket's station mask (a page with a filter on)
    sta = bool(int_arg("stations", 0, lo=0, hi=1)) and lanes == "sniffer"
    return cached_json(("tile", t0, t1, px, lanes, sta), lambda: r.tile(t0, t1, px, lanes, arrays=True, stations=sta))


@bp.get("/ppdu/<uint:ppdu_id>")
def ppdu(ppdu_id: int):
    d = run().ppdu_detail(ppdu_id)
    if d is None:
        abort(404)
    return jsonify(d)


@bp.get("/tracks")
def tracks():
    """Counter tracks in ``n`` buckets over [t0, t1) (run-relative ns); size ~ n, not packets."""
    r = run()
    t0, t1 = range_args(r.meta()["span_ns"])
    n = int_arg("n", 500, lo=1, hi=2000)
    return cached_json(("tracks", t0, t1, n), lambda: r.tracks(t0, t1, n, arrays=True))


@bp.get("/find")
def find():
    """The next event of a class (``what``: collision, failed, unanswered, event) at or after
    ``after``, or with ``before=1`` the last one before it."""
    from viz.runview import FIND
    r = run()
    what = request.args.get("what", "")
    if what not in FIND:
        abort(400, description=f"parameter 'what' must be one of {', '.join(FIND)}")
    after = int_arg("after", lo=0, hi=r.meta()["span_ns"] + 1)
    before = int_arg("before", 0, lo=0, hi=1)
    return jsonify(r.find(what, after, before=bool(before)))


@bp.get("/search")
def search():
    """``q``: a MAC, an IPv4 address, a port or ``seq N``; ``after``: where to look from (ns)."""
    r = run()
    q = request.args.get("q", "")
    if not q.strip() or len(q) > 64:
        abort(400, description="parameter 'q' must be 1-64 characters")
    after = int_arg("after", 0, lo=0, hi=r.meta()["span_ns"] + 1)
    return jsonify(r.search(q, after))
