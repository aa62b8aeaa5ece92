"""Decoded columns held narrow: the fairness command's reading of an 802.11 capture.

The reader's columns carry the schema's width (``tsft_us`` and ``ampdu_ref`` int64,
categorical codes int32, a validity mask per nullable column): ~230 bytes per frame for
the ~57 columns the PPDU grouping and the TCP analysis read. Here each streamed batch is
cast to the schema dtype (the values the frame table would hold) and then stored in the
narrowest integer type of the same signedness that holds the batch's values; a mask that
is all valid is dropped; category codes go into one list per column. Each batch is copied
into columns allocated once as it arrives (nothing of it stays pinned in the decoding
threads' heaps); the PPDU grouping reads them as they are (``airtime.framecols.Columns``,
no pandas), and :func:`lean_frame` gives a DataFrame over these arrays without widening
them (pandas nullable arrays of the narrow dtype, plain numpy where no value is null). Readers of the columns convert to the dtype they compute in
(``to_numpy(int64)``, :func:`sniffsync.tcp.columns.frame_getter`), so results do not change.
"""
from __future__ import annotations

import threading

import numpy as np

from sniffsync.decode.schema import COLUMNS
from sniffsync.decode.table import Cat, ColumnSink, as_cat, bad_column, frame_table, nullable

__all__ = ["read_lean", "narrow", "lean_frame"]

_SCHEMA = {c.name: c.dtype for c in COLUMNS}
_SIGNED = (np.int8, np.int16, np.int32, np.int64)
_UNSIGNED = (np.uint8, np.uint16, np.uint32, np.uint64)
LEAN_ROWS = 1 << 16       # frames per batch (one decoding chunk each): less per-batch overhead


def _schema_np(name: str, values: np.ndarray) -> np.dtype:
    """The numpy dtype the frame table holds ``name`` in (the reader's if not a schema int)."""
    sd = _SCHEMA.get(name, "")
    if sd == "boolean":
        return np.dtype(bool)
    if sd.lower().lstrip("u").startswith("int"):          # Int8 ... UInt64, int16 ... int64
        return np.dtype(sd.lower())
    return values.dtype


def _smallest(v: np.ndarray) -> np.dtype:
    """Narrowest integer dtype of ``v``'s signedness holding all of its values."""
    if v.dtype.kind not in "iu" or v.size == 0:
        return v.dtype
    lo, hi = int(v.min()), int(v.max())
    for t in (_SIGNED if v.dtype.kind == "i" else _UNSIGNED):
        info = np.iinfo(t)
        if info.min <= lo and hi <= info.max:
            return np.dtype(t) if np.dtype(t).itemsize < v.dtype.itemsize else v.dtype
    return v.dtype


def _narrow_codes(cat: Cat) -> Cat:
    codes = np.asarray(cat.codes)
    k = len(cat.categories)
    t = np.int8 if k < 127 else np.int16 if k < 32767 else codes.dtype
    return Cat(codes.astype(t, copy=False), cat.categories)


def narrow(cols: dict) -> dict:
    """``cols`` (``{name: (values, valid)}``) cast to the schema dtype and narrowed."""
    out = {}
    for name, (v, ok) in cols.items():
        if ok is not None:
            ok = np.asarray(ok, bool)
            if ok.all():
                ok = None
        if isinstance(v, Cat) or _SCHEMA.get(name) == "category":
            out[name] = (_narrow_codes(as_cat(v, ok, name)), None)
            continue
        v = np.asarray(v)
        if v.dtype != object:
            v = v.astype(_schema_np(name, v), copy=False)
            v = v.astype(_smallest(v), copy=False)
        out[name] = (v, ok)
    return out


def read_lean(path, columns, sniffer: int = 0, spill=(), spill_copy=()):
    """``(n, cols, marks)`` as :func:`sniffsync.decode.frames.read_columns` gives them
    (``records=False``), with every column narrowed (:func:`narrow`).

    ``spill``: names of columns parked in a temporary file as the batches arrive (not held
    while the caller's first stages run): ``cols`` is then a
    :class:`sniffsync.fairness.spill.SpilledCols`, which reads each back when first asked
    for (``restore()``: all at once); ``spill_copy``: columns also copied there (and kept
    in ``cols``, so a stage may free them)."""
    from sniffsync.decode.frames import iter_columns
    from sniffsync.fairness.spill import Spill, SpilledCols
    parked, codes = Spill(spill, spill_copy), _Codes()
    widths = {}               # name -> the batches' dtypes (one: the column is as narrow as it gets)

    def post(rec, n, cols, marks):                # on the decoding worker; drops ``rec``
        end = int(rec.data_off[-1]) + int(rec.caplen[-1]) if n else 1
        cols = narrow(cols)
        for name, (v, ok) in cols.items():        # categories: codes into one numbering per column
            if isinstance(v, Cat):
                cols[name] = (codes.remap(name, v, rec.row0), ok)
            else:
                widths.setdefault(name, set()).add(v.dtype)
        parked.add(cols, n, rec.row0)             # (here, not on the main thread: it walks)
        return rec.row0, n, cols, marks, int(n * rec.buf.size / max(end, 1) * 1.25) + 1024

    marks, sink = [], None
    # one decoding chunk a batch: no per-chunk overhead, no join of chunks; the walked pages
    # stay mapped until their batch is decoded (then dropped), not mapped twice
    batches = iter_columns(path, sniffer, columns, post=post, batch_rows=LEAN_ROWS, chunk_rows=LEAN_ROWS,
                           drop_walked=False)
    try:
        for row0, k, cols, batch_marks, rows_estimate in batches:
            marks.extend((np.asarray(r, np.int64) + row0, why) for r, why in batch_marks)
            # copied into columns allocated once: the batch's arrays are freed (and their
            # memory reused by the next batches) at once, none kept until a final join
            sink = sink or ColumnSink(rows_estimate)
            sink.add(cols, k)
            del cols
    except BaseException:
        batches.close()                           # (waits for the workers: none parks after)
        parked.close()
        raise
    if sink is None:                              # an empty capture: the reader's own columns
        parked.close()
        from sniffsync.decode.frames import read_columns
        return read_columns(path, sniffer, columns, records=False)[1:]
    cats = codes.final()

    def finish(name, col):
        v, ok = col
        if name in cats:                          # (nulls of batches that lacked it: code -1)
            categories, order = cats[name]
            return as_cat(Cat(v if order is None else order[v], categories), ok), None
        # batches of different widths met at the widest (one width: the narrowest of each
        # batch, so of the column: no scan of its values)
        if v.dtype.kind in "iu" and len(widths.get(name, ())) > 1:
            return v.astype(_smallest(v), copy=False), ok
        return v, ok
    cols = sink.result()
    for name in list(cols):
        cols[name] = finish(name, cols[name])
    if not parked.parts:
        parked.close()
        return sink.n, cols, marks
    return sink.n, SpilledCols(cols, parked, finish), marks


def _code_dtype(k: int):
    return np.int8 if k < 127 else np.int16 if k < 32767 else np.int32


class _Codes:
    """One numbering per categorical column for batches coded on any thread, in any order;
    :meth:`final` renumbers it to first-seen order in the file (what a reading in order
    gives), so results do not depend on thread timing."""

    def __init__(self):
        self.lock = threading.Lock()
        self.index = {}     # name -> {category: code}
        self.first = {}     # name -> [(row0, position in its batch) where each code was first seen]

    def remap(self, name: str, cat: Cat, row0: int) -> np.ndarray:
        """A batch's codes (rows from ``row0``) in the column's numbering."""
        with self.lock:
            index, first = self.index.setdefault(name, {}), self.first.setdefault(name, [])
            ids = []
            for pos, v in enumerate(cat.categories):
                code = index.setdefault(v, len(index))
                if code == len(first):
                    first.append((row0, pos))
                elif (row0, pos) < first[code]:
                    first[code] = (row0, pos)
                ids.append(code)
            k = len(index)
        remap = np.array(ids + [-1], _code_dtype(k))    # (in the codes' final dtype: one pass)
        return remap[np.asarray(cat.codes)]

    def final(self) -> dict:
        """``{name: (categories, order)}``: ``order[code]`` the file-order code (last: -1),
        None where the numbering already is in file order."""
        out = {}
        for name, index in self.index.items():
            cats, first = list(index), self.first[name]
            rank = sorted(range(len(cats)), key=first.__getitem__)
            if rank == list(range(len(cats))):
                out[name] = cats, None
                continue
            order = np.empty(len(cats) + 1, _code_dtype(len(cats)))
            order[rank] = np.arange(len(cats))
            order[-1] = -1
            out[name] = [cats[i] for i in rank], order
        return out


def lean_frame(n: int, cols: dict, marks: list, names, consume=()):
    """Frame-table DataFrame of ``names`` (schema order) over the narrow arrays: nullable
    pandas arrays of the narrow dtype (plain numpy without nulls), no widened copy
    (:func:`sniffsync.decode.table.frame_table` otherwise). Columns named in ``consume``
    move into the DataFrame: removed from ``cols``, their valid mask turned in place into
    the null mask pandas holds (no second mask per column)."""
    import pandas as pd
    wanted, data = set(names), {}
    for c in COLUMNS:
        if c.name not in wanted:
            continue
        if c.name == "bad" and "bad" not in cols:
            vals, ok = bad_column(n, marks), None
        elif c.name in cols:
            vals, ok = cols.pop(c.name) if c.name in consume else cols[c.name]
        else:                                     # absent: all-null, as the frame table has it
            data[c.name] = frame_table(n, {}, [], [c.name])[c.name].array
            continue
        if c.dtype == "category":
            cat = as_cat(vals, ok, c.name)
            data[c.name] = pd.Categorical.from_codes(cat.codes, categories=pd.Index(cat.categories, dtype=object))
            continue
        vals = np.asarray(vals)
        if c.dtype == "string" or vals.dtype.kind not in "iub":
            data[c.name] = nullable(vals, ok, c.dtype)
            continue
        if ok is None:                            # no null: plain numpy, no mask to hold
            data[c.name] = vals
            continue
        null = np.logical_not(ok, out=ok) if c.name in consume else ~ok
        data[c.name] = (pd.arrays.BooleanArray(vals.astype(bool, copy=False), null) if c.dtype == "boolean"
                        else pd.arrays.IntegerArray(vals, null))
    return pd.DataFrame(data, copy=False)
