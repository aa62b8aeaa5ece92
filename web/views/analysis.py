from flask import Blueprint, abort, request

from web.views import int_arg, run
from web.views.cached import cached_json

bp = Blueprint("analysis", __name__, url_prefix="/api")


@bp.get("/analysis")
def analysis():
    r = run()
    span = r.meta()["span_ns"]
    if "t0" in request.args or "t1" in request.args:
        t0, t1 = int_arg("t0", lo=0, hi=span), int_arg("t1", lo=0, hi=span + 1)
        if t1 <= t0:
            abort(400, description="t1 must be greater than t0")
        return cached_json(("analysis", t0, t1), lambda: r.analysis(t0, t1))
    return cached_json(("analysis",), r.analysis)
