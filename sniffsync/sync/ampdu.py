"""Subframes of one A-MPDU in the merged table: one time, and the order the air sent them.

Every subframe of an A-MPDU carries the PPDU's stamp, so in a sniffer's capture only
its record order tells the subframes apart. Merged copies get the mean common time of
their copies, which differs between subframes heard by different sets of sniffers: a
sort by time scrambles them. Here, per sniffer, runs of consecutive records with one
common time are its PPDUs; transmissions (groups of copies) linked through such PPDUs
form one *cluster* (connected components, by label propagation), which gets one time.
Inside a cluster every sniffer's record order is a chain of edges; a transmission's
``rank`` is the longest path from it to the cluster's end (Bellman-Ford style passes over
the edges into ranks that just grew, started from each sniffer's own count of later
subframes), so sorting by ``-rank``
keeps every sniffer's order (a topological order). Transmissions no sniffer saw in one
PPDU together keep their group order. Caveat: sniffers that contradict each other
(a cycle) stop the passes at :data:`MAX_PASSES`.
"""
from __future__ import annotations

import numpy as np

from sniffsync.sync.order import order_by

__all__ = ["ppdu_clusters", "MAX_PASSES"]

MAX_PASSES = 1100          # > the longest A-MPDU (1024 subframes, HE)


def ppdu_clusters(sniffer, common_ns, group, n_groups: int):
    """``(cluster, rank, time)`` per group: its A-MPDU cluster id, the number of
    subframes sent after it in that cluster (0 for a frame sent alone), and the common
    time of the cluster: that of the sniffer PPDU holding most of its subframes (a
    sniffer that missed some places the end of a start-stamped PPDU early), ties to the
    earliest row; -1 for groups alone in their cluster (keep their own time).

    Parameters
    ----------
    sniffer, common_ns, group : int arrays, shape (n,)
        Per copy (rows of each sniffer in its capture order): sniffer, time on the
        common clock, transmission (group) id ``0..n_groups-1``.
    """
    sniffer, common_ns, group = (np.asarray(a, np.int64) for a in (sniffer, common_ns, group))
    n = len(group)
    cluster, rank = np.arange(n_groups, dtype=np.int64), np.zeros(n_groups, np.int64)
    alone = np.full(n_groups, -1, np.int64)
    if n < 2:
        return cluster, rank, alone
    link = (sniffer[1:] == sniffer[:-1]) & (common_ns[1:] == common_ns[:-1])   # same PPDU
    if not link.any():
        return cluster, rank, alone
    new = np.r_[True, ~link]
    ppdu = np.cumsum(new) - 1                     # per row; ascends along the rows
    p_start = np.flatnonzero(new)
    whole = False                                 # the components converged
    for _ in range(MAX_PASSES):                   # components: a few passes
        lab_p = np.minimum.reduceat(cluster[group], p_start)
        nxt = cluster.copy()             # a group's own label is among its PPDUs' (<= it)
        np.minimum.at(nxt, group, lab_p[ppdu])    # (no sort of the rows by group)
        if (nxt == cluster).all():
            whole = True
            break
        cluster = nxt
    # longest path to the cluster's end along every sniffer's record order
    p_end = np.r_[p_start[1:], n]
    after = p_end[ppdu] - 1 - np.arange(n)        # later subframes in this sniffer's PPDU
    np.maximum.at(rank, group, after)
    src, dst = group[:-1][link], group[1:][link]
    _longest_paths(rank, src, dst, cluster if whole else None)
    return cluster, rank, _cluster_time(cluster, group, ppdu, p_start, common_ns, alone)


def _longest_paths(rank, src, dst, cluster=None) -> None:
    """Bellman-Ford passes, in place: ``rank[s] >= rank[d] + 1`` for every edge ``s -> d``.

    Only edges into a rank that just grew can grow more: the first pass takes every edge,
    each later one those into the groups the last grew (the edges sorted by ``dst``, so a
    grown group's are one slice), so a pass costs its grown groups, not all edges; and
    with ``cluster`` (labels no edge crosses: converged components) only the edges of the
    clusters where the first pass grew a rank are sorted. Ranks only grow, by the maximum
    of what the pass's edges offer: the edge set of each pass, not its order, sets the result.
    """
    cand = rank[dst] + 1
    grow = cand > rank[src]
    if not grow.any():
        return
    s, cand = src[grow], cand[grow]
    if cluster is not None:              # the other clusters' ranks hold already
        hot = np.zeros(len(rank), bool)
        hot[cluster[s]] = True
        keep = hot[cluster[dst]]
        src, dst = src[keep], dst[keep]
    by_dst = order_by(dst)
    src_d, dst_d = src[by_dst], dst[by_dst]
    for _ in range(MAX_PASSES):
        np.maximum.at(rank, s, cand)
        grown = np.unique(s)              # groups whose rank grew: their in-edges next
        lo, hi = np.searchsorted(dst_d, grown), np.searchsorted(dst_d, grown, "right")
        cnt = hi - lo
        edges = np.repeat(lo - np.cumsum(cnt) + cnt, cnt) + np.arange(int(cnt.sum()))
        s = src_d[edges]
        cand = np.repeat(rank[grown], cnt) + 1
        grow = cand > rank[s]
        if not grow.any():
            break
        s, cand = s[grow], cand[grow]


def _cluster_time(cluster, group, ppdu, p_start, common_ns, alone) -> np.ndarray:
    """Per group, the common time of the fullest sniffer PPDU of its cluster (see above)."""
    size = np.diff(np.r_[p_start, len(group)])
    lab = cluster[group[p_start]]
    pick = np.lexsort((p_start, -size, lab))            # per cluster: fullest, then first
    first = pick[np.r_[True, lab[pick][1:] != lab[pick][:-1]]]
    t = np.zeros(len(cluster), np.int64)
    t[lab[first]] = common_ns[p_start[first]]
    shared = np.bincount(cluster, minlength=len(cluster))[cluster] > 1
    return np.where(shared, t[cluster], alone)
