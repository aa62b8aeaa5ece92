"""Per-lane ranks of many times from one search: a tile's bucket edges among every lane's items.

A bucketed tile needs, for each lane and each of its ~1,200 edges, how many of the lane's items
start (end) before the edge: ``lanes x edges`` binary searches (15,600 for 13 station lanes),
each missing the cache over a run-sized array (~1.5 ms at 1M PPDUs for the whole-run views).
Here the items of every lane are sorted by time once, with a checkpoint every :data:`CHECK`
items holding how many of each lane come before it. An edge is then one search among all the
items (``edges`` searches, not ``lanes x edges``), the nearest checkpoint's row, and the lanes of
the at most ``CHECK / 2`` items between the checkpoint and the edge's position. Exact: the same
counts as a search per lane.
"""
from __future__ import annotations

import numpy as np

from viz.keyed import ranges

__all__ = ["LaneRanks", "CHECK", "MAX_LANES"]

CHECK = 16            # items between two checkpoint rows
MAX_LANES = 64        # beyond, the rows (lanes x items / CHECK) outgrow the items: not built


class LaneRanks:
    """``rank(q)``: per lane, how many of its items have a time < q (what ``searchsorted``
    left of q in the lane's sorted times gives)."""

    def __init__(self, t: np.ndarray, lane_of: np.ndarray, n_lanes: int):
        order = np.argsort(t, kind="stable")
        self.t = np.ascontiguousarray(t[order], np.int64)
        self.lane = np.asarray(lane_of)[order].astype(np.int8 if n_lanes < 128 else np.int16)
        self.nl = n_lanes
        nb = -(-len(t) // CHECK)
        per = np.bincount(np.arange(len(t)) // CHECK * n_lanes + self.lane, minlength=nb * n_lanes)
        self.rows = np.zeros((nb + 1, n_lanes), np.int32 if len(t) < 1 << 31 else np.int64)
        np.cumsum(per.reshape(nb, n_lanes), axis=0, out=self.rows[1:])

    def rank(self, q) -> np.ndarray:
        """(lanes, len(q)): per lane, the number of its items with time < ``q[i]``."""
        q = np.asarray(q, np.int64)
        p = np.searchsorted(self.t, q)
        j = np.minimum((p + CHECK // 2) // CHECK, len(self.rows) - 1)
        c = np.minimum(j * CHECK, len(self.t))           # the checkpoint's position
        lo, hi = np.minimum(c, p), np.maximum(c, p)
        row = np.repeat(np.arange(len(q)), hi - lo)
        fix = np.bincount(row * self.nl + self.lane[ranges(lo, hi)], minlength=len(q) * self.nl)
        fix = fix.reshape(len(q), self.nl) * np.where(c < p, 1, -1)[:, None]
        return (self.rows[j] + fix).T.astype(np.int64)
