"""Searches of many sorted queries per group in one array keyed by group.

The tiles and counter tracks keep one array per lane or series concatenated, each item keyed
``group * stride + time + 1``, so one ``searchsorted`` answers every group's bucket edges. A
binary search over the whole array misses the cache at most of its ~20 steps; when the
queries' window holds a small part of the array, :func:`search_within` searches a compact
copy of just that part (the items between each group's first and last query), which is the
same answer (every key outside the window is below or above all of the group's queries).
"""
from __future__ import annotations

import numpy as np

__all__ = ["ranges", "search_within"]

SMALL = 8             # the window is copied when it holds under 1/SMALL of the array


def ranges(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The positions [a[i], b[i]) for every i, concatenated (an empty range where b <= a)."""
    n = np.maximum(b - a, 0)
    return np.repeat(a - np.cumsum(n) + n, n) + np.arange(int(n.sum()))


def search_within(keys: np.ndarray, k0: np.ndarray, k1: np.ndarray, q: np.ndarray,
                  side: str = "left") -> np.ndarray:
    """``np.searchsorted(keys, q, side)`` for queries ``q`` (groups, m) whose answers in row g
    are known to lie in [k0[g], k1[g]]."""
    n = np.maximum(k1 - k0, 0)
    if int(n.sum()) * SMALL >= len(keys):
        return np.searchsorted(keys, q, side)
    shift = (k0 - (np.cumsum(n) - n))[:, None]
    return np.searchsorted(keys[ranges(k0, k1)], q, side) + shift
