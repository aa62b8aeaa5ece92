"""Writers for frame-like tables: CSV, Parquet, JSON lines.

In memory MACs are 48-bit integers; exports show them colon-hex. Formatting is
done once per distinct value (dictionary encoding), never per row.

:func:`write_columns` writes the reader's numpy columns straight through Arrow (no
pandas: the ``frames`` command never imports it); :func:`write_table` writes DataFrames.
"""
from __future__ import annotations

import io
import os
import sys

import numpy as np

from sniffsync.errors import UsageError
from sniffsync.decode.macs import as_mac_ints, mac_codes
from sniffsync.decode.schema import DTYPES
from sniffsync.decode.table import Cat
from sniffsync.io.atomic import atomic_output
from sniffsync.runtime import pool, workers

__all__ = ["MAC_COLUMNS", "mac_strings", "for_export", "write_table", "write_columns",
           "arrow_columns", "FORMATS"]

MAC_COLUMNS = ("ra", "ta", "bssid", "sa", "da", "other_ta")
FORMATS = {".csv": "csv", ".parquet": "parquet", ".jsonl": "jsonl", ".json": "jsonl"}


def mac_strings(values):
    """Colon-hex categorical for a nullable 48-bit MAC column."""
    import pandas as pd
    codes, names = mac_codes(*as_mac_ints(values))
    return pd.Categorical.from_codes(codes, categories=pd.Index(names, dtype=object))


def _is_text(col) -> bool:
    """True when a column already holds text (its first non-null value is a str)."""
    v = col.dropna()
    return len(v) > 0 and isinstance(v.iloc[0], str)


def for_export(df):
    """Copy of ``df`` with MAC columns as colon-hex (other columns untouched)."""
    out = df.copy(deep=False)
    for name in MAC_COLUMNS:                  # (a column already text, e.g. flows' ta, stays)
        if name in out.columns and not _is_text(out[name]):
            out[name] = mac_strings(out[name])
    return out


def _plain(table):
    """CSV cannot hold dictionary arrays: decode them to plain strings (once per column)."""
    import pyarrow as pa
    cols = [c.cast(c.type.value_type) if pa.types.is_dictionary(c.type) else c for c in table.columns]
    return pa.Table.from_arrays(cols, names=table.column_names)


def _arrow_table(df):
    import pyarrow as pa
    return _plain(pa.Table.from_pandas(df, preserve_index=False))


def _write_csv(df, stream) -> None:
    _write_arrow_csv(_arrow_table(df), stream)


def _write_arrow_csv(table, stream) -> None:
    import pyarrow.csv as pacsv
    pacsv.write_csv(_plain(table), stream, write_options=pacsv.WriteOptions(quoting_style="needed"))


# schema dtype -> numpy dtype of the Arrow values (categoricals are dictionary arrays)
_NP = {"int16": "i2", "int32": "i4", "int64": "i8", "Int8": "i1", "Int32": "i4", "Int64": "i8",
       "UInt8": "u1", "UInt16": "u2", "UInt32": "u4", "UInt64": "u8", "boolean": "?"}


def _arrow(vals, null):
    """Arrow array over a numpy column without a copy (``null``: mask or None).

    Built from buffers: ``pa.array`` would import pandas just to check the input type.
    """
    import pyarrow as pa
    vals = np.ascontiguousarray(vals)
    n = len(vals)
    data = pa.py_buffer(np.packbits(vals, bitorder="little") if vals.dtype == bool else vals)
    typ = pa.bool_() if vals.dtype == bool else pa.from_numpy_dtype(vals.dtype)
    if null is None or not null.any():
        return pa.Array.from_buffers(typ, n, [None, data], null_count=0)
    valid = pa.py_buffer(np.packbits(~null, bitorder="little"))
    return pa.Array.from_buffers(typ, n, [valid, data], null_count=int(np.count_nonzero(null)))


def _strings(texts: list):
    """Arrow string array of Python strings, from buffers."""
    import pyarrow as pa
    raw = [t.encode("utf-8") for t in texts]
    offsets = np.zeros(len(raw) + 1, np.int32)
    np.cumsum([len(r) for r in raw], out=offsets[1:])
    return pa.Array.from_buffers(pa.string(), len(raw),
                                 [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(raw))])


def _dictionary(codes, null, categories: list, index=None):
    """Dictionary array: ``codes`` (-1 or ``null`` -> null) into the string ``categories``;
    ``index``: the indices' numpy type (default: the smallest that holds them)."""
    import pyarrow as pa
    if not categories:                           # no value at all: a null column
        return pa.Array.from_buffers(pa.null(), len(codes), [None], null_count=len(codes))
    codes = np.asarray(codes)
    mask = codes < 0 if null is None else (codes < 0) | null
    index = _arrow(np.where(mask, 0, codes).astype(index or _index_dtype(len(categories))), mask)
    return pa.DictionaryArray.from_arrays(index, _strings([str(c) for c in categories]))


def _mac_dictionary(vals, null, index=None):
    """Colon-hex dictionary array of a MAC column: number the distinct values, format each once."""
    codes, names = mac_codes(vals, null)
    return _dictionary(codes, null, names, index)


def _index_dtype(k: int):
    """Smallest signed integer type for ``k`` category codes (pandas' rule, so files match)."""
    return next(t for t in (np.int8, np.int16, np.int32) if k < np.iinfo(t).max)


def _pandas_meta(name: str, dtype: str, arr) -> dict:
    """pandas' schema metadata entry for one column, so ``pd.read_parquet`` restores the
    nullable / categorical dtypes exactly as for a file written from the DataFrame."""
    import pyarrow as pa
    meta = None
    if dtype in ("category", "string") or name in MAC_COLUMNS:
        if pa.types.is_dictionary(arr.type):
            k = len(arr.dictionary)
            numpy_type = arr.type.index_type.to_pandas_dtype().__name__
        else:
            k, numpy_type = 0, "int8"
        pandas_type, meta = "categorical", {"num_categories": k, "ordered": False}
    elif dtype == "boolean":
        pandas_type, numpy_type = "bool", "boolean"
    else:
        pandas_type, numpy_type = dtype.lower(), dtype
    return {"name": name, "field_name": name, "pandas_type": pandas_type,
            "numpy_type": numpy_type, "metadata": meta}


def arrow_columns(n: int, cols: dict, names: list, index=None):
    """Arrow table of the numpy ``Cols`` (``{name: (values, valid)}``) in ``names`` order.

    Integers keep their schema width, nulls come from ``valid``, categoricals
    (:class:`sniffsync.decode.table.Cat`) and MACs become dictionary arrays (indices of
    numpy type ``index``, default the smallest that fits: pandas' choice); a column not in
    ``cols`` is all null. The schema carries pandas metadata, as a file written from
    the equivalent DataFrame would.
    """
    import json

    import pyarrow as pa
    arrays = []
    for name in names:
        vals, valid = cols.get(name, (None, np.zeros(n, bool)))
        null = None if valid is None or np.all(valid) else ~np.asarray(valid, bool)
        dtype = DTYPES[name]
        if name in MAC_COLUMNS and vals is not None:
            arrays.append(_mac_dictionary(vals, null, index))
        elif dtype in ("category", "string"):
            if vals is None:
                vals = Cat(np.full(n, -1, np.int32), [])
            if not isinstance(vals, Cat):
                from sniffsync.decode.table import as_cat
                vals = as_cat(vals, valid)
            arrays.append(_dictionary(vals.codes, null, vals.categories, index))
        elif vals is None:
            arrays.append(_arrow(np.zeros(n, _NP[dtype]), np.ones(n, bool)))
        else:
            arrays.append(_arrow(np.asarray(vals).astype(_NP[dtype], copy=False), null))
    meta = {"index_columns": [], "column_indexes": [], "attributes": {},
            "columns": [_pandas_meta(c, DTYPES[c], a) for c, a in zip(names, arrays)],
            "creator": {"library": "pyarrow", "version": pa.__version__}}
    return pa.Table.from_arrays(arrays, names=list(names)).replace_schema_metadata(
        {"pandas": json.dumps(meta)})


def write_columns(n: int, cols: dict, names: list, path: str | None, fmt: str | None = None) -> None:
    """Write numpy ``Cols`` as :func:`write_table` writes a frame table.

    CSV and Parquet go through Arrow without pandas; other formats through a DataFrame.
    ``cols`` is consumed: it is emptied once converted, so its arrays can be freed
    while the file is written.
    """
    fmt = fmt or ("csv" if path in (None, "-") else FORMATS.get(os.path.splitext(path)[1].lower()))
    if fmt not in ("csv", "parquet"):
        from sniffsync.decode.table import frame_table
        df = frame_table(n, cols, [], names)
        return write_table(df[list(names)], path, fmt)
    table = arrow_columns(n, cols, names)
    cols.clear()                       # the Arrow copy is all that is needed from here on
    if path is None or path == "-":
        _write_csv_parallel(table, sys.stdout.buffer)
        sys.stdout.flush()
        return
    with atomic_output(path) as fh:
        if fmt == "csv":
            _write_csv_parallel(table, fh)
        else:
            _write_parquet(table, fh)


def _write_csv_parallel(table, stream, parts: int | None = None) -> None:
    """CSV of ``table`` (dictionary columns written as their values), the row slices
    (default: two per worker thread) formatted on worker threads (Arrow releases the GIL)
    and written in order."""
    import pyarrow.csv as pacsv
    parts = parts or 2 * workers()
    n = table.num_rows
    cuts = [n * i // parts for i in range(parts + 1)]

    def text(i):
        sink = io.BytesIO()
        pacsv.write_csv(table.slice(cuts[i], cuts[i + 1] - cuts[i]), sink, write_options=pacsv.WriteOptions(
            quoting_style="needed", include_header=i == 0))
        return sink.getvalue()
    with pool(parts) as ex:
        for chunk in ex.map(text, range(parts)):
            stream.write(chunk)


def _write_parquet(table, fh) -> None:
    import pyarrow.parquet as pq
    pq.write_table(table, fh)


def write_table(df, path: str | None, fmt: str | None = None) -> None:
    """Write ``df`` (already selected) to ``path`` by its extension; CSV to stdout when ``path`` is None.

    Written through :func:`~sniffsync.io.atomic.atomic_output`: a failure leaves no partial output.
    """
    df = for_export(df)
    if path is None or path == "-":
        _write_csv(df, sys.stdout.buffer)
        sys.stdout.flush()
        return
    fmt = fmt or FORMATS.get(os.path.splitext(path)[1].lower())
    if fmt is None:
        raise UsageError(f"{path}: unknown output format (use .csv, .parquet or .jsonl)")

    with atomic_output(path) as fh:
        if fmt == "csv":
            _write_csv(df, fh)
        elif fmt == "parquet":
            import pyarrow as pa
            _write_parquet(pa.Table.from_pandas(df, preserve_index=False), fh)
        else:
            df.to_json(fh, orient="records", lines=True, date_format="iso")
