"""The PPDU table of :func:`airtime.ppdu.group_ppdus`, held as numpy columns and built into a
pandas DataFrame only when a caller asks for it (:attr:`PpduGrouping.ppdus`): a caller that
reads a few columns (:meth:`PpduGrouping.column`, the ``fairness`` command) imports no pandas.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from airtime.framecols import Columns, Labels, _is_labels, _np
from airtime.kinds import KIND_NAMES

if TYPE_CHECKING:                # pandas is imported where a table is read or built
    import pandas as pd

__all__ = ["PpduGrouping", "PpduTable"]

# the PPDU table's columns of the first MPDU, and their dtypes
FIRST_COLUMNS = {"ta": "UInt64", "ra": "UInt64", "mcs": "UInt8", "nss": "UInt8", "bw_mhz": "UInt16",
                 "gi_ns": "UInt16", "signal_dbm": "Int8"}


class _Nullable(NamedTuple):
    """A column of the first MPDUs read from :class:`Columns`: values, valid mask, pandas dtype."""
    values: np.ndarray
    valid: np.ndarray | None
    dtype: str


class PpduTable:
    """The PPDU table's columns in order (numpy arrays, :class:`Labels`, pandas arrays of a
    DataFrame input, or first-MPDU values with their valid mask); :meth:`frame` builds (once)
    the DataFrame, :meth:`column` gives one column as numpy without it."""

    def __init__(self, cols: dict):
        self.cols, self._frame = cols, None

    def __len__(self) -> int:
        return len(self.cols["ppdu"])

    def frame(self) -> pd.DataFrame:
        if self._frame is None:
            import pandas as pd
            self._frame = pd.DataFrame({k: _pandas(v) for k, v in self.cols.items()})
        return self._frame

    def column(self, name: str, dtype=np.int64, fill=-1) -> np.ndarray:
        """Column ``name`` as numpy ``dtype`` (nulls -> ``fill``)."""
        if self._frame is not None:
            return self._frame[name].to_numpy(dtype, na_value=fill)
        v = self.cols[name]
        if isinstance(v, _Nullable):
            out = v.values.astype(dtype)
            if v.valid is not None:
                out[~np.asarray(v.valid, bool)] = fill
            return out
        if isinstance(v, np.ndarray):
            return v.astype(dtype, copy=False)
        return v.to_numpy(dtype, na_value=fill)      # (a pandas array of a DataFrame input)

    def with_column(self, name: str, values) -> "PpduTable":
        return PpduTable({**self.cols, name: values})


def _pandas(v):
    if isinstance(v, _Nullable):
        from sniffsync.decode.table import nullable
        return nullable(v.values, v.valid, v.dtype)
    if isinstance(v, Labels):
        return v.to_pandas()
    return v


class _Fields(NamedTuple):
    table: PpduTable | None
    frame_ppdu: np.ndarray
    tsft_at: dict


class PpduGrouping(_Fields):
    """What :func:`airtime.ppdu.group_ppdus` returns: ``(ppdus, frame_ppdu, tsft_at)``.

    ``ppdus``: one row per PPDU (columns in docs/airtime.md), a DataFrame built on first
    access; ``frame_ppdu``: int64 PPDU id of each frame row; ``tsft_at``: ``{sniffer: "start"
    | "end"}``, what its stamps were taken to mark. :meth:`column` reads one PPDU column
    without building the DataFrame."""
    __slots__ = ()

    @property
    def ppdus(self) -> pd.DataFrame | None:
        return None if self.table is None else self.table.frame()

    def column(self, name: str, dtype=np.int64, fill=-1) -> np.ndarray:
        return self.table.column(name, dtype, fill)

    def __iter__(self):
        return iter((self.ppdus, self.frame_ppdu, self.tsft_at))

    def __getitem__(self, i):
        return tuple(self)[i]


def first_columns(frames, g) -> dict:
    """What the PPDU table reads of the frames: the first MPDU's columns and the sums."""
    if isinstance(frames, Columns):
        out = {}
        for name, dtype in FIRST_COLUMNS.items():
            v, ok = frames.cols.get(name, (np.zeros(len(g.first), np.int64), np.zeros(len(g.first), bool)))
            out[name] = _Nullable(np.asarray(v)[g.first], None if ok is None else ok[g.first], dtype) \
                if name in frames else _Nullable(v, ok, dtype)
        phy = frames.cols.get("phy")
        out["phy"] = _phy_labels(*phy, g.first) if phy is not None else None
    else:
        out = _first_pandas(frames, g)
    out["retries"] = _group_sum(_np(frames, "retry", 0, bool), g)        # (int64 sums of bools)
    out["fcs_bad"] = _group_sum(_np(frames, "fcs_bad", 0, bool), g)
    return out


def _phy_labels(v, ok, rows) -> Labels:
    if not _is_labels(v):
        from sniffsync.decode.table import as_cat
        v = as_cat(v, ok, "phy")
    codes = v.codes[rows] if ok is None else np.where(ok[rows], v.codes[rows], -1)
    return Labels(codes, v.categories)


def _first_pandas(frames, g) -> dict:
    import pandas as pd
    n_groups = len(g.starts)

    def grouped(name, dtype):
        vals = frames[name].iloc[g.first].reset_index(drop=True) if name in frames else \
            pd.Series(pd.array([None] * n_groups, dtype=dtype))
        return vals.astype(dtype)
    out = {name: grouped(name, dtype) for name, dtype in FIRST_COLUMNS.items()}
    out["phy"] = grouped("phy", "category") if "phy" in frames else None
    return out


def _group_sum(values, g) -> np.ndarray:
    """Per-PPDU int64 sum of a per-frame column; no gathered or widened per-frame copy
    (a bool column: its True rows counted by PPDU; frames in PPDU order: no gather)."""
    o = g.order
    if not len(o):
        return np.zeros(0, np.int64)
    if values.dtype == bool:
        return np.bincount(g.frame_ppdu[np.flatnonzero(values)], minlength=len(g.starts)).astype(np.int64)
    in_order = not isinstance(o, np.ndarray) or (o[1:] > o[:-1]).all()
    return np.add.reduceat(values if in_order else values[o], g.starts)


def ppdu_table(grouped, g, snf, start_ns, end_ns, airtime, kind, psdu) -> PpduTable:
    """The PPDU table: times, airtime, kind and sums, and the first MPDU's PHY columns
    (``grouped``: :func:`first_columns`)."""
    n_groups = len(g.starts)
    retries, fcs_bad = grouped["retries"], grouped["fcs_bad"]
    return PpduTable({
        "ppdu": np.arange(n_groups, dtype=np.int64),
        "sniffer": snf.astype(np.int16),
        "start_ns": start_ns, "end_ns": end_ns, "airtime_ns": airtime,
        "start_us": (start_ns + 500) // 1000, "end_us": (end_ns + 500) // 1000,
        "airtime_us": np.where(airtime >= 0, (airtime + 500) // 1000, -1),
        "ta": grouped["ta"], "ra": grouped["ra"],
        "kind": Labels(kind, KIND_NAMES, obj=False),
        "n_mpdus": g.counts.astype(np.int32), "psdu_bytes": psdu,
        "phy": grouped["phy"],
        "mcs": grouped["mcs"], "nss": grouped["nss"],
        "bw_mhz": grouped["bw_mhz"], "gi_ns": grouped["gi_ns"],
        "retries": retries.astype(np.int32), "fcs_bad": fcs_bad.astype(np.int32),
        "first_frame": g.first.astype(np.int64),
        "signal_dbm": grouped["signal_dbm"],
    })
