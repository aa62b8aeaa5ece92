"""Streamed export of the frame table: CSV or Parquet written batch by batch, as decoded.

:class:`BatchWriter` splits the work so that the costly part runs where the batch was
decoded: :meth:`BatchWriter.convert` (numpy columns -> Arrow -> CSV bytes) is
thread-safe and runs on the decoding worker; :meth:`BatchWriter.write` appends the
result in file order. Small CSV batches (and the header) are formatted by
:mod:`sniffsync.export.csvtext` with the same bytes, so a small capture never imports
Arrow. Every batch is cast to one fixed schema (dictionary columns with int32 indices),
so a Parquet file gets one row group per batch and the same pandas dtypes as a file
written at once. Memory holds a few batches, not the table.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import sys

import numpy as np

from sniffsync.errors import UsageError
from sniffsync.io.atomic import atomic_output
from sniffsync.export import csvtext
from sniffsync.export.tables import _NP, FORMATS, MAC_COLUMNS, _pandas_meta, arrow_columns
from sniffsync.decode.schema import DTYPES

__all__ = ["BatchWriter", "stream_schema", "parquet_writer", "dictionary_columns"]


def stream_schema(names: list):
    """Arrow schema every streamed batch is cast to (with pandas metadata)."""
    import pyarrow as pa
    fields = []
    for name in names:
        dtype = DTYPES[name]
        if name in MAC_COLUMNS or dtype in ("category", "string"):
            typ = pa.dictionary(pa.int32(), pa.string())
        elif dtype == "boolean":
            typ = pa.bool_()
        else:
            typ = pa.from_numpy_dtype(np.dtype(_NP[dtype]))
        fields.append(pa.field(name, typ))
    empty = [pa.nulls(0, f.type) for f in fields]          # (pa.array would import pandas)
    meta = {"index_columns": [], "column_indexes": [], "attributes": {},
            "columns": [_pandas_meta(n, DTYPES[n], a) for n, a in zip(names, empty)],
            "creator": {"library": "pyarrow", "version": pa.__version__}}
    return pa.schema(fields, metadata={"pandas": json.dumps(meta)})


def _cast(table, schema):
    """``table`` with the types of ``schema`` (an all-null column may come as Arrow null)."""
    import pyarrow as pa
    cols = []
    for col, field in zip(table.columns, schema):
        if col.type == field.type:
            cols.append(col)
        elif pa.types.is_null(col.type):
            cols.append(pa.nulls(len(col), field.type))
        else:
            cols.append(col.cast(field.type))
    return pa.Table.from_arrays(cols, schema=schema)


def dictionary_columns(schema) -> list:
    """Columns written with Parquet dictionary encoding: all but the plain 64-bit integers
    (time stamps, TSFT, A-MPDU references: nearly every value distinct, so the encoder
    built a dictionary only to drop it; ~20 % of the encoding time, and a smaller file)."""
    import pyarrow as pa
    return [f.name for f in schema if not (pa.types.is_integer(f.type) and f.type.bit_width == 64)]


def parquet_writer(fh, schema):
    """A Parquet writer of ``schema`` on the open file ``fh`` (options: :func:`dictionary_columns`):
    ``pyarrow.parquet.ParquetWriter``'s own writer with its defaults otherwise (the same
    bytes, a test compares them), without importing ``pyarrow.parquet``, whose ``pyarrow.fs``
    (cloud filesystems, ssl) adds ~9 MB to a run that only writes a local file. Any other
    pyarrow: ``pyarrow.parquet.ParquetWriter``."""
    from pyarrow._parquet import ParquetWriter       # (what pyarrow.parquet wraps)
    use_dictionary = dictionary_columns(schema)
    try:
        return ParquetWriter(fh, schema, version="2.6", compression="snappy", use_dictionary=use_dictionary,
                             write_statistics=True, use_deprecated_int96_timestamps=False,
                             writer_engine_version="V2")
    except TypeError:                                 # its arguments changed
        import pyarrow.parquet as pq
        return pq.ParquetWriter(fh, schema, use_dictionary=use_dictionary)


class _Aborted(Exception):
    """Passed to the output's context on :meth:`BatchWriter.abort`: discard the file."""


class BatchWriter:
    """Write frame-table batches to ``path`` (CSV on stdout when ``path`` is None or "-").

    A file is written through :func:`~sniffsync.io.atomic.atomic_output` (a temporary
    file renamed into place by :meth:`close`); :meth:`abort` (or leaving a ``with`` block
    by an exception) removes it, so a failure leaves no partial output.
    """

    def __init__(self, path: str | None, names: list, fmt: str | None = None):
        self.names = list(names)
        self.path = None if path in (None, "-") else path
        self.fmt = fmt or ("csv" if self.path is None else FORMATS.get(os.path.splitext(path)[1].lower()))
        if self.fmt not in ("csv", "parquet"):
            raise UsageError(f"{path}: streamed output is CSV or Parquet")
        self._schema = None
        self.rows = 0
        self._out, self._fh, self._pq = None, sys.stdout.buffer, None
        if self.path is not None:
            self._out = contextlib.ExitStack()
            self._fh = self._out.enter_context(atomic_output(self.path))
        try:
            self._start()
        except BaseException:
            self.abort()
            raise

    @property
    def schema(self):
        """The Arrow schema of every batch (built on first use: small CSV needs no Arrow)."""
        if self._schema is None:
            self._schema = stream_schema(self.names)
        return self._schema

    def _start(self) -> None:
        """The Parquet writer, or the CSV header."""
        if self.fmt == "parquet":
            self._pq = parquet_writer(self._fh, self.schema)
        else:
            self._fh.write(csvtext.header(self.names))

    @staticmethod
    def _csv(table, header: bool = False) -> bytes:
        # the CSV writer prints a dictionary column's values itself (no Python-side cast:
        # that would import pyarrow.compute, ~0.1-0.2 s of start-up)
        import pyarrow.csv as pacsv
        sink = io.BytesIO()
        pacsv.write_csv(table, sink, write_options=pacsv.WriteOptions(
            quoting_style="needed", include_header=header))
        return sink.getvalue()

    def convert(self, n: int, cols: dict):
        """Arrow table (Parquet) or CSV bytes of one batch; thread-safe."""
        if self.fmt == "csv" and n <= csvtext.SMALL:
            return csvtext.rows(n, cols, self.names)       # same bytes, no Arrow import
        # int32 indices as in the schema: no cast (nor pyarrow.compute import) per batch
        table = _cast(arrow_columns(n, cols, self.names, np.int32), self.schema)
        return table if self.fmt == "parquet" else self._csv(table)

    def write(self, converted) -> None:
        """Append one converted batch (in file order)."""
        if self.fmt == "parquet":
            self.rows += converted.num_rows
            if converted.num_rows:
                self._pq.write_table(converted)
        else:
            self._fh.write(converted)

    def close(self) -> None:
        try:
            if self._pq is not None:
                self._pq.close()              # the Parquet footer
                self._pq = None
        except BaseException:
            self.abort()
            raise
        if self._out is None:
            self._fh.flush()
            return
        out, self._out = self._out, None
        out.close()                    # renames the finished file into place

    def abort(self) -> None:
        if self._pq is not None:
            try:
                self._pq.close()
            except Exception:        # the file is removed anyway
                pass
            self._pq = None
        if self._out is not None:
            out, self._out = self._out, None
            out.__exit__(_Aborted, _Aborted(), None)     # removes the temporary file

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self.abort()
        return False
