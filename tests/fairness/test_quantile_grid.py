"""The queueing-delay quantiles are computed on every window of the grid, then the listed
windows' rows taken (sniffsync.fairness.core.run_tables): equal to computing them on the
listed windows only (a window's quantiles depend on its own samples)."""
from __future__ import annotations

import numpy as np

from sniffsync.fairness.windows import data_windows, last_window, window_quantiles

MS = 1_000_000


def test_quantiles_on_the_whole_grid_equal_the_listed_windows():
    rng = np.random.default_rng(17)
    for window_ms, step_ms in [(400, 200), (100, 250), (300, 100), (1000, 300)]:
        w, s = window_ms * MS, step_ms * MS
        ts = np.sort(np.concatenate([rng.integers(0, 3000 * MS, 300), rng.integers(9000 * MS, 9500 * MS, 40)]))
        qdelay = rng.integers(0, 80 * MS, len(ts))
        # the windows listed: some hold no RTT sample (NaN rows), the gaps none
        events = np.sort(np.concatenate([ts[::3], rng.integers(5000 * MS, 5600 * MS, 5)]))
        ks = data_windows(events, 0, int(ts.max()), w, s)
        assert len(ks) < last_window(0, int(ts.max()), w, s) + 1      # a sparse list
        grid = s * np.arange(last_window(0, int(ts.max()), w, s) + 1)
        whole = window_quantiles(ts, qdelay, grid, w, step_ns=s)[ks]
        listed = window_quantiles(ts, qdelay, s * ks, w, step_ns=s)
        np.testing.assert_array_equal(whole, listed)
        assert np.isfinite(listed).any() and np.isnan(listed).any()
