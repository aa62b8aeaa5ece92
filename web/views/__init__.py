"""Blueprints: pages (the HTML shell), timeline (tiles, PPDU details), analysis (charts' data)."""
import re

from flask import abort, current_app, request
from werkzeug.routing import BaseConverter

# ASCII digits only: int() would also take "5_000", "+5", " 5" and "٥" (Arabic-Indic five)
_INT = re.compile(r"-?[0-9]{1,18}")


class UIntConverter(BaseConverter):
    """``<uint:name>`` path segment: 1-18 ASCII digits (Werkzeug's ``int`` matches any Unicode digit)."""
    regex = r"[0-9]{1,18}"

    def to_python(self, value):
        return int(value)

    def to_url(self, value):
        return str(int(value))


def run():
    r = current_app.extensions.get("sniffsync.run")
    if r is None:
        abort(404)
    return r


def parse_int(name: str, raw: str, lo=None, hi=None) -> int:
    """``raw`` as an integer in [lo, hi], or 400 naming the parameter.

    Only ``^-?[0-9]+$`` is an integer here; a '-' passes the syntax but any bound ``lo >= 0``
    refuses it, so negative values exist only where ``lo`` allows them.
    """
    if _INT.fullmatch(raw) is None:
        if re.fullmatch(r"-?[0-9]+", raw):                 # digits, just too many of them
            abort(400, description=f"parameter {name!r} out of range [{lo}, {hi}]")
        abort(400, description=f"parameter {name!r} must be an integer (ASCII digits), got {raw[:40]!r}")
    v = int(raw)
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        abort(400, description=f"parameter {name!r} out of range [{lo}, {hi}]")
    return v


def int_arg(name: str, default=None, lo=None, hi=None) -> int | None:
    """Integer query parameter (see :func:`parse_int`), or 400 with a message naming it."""
    raw = request.args.get(name)
    if raw is None or raw == "":
        if default is None:
            abort(400, description=f"missing parameter {name!r}")
        return default
    return parse_int(name, raw, lo, hi)


def range_args(span_ns: int) -> tuple[int, int]:
    """``t0``, ``t1`` (run-relative ns, ``0 <= t0 < t1 <= span + 1``); 400 when bad."""
    t0, t1 = int_arg("t0", lo=0, hi=span_ns), int_arg("t1", lo=0, hi=span_ns + 1)
    if t1 <= t0:
        abort(400, description="t1 must be greater than t0")
    return t0, t1
