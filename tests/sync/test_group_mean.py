"""group_mean: the merged time of a transmission's copies, exact to the ns at epoch scale."""
import numpy as np

from sniffsync.sync.order import group_mean


def test_mean_of_copies_at_epoch_scale_is_exact_to_the_ns():
    # copies 1.7e18 ns after the epoch: float64 steps there are 256 ns
    t0 = 1_700_000_000_123_456_789
    t = np.array([t0, t0 + 2, t0 + 1001, t0 + 1003, t0 + 5], np.int64)
    g = np.array([0, 0, 1, 1, 2])
    assert group_mean(g, t, 4).tolist() == [t0 + 1, t0 + 1002, t0 + 5, 0]
    assert group_mean(g, t, 3, sel=np.array([True, False, True, True, True])).tolist() == [t0, t0 + 1002, t0 + 5]


def test_a_tie_rounds_the_same_whatever_else_is_in_the_table():
    # the streamed merge sees a window of the rows; the mean of a group must not depend on them
    t = np.array([1_000_000_000_000_000_001, 1_000_000_000_000_000_002], np.int64)
    alone = group_mean(np.array([0, 0]), t, 1)
    with_other = group_mean(np.array([1, 0, 0]), np.r_[np.int64(7), t], 2)
    assert alone[0] == with_other[0] == t[0]      # 0.5 ns past the first: half to even
