"""The fairness window arithmetic (sniffsync.fairness.windows) against slow, obviously
correct oracles: Python loops, and the pandas operations it replaces (groupby quantile,
time-based rolling min).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sniffsync.fairness.windows import trailing_min, window_quantiles, window_starts, window_sums
from frame_rows import MS

RNG = np.random.default_rng(20261122)
EPOCH_NS = 1_700_000_000_123_456_789     # beyond float64's exact integers


def _groups(n, k, rng=RNG):
    return np.sort(rng.integers(0, k, n))


@pytest.mark.parametrize("horizon_ns", [1, 5 * MS, 10**12])
def test_trailing_min_is_time_rolling_min(horizon_ns):
    n = 3000
    key = _groups(n, 4)
    ts = EPOCH_NS + np.concatenate([np.sort(RNG.integers(0, 10**9, c)) for c in np.bincount(key)])
    ts[5] = ts[4] = ts[3]                          # equal stamps: only rows up to this one
    values = RNG.integers(0, 10**7, n)
    df = pd.DataFrame({"k": key, "v": values}, index=pd.to_datetime(ts, unit="ns"))
    expect = df.groupby("k")["v"].rolling(pd.Timedelta(horizon_ns, "ns"), min_periods=1).min()
    assert np.array_equal(trailing_min(key, ts, values, horizon_ns), expect.to_numpy().astype(np.int64))


@pytest.mark.parametrize("window_ms,step_ms", [(400, 200), (1000, 300), (100, 250)])
def test_window_sums_match_loop(window_ms, step_ms):
    unit = RNG.integers(0, 3, 2000)
    ts = RNG.integers(-500 * MS, 4000 * MS, 2000)
    w = RNG.random(2000)
    starts = window_starts(0, 3000 * MS, window_ms * MS, step_ms * MS)
    got = window_sums(unit, ts, w, 3, starts, window_ms * MS)
    for u in range(3):
        for k, s in enumerate(starts):
            sel = (unit == u) & (ts >= s) & (ts < s + window_ms * MS)
            assert got[u, k] == pytest.approx(w[sel].sum(), abs=1e-9)


def _quantiles_pandas(ts_ns, values, starts, window_ns, qs=(0.5, 0.95)):
    """The pandas implementation the numpy one replaced (explode into windows, groupby quantile)."""
    t0, step = starts[0], (starts[1] - starts[0]) if len(starts) > 1 else window_ns
    k_hi = np.minimum((ts_ns - t0) // step, len(starts) - 1)
    k_lo = np.maximum(-(-(ts_ns - t0 - window_ns + 1) // step), 0)
    cnt = np.maximum(k_hi - k_lo + 1, 0)
    rep = np.repeat(np.arange(len(ts_ns)), cnt)
    win = k_lo[rep] + (np.arange(len(rep)) - np.repeat(np.cumsum(cnt) - cnt, cnt))
    out = np.full((len(starts), len(qs)), np.nan)
    if len(rep):
        q = pd.Series(np.asarray(values, float)[rep]).groupby(win).quantile(list(qs)).unstack()
        out[q.index.to_numpy()] = q.to_numpy()
    return out


@pytest.mark.parametrize("window_ms,step_ms", [(400, 200), (1000, 300), (100, 250), (50, 50)])
def test_window_quantiles_match_pandas(window_ms, step_ms):
    ts = np.sort(RNG.integers(0, 3000 * MS, 4000))
    values = RNG.integers(0, 10**8, 4000)
    values[:50] = 7                                 # ties
    starts = window_starts(int(ts[0]), int(ts[-1]), window_ms * MS, step_ms * MS)
    got = window_quantiles(ts, values, starts, window_ms * MS, (0.1, 0.5, 0.95, 1.0))
    expect = _quantiles_pandas(ts, values, starts, window_ms * MS, (0.1, 0.5, 0.95, 1.0))
    np.testing.assert_array_equal(got, expect)
    assert np.isnan(window_quantiles(ts[:0], values[:0], starts, window_ms * MS)).all()


@pytest.mark.parametrize("window_ms,step_ms", [(400, 200), (100, 250), (1000, 300)])
def test_window_quantiles_on_a_sparse_grid_are_the_full_grid_rows(window_ms, step_ms):
    # windows listed only where data is (fairness.windows.data_windows): the quantiles of
    # a listed window are those of the same window on the full grid
    ts = np.sort(np.concatenate([RNG.integers(0, 900 * MS, 300), RNG.integers(9000 * MS, 9500 * MS, 200)]))
    values = RNG.integers(0, 10**8, len(ts))
    full = window_starts(0, int(ts[-1]), window_ms * MS, step_ms * MS)
    k = np.sort(RNG.choice(len(full), len(full) // 3, replace=False))
    got = window_quantiles(ts, values, full[k], window_ms * MS, step_ns=step_ms * MS)
    np.testing.assert_array_equal(got, window_quantiles(ts, values, full, window_ms * MS)[k])


def test_station_rows_per_run_equal_the_per_row_lookup():
    # the cross-layer view looks stations up once per run of one transmitter (rows come in
    # flow-direction order); it must pick the rows and stations a per-row lookup picks
    from sniffsync.fairness.crosslayer import _known, _station_rows
    rng = np.random.default_rng(11)
    for _ in range(200):
        st = np.unique(rng.integers(0, 10, rng.integers(1, 5)))
        ta = np.repeat(rng.integers(-1, 12, rng.integers(0, 60)), rng.integers(1, 30))
        rows, station = _station_rows(st, ta)
        idx, found = _known(st, ta)
        assert np.array_equal(np.arange(len(ta))[rows], np.flatnonzero(found))
        assert np.array_equal(station, idx[found])
