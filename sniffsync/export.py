"""Writers for frame-like tables: CSV, Parquet, JSON lines.

In memory MACs are 48-bit integers; exports show them colon-hex. Formatting is
done once per distinct value (np.unique + categorical codes), never per row.
"""
from __future__ import annotations

import os
import sys
import tempfile

import numpy as np
import pandas as pd

from .errors import CaptureError, UsageError

__all__ = ["MAC_COLUMNS", "mac_strings", "for_export", "write_table", "FORMATS"]

MAC_COLUMNS = ("ra", "ta", "bssid", "sa", "da")
FORMATS = {".csv": "csv", ".parquet": "parquet", ".jsonl": "jsonl", ".json": "jsonl"}


def mac_strings(values) -> pd.Categorical:
    """Colon-hex categorical for a nullable 48-bit MAC column."""
    arr = pd.array(values, dtype="UInt64")
    mask = np.asarray(arr.isna())
    ints = np.asarray(arr.fillna(0).to_numpy(dtype=np.uint64))
    uniq, codes = np.unique(ints, return_inverse=True)
    names = [":".join(f"{(int(u) >> s) & 0xFF:02x}" for s in range(40, -8, -8)) for u in uniq]
    codes = np.where(mask, -1, codes.ravel())
    return pd.Categorical.from_codes(codes, categories=pd.Index(names, dtype=object))


def for_export(df: pd.DataFrame) -> pd.DataFrame:
    """Copy of ``df`` with MAC columns as colon-hex (other columns untouched)."""
    out = df.copy(deep=False)
    for name in MAC_COLUMNS:
        if name in out.columns:
            out[name] = mac_strings(out[name])
    return out


def _arrow_table(df: pd.DataFrame):
    import pyarrow as pa
    table = pa.Table.from_pandas(df, preserve_index=False)
    # CSV cannot hold dictionary arrays; decode them to plain strings
    cols = [c.cast(c.type.value_type) if pa.types.is_dictionary(c.type) else c for c in table.columns]
    return pa.Table.from_arrays(cols, names=table.column_names)


def _write_csv(df: pd.DataFrame, stream) -> None:
    import pyarrow.csv as pacsv
    pacsv.write_csv(_arrow_table(df), stream,
                    write_options=pacsv.WriteOptions(quoting_style="needed"))


def write_table(df: pd.DataFrame, path: str | None, fmt: str | None = None) -> None:
    """Write ``df`` (already selected) to ``path`` by its extension; CSV to stdout when ``path`` is None.

    Writes to a temporary file first so a failure leaves no partial output.
    """
    df = for_export(df)
    if path is None or path == "-":
        _write_csv(df, sys.stdout.buffer)
        sys.stdout.flush()
        return
    fmt = fmt or FORMATS.get(os.path.splitext(path)[1].lower())
    if fmt is None:
        raise UsageError(f"{path}: unknown output format (use .csv, .parquet or .jsonl)")
    folder = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".sniffsync-", dir=folder)
    except OSError as exc:
        raise CaptureError(f"{path}: cannot write: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            if fmt == "csv":
                _write_csv(df, fh)
            elif fmt == "parquet":
                import pyarrow.parquet as pq
                import pyarrow as pa
                pq.write_table(pa.Table.from_pandas(df, preserve_index=False), fh)
            else:
                df.to_json(fh, orient="records", lines=True, date_format="iso")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
