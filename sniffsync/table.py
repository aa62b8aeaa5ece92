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
        cat = values if isinstance(values, pd.Categorical) else pd.Categorical(values)
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
    """Place columns decoded for a subset ``rows`` of ``n`` frames into full-length columns."""
    out = {}
    for name, (vals, valid) in cols.items():
        vals = np.asarray(vals)
        full = np.zeros(n, dtype=vals.dtype) if vals.dtype != object else np.full(n, None, object)
        full[rows] = vals
        ok = np.zeros(n, bool)
        ok[rows] = True if valid is None else valid
        out[name] = (full, ok)
    return out


def frame_table(n: int, cols: Cols, marks: Marks, columns: list[str] | None = None) -> pd.DataFrame:
    """The frame table: every schema column (all-null when no stage produced it)."""
    data = {}
    wanted = set(columns) if columns else None
    for c in COLUMNS:
        if wanted is not None and c.name not in wanted:
            continue
        if c.name == "bad":
            reason = np.full(n, None, object)
            for rows, why in marks:
                empty = np.array([r is None for r in reason[rows]], bool)
                reason[np.asarray(rows)[empty]] = why     # first reason wins
            data["bad"] = pd.array(reason, dtype="string")
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
