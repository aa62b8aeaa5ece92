"""A-MPDU subframes in the merged table: hand-built sniffer captures with the true air order
known, and the rule that a frame that failed its FCS is never a sync anchor."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sniffsync.sync.ampdu import ppdu_clusters
from sniffsync.sync.anchors import anchor_candidates


def _rows(captures):
    """Per sniffer, a list of PPDUs (end time, [transmission ids in record order])."""
    sn, t, g = [], [], []
    for s, ppdus in enumerate(captures):
        for end, ids in ppdus:
            sn += [s] * len(ids)
            t += [end] * len(ids)
            g += ids
    return np.array(sn), np.array(t), np.array(g)


def _air_order(captures, n):
    sn, t, g = _rows(captures)
    cl, rank, tc = ppdu_clusters(sn, t, g, n)
    return np.lexsort((np.arange(n), -rank)), cl, tc


def test_order_from_sniffers_that_each_missed_subframes():
    # the air sent 0..9 in one A-MPDU; A missed 5, B caught only 5..9 (and 0 and 1 alone)
    a = [(1000, [0, 1, 2, 3, 4, 6, 7, 8, 9])]
    b = [(1001, [5, 6, 7, 8, 9]), (2000, [10]), (3000, [11])]
    order, cl, tc = _air_order([a, b], 12)
    ten = order[np.isin(order, range(10))]
    assert ten[:5].tolist() == [0, 1, 2, 3, 4] and ten[5:].tolist() == [5, 6, 7, 8, 9]
    assert len(set(cl[:10])) == 1 and cl[10] != cl[11]
    # one time for the whole A-MPDU: A's PPDU holds most of its subframes
    assert (tc[:10] == 1000).all() and (tc[10:] == -1).all()


def test_subframe_heard_only_by_a_sniffer_that_caught_the_tail():
    # air: 0 1 2 3; A has 0 1 3, B has 2 3: 2 must come after 1 and before 3
    order, _, _ = _air_order([[(10, [0, 1, 3])], [(11, [2, 3])]], 4)
    pos = np.argsort(order)
    assert pos[0] < pos[1] and pos[2] < pos[3] and pos[1] < pos[3]


def test_frames_sent_alone_keep_their_own_time():
    order, cl, tc = _air_order([[(10, [0]), (20, [1])], [(11, [0]), (21, [1])]], 2)
    assert cl.tolist() == [0, 1] and tc.tolist() == [-1, -1]


def test_contradicting_sniffers_end():
    # A says 0 before 1, B says 1 before 0: a cycle; the passes stop and all rows stay
    order, _, _ = _air_order([[(10, [0, 1])], [(11, [1, 0])]], 2)
    assert sorted(order.tolist()) == [0, 1]


def test_bad_fcs_frames_are_never_anchors():
    n = 6
    df = pd.DataFrame({
        "type_subtype": pd.array([0x08, 0x08, 0x19, 0x19, 0x28, 0x28], "Int64"),
        "bad": pd.Categorical([None] * n),
        "fcs_bad": pd.array([False, True, False, True, False, True], "boolean"),
        "ta": pd.array([1, 1, 2, 2, 3, 3], "UInt64"), "ra": pd.array([9] * n, "UInt64"),
        "bssid": pd.array([1] * n, "UInt64"),
        "beacon_tsf_us": pd.array([5, 6, None, None, None, None], "Int64"),
        "ba_ssn": pd.array([None, None, 1, 2, None, None], "Int64"),
        "ba_bitmap_lo": pd.array([None, None, 3, 4, None, None], "UInt64"),
        "seq": pd.array([1, 2, 3, 4, 5, 6], "Int64"), "frag": pd.array([0] * n, "Int64"),
        "retry": pd.array([False] * n, "boolean"), "wirelen": np.full(n, 100), "mpdu_len": pd.array([80] * n, "Int32"),
        "duration_us": pd.array([0] * n, "Int64"), "fcs": pd.array([7] * n, "UInt64")})
    rows, _, _ = anchor_candidates(df, ("beacon", "ba", "unique"))
    assert sorted(rows.tolist()) == [0, 2, 4]


def _passes_over_all_edges(rank, src, dst, max_passes):
    """The longest-path passes as first written: every pass scans all edges for the ones
    into a rank that just grew (the slow oracle of ``ampdu._longest_paths``)."""
    edges = np.arange(len(src))
    changed = np.zeros(len(rank), bool)
    for _ in range(max_passes):
        s, cand = src[edges], rank[dst[edges]] + 1
        grow = cand > rank[s]
        if not grow.any():
            break
        np.maximum.at(rank, s[grow], cand[grow])
        changed[:] = False
        changed[s[grow]] = True
        edges = np.flatnonzero(changed[dst])


@pytest.mark.parametrize("clustered", [True, False])
@pytest.mark.parametrize("seed", range(6))
def test_longest_paths_equal_the_all_edge_passes(seed, clustered, monkeypatch):
    """Chains, shared nodes and cycles (stopped by MAX_PASSES, lowered here): same ranks,
    in clusters of which some never grow (their edges are left out after the first pass)
    or, without labels (components that did not converge), edges anywhere."""
    from sniffsync.sync import ampdu
    monkeypatch.setattr(ampdu, "MAX_PASSES", 7)
    rng = np.random.default_rng(seed)
    n, size = 60, 15 if clustered else 60     # four clusters of 15 groups; edges stay inside
    src = rng.integers(0, n, 150)
    base = src - src % size
    dst = np.where(rng.random(150) < 0.8, np.minimum(src + rng.integers(1, 4, 150), base + size - 1),
                   base + rng.integers(0, size, 150))
    start = rng.integers(0, 3, n)
    if clustered:
        start[:size] = 100 - np.arange(size)     # the first cluster's ranks already hold
    want, got = start.copy(), start.copy()
    _passes_over_all_edges(want, src, dst, 7)
    ampdu._longest_paths(got, src, dst, np.arange(n) - np.arange(n) % size if clustered else None)
    assert got.tolist() == want.tolist()
    assert (want != start).any()


def test_ranks_when_the_components_do_not_converge(monkeypatch):
    """With too few passes for the components (MAX_PASSES lowered), labels can cut one
    PPDU's subframes apart: the longest paths then take every edge, as the all-edge passes
    (the oracle) over each sniffer's PPDUs give them."""
    from sniffsync.sync import ampdu
    monkeypatch.setattr(ampdu, "MAX_PASSES", 3)
    cut_apart = 0
    for seed in range(80, 120):          # two sniffers hear every transmission, PPDUs cut anywhere
        rng = np.random.default_rng(seed)
        ng = int(rng.integers(6, 30))
        sn, t, g = [], [], []
        for s in range(2):
            cuts = np.sort(rng.choice(np.arange(1, ng), size=rng.integers(1, ng // 2), replace=False))
            step = np.zeros(ng, np.int64)
            step[cuts] = 1
            sn.append(np.full(ng, s))
            t.append(np.cumsum(step) * 1000 + s)
            g.append(np.arange(ng))
        sn, t, g = np.concatenate(sn), np.concatenate(t), np.concatenate(g)
        cluster, got, _ = ampdu.ppdu_clusters(sn, t, g, ng)
        link = (sn[1:] == sn[:-1]) & (t[1:] == t[:-1])
        src, dst = g[:-1][link], g[1:][link]
        cut_apart += (cluster[src] != cluster[dst]).any()
        ppdu = np.cumsum(np.r_[True, ~link]) - 1
        want = np.zeros(ng, np.int64)
        first = np.flatnonzero(np.r_[True, ~link])
        np.maximum.at(want, g, np.bincount(ppdu)[ppdu] - 1 - (np.arange(len(g)) - first[ppdu]))   # later in it
        _passes_over_all_edges(want, src, dst, 3)
        assert got.tolist() == want.tolist(), seed
    assert cut_apart
