"""Columns passed between decoding stages and their assembly into the frame table.

A decoding stage returns ``Cols``: ``{name: (values, valid)}`` with plain numpy
``values`` (or a :class:`Cat` for categorical columns) and a boolean ``valid`` mask
(``None`` means all valid), plus ``Marks``: ``[(row_indices, reason)]`` for frames it
could not fully decode. The stages never import pandas: only :func:`frame_table` and
:func:`nullable` (the pandas edge) do, so the CLI can export through Arrow without it.
"""
from __future__ import annotations

import numpy as np

from sniffsync.decode.schema import COLUMNS, PHY_NAMES

__all__ = ["Cols", "Marks", "Cat", "nullable", "frame_table", "scatter", "concat_cols", "ColumnSink",
           "bad_column", "factorize", "GOLDEN64"]

Cols = dict  # name -> (np.ndarray | Cat values, np.ndarray | None valid)
Marks = list  # [(np.ndarray row indices, str reason)]

_CATEGORIES = {"phy": PHY_NAMES}


class Cat:
    """Categorical column without pandas: integer ``codes`` (-1 = null) into ``categories``.

    ``np.asarray(cat)`` gives an object array of the category values (None for -1),
    so tests and callers can treat it like any column.
    """
    __slots__ = ("codes", "categories")

    def __init__(self, codes, categories):
        self.codes = np.asarray(codes)
        self.categories = list(categories)

    def __len__(self):
        return len(self.codes)

    def __array__(self, dtype=None, copy=None):
        lut = np.array(list(self.categories) + [None], dtype=object)
        return lut[self.codes].astype(dtype) if dtype is not None else lut[self.codes]


_HASH_BITS = 16
_SORT_BELOW = 1 << 12     # keys sorted, not hashed, below this many
GOLDEN64 = np.uint64(0x9E3779B97F4A7C15)   # Fibonacci hashing multiplier: 2**64 / golden ratio, odd


def factorize(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, uniques)`` of a 1-D integer array, as ``np.unique(keys, return_inverse=True)``
    gives them (``uniques`` sorted, ``uniques[codes] == keys``), without pandas.

    Fast path, no sort of the rows: hash every key into a 16-bit bucket table; if no
    two distinct keys share a bucket (checked exactly), the occupied buckets are the
    distinct keys. Otherwise (many distinct keys) fall back to :func:`numpy.unique`.
    """
    keys = np.asarray(keys)
    if keys.size == 0 or keys.dtype.kind not in "iu":
        uniq, codes = np.unique(keys, return_inverse=True)
        return codes.ravel(), uniq
    if keys.size < _SORT_BELOW:       # few keys: a sort costs less than the bucket tables
        return _factorize_sorted(keys.ravel())
    lo = keys.min()
    span = int(keys.max()) - int(lo) + 1
    if span <= 1 << _HASH_BITS:
        # keys within 65536 of each other (one subnet's addresses, ports, codes): the
        # offsets index a table directly, no hashing
        idx = (keys - lo if keys.dtype.kind == "u" else keys.astype(np.int64) - int(lo)).astype(np.intp)
        used = np.zeros(span, bool)
        used[idx] = True
        present = np.flatnonzero(used)
        rank = np.zeros(span, np.intp)
        rank[present] = np.arange(len(present))
        uniq = present.astype(keys.dtype) + lo if keys.dtype.kind == "u" else \
            (present + int(lo)).astype(keys.dtype)
        return rank[idx], uniq
    h = ((keys.astype(np.uint64) * GOLDEN64) >> np.uint64(64 - _HASH_BITS)).astype(np.intp)
    table = np.zeros(1 << _HASH_BITS, keys.dtype)
    table[h] = keys
    if not np.array_equal(table[h], keys):            # two keys in one bucket
        uniq, codes = np.unique(keys, return_inverse=True)
        return codes.ravel(), uniq
    used = np.zeros(1 << _HASH_BITS, bool)
    used[h] = True
    buckets = np.flatnonzero(used)
    order = np.argsort(table[buckets], kind="stable")
    rank = np.zeros(1 << _HASH_BITS, np.intp)
    rank[buckets[order]] = np.arange(len(buckets))
    return rank[h], table[buckets[order]]


def _factorize_sorted(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`factorize` by one sort (its tables cost ~1 MB of writes a call, whatever the size)."""
    order = np.argsort(keys, kind="stable")
    s = keys[order]
    first = np.empty(s.size, bool)
    first[:1] = True
    np.not_equal(s[1:], s[:-1], out=first[1:])
    codes = np.empty(s.size, np.intp)
    codes[order] = np.cumsum(first) - 1
    return codes, s[first]


def _union_cats(cats: list) -> Cat:
    """One :class:`Cat` from several (categories merged in first-seen order)."""
    names, index, parts = [], {}, []
    for c in cats:
        remap = np.empty(len(c.categories) + 1, np.int32)
        remap[-1] = -1
        for i, v in enumerate(c.categories):
            remap[i] = index.setdefault(v, len(names))
            if remap[i] == len(names):
                names.append(v)
        parts.append(remap[c.codes])
    return Cat(np.concatenate(parts) if parts else np.zeros(0, np.int32), names)


def concat_cols(parts: list, consume: bool = False) -> Cols:
    """Concatenate the ``Cols`` of consecutive row chunks.

    A column missing from a chunk (no frame of it needed that stage) is null there.
    With ``consume``, each column is removed from the chunks once concatenated: the
    chunks and the result never coexist in full (a lower peak of fresh memory).
    """
    if len(parts) == 1:
        return dict(parts[0])
    names = list(dict.fromkeys(name for p in parts for name in p))
    lens = [_rows(p) for p in parts]
    out = {}
    for name in names:
        like = next(p[name][0] for p in parts if name in p)
        cells = [(p.pop(name) if consume else p[name]) if name in p else _null_like(like, k)
                 for p, k in zip(parts, lens)]
        vs = [v for v, _ in cells]
        oks = [o for _, o in cells]
        v = _union_cats(vs) if isinstance(like, Cat) else np.concatenate([np.asarray(x) for x in vs])
        ok = None if all(o is None for o in oks) else np.concatenate(
            [np.ones(len(x), bool) if o is None else np.asarray(o, bool) for x, o in zip(vs, oks)])
        out[name] = (v, ok)
    return out


class ColumnSink:
    """Consecutive row chunks' ``Cols`` written into columns allocated once.

    The same result as :func:`concat_cols` of every chunk, without the chunks and their
    concatenation alive at once: each chunk is copied in and can be freed. Columns are
    allocated zeroed (untouched pages cost nothing) with room for ``capacity`` rows and
    doubled when a chunk does not fit; a column first seen in a later chunk, or missing
    from one, is null there; dtypes promote as :func:`numpy.concatenate` would.
    Categorical columns are kept per chunk and unioned at the end (their codes are small).
    """

    def __init__(self, capacity: int = 0):
        self.n, self.cap = 0, max(int(capacity), 0)
        self.vals, self.oks, self.cats, self.order = {}, {}, {}, {}

    def _alloc(self, dtype, keep):
        out = np.full(self.cap, None, object) if dtype == object else np.zeros(self.cap, dtype)
        if keep is not None:
            out[:self.n] = keep[:self.n]
        return out

    def add(self, cols: Cols, k: int) -> None:
        """Append ``k`` rows (every column of ``cols`` has ``k`` values)."""
        lo, hi = self.n, self.n + k
        if hi > self.cap:
            self.cap = max(hi, 2 * self.cap, 1024)
            for d in (self.vals, self.oks):
                for name, a in d.items():
                    if a is not None:
                        d[name] = self._alloc(a.dtype, a)
        for name in self.vals:
            if name not in cols:                   # missing here: null rows
                self._own_oks(name)
        for name, cells in self.cats.items():
            if name not in cols:
                cells.append((lo, None))
        for name, (v, ok) in cols.items():
            self.order.setdefault(name, None)
            if isinstance(v, Cat):
                self.cats.setdefault(name, [(0, None)] if lo else []).append((lo, (v, ok)))
                continue
            v = np.asarray(v)
            a = self.vals.get(name)
            if a is None:
                a = self.vals[name] = self._alloc(v.dtype, None)
                self.oks[name] = None if lo == 0 else np.zeros(self.cap, bool)
            elif v.dtype != a.dtype and np.result_type(a.dtype, v.dtype) != a.dtype:
                a = self.vals[name] = self._alloc(np.result_type(a.dtype, v.dtype), a)
            a[lo:hi] = v
            if ok is not None and self.oks[name] is None and ok.all():
                ok = None                          # all valid so far: no mask to hold
            if ok is not None:
                self._own_oks(name)[lo:hi] = ok
            elif self.oks[name] is not None:
                self.oks[name][lo:hi] = True
        self.n = hi

    def _own_oks(self, name):
        """The column's valid mask as an array (rows so far valid when it was None)."""
        if self.oks[name] is None:
            self.oks[name] = np.zeros(self.cap, bool)
            self.oks[name][:self.n] = True
        return self.oks[name]

    def result(self) -> Cols:
        """The columns, first-seen order; sinks' arrays are views of ``n`` rows."""
        out = {}
        for name in self.order:
            if name in self.cats:
                cells = self.cats[name]
                like = next(c for _, c in cells if c is not None)[0]
                ends = [lo for lo, _ in cells[1:]] + [self.n]
                parts = [{name: cell if cell is not None else _null_like(like, end - lo)}
                         for (lo, cell), end in zip(cells, ends)]
                out[name] = concat_cols(parts)[name]
                continue
            ok = self.oks[name]
            out[name] = (self.vals[name][:self.n], None if ok is None else ok[:self.n])
        return out


def _rows(cols: Cols) -> int:
    return len(next(iter(cols.values()))[0]) if cols else 0


def _null_like(like, n: int):
    """``n`` null rows of the same kind as the column ``like``."""
    if isinstance(like, Cat):
        return Cat(np.full(n, -1, np.int32), []), None
    like = np.asarray(like)
    vals = np.full(n, None, object) if like.dtype == object else np.zeros(n, like.dtype)
    return vals, np.zeros(n, bool)


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
        if isinstance(vals, Cat) or type(vals).__name__ == "Categorical":
            codes = np.full(n, -1, np.asarray(vals.codes).dtype)
            codes[rows] = vals.codes
            out[name] = (Cat(codes, vals.categories), ok)
            continue
        vals = np.asarray(vals)
        full = np.zeros(n, dtype=vals.dtype) if vals.dtype != object else np.full(n, None, object)
        full[rows] = vals
        out[name] = (full, ok)
    return out


def bad_column(n: int, marks: Marks) -> Cat:
    """The ``bad`` column: per row the first reason it was marked with (-1 = fine)."""
    code = np.full(n, -1, np.int32)
    reasons: list = []
    for rows, why in marks:
        rows = np.asarray(rows, np.int64)
        rows = rows[code[rows] < 0]              # first reason wins
        if rows.size:
            if why not in reasons:
                reasons.append(why)
            code[rows] = reasons.index(why)
    return Cat(code, reasons)


def _strings_cat(values, mask) -> Cat:
    """Cat from an object array of strings / None, formatting nothing (each value kept once)."""
    obj = np.asarray(values, dtype=object)
    keep = ~mask & np.array([v is not None for v in obj], bool) if obj.size else mask
    codes = np.full(len(obj), -1, np.int32)
    idx = np.flatnonzero(keep)
    if idx.size == 0:
        return Cat(codes, [])
    cats, inv = np.unique(obj[idx].astype(str), return_inverse=True)
    codes[idx] = inv.ravel()
    return Cat(codes, list(cats))


def as_cat(vals, valid, name: str | None = None) -> Cat:
    """Any categorical column representation (Cat, pandas Categorical, strings) as a Cat with nulls."""
    mask = np.zeros(len(vals), bool) if valid is None else ~np.asarray(valid, bool)
    if not isinstance(vals, Cat):
        if type(vals).__name__ == "Categorical":
            vals = Cat(vals.codes, list(vals.categories))
        elif name in _CATEGORIES:
            lut = {v: i for i, v in enumerate(_CATEGORIES[name])}
            vals = Cat([lut.get(v, -1) for v in np.asarray(vals, object)], _CATEGORIES[name])
        else:
            vals = _strings_cat(vals, mask)
    if mask.any():
        vals = Cat(np.where(mask, -1, vals.codes), vals.categories)
    return vals


def nullable(values, valid, dtype: str):
    """Pandas array of ``dtype`` from numpy ``values`` where ``valid`` is False -> null."""
    import pandas as pd
    if dtype == "category":
        c = as_cat(values, valid)
        return pd.Categorical.from_codes(c.codes, categories=pd.Index(c.categories, dtype=object))
    if isinstance(values, Cat):
        values = np.asarray(values)
    values = np.asarray(values)
    n = len(values)
    mask = np.zeros(n, bool) if valid is None else ~np.asarray(valid, bool)
    if dtype == "boolean":
        return pd.arrays.BooleanArray(values.astype(bool, copy=False), mask)
    if dtype == "string":
        obj = np.asarray(values, dtype=object).copy()
        obj[mask] = None
        return pd.array(obj, dtype="string")
    if dtype[0] in "IU":   # pandas nullable integer
        np_dtype = np.dtype(dtype.lower())
        return pd.arrays.IntegerArray(values.astype(np_dtype, copy=False), mask)
    return values.astype(dtype, copy=False)


def frame_table(n: int, cols: Cols, marks: Marks, columns: list[str] | None = None):
    """The frame table (pandas DataFrame): every schema column, all-null when no stage produced it.

    With ``columns``, only those columns, in schema order.
    """
    import pandas as pd
    data = {}
    wanted = set(columns) if columns else None
    for c in COLUMNS:
        if wanted is not None and c.name not in wanted:
            continue
        if c.name == "bad" and "bad" not in cols:
            vals, valid = bad_column(n, marks), None
        elif c.name in cols:
            vals, valid = cols[c.name]
        elif c.dtype in ("int16", "int32", "int64"):
            raise KeyError(f"required column {c.name} missing")
        elif c.dtype in ("string", "category"):
            vals, valid = Cat(np.full(n, -1, np.int32), []), None
        else:
            vals, valid = np.zeros(n, np.int64), np.zeros(n, bool)
        if c.dtype == "category":
            vals = as_cat(vals, valid, c.name)
            valid = None
        data[c.name] = nullable(vals, valid, c.dtype)
    return pd.DataFrame(data, copy=False)
