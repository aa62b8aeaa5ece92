"""Frame-table columns as numpy for the PPDU stages (nulls filled, missing columns
constant, text as Categorical codes) and each MPDU's length on the air."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:                # pandas is imported where a table is read or built
    import pandas as pd

__all__ = ["mpdu_bytes", "FCS_AT_END"]

FCS_AT_END = 0x10                                # radiotap Flags bit
MPDU_CHUNK = 1 << 18                             # rows of mpdu_bytes' temporaries at a time


def _np(frames: pd.DataFrame, name: str, fill, dtype=np.int64) -> np.ndarray:
    """Column as numpy with nulls -> ``fill`` (a missing column is all ``fill``)."""
    import pandas as pd
    if name not in frames:
        return np.full(len(frames), fill, dtype)
    col = frames[name]
    if isinstance(col.dtype, pd.CategoricalDtype):
        col = col.astype(object)
    return col.to_numpy(dtype=dtype, na_value=fill)


def _np_rows(frames: pd.DataFrame, name: str, fill, rows, dtype=np.int64) -> np.ndarray:
    """:func:`_np` of frame ``rows`` only (an index array, or a slice: no gather)."""
    import pandas as pd
    n = len(range(*rows.indices(len(frames)))) if isinstance(rows, slice) else len(rows)
    if name not in frames:
        return np.full(n, fill, dtype)
    col = frames[name].array
    part = col[rows] if isinstance(rows, slice) else col.take(rows)
    if isinstance(part, pd.Categorical):
        return pd.Series(part).astype(object).to_numpy(dtype=dtype, na_value=fill)
    return part.to_numpy(dtype=dtype, na_value=fill)


def _median_by(values, key) -> pd.Series:
    """``pd.Series(values).groupby(key).median()`` (float64 medians, sorted keys) with less
    memory: each group's values cast to float64 as pandas does, then partitioned in place
    (float64 ``values`` are reordered: the caller gives them up)."""
    import pandas as pd
    key = np.asarray(key)
    small = key.dtype.kind in "iu" and len(key) and 0 <= key.min() and key.max() < 1 << 16
    keys = np.flatnonzero(np.bincount(key)).astype(key.dtype) if small else np.unique(key)   # (no sort)
    vals = values.astype(np.float64, copy=False)      # (partitioned in place: the caller's)
    meds = [np.median(vals if len(keys) == 1 else vals[key == k], overwrite_input=True) for k in keys]
    return pd.Series(np.asarray(meds, np.float64), index=keys)


def _keep_only(frames, names) -> None:
    """Delete from ``frames`` (in place) every column not in ``names``."""
    for name in [c for c in frames.columns if c not in names]:
        del frames[name]


def _cat(frames: pd.DataFrame, name: str, fill: str) -> pd.Categorical:
    """Text column as a Categorical (no per-row string objects; null/missing -> ``fill``)."""
    import pandas as pd
    if name not in frames:
        return pd.Categorical.from_codes(np.zeros(len(frames), np.int64), [fill])
    col = frames[name]
    cat = col.array if isinstance(col.dtype, pd.CategoricalDtype) else pd.Categorical(col)
    if cat.isna().any():
        if fill not in cat.categories:
            cat = cat.add_categories([fill])
        cat = cat.fillna(fill)
    return cat


def _cat_rows(frames: pd.DataFrame, name: str, fill: str, rows) -> pd.Categorical:
    """``_cat(frames, name, fill)[rows]`` without a per-frame array (the same labels)."""
    import pandas as pd
    if name not in frames:
        return pd.Categorical.from_codes(np.zeros(len(rows), np.int8), [fill])
    return _cat(pd.DataFrame({name: frames[name].array.take(rows)}), name, fill)


def _cat_in(cat: pd.Categorical, labels) -> np.ndarray:
    """``np.isin(cat, labels)`` on the integer codes."""
    hit = np.flatnonzero(np.isin(np.asarray(cat.categories, object), list(labels)))
    return np.isin(cat.codes, hit)


def mpdu_bytes(frames: pd.DataFrame) -> np.ndarray:
    """Length of each MPDU on the air including its FCS, from the original length.

    ``mpdu_len`` where it is set, else ``wirelen - rt_len`` (radiotap header
    length; null counts as 0); +4 when the radiotap
    Flags do not say the FCS is included (the air had it anyway).
    """
    out = np.empty(len(frames), np.int64)
    for lo in range(0, len(frames), MPDU_CHUNK):       # (elementwise: chunks change nothing)
        part = slice(lo, min(lo + MPDU_CHUNK, len(frames)))
        wire = _np_rows(frames, "wirelen", -1, part)
        own = _np_rows(frames, "mpdu_len", -1, part)
        n = np.where(own >= 0, own, np.where(wire >= 0, wire - _np_rows(frames, "rt_len", 0, part), -1))
        fcs_in = (_np_rows(frames, "rt_flags", 0, part) & FCS_AT_END) != 0
        out[part] = np.where(n >= 0, n + np.where(fcs_in, 0, 4), -1)
    return out
