"""Blueprints: pages (the HTML shell), timeline (tiles, PPDU details), analysis (charts' data)."""
from flask import abort, current_app, request


def run():
    r = current_app.extensions.get("sniffsync.run")
    if r is None:
        abort(404)
    return r


def int_arg(name: str, default=None, lo=None, hi=None) -> int | None:
    """Integer query parameter, or 400 with a message naming it."""
    raw = request.args.get(name)
    if raw is None or raw == "":
        if default is None:
            abort(400, description=f"missing parameter {name!r}")
        return default
    try:
        v = int(raw)
    except ValueError:
        abort(400, description=f"parameter {name!r} must be an integer, got {raw[:40]!r}")
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        abort(400, description=f"parameter {name!r} out of range [{lo}, {hi}]")
    return v
