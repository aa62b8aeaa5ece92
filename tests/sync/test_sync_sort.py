"""Fast orders and clustering of sync against slow oracles (np.lexsort, plain loops)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sniffsync.sync.anchors import (_cluster, _key_only_clusters, anchor_pairs, cluster, hash_key,
                                    key_order)
from sniffsync.sync.fit import ClockModel
from sniffsync.sync.order import order_by


def _major(rng, n, kind):
    if kind == "hash":                   # full 64-bit keys
        return rng.integers(0, 2**64, n, dtype=np.uint64)
    if kind == "collide":                # equal top bits, different low bits: the fix-up path
        top = rng.integers(0, 3, n, dtype=np.uint64) << np.uint64(61)
        return top | rng.integers(0, 4, n, dtype=np.uint64)
    return rng.integers(0, 40, n)        # small ids: packed exactly


@pytest.mark.parametrize("kind", ["hash", "collide", "small"])
@pytest.mark.parametrize("n", [0, 1, 2, 7, 1000])
def test_order_by_is_lexsort(kind, n):
    rng = np.random.default_rng(n)
    major = _major(rng, n, kind)
    t = rng.integers(0, 30, n)           # ties in the minor key too
    assert order_by(major).tolist() == np.lexsort((major,)).tolist()
    assert order_by(major, np.argsort(t, kind="stable")).tolist() == np.lexsort((t, major)).tolist()


def test_order_by_rejects_negative_keys():
    with pytest.raises(ValueError):
        order_by(np.array([3, -1]))


def _clusters(seed, n=3000):
    rng = np.random.default_rng(seed)
    key = rng.integers(0, 60, n).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    clock = rng.integers(0, 4, n)
    t = rng.integers(0, 50_000, n) + clock * 7        # repeats: several copies per clock
    return key, t, clock


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("gate", [None, 0, 300])
def test_cluster_from_key_order_equals_lexsort_path(seed, gate):
    key, t, clock = _clusters(seed)
    want = cluster(key, t, clock, gate)                      # np.lexsort path
    got, by_cid = _cluster(key, t, clock, gate, key_order(key), pairs=True)
    assert got.tolist() == want.tolist()
    assert by_cid.tolist() == np.argsort(want, kind="stable").tolist()
    i, j = anchor_pairs(got, clock, by_cid)
    i0, j0 = anchor_pairs(want, clock)
    assert i.tolist() == i0.tolist() and j.tolist() == j0.tolist()


def test_key_only_clusters_match_a_loop():
    key, _, clock = _clusters(3, 800)
    got = _key_only_clusters(key, clock)
    uniq = sorted(set(key.tolist()))
    for r in range(len(key)):            # slow oracle: key rank, -1 if a clock has it twice
        same = [c for k, c in zip(key.tolist(), clock.tolist()) if k == key[r]]
        want = -1 if len(same) != len(set(same)) else uniq.index(int(key[r]))
        assert got[r] == want
    assert _key_only_clusters(key, clock, key_order(key)).tolist() == got.tolist()
    assert len(_key_only_clusters(key[:0], clock[:0])) == 0


def test_hash_key_of_rows_is_hash_of_taken_rows():
    rng = np.random.default_rng(0)
    n = 500
    a = np.where(rng.random(n) < 0.2, None, rng.integers(0, 9, n))
    df = pd.DataFrame({"a": pd.array(a, dtype="UInt16"),
                       "b": rng.integers(0, 5, n).astype(np.int32),
                       "c": pd.array(rng.random(n) < 0.5, dtype="boolean")})
    rows = rng.permutation(n)[:200]
    assert hash_key(df, ["a", "b", "c"], rows).tolist() == hash_key(df.iloc[rows], ["a", "b", "c"]).tolist()


@pytest.mark.parametrize("grouped", [True, False])
def test_clock_model_apply_matches_per_row_interpolation(grouped):
    rng = np.random.default_rng(1)
    n = 5000
    clocks = pd.DataFrame({"t0_ns": [0, 1_000, 5_000]})
    knots = [np.linspace(0, 1e6, 9), np.zeros(1), np.linspace(0, 2e6, 3)]
    values = [rng.normal(0, 1e3, len(k)) for k in knots]
    model = ClockModel(clocks, np.array([10, -20, 30]), knots, values,
                       np.array([True, True, False]), np.ones(3), 0)
    clock = np.sort(rng.integers(0, 3, n)) if grouped else rng.integers(0, 3, n)
    local = rng.integers(-100_000, 3_000_000, n)          # extrapolates at both ends
    got = model.apply(local, clock)
    for r in range(0, n, 7):
        c, x = clock[r], local[r] - clocks.t0_ns[clock[r]]
        k, v = knots[c], values[c]
        if len(k) == 1:
            g = v[0]
        else:
            j = min(max(int(np.searchsorted(k, x, side="right")) - 1, 0), len(k) - 2)
            f = (x - k[j]) / (k[j + 1] - k[j])
            g = v[j] * (1 - f) + v[j + 1] * f
        want = local[r] + model.offset_ns[c] + int(np.rint(g)) if model.synced[c] else local[r]
        assert got[r] == want


def test_match_copies_with_the_key_order_equals_without():
    """merge() sorts the copies' keys beside the fit and hands the order to match_copies:
    the same groups; with unsynced rows (their keys are replaced) the order is not used."""
    from sniffsync.sync.copies import match_copies
    rng = np.random.default_rng(5)
    n = 3000
    df = pd.DataFrame({"sniffer": rng.integers(0, 3, n)})
    key = rng.integers(0, 200, n).astype(np.uint64)
    t = rng.integers(0, 10**6, n)
    synced = np.ones(n, bool)
    for _ in range(2):
        want = match_copies(df, t, synced, 5000, key)
        assert match_copies(df, t, synced, 5000, key, by_key=key_order(key)).tolist() == want.tolist()
        synced[::7] = False
