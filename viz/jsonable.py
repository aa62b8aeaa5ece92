"""Answers built from numpy arrays and pre-encoded JSON, and their encoder.

The server's views return numpy arrays inside their dicts: orjson's numpy mode writes them
without making a Python object per number, which is most of a tile's or a track's cost
otherwise. A column whose values never change (a brushed range's RTT samples, Jain per
window) is encoded once, at load, as :class:`Texts`; a range's series is then a slice of
those bytes (:class:`Raw`), put into the answer as is by :func:`dumpb`. Callers that want
plain Python values (the report, the tests, ``==`` on answers) pass a dict through
:func:`plain`: the same values, a float NaN as None (what the encoders write as ``null``).
"""
from __future__ import annotations

import importlib
import importlib.util
import json

import numpy as np

from viz.keyed import ranges

# optional (a third-party accelerator, not ours): the standard library does the same, slower
orjson = importlib.import_module("orjson") if importlib.util.find_spec("orjson") else None

__all__ = ["plain", "dumpb", "Raw", "Texts", "numpy_default"]

_MARK = "\x00sniffsync-raw\x00"               # what a Raw is written as before it is spliced in
_MARK_JSON = b'"\\u0000sniffsync-raw\\u0000"'   # ... as both encoders write it


class Raw:
    """JSON text (bytes) that :func:`dumpb` puts into an answer as is."""
    __slots__ = ("data",)

    def __init__(self, data: bytes):
        self.data = data


def numpy_default(o):
    """Numpy values for the standard library's encoder, as orjson writes them (NaN as null)."""
    if isinstance(o, np.ndarray):
        return plain(o)
    if isinstance(o, np.generic):
        return None if isinstance(o, np.floating) and not np.isfinite(o) else o.item()
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


def dumpb(obj, default=numpy_default, ensure_ascii: bool = True) -> bytes:
    """Compact JSON with sorted keys: orjson when installed (numpy arrays natively), else the
    standard library with ``default``; every :class:`Raw` spliced in where it stands."""
    raws = []

    def hook(o):
        if isinstance(o, Raw):
            raws.append(o.data)
            return _MARK
        return default(o)
    body = None
    if orjson is not None:
        try:
            body = orjson.dumps(obj, default=hook, option=orjson.OPT_SORT_KEYS | orjson.OPT_SERIALIZE_NUMPY)
        except TypeError:             # a type or value only json handles
            raws.clear()
    if body is None:
        body = json.dumps(obj, default=hook, sort_keys=True, separators=(",", ":"),
                          ensure_ascii=ensure_ascii).encode()
    if not raws:
        return body
    parts = body.split(_MARK_JSON)
    out = [parts[0]]
    for raw, part in zip(raws, parts[1:]):
        out += (raw, part)
    return b"".join(out)


class Texts:
    """A numeric column's values as :func:`dumpb` writes them, so that a selection of them is
    a slice of bytes instead of an encoding."""

    def __init__(self, values: np.ndarray):
        values = np.ascontiguousarray(values)
        self.n = len(values)
        self.buf = np.frombuffer(dumpb(values), np.uint8) if self.n else np.zeros(0, np.uint8)
        sep = np.flatnonzero(self.buf == ord(","))          # numbers hold no comma
        self.start = np.concatenate([[1], sep + 1]) if self.n else np.zeros(0, np.int64)
        self.stop = np.concatenate([sep, [len(self.buf) - 1]]) if self.n else np.zeros(0, np.int64)

    def select(self, pos) -> Raw:
        """The JSON array of the values at ``pos`` (a slice or positions)."""
        if isinstance(pos, slice):
            a, b, _ = pos.indices(self.n)
            if b <= a:
                return Raw(b"[]")
            return Raw(b"[" + self.buf[self.start[a]:self.stop[b - 1]].tobytes() + b"]")
        pos = np.asarray(pos, np.int64)
        if not len(pos):
            return Raw(b"[]")
        text = self.buf[ranges(self.start[pos], self.stop[pos] + 1)]     # each with its separator
        text[-1] = ord("]")
        return Raw(b"[" + text.tobytes())


def plain(obj):
    """``obj`` with every ndarray (at any depth in dicts, lists, tuples) as a list, NaN as
    None, and every :class:`Raw` as the value its JSON text stands for."""
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind == "f" and not np.isfinite(obj).all():
            o = obj.astype(object)
            o[~np.isfinite(obj)] = None
            return o.tolist()
        return obj.tolist()
    if isinstance(obj, Raw):
        return json.loads(obj.data)
    if isinstance(obj, dict):
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [plain(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(plain(v) for v in obj)
    return obj
