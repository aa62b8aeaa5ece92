"""Matching copies one time window at a time: the same groups as one pass over the capture.

Copies of one transmission lie within the copy gate of each other (a few µs), and the
subframes of one A-MPDU within one PPDU (<= 5.5 ms), so a transmission is decided by
the rows around it. The capture is cut into windows of ``window_ns`` on the output clock;
each window is clustered (:func:`sniffsync.sync.copies.match_copies`) with ``margin_ns``
of rows either side, and keeps the groups whose output time (the merged table's
``ts_ns``: the A-MPDU cluster's time, else the mean of the copies, rounded as the
merged table rounds it) falls inside it. A group cut by the margin's edge lies in
the margin, so it belongs to the neighbour, where it is whole: every group is kept
exactly once, whole.

Group ids: a window's kept groups are numbered in the order the one-pass clustering
gives them (by content key, then time) after the groups of earlier windows. The merged
table compares ids only between groups of one output time, always kept by one window,
so it comes out in the same row order as with the one-pass ids. A kept group with a
copy within half the margin of the window's rows' edge (an assumption broken: a chain
of equal keys within the gate) raises instead of being kept wrong.
"""
from __future__ import annotations

import numpy as np

from sniffsync.errors import SyncError
from sniffsync.sync.ampdu import ppdu_clusters
from sniffsync.sync.copies import match_copies
from sniffsync.sync.order import group_mean, order_by

__all__ = ["MARGIN_NS", "match_windowed", "keep_window", "output_rank", "window_bounds"]

MARGIN_NS = 50_000_000       # rows either side of a window: >> a PPDU (5.5 ms) + copy gates


def window_bounds(t_ns: np.ndarray, window_ns: int) -> np.ndarray:
    """Window edges ``[t0, t0 + w, ...]`` covering every ``t_ns`` (last edge exclusive)."""
    if len(t_ns) == 0:
        return np.zeros(1, np.int64)
    lo, hi = int(t_ns.min()), int(t_ns.max())
    return lo + np.arange((hi - lo) // window_ns + 2, dtype=np.int64) * np.int64(window_ns)


def match_windowed(df, common_ns, t_ns, synced, gate_ns: float, key, window_ns: int,
                   margin_ns: int = MARGIN_NS, hook=None, clock=None,
                   clock_gate_ns=None) -> np.ndarray:
    """Group id per row, as ``match_copies`` over the whole table, one window at a time.

    Parameters
    ----------
    df : DataFrame
        Frame table (``sniffer`` and the merge key's columns; ``key`` given).
    common_ns : int64 array
        Time on the common clock (the gate applies to it).
    t_ns : int64 array
        Output time (the windows cut it): ``common_ns`` mapped to the epoch, or the
        capture time of unsynced rows.
    synced, gate_ns, key
        As :func:`sniffsync.sync.copies.match_copies`.
    window_ns, margin_ns : int
        Window length and rows taken either side of it.
    clock, clock_gate_ns : arrays, optional
        Clock per row and copy gate per clock (:func:`sniffsync.sync.copies.copy_gates`).
    hook : callable, optional
        ``hook(rows)`` with the row indices of each window as it is matched (tests
        check the rows held at once).
    """
    n = len(df)
    window_ns, margin_ns = int(window_ns), int(margin_ns)
    if window_ns <= 0 or margin_ns <= 0:
        raise ValueError("window_ns and margin_ns must be > 0")
    t_ns = np.asarray(t_ns, np.int64)
    group = np.full(n, -1, np.int64)
    if n == 0:
        return group
    edges = window_bounds(t_ns, window_ns)
    sniffer = df["sniffer"].to_numpy(np.int64)
    base = edges[0] - margin_ns
    by_t = order_by(t_ns - base)                 # rows in output-time order
    t_sorted = t_ns[by_t]
    next_id = 0
    for lo, hi in zip(edges[:-1], edges[1:]):    # per window: a handful of numpy passes
        a, b = np.searchsorted(t_sorted, [lo - margin_ns, hi + margin_ns])
        if a == b:
            continue                             # an empty stretch of the capture
        rows = np.sort(by_t[a:b])                # the table's order: ties as in one pass
        if hook is not None:
            hook(rows)
        g = match_copies(df.iloc[rows], common_ns[rows], synced[rows], gate_ns, key[rows],
                         None if clock is None else np.asarray(clock)[rows], clock_gate_ns)
        mine, g_own = keep_window(g, sniffer[rows], t_ns[rows], (lo, hi), margin_ns)
        group[rows[mine]] = g_own + next_id
        next_id += int(g_own.max()) + 1 if len(g_own) else 0
    if (group < 0).any():                        # every row is in the group of one window
        raise SyncError("windowed matching left rows without a group (a bug)")
    return group


def _output_time(sniffer, t, g, with_rank: bool = False):
    """Per group, its ``ts_ns`` in :func:`sniffsync.sync.copies.merged_table` (same rule),
    and with ``with_rank`` its rank in its A-MPDU (subframes sent after it)."""
    ng = int(g.max()) + 1
    _, rank, t_cl = ppdu_clusters(sniffer, t, g, ng)
    out = np.where(t_cl >= 0, t_cl, group_mean(g, t, ng))
    return (out, rank) if with_rank else out


def output_rank(sniffer, t, g) -> np.ndarray:
    """Per group id, its row in the merged table without duplicates (the order of
    :func:`sniffsync.sync.copies.merged_table`: time, A-MPDU order, group id), so that
    a table with every copy numbers its transmissions as the one without."""
    if len(g) == 0:
        return np.zeros(0, np.int64)
    ts, rank = _output_time(np.asarray(sniffer, np.int64), np.asarray(t, np.int64),
                            np.asarray(g, np.int64), with_rank=True)
    order = order_by(ts - ts.min(), np.argsort(rank.max() - rank, kind="stable"))
    out = np.empty(len(order), np.int64)
    out[order] = np.arange(len(order))
    return out


def keep_window(g, sniffer, t, core, margin_ns: int):
    """``(rows, ids)``: the rows of a window's groups whose output time is in ``core``
    (``[lo, hi)``) and their group ids renumbered 0, 1, ... in the local order.

    ``g``: group per row of the window (rows in table order), ``t``: output time per row.
    """
    lo, hi = core
    out_t = _output_time(sniffer, t, g)
    ng = len(out_t)
    first = np.full(ng, np.iinfo(np.int64).max)
    last = np.full(ng, np.iinfo(np.int64).min)
    np.minimum.at(first, g, t)
    np.maximum.at(last, g, t)
    mine = (out_t >= lo) & (out_t < hi)
    if ((first[mine] < lo - margin_ns // 2) | (last[mine] >= hi + margin_ns // 2)).any():
        raise SyncError(f"copies of one transmission span more than {margin_ns / 2e6:g} ms: "
                        "merge without --window-s")
    new_id = np.cumsum(mine) - 1
    rows = np.flatnonzero(mine[g])
    return rows, new_id[g[rows]]
