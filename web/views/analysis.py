from flask import Blueprint, abort, jsonify, request

from web.views import int_arg, run

bp = Blueprint("analysis", __name__, url_prefix="/api")


@bp.get("/analysis")
def analysis():
    r = run()
    span = r.meta()["span_ns"]
    if "t0" in request.args or "t1" in request.args:
        t0, t1 = int_arg("t0", lo=0, hi=span), int_arg("t1", lo=0, hi=span + 1)
        if t1 <= t0:
            abort(400, description="t1 must be greater than t0")
        return jsonify(r.analysis(t0, t1))
    return jsonify(r.analysis())
