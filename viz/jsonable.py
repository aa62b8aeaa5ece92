"""Answers built from numpy arrays, as plain Python values.

The server's views return numpy arrays inside their dicts: the JSON encoder (orjson's numpy
mode, :mod:`web.jsonfast`) writes them without making a Python object per number, which is
most of a tile's or a track's cost otherwise. Callers that want plain lists (the report, the
tests, ``==`` on answers) pass the dict through :func:`plain`: the same values, a float NaN as
None (what the JSON encoders write as ``null``).
"""
from __future__ import annotations

import numpy as np

__all__ = ["plain"]


def plain(obj):
    """``obj`` with every ndarray (at any depth in dicts, lists, tuples) as a list; NaN -> None."""
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind == "f" and not np.isfinite(obj).all():
            o = obj.astype(object)
            o[~np.isfinite(obj)] = None
            return o.tolist()
        return obj.tolist()
    if isinstance(obj, dict):
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [plain(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(plain(v) for v in obj)
    return obj
