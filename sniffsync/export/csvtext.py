"""CSV text of small frame-table batches without Arrow: the same bytes as its CSV writer.

Arrow's import (~0.1 s) is most of the start-up of ``sniffsync frames`` on a small capture;
for batches of up to :data:`SMALL` rows the cells are formatted here instead, exactly as
``pyarrow.csv.write_csv(..., quoting_style="needed")`` writes the table that
:func:`sniffsync.export.tables.arrow_columns` builds: names and text quoted (``"`` doubled),
integers in decimal, booleans ``true``/``false``, nulls empty, ``\\n`` line ends.
Text is formatted once per distinct value (categories, MACs), never per row.
"""
from __future__ import annotations

import numpy as np

from sniffsync.decode.macs import mac_codes
from sniffsync.decode.schema import DTYPES
from sniffsync.decode.table import Cat

__all__ = ["SMALL", "header", "rows"]

SMALL = 4096          # larger batches go through Arrow (faster per row once imported)
_INT = {"int16": "i2", "int32": "i4", "int64": "i8", "Int8": "i1", "Int32": "i4", "Int64": "i8",
        "UInt8": "u1", "UInt16": "u2", "UInt32": "u4", "UInt64": "u8"}


def _quote(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def header(names: list) -> bytes:
    return (",".join(_quote(n) for n in names) + "\n").encode()


def _coded(codes, null, categories: list) -> list:
    """Cells of a dictionary column: quoted category text, empty where null or code < 0."""
    lut = [_quote(str(c)) for c in categories] + [""]
    codes = np.asarray(codes, np.int64)
    missing = codes < 0 if null is None else (codes < 0) | null
    return [lut[c] for c in np.where(missing, len(lut) - 1, codes).tolist()]


def _cells(n: int, name: str, vals, valid) -> list:
    from sniffsync.export.tables import MAC_COLUMNS
    null = None if valid is None or np.all(valid) else ~np.asarray(valid, bool)
    dtype = DTYPES[name]
    if name in MAC_COLUMNS and vals is not None:
        codes, names = mac_codes(vals, null)
        return _coded(codes, null, names)
    if dtype in ("category", "string"):
        if vals is None:
            return [""] * n
        if not isinstance(vals, Cat):
            from sniffsync.decode.table import as_cat
            vals = as_cat(vals, valid)
        return _coded(vals.codes, null, vals.categories)
    if vals is None:
        return [""] * n
    if dtype == "boolean":
        text = np.where(np.asarray(vals, bool), "true", "false").tolist()
    else:
        text = list(map(str, np.asarray(vals).astype(_INT[dtype], copy=False).tolist()))
    if null is not None:
        for i in np.flatnonzero(null).tolist():
            text[i] = ""
    return text


def rows(n: int, cols: dict, names: list) -> bytes:
    """CSV lines (no header) of one batch of numpy ``Cols`` (``{name: (values, valid)}``)."""
    if n == 0:
        return b""
    columns = [_cells(n, name, *cols.get(name, (None, None))) for name in names]
    return ("\n".join(map(",".join, zip(*columns))) + "\n").encode()
