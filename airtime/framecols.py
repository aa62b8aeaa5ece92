"""Frame-table columns as numpy for the PPDU stages (nulls filled, missing columns
constant, text as category codes) and each MPDU's length on the air.

The stages read a pandas frame table or a :class:`Columns` mapping (numpy arrays with a
valid mask, categories as codes + labels: no pandas imported); the helpers here give the
same values from either."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from sniffsync.nomask import median

if TYPE_CHECKING:                # pandas is imported where a table is read or built
    import pandas as pd

__all__ = ["mpdu_bytes", "FCS_AT_END", "Columns", "Labels"]

FCS_AT_END = 0x10                                # radiotap Flags bit
MPDU_CHUNK = 1 << 18                             # rows of mpdu_bytes' temporaries at a time


class Labels:
    """Category codes (-1 = null) into ``categories``: what the stages read of a text
    column (``pd.Categorical`` offers the same ``codes`` / ``categories``)."""
    __slots__ = ("codes", "categories", "obj")
    ndim = 1

    def __init__(self, codes, categories, obj: bool = True):
        self.codes, self.categories, self.obj = np.asarray(codes), list(categories), obj

    def __len__(self) -> int:
        return len(self.codes)

    def __getitem__(self, rows) -> "Labels":
        return Labels(self.codes[rows], self.categories, self.obj)

    def to_pandas(self):
        """``pd.Categorical`` (``obj``: categories an object Index, as the frame table holds
        them; else pandas' default for a list of labels)."""
        import pandas as pd
        cats = pd.Index(self.categories, dtype=object) if self.obj else self.categories
        return pd.Categorical.from_codes(self.codes, categories=cats)


class Columns:
    """Frame columns without pandas: ``{name: (values, valid)}`` over ``n`` rows (``valid``
    a bool mask or None: no null; category values a :class:`Labels` or
    ``sniffsync.decode.table.Cat``, nulls as code -1). ``len``, ``in``, ``del`` and
    ``columns`` as a DataFrame has them; :meth:`of` takes plain arrays too."""
    __slots__ = ("n", "cols")

    def __init__(self, n: int, cols: dict):
        self.n, self.cols = int(n), cols

    @classmethod
    def of(cls, mapping, n: int | None = None) -> "Columns":
        """From ``{name: array | (values, valid) | Cat | Labels}``."""
        cols = {k: v if isinstance(v, tuple) else (v, None) for k, v in mapping.items()}
        if n is None:
            n = len(next(iter(cols.values()))[0]) if cols else 0
        return cls(n, cols)

    def __len__(self) -> int:
        return self.n

    def __contains__(self, name) -> bool:
        return name in self.cols

    def __delitem__(self, name) -> None:
        del self.cols[name]

    @property
    def columns(self) -> list:
        return list(self.cols)

    def take(self, rows) -> "Columns":
        """The rows ``rows`` (a bool mask or an index array) of every column."""
        rows = np.flatnonzero(rows) if np.asarray(rows).dtype == bool else np.asarray(rows, np.int64)
        return Columns(len(rows), {k: (_take(v, rows), None if ok is None else ok[rows])
                                   for k, (v, ok) in self.cols.items()})


def _take(v, rows):
    return Labels(v.codes[rows], v.categories) if _is_labels(v) else np.asarray(v)[rows]


def _is_labels(v) -> bool:
    return hasattr(v, "codes") and hasattr(v, "categories")


def _filled(v, ok, rows, fill, dtype) -> np.ndarray:
    """``Columns`` values ``v`` (valid ``ok``) of ``rows`` as ``dtype``, nulls -> ``fill``."""
    if _is_labels(v):               # text converted to ``dtype`` (as pandas' astype(object) does)
        codes = v.codes if rows is None else v.codes[rows]
        lut = np.array(list(v.categories) + [fill], dtype=object)
        return lut[codes].astype(dtype)
    v = np.asarray(v) if rows is None else np.asarray(v)[rows]
    out = v.astype(dtype, copy=False)
    if ok is not None:
        bad = ~np.asarray(ok if rows is None else ok[rows], bool)
        if bad.any():
            out = out.copy() if out is v else out
            out[bad] = fill
    return out


def _np(frames: pd.DataFrame, name: str, fill, dtype=np.int64) -> np.ndarray:
    """Column as numpy with nulls -> ``fill`` (a missing column is all ``fill``)."""
    if name not in frames:
        return np.full(len(frames), fill, dtype)
    if isinstance(frames, Columns):
        return _filled(*frames.cols[name], None, fill, dtype)
    import pandas as pd
    col = frames[name]
    if isinstance(col.dtype, pd.CategoricalDtype):
        col = col.astype(object)
    return col.to_numpy(dtype=dtype, na_value=fill)


def _np_rows(frames: pd.DataFrame, name: str, fill, rows, dtype=np.int64) -> np.ndarray:
    """:func:`_np` of frame ``rows`` only (an index array, or a slice: no gather)."""
    n = len(range(*rows.indices(len(frames)))) if isinstance(rows, slice) else len(rows)
    if name not in frames:
        return np.full(n, fill, dtype)
    if isinstance(frames, Columns):
        return _filled(*frames.cols[name], rows, fill, dtype)
    import pandas as pd
    col = frames[name].array
    part = col[rows] if isinstance(rows, slice) else col.take(rows)
    if isinstance(part, pd.Categorical):
        return pd.Series(part).astype(object).to_numpy(dtype=dtype, na_value=fill)
    return part.to_numpy(dtype=dtype, na_value=fill)


def _median_by(values, key) -> pd.Series:
    """``pd.Series(values).groupby(key).median()`` (float64 medians, sorted keys) with less
    memory: :func:`_median_by_arrays` as a Series."""
    import pandas as pd
    keys, meds = _median_by_arrays(values, key)
    return pd.Series(meds, index=keys)


def _median_by_arrays(values, key) -> tuple[np.ndarray, np.ndarray]:
    """``(keys, medians)`` of :func:`_median_by`: each group's values cast to float64 as
    pandas does, then partitioned in place (float64 ``values`` are reordered: the caller
    gives them up)."""
    key = np.asarray(key)
    small = key.dtype.kind in "iu" and len(key) and 0 <= key.min() and key.max() < 1 << 16
    keys = np.flatnonzero(np.bincount(key)).astype(key.dtype) if small else np.unique(key)   # (no sort)
    vals = values.astype(np.float64, copy=False)      # (partitioned in place: the caller's)
    meds = [median(vals if len(keys) == 1 else vals[key == k]) for k in keys]   # (np.median: numpy.ma)
    return keys, np.asarray(meds, np.float64)


def _keep_only(frames, names) -> None:
    """Delete from ``frames`` (in place) every column not in ``names``."""
    for name in [c for c in frames.columns if c not in names]:
        del frames[name]


def _cat(frames: pd.DataFrame, name: str, fill: str) -> pd.Categorical:
    """Text column as a Categorical (no per-row string objects; null/missing -> ``fill``);
    a :class:`Labels` from :class:`Columns` (the same codes and labels)."""
    if isinstance(frames, Columns):
        return _labels(frames, name, fill)
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
    if isinstance(frames, Columns):
        return _labels(frames, name, fill, rows)
    import pandas as pd
    if name not in frames:
        return pd.Categorical.from_codes(np.zeros(len(rows), np.int8), [fill])
    return _cat(pd.DataFrame({name: frames[name].array.take(rows)}), name, fill)


def _labels(frames: Columns, name: str, fill: str, rows=None) -> Labels:
    """:func:`_cat` of a :class:`Columns`: nulls coded as ``fill`` (added last if new)."""
    n = len(frames) if rows is None else len(rows)
    if name not in frames:
        return Labels(np.zeros(n, np.int8), [fill])
    v, ok = frames.cols[name]
    if not _is_labels(v):
        from sniffsync.decode.table import as_cat
        v = as_cat(v, ok, name)
    codes, cats = (v.codes if rows is None else v.codes[rows]), list(v.categories)
    if ok is not None:
        codes = np.where(ok if rows is None else ok[rows], codes, -1)
    null = codes < 0
    if null.any():
        if fill not in cats:
            cats.append(fill)
        codes = np.where(null, cats.index(fill), codes)
    return Labels(codes, cats)


def label_codes(frames, name: str):
    """``(codes, categories)`` of a text column (codes -1 = null; a table read back may hold
    plain strings), or None when absent."""
    if name not in frames:
        return None
    if isinstance(frames, Columns):
        v, ok = frames.cols[name]
        if not _is_labels(v):
            from sniffsync.decode.table import as_cat
            v = as_cat(v, ok, name)
        codes = v.codes if ok is None else np.where(ok, v.codes, -1)
        return np.asarray(codes), list(v.categories)
    import pandas as pd
    col = frames[name]
    col = col if isinstance(col.dtype, pd.CategoricalDtype) else col.astype("category")
    return np.asarray(col.cat.codes), col.cat.categories


def _cat_in(cat: pd.Categorical, labels) -> np.ndarray:
    """``np.isin(cat, labels)`` on the integer codes."""
    lut = np.zeros(len(cat.categories) + 1, bool)      # (last: null, code -1)
    lut[:-1] = np.isin(np.asarray(cat.categories, object), list(labels))
    return lut[np.asarray(cat.codes)]             # (one gather: np.isin on 1M codes took ~10 ms)


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
