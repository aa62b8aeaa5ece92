"""Timeline tiles against a brute-force oracle: busy time, counts, worst event, item mode."""
import numpy as np
import pandas as pd
import pytest

from airtime.ppdu import KIND_NAMES
from viz.tiles import KINDS, build_index, busy_between, tile


def test_kinds_are_the_ppdu_kinds_in_drawing_order():
    # the page colours a kind by its code here (web/static/js/colors.js KIND_COLOR)
    assert sorted(KINDS) == sorted(KIND_NAMES)
    assert KINDS == ["data", "rts", "cts", "ack", "ba", "bar", "beacon", "mgmt", "other"]


def _ppdus(rng, n=400, n_sta=3):
    start = np.sort(rng.integers(0, 10_000_000, n))
    dur = rng.integers(20_000, 3_000_000, n)
    return pd.DataFrame({
        "ppdu": np.arange(n), "start_ns": start + 1_000_000_000, "end_ns": start + dur + 1_000_000_000,
        "ta": pd.array(rng.integers(1, n_sta + 1, n), dtype="UInt64"),
        "ra": pd.array(np.zeros(n, np.uint64), dtype="UInt64"),
        "kind": rng.choice(["data", "rts", "cts", "ba"], n),
        "sniffer": np.zeros(n, int), "heard_mask": rng.integers(1, 8, n)})


def _busy_oracle(s, e, a, b):
    return int(np.clip(np.minimum(e, b) - np.maximum(s, a), 0, None).sum())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_busy_matches_bruteforce(seed):
    rng = np.random.default_rng(seed)
    p = _ppdus(rng)
    idx = build_index(p)
    edges = np.sort(rng.integers(-1_000_000, 14_000_000, 50))
    for lane, label in enumerate(idx.lanes):
        sel = p[p.ta.astype(int) == int(label.replace(":", ""), 16)]
        s = sel.start_ns.to_numpy() - idx.t0_ns
        e = sel.end_ns.to_numpy() - idx.t0_ns
        want = [_busy_oracle(s, e, a, b) for a, b in zip(edges[:-1], edges[1:])]
        assert busy_between(idx, lane, edges).tolist() == want


def test_bucket_tile_keeps_short_failure_visible():
    rng = np.random.default_rng(5)
    p = _ppdus(rng, n=2000)
    ev = pd.DataFrame({"ppdu": [777], "kind": ["rts_cts_collision"]})
    idx = build_index(p, ev)
    t = tile(idx, 0, idx.t1_ns - idx.t0_ns, px=100)
    assert t["mode"] == "buckets"
    lane = idx.lanes.index(f"00:00:00:00:00:{int(p.ta[777]):02x}")
    start = p.start_ns[777] - idx.t0_ns
    b = np.searchsorted(t["edges_ns"], start, side="right") - 1
    assert t["severity"][lane][b] == 4
    assert sum(sum(c) for c in t["count"]) == len(p)       # every PPDU counted once
    assert sum(map(sum, t["severity"])) >= 4                # and nothing else invented beyond it
    assert max(max(s) for s in t["severity"]) == 4


def test_item_tile_lists_exactly_the_overlapping_ppdus():
    rng = np.random.default_rng(7)
    p = _ppdus(rng)
    idx = build_index(p)
    a, b = 3_000_000, 3_400_000
    t = tile(idx, a, b, px=800)
    assert t["mode"] == "items"
    s = p.start_ns - idx.t0_ns
    e = p.end_ns - idx.t0_ns
    want = set(p.ppdu[(s < b) & (e > a)])
    assert set(t["items"]["ppdu"]) == want
    assert all(k < len(KINDS) for k in t["items"]["kind"])


def test_sniffer_lanes_follow_heard_mask():
    rng = np.random.default_rng(3)
    p = _ppdus(rng, n=100)
    idx = build_index(p, lanes="sniffer", n_sniffers=3, names=["A", "B", "C"])
    assert idx.lanes == ["A", "B", "C"]
    for s in range(3):
        assert np.diff(idx.bounds)[s] == int(((p.heard_mask.to_numpy() >> s) & 1).sum())


@pytest.mark.parametrize("seed", [3, 4])
def test_bucket_counts_and_dominant_kind_match_bruteforce(seed):
    """Per lane and bucket: PPDUs counted where they start (those running into the range in
    bucket 0) and the kind with the most airtime among them — by a loop over the PPDUs, on
    enough PPDUs (and a range not at a checkpoint) that the per-kind checkpoints are crossed."""
    rng = np.random.default_rng(seed)
    p = _ppdus(rng, n=3000, n_sta=4)
    p["kind"] = rng.choice(["data", "rts", "cts", "ba", "beacon", "mgmt"], len(p))
    idx = build_index(p)
    t0, t1, px = 1_234_567, 9_876_543, 37
    t = tile(idx, t0, t1, px, max_items=0)
    assert t["mode"] == "buckets"
    edges = np.array(t["edges_ns"])
    for lane, label in enumerate(idx.lanes):
        sel = p[p.ta.astype(int) == int(label.replace(":", ""), 16)]
        count, air = np.zeros(px, int), np.zeros((px, len(KINDS)), np.int64)
        for s, e, k in zip(sel.start_ns - idx.t0_ns, sel.end_ns - idx.t0_ns, sel.kind):
            if s >= t1 or e <= t0:
                continue
            b = 0 if s < t0 else int(np.searchsorted(edges, s, side="right")) - 1
            count[b] += 1
            air[b, KINDS.index(k)] += e - s
        want = [int(np.argmax(a)) if a.sum() else -1 for a in air]
        assert t["count"][lane] == count.tolist()
        assert t["kind"][lane] == want
