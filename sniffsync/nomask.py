"""numpy helpers that do not import ``numpy.ma``: ``np.median``, ``np.percentile``,
``np.unique`` (without ``return_*``) and ``np.union1d`` import it on first use (~7 ms of a
command's start-up, issue 17). numpy only, so every layer may use them."""
from __future__ import annotations

import numpy as np

__all__ = ["median", "percentile", "distinct"]


def median(v: np.ndarray) -> float:
    """``np.median`` of finite values (that one imports numpy.ma: ~7 ms of start-up): the
    middle value, or the mean of the two middle ones."""
    n = len(v)
    mid = np.partition(v, [(n - 1) // 2, n // 2])
    return float(np.mean(mid[[(n - 1) // 2, n // 2]]))


def percentile(v: np.ndarray, q: float) -> float:
    """``np.percentile(v, q)`` (method linear) of finite values, to the bit (that one imports
    numpy.ma too): index ``(n - 1) * q / 100``, numpy's interpolation between its neighbours."""
    n = len(v)
    at = (n - 1) * (q / 100)
    i = int(at)
    j = min(i + 1, n - 1)
    mid = np.partition(v, [i, j])
    a, b, g = mid[i], mid[j], at - i
    d = b - a
    return float(b - d * (1 - g) if g >= 0.5 else a + d * g)


def distinct(a) -> np.ndarray:
    """``np.unique(a)`` of a 1-D array: its distinct values, ascending."""
    a = np.sort(np.asarray(a).ravel())
    return a[np.r_[True, a[1:] != a[:-1]]] if len(a) else a
