"""MAC addresses: 48-bit integers in tables (first on-air byte most significant), colon-hex in text.

The one home of MAC handling: :func:`mac_ints` reads addresses out of frame bytes,
:func:`mac_text` formats one, :func:`mac_codes` numbers a column's distinct addresses and
formats each once (the exports' dictionary, the report's labels). numpy and pandas are
imported where needed: the command-line parser imports this module.
"""
from __future__ import annotations

__all__ = ["mac_ints", "mac_text", "mac_codes", "mac_texts", "as_mac_ints", "int_mac_texts"]


def mac_ints(w, at: int):
    """uint64 address of the 6 bytes at column ``at`` of each row of ``w`` ((n, k) uint8)."""
    import numpy as np

    from sniffsync.io.bytecols import be
    b = np.zeros((w.shape[0], 8), np.uint8)
    b[:, 2:] = w[:, at:at + 6]
    return be(b, 0, 8)


def mac_text(v) -> str | None:
    """``0xaabbccddeeff`` -> ``'aa:bb:cc:dd:ee:ff'``; null -> None."""
    if v is None or type(v).__name__ == "NAType" or (isinstance(v, float) and v != v):
        return None
    v = int(v)
    return ":".join(f"{(v >> s) & 0xFF:02x}" for s in range(40, -8, -8))


def mac_codes(values, null=None) -> tuple:
    """``(codes, names)``: per row the index of its address in ``names`` (-1 where ``null``),
    ``names`` the colon-hex text of the distinct addresses in ascending order."""
    import numpy as np

    from sniffsync.decode.table import factorize
    v = np.asarray(values, np.uint64)
    if null is not None and null.all():
        return np.full(len(v), -1, np.int64), []
    codes, uniq = factorize(v if null is None else np.where(null, v[~null][0], v))
    if null is not None:
        codes = np.where(null, -1, codes)
    return codes, [mac_text(u) for u in uniq.tolist()]


def as_mac_ints(values) -> tuple:
    """``(uint64 values, null mask or None)`` of a MAC column (numpy, pandas nullable, objects)."""
    import numpy as np
    import pandas as pd
    arr = pd.array(values, dtype="UInt64")
    null = np.asarray(arr.isna())
    return np.asarray(arr.fillna(0).to_numpy(dtype=np.uint64)), (null if null.any() else None)


def mac_texts(values) -> list:
    """Colon-hex text (None for null) of every row of a column, formatting each distinct value once."""
    codes, names = mac_codes(*as_mac_ints(values))
    lut = names + [None]
    return [lut[c] for c in codes.tolist()]


def int_mac_texts(values):
    """Colon-hex text (object array, None where negative) of an int64 address column whose
    -1 means "no address" (the numpy tables of tcp / fairness)."""
    import numpy as np
    v = np.asarray(values, np.int64)
    null = v < 0
    codes, names = mac_codes(np.where(null, 0, v).astype(np.uint64), null if null.any() else None)
    return np.array(names + [None], dtype=object)[codes]
