"""The content-defined sample of "unique" anchors (sniffsync/sync/anchorsample.py).

Checked on synthetic candidates: the sample is a function of the content key (every copy
of a frame kept or dropped together, so clusters stay whole), the key order after it is
the order of the kept keys, beacons and Block-Acks all kept, a sparse clock's keys all
kept at weight 1, the rest at weight k; the factor follows the density rule. Scored
against the clocks a generator applied: tests/sync/test_long_run.py.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sniffsync.sync import anchorsample as A
from sniffsync.sync.anchors import key_order

ANCHORS = ("beacon", "ba", "unique")
KNOT_NS = 1e9


def _clocks(spans_s, tsft=None):
    return pd.DataFrame({"t0_ns": np.zeros(len(spans_s), np.int64),
                         "t1_ns": (np.asarray(spans_s) * 1e9).astype(np.int64),
                         "tsft": np.ones(len(spans_s), bool) if tsft is None else np.asarray(tsft)})


def _candidates(rng, n_keys, clocks_of_copy, kinds=(2,)):
    """Every key heard by each clock of ``clocks_of_copy`` (one row per copy), kinds cycled."""
    keys = rng.integers(0, 2**63, n_keys, dtype=np.int64).astype(np.uint64)
    kind = np.asarray(kinds, np.int8)[np.arange(n_keys) % len(kinds)]
    key = np.concatenate([keys for _ in clocks_of_copy])
    kk = np.concatenate([kind for _ in clocks_of_copy])
    clock = np.concatenate([np.full(n_keys, c, np.int64) for c in clocks_of_copy])
    rows = np.arange(len(key))
    return (rows, kk, key, key_order(key)), clock


def test_sample_is_a_function_of_the_key_and_keeps_the_order():
    rng = np.random.default_rng(1)
    cand, clock = _candidates(rng, 40_000, [0, 1, 2], kinds=(0, 1, 2, 2, 2, 2))
    (rows, kind, key, (order, run)), w, k = A.sample_anchors(cand, clock, _clocks([10, 10, 10]),
                                                              ANCHORS, KNOT_NS, sample=8)
    assert k == 8
    kept = np.isin(cand[2], key)
    assert kept[cand[1] != 2].all()                       # beacons and Block-Acks: all
    u = cand[1] == 2
    assert 0.10 < kept[u].mean() < 0.15                   # ~1 in 8 of the unique ones
    # kept or dropped by key: each kept key keeps its 3 copies
    assert (np.unique(key, return_counts=True)[1] == 3).all()
    assert np.array_equal(rows, np.flatnonzero(kept))
    ref_order, ref_run = key_order(key)
    assert np.array_equal(order, ref_order) and np.array_equal(run, ref_run)
    assert np.array_equal(w, np.where(kind == 2, 8.0, 1.0))


def test_sparse_clock_keeps_every_key_at_weight_one():
    rng = np.random.default_rng(2)
    dense, clock = _candidates(rng, 30_000, [0, 1])
    few, fclock = _candidates(rng, 200, [0, 1, 2])        # also heard by clock 2, rarely
    cand = tuple(np.concatenate([a, b]) for a, b in zip(dense[:3], few[:3]))
    cand = (np.arange(len(cand[0])), cand[1], cand[2], key_order(cand[2]))
    clock = np.concatenate([clock, fclock])
    (rows, kind, key, _), w, k = A.sample_anchors(cand, clock, _clocks([10, 10, 10]), ANCHORS, KNOT_NS, 4)
    on2 = np.isin(key, few[2])
    assert np.isin(few[2], key).all()                     # none of clock 2's keys lost
    assert (w[on2] == 1).all() and (w[~on2] == 4).all()
    assert 0.2 < (~on2).sum() / (2 * 30_000) < 0.3


def _shared_keys(sizes, spans, tsft=None, seed=5):
    """Candidates: clock c holds the first ``sizes[c]`` keys of one pool (so clocks share
    the keys both hold)."""
    rng = np.random.default_rng(seed)
    pool = rng.integers(0, 2**63, max(sizes), dtype=np.int64).astype(np.uint64)
    key = np.concatenate([pool[:n] for n in sizes])
    clock = np.repeat(np.arange(len(sizes)), sizes)
    kind = np.full(len(key), 2, np.int8)
    return kind, clock, _clocks(spans, tsft), key_order(key)


@pytest.mark.parametrize("sizes, spans, tsft, want", [
    ([100_000, 100_000], [100, 100], None, 1),                 # below MIN_ROWS candidates: all
    ([1_000_000, 1_000_000], [1000, 1000], None, 4),           # 1000 shared per knot: 1000/128 -> 4
    ([1_000_000, 1_000_000, 1_000_000], [1000] * 3, [True, True, False], 4),   # a host clock: not dense
    ([300_000, 300_000], [1, 1], None, 64),                    # capped
])
def test_factor_follows_the_shared_density_of_the_sparsest_dense_clock(sizes, spans, tsft, want):
    kind, clock, clocks, by_key = _shared_keys(sizes, spans, tsft)
    assert A.sample_factor(kind, clock, clocks, 2, KNOT_NS, by_key) == want


def test_a_busy_clock_sharing_few_keys_keeps_them_all():
    """C holds 300k keys of its own and 200 of A's and B's: it is sparse by what it shares."""
    rng = np.random.default_rng(6)
    ab = rng.integers(0, 2**63, 300_000, dtype=np.int64).astype(np.uint64)
    own = rng.integers(0, 2**63, 300_000, dtype=np.int64).astype(np.uint64)
    key = np.concatenate([ab, ab, ab[:200], own])
    clock = np.repeat([0, 1, 2, 2], [300_000, 300_000, 200, 300_000])
    cand = (np.arange(len(key)), np.full(len(key), 2, np.int8), key, key_order(key))
    (_, _, kept, _), w, k = A.sample_anchors(cand, clock, _clocks([100] * 3), ANCHORS, KNOT_NS, "auto")
    assert k == 16                                        # A and B: 3000 shared per knot
    assert np.isin(ab[:200], kept).all() and (w[np.isin(kept, ab[:200])] == 1).all()


@pytest.mark.parametrize("n_sub", [1, 4, 32])
def test_weights_keep_an_ampdu_one_measurement_in_expectation(n_sub):
    """Subframes of one A-MPDU share a stamp: the fit counts them as one measurement
    (fit._share); after sampling, a stamp group's pairs still weigh 1 on average."""
    from sniffsync.sync.fit import _share
    rng = np.random.default_rng(n_sub)
    groups, k = 40_000 // n_sub + 2000, 8
    keys = rng.integers(0, 2**63, groups * n_sub, dtype=np.int64).astype(np.uint64)
    stamp = np.repeat(np.arange(groups, dtype=np.int64) * 1000, n_sub)
    key = np.concatenate([keys, keys])
    clock = np.repeat([0, 1], len(keys))
    local = np.concatenate([stamp, stamp + 7])
    cand = (np.arange(len(key)), np.full(len(key), 2, np.int8), key, key_order(key))
    (rows, _, kept, _), w, _ = A.sample_anchors(cand, clock, _clocks([1, 1], [True, True]), ANCHORS,
                                                KNOT_NS, k, local)
    a, b = rows[rows < len(keys)], rows[rows >= len(keys)]
    assert np.array_equal(key[a], key[b])                 # both copies of a kept key
    wa = w[rows < len(keys)]
    pair_w = _share(clock[a], local[a], clock[b], local[b]) * wa
    per_group = np.bincount(stamp[a] // 1000, weights=pair_w, minlength=groups)
    assert abs(per_group.mean() - 1) < 0.06, per_group.mean()        # (k / n alone gave ~k for 32)


def test_not_a_power_of_two_is_refused():
    rng = np.random.default_rng(3)
    cand, clock = _candidates(rng, 10, [0, 1])
    from sniffsync.errors import UsageError
    for bad in (3, 0, 2.0, "every"):
        with pytest.raises(UsageError):
            A.sample_anchors(cand, clock, _clocks([1, 1]), ANCHORS, KNOT_NS, bad)
    assert A.sample_anchors(cand, clock, _clocks([1, 1]), ("beacon", "ba"), KNOT_NS, 4)[1:] == (None, 1)
    assert A.sample_anchors(cand, clock, _clocks([1, 1]), ANCHORS, KNOT_NS, 1)[1:] == (None, 1)
    for bad in (3, 0, True):
        with pytest.raises(UsageError):
            merge_with_sample(bad)


def merge_with_sample(bad):
    """merge() refuses a bad sample before reading anything (the path does not exist)."""
    from sniffsync.sync.merge import merge
    merge(["/nonexistent/a.pcap", "/nonexistent/b.pcap"], anchor_sample=bad)


def test_cli_reports_the_sample_and_all_anchors_fits_every_one(tmp_path, monkeypatch, capsys):
    """On the ns-3 hidden-node sniffers (real captures): the size rule lowered so they
    qualify, ``merge`` fits a sample and says so; ``--all-anchors`` fits every anchor and
    gives the report of the merge without sampling (the rule as it stands)."""
    import json
    import os
    from sniffsync.cli.main import main
    data = os.path.join(os.path.dirname(__file__), "..", "data", "captures")
    caps = [os.path.join(data, f"ns3-11n-ht20-hidden-sniffer{x}.pcap")
            for x in ("A-nearAP", "B-nearSTA1", "C-nearSTA2")]

    def run(name, *extra):
        assert main(["merge", *caps, "-o", str(tmp_path / f"{name}.pcapng"),
                     "--report", str(tmp_path / f"{name}.json"), *extra]) == 0
        return json.loads((tmp_path / f"{name}.json").read_text()), capsys.readouterr().err

    plain, _ = run("plain")
    monkeypatch.setattr(A, "MIN_ROWS", 16)
    monkeypatch.setattr(A, "PER_KNOT", 2)
    sampled, said = run("sampled")
    every, said_all = run("all", "--all-anchors")
    k = sampled["totals"]["anchor_sample"]
    assert plain["totals"]["anchor_sample"] == 1 and every["totals"]["anchor_sample"] == 1 and k > 1
    assert f"1 in {k}" in said and "1 in" not in said_all
    u = [s["anchors"]["unique"] for s in sampled["sniffers"]]
    assert all(a < b for a, b in zip(u, [s["anchors"]["unique"] for s in every["sniffers"]]))
    assert every == plain and (tmp_path / "all.pcapng").read_bytes() == (tmp_path / "plain.pcapng").read_bytes()
    assert sampled["totals"]["frames_out"] == plain["totals"]["frames_out"]
    from sniffsync.sync.mergedfile import read_merged
    ts = {n: read_merged(tmp_path / f"{n}.pcapng", [], records=False).frames["ts_ns"].to_numpy(np.int64)
          for n in ("plain", "sampled")}
    d = np.abs(ts["sampled"] - ts["plain"])
    assert 0 < d.max() and np.percentile(d, 99) < 300, np.percentile(d, [50, 99, 100])   # the TSF step: 1000
