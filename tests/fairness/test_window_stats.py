"""The summary's median and p10 without numpy.median / numpy.percentile (both import numpy.ma:
start-up, issue 17) must give numpy's float to the bit (the report bytes depend on it)."""
import numpy as np
import pytest

from sniffsync.fairness.windows import median, percentile, summarize
from sniffsync.tcp.columns import sorted_unique


@pytest.mark.parametrize("scale", [1.0, 1e-9, 3.7e9])
def test_median_and_percentile_equal_numpy(scale):
    rng = np.random.default_rng(7)
    for n in [1, 2, 3, 4, 5, 10, 11, 99, 100, 1001]:
        for rounded in (False, True):
            v = rng.random(n) * scale
            if rounded:                       # ties and exact order statistics
                v = np.round(v * 10 / scale) * scale / 10
            assert median(v) == float(np.median(v))
            for q in (5, 10, 50, 90, 95):
                assert percentile(v, q) == float(np.percentile(v, q)), (n, q)


def test_summarize_on_known_values():
    s = summarize(np.array([0.5, np.nan, 1.0, 0.9, 0.7]), below=0.8)
    assert s == {"windows": 4, "median": 0.8, "p10": pytest.approx(0.56), "share_below_0.8": 0.5}


def test_sorted_unique():
    a = np.array([5, 1, 5, 3, 1, 9])
    assert sorted_unique(a).tolist() == [1, 3, 5, 9]
    assert sorted_unique(np.zeros(0, np.int64)).tolist() == []


def test_distinct_equals_numpy_unique():
    from sniffsync.nomask import distinct
    rng = np.random.default_rng(3)
    for n in (0, 1, 2, 17, 1000):
        for dtype in (np.int64, np.uint64, np.float64):
            a = rng.integers(0, max(n // 3, 1), n).astype(dtype)
            got = distinct(a)
            assert got.dtype == np.unique(a).dtype and np.array_equal(got, np.unique(a))
