"""Columns passed between decoding stages and their assembly into the frame table.

A decoding stage returns ``Cols``: ``{name: (values, valid)}`` with plain numpy
``values`` and a boolean ``valid`` mask (``None`` means all valid), plus ``Marks``:
``[(row_indices, reason)]`` for frames it could not fully decode. :func:`frame_table`
turns them into pandas nullable columns without copying per row.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .schema import COLUMNS, PHY_NAMES

__all__ = ["Cols", "Marks", "nullable", "frame_table", "scatter"]

Cols = dict  # name -> (np.ndarray values, np.ndarray | None valid)
Marks = list  # [(np.ndarray row indices, str reason)]

_CATEGORIES = {"phy": PHY_NAMES}


def nullable(values, valid, dtype: str):
    """Pandas array of ``dtype`` from numpy ``values`` where ``valid`` is False -> null."""
    values = np.asarray(values) if not isinstance(values, pd.Categorical) else values
    n = len(values)
    mask = np.zeros(n, bool) if valid is None else ~np.asarray(valid, bool)
    if dtype == "boolean":
        return pd.arrays.BooleanArray(np.asarray(values, bool), mask)
    if dtype == "category":
        if not isinstance(values, pd.Categorical):
            return _category_of_strings(values, mask | pd.isna(np.asarray(values, dtype=object)))
        cat = values
        if mask.any():
            codes = np.where(mask, -1, cat.codes)
            cat = pd.Categorical.from_codes(codes, categories=cat.categories)
        return cat
    if dtype == "string":
        obj = np.asarray(values, dtype=object).copy()
        obj[mask] = None
        return pd.array(obj, dtype="string")
    if dtype[0] in "IU":   # pandas nullable integer
        np_dtype = np.dtype(dtype.lower())
        return pd.arrays.IntegerArray(np.asarray(values).astype(np_dtype, copy=False), mask)
    out = np.asarray(values).astype(dtype, copy=False)
    return out


def scatter(n: int, rows: np.ndarray, cols: Cols) -> Cols:
    """Place columns decoded for a subset ``rows`` of ``n`` frames into full-length columns.

    When ``rows`` is every frame in order (one link type: the usual case) the columns
    pass through untouched; categoricals are scattered by their codes.
    """
    if len(rows) == n and (n == 0 or (rows[0] == 0 and rows[-1] == n - 1)):
        return dict(cols)
    out = {}
    for name, (vals, valid) in cols.items():
        ok = np.zeros(n, bool)
        ok[rows] = True if valid is None else valid
        if isinstance(vals, pd.Categorical):
            codes = np.full(n, -1, vals.codes.dtype)
            codes[rows] = vals.codes
            out[name] = (pd.Categorical.from_codes(codes, dtype=vals.dtype), ok)
            continue
        vals = np.asarray(vals)
        full = np.zeros(n, dtype=vals.dtype) if vals.dtype != object else np.full(n, None, object)
        full[rows] = vals
        out[name] = (full, ok)
    return out


def _category_of_strings(values, mask) -> pd.Categorical:
    """Categorical from a mostly-null object array, formatting each distinct value once."""
    codes = np.full(len(values), -1, np.int64)
    idx = np.flatnonzero(~mask)
    if idx.size == 0:
        return pd.Categorical.from_codes(codes, categories=pd.Index([], dtype=object))
    c, uniq = pd.factorize(np.asarray(values, dtype=object)[idx])
    codes[idx] = c
    return pd.Categorical.from_codes(codes, categories=pd.Index(uniq, dtype=object))


def frame_table(n: int, cols: Cols, marks: Marks, columns: list[str] | None = None) -> pd.DataFrame:
    """The frame table: every schema column (all-null when no stage produced it)."""
    data = {}
    wanted = set(columns) if columns else None
    for c in COLUMNS:
        if wanted is not None and c.name not in wanted:
            continue
        if c.name == "bad":
            code = np.full(n, -1, np.int64)
            reasons = []
            for rows, why in marks:
                rows = np.asarray(rows, np.int64)
                rows = rows[code[rows] < 0]              # first reason wins
                if rows.size:
                    if why not in reasons:
                        reasons.append(why)
                    code[rows] = reasons.index(why)
            data["bad"] = pd.Categorical.from_codes(code, categories=pd.Index(reasons, dtype=object))
            continue
        if c.name in cols:
            vals, valid = cols[c.name]
        elif c.dtype in ("int16", "int32", "int64"):
            raise KeyError(f"required column {c.name} missing")
        else:
            vals, valid = np.zeros(n, np.int64), np.zeros(n, bool)
            if c.dtype in ("string", "category"):
                vals = np.full(n, None, object)
        if c.dtype == "category" and c.name in _CATEGORIES and not isinstance(vals, pd.Categorical):
            vals = pd.Categorical(vals, categories=_CATEGORIES[c.name])
        data[c.name] = nullable(vals, valid, c.dtype)
    return pd.DataFrame(data, copy=False)
