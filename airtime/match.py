"""Keyed matching in time windows, the join every detector needs.

"For each RTS, the CTS to its transmitter that starts one SIFS after it ends" is:
for each row of A, the first row of B with the same key whose time falls in
``[t_a + lo, t_a + hi]``. Keys are made dense, B is sorted once by (key, time), and
each query becomes one ``searchsorted`` on a combined ``key * M + time_rank`` integer
(ranks instead of raw times so the product never overflows int64).
"""
from __future__ import annotations

import numpy as np

__all__ = ["match_in_window", "overlapping_pairs", "MAX_PAIRS_PER_INTERVAL"]

# real air time overlaps are rare (collisions, a hidden station): far below this many per PPDU
MAX_PAIRS_PER_INTERVAL = 8


def match_in_window(key_a, t_a, key_b, t_b, lo, hi) -> np.ndarray:
    """Index into B of the first row with ``key_b == key_a`` and ``t_a+lo <= t_b <= t_a+hi``.

    Parameters
    ----------
    key_a, key_b : array of int
        Match keys (e.g. MAC addresses as integers).
    t_a, t_b : array of int64
        Times in ns.
    lo, hi : int or array of int
        Window relative to ``t_a`` (inclusive).

    Returns
    -------
    ndarray of int64
        ``-1`` where no row of B qualifies.

    Examples
    --------
    >>> match_in_window([1, 2], [0, 0], [2, 1, 1], [5, 30, 9], 4, 10).tolist()
    [2, 0]
    """
    key_a, key_b = np.asarray(key_a), np.asarray(key_b)
    t_a, t_b = np.asarray(t_a, np.int64), np.asarray(t_b, np.int64)
    na, nb = len(key_a), len(key_b)
    out = np.full(na, -1, np.int64)
    if na == 0 or nb == 0:
        return out
    _, codes = np.unique(np.concatenate([key_a, key_b]), return_inverse=True)
    ca, cb = codes[:na].astype(np.int64), codes[na:].astype(np.int64)
    order = np.lexsort((t_b, cb))
    tb_sorted = np.sort(t_b)
    m = nb + 1
    kb = cb[order] * m + np.searchsorted(tb_sorted, t_b[order], "left")
    start = t_a + np.asarray(lo, np.int64)
    q = ca * m + np.searchsorted(tb_sorted, start, "left")
    pos = np.searchsorted(kb, q, "left")
    ok = pos < nb
    p = np.where(ok, pos, 0)
    cand = order[p]
    ok &= (cb[cand] == ca) & (t_b[cand] >= start) & (t_b[cand] <= t_a + np.asarray(hi, np.int64))
    out[ok] = cand[ok]
    return out


def overlapping_pairs(start, end) -> tuple[np.ndarray, np.ndarray]:
    """All pairs ``(i, j)``, ``i != j``, of intervals ``[start, end)`` that overlap.

    Sorted by start, interval ``j > i`` overlaps ``i`` iff ``start[j] < end[i]``, so the
    partners of ``i`` are one contiguous run found with ``searchsorted``; the runs are
    expanded with ``repeat``/``cumsum`` (cost proportional to the number of pairs).
    Returns indices into the original arrays with ``start[i] <= start[j]``.
    """
    start, end = np.asarray(start, np.int64), np.asarray(end, np.int64)
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    first = np.arange(len(s)) + 1
    last = np.searchsorted(s, e, "left")
    cnt = np.maximum(last - first, 0)
    total = int(cnt.sum())
    if total > MAX_PAIRS_PER_INTERVAL * len(s) + (1 << 20):   # (pairs cost ~50 B each, next)
        from sniffsync.errors import CaptureError
        raise CaptureError(f"{total:,} pairs of overlapping PPDUs among {len(s):,}: their stamps put "
                           "many on top of each other (a broken capture clock?)")
    i = np.repeat(np.arange(len(s)), cnt)
    # j runs first[i] .. last[i]-1 for each i
    offs = np.arange(cnt.sum()) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    j = first[i] + offs
    return order[i], order[j]
