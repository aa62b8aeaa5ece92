"""The app's JSON encoder: orjson when it is installed, else Flask's (the standard library's).

A tile or a counter-track answer is tens of thousands of numbers; the standard library
encodes them at ~0.25 µs each (14 ms for a 250 kB whole-run tile, as long as computing it),
orjson ~5x faster. Under concurrent clients that time holds the GIL, so it delays every
other request. Same JSON either way (sorted keys, compact), except that orjson writes
non-ASCII text as UTF-8 instead of ``\\uXXXX`` escapes and a non-finite float as ``null``
(the standard library writes ``NaN``, which ``JSON.parse`` refuses); anything orjson cannot
encode (an integer beyond 64 bits, a non-string key) goes to the standard library.
"""
from __future__ import annotations

import importlib
import importlib.util
from flask.json.provider import DefaultJSONProvider

from viz.jsonable import dumpb, numpy_default

# optional (a third-party accelerator, not ours): the standard library does the same, slower
orjson = importlib.import_module("orjson") if importlib.util.find_spec("orjson") else None

__all__ = ["FastJSONProvider"]

_COMPACT = {"separators": (",", ":")}


def _default(o):
    """Numpy values (viz.jsonable), then what Flask's encoder takes (dates, dataclasses, ...)."""
    try:
        return numpy_default(o)
    except TypeError:
        return DefaultJSONProvider.default(o)


class FastJSONProvider(DefaultJSONProvider):
    """Also writes numpy arrays and scalars (the views' columns), with or without orjson."""

    default = staticmethod(_default)

    def dumpb(self, obj) -> bytes:
        """Compact JSON bytes with sorted keys (what :func:`flask.jsonify` sends), no str round
        trip; pre-encoded parts (:class:`viz.jsonable.Raw`) spliced in."""
        return dumpb(obj, self.default, self.ensure_ascii)

    def dumps(self, obj, **kwargs) -> str:
        if orjson is not None and (not kwargs or kwargs == _COMPACT):
            try:
                return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS | orjson.OPT_SERIALIZE_NUMPY).decode()
            except TypeError:           # orjson.JSONEncodeError: a type or value only json handles
                pass
        return super().dumps(obj, **kwargs)
