"""A fairness table (goodput windows, RTT samples) as :class:`viz.analysis_index.AnalysisIndex`
reads it for a time range: rows grouped by flow, a range a ``searchsorted`` per flow when the
flow's times are sorted, and columns encoded once as JSON text (:class:`viz.jsonable.Texts`)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from viz.analysis import MAX_POINTS, _thin
from viz.jsonable import Texts

__all__ = ["RangeSeries"]


class RangeSeries:
    """One fairness table, rows in their own order (the reference keeps it), with the
    (run, fd) group code per row; a range is a mask over the time column."""

    def __init__(self, df: pd.DataFrame, time_col: str, labels: dict):
        self.t = df[time_col].to_numpy(np.int64)
        keys = sorted(set(zip(df["run"], df["fd"])))
        self.labels = [labels.get(k, f"flow {k[1]}") for k in keys]
        pos = {k: i for i, k in enumerate(keys)}
        self.group = np.array([pos[k] for k in zip(df["run"], df["fd"])], np.int64)
        self.df = df
        # per group, its rows in table order; when their times are sorted a range is a searchsorted
        order = np.argsort(self.group, kind="stable")
        cut = np.searchsorted(self.group[order], np.arange(len(keys) + 1))
        self.rows = [order[cut[g]:cut[g + 1]] for g in range(len(keys))]
        self.sorted = all(np.all(np.diff(self.t[r]) >= 0) for r in self.rows)

        self.tg = [self.t[r] for r in self.rows]
        self.off = np.concatenate([[0], np.cumsum([len(r) for r in self.rows])]).astype(np.int64)

    def pos_in(self, g: int, lo, hi):
        """Positions (a slice when times are sorted) among group ``g``'s rows of the rows with
        time in [lo, hi)."""
        t = self.tg[g]
        if self.sorted:
            return slice(int(np.searchsorted(t, lo)), int(np.searchsorted(t, hi)))
        return np.flatnonzero((t >= lo) & (t < hi))

    def rows_in(self, g: int, lo, hi) -> np.ndarray:
        """Rows of group ``g`` with time in [lo, hi), in table order."""
        return self.rows[g][self.pos_in(g, lo, hi)]

    def texts(self, values: np.ndarray) -> Texts:
        """``values`` (one per row) encoded once, group after group (:meth:`select` positions)."""
        return Texts(values[np.concatenate(self.rows)] if self.rows else values[:0])

    def select(self, g: int, pos):
        """Group ``g``'s positions ``pos`` (as :meth:`pos_in` gives) thinned to MAX_POINTS, as
        positions into :meth:`texts` (a slice when they are consecutive)."""
        if isinstance(pos, slice):
            n = pos.stop - pos.start
            if n <= MAX_POINTS:
                return slice(self.off[g] + pos.start, self.off[g] + pos.stop)
            return self.off[g] + pos.start + _thin(np.arange(n))
        return self.off[g] + pos[_thin(np.arange(len(pos)))]

    def mask(self, lo, hi) -> np.ndarray:
        return (self.t >= lo) & (self.t < hi)


class GoodputGrid:
    """The goodput part of a range's answer without a flow filter, sliced from text encoded
    once: every window start of the run (``T``), and per flow its goodput (Mb/s, rounded)
    at each of them, null where the flow has no window. A range is a slice of ``T``; a flow
    is in it when it has a window in it (a count, not its values: a NaN goodput still counts).
    Same answer as building the series from the range's rows (a flow's later row at the same
    start wins in both)."""

    MAX_CELLS = 4_000_000          # flows x window starts: beyond, built per range as before

    @classmethod
    def build(cls, w: RangeSeries, mbps: np.ndarray, base: int):
        t = np.unique(w.t)
        return cls(w, t, mbps, base) if len(w.labels) * len(t) <= cls.MAX_CELLS else None

    def __init__(self, w: RangeSeries, t: np.ndarray, mbps: np.ndarray, base: int):
        self.T, self.labels = t, w.labels
        y = np.full((len(w.labels), len(t)), np.nan)
        y[w.group, np.searchsorted(t, w.t)] = mbps          # table order: the last row wins
        self.rows = [Texts(np.round(r, 3)) for r in y]
        self.t_text = Texts(t - base)
        n = np.zeros((len(w.labels), len(t) + 1), np.int64)
        np.add.at(n, (w.group, np.searchsorted(t, w.t) + 1), 1)
        self.count = np.cumsum(n, axis=1)                  # per flow, its windows before T[i]

    def select(self, lo, hi) -> dict:
        a, b = np.searchsorted(self.T, [lo, hi])
        k = slice(int(a), int(b))
        return {"t_ns": self.t_text.select(k),
                "series": [{"label": self.labels[g], "mbps": self.rows[g].select(k)}
                           for g in np.flatnonzero(self.count[:, b] > self.count[:, a])]}
