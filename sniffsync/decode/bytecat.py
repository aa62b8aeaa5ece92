"""Categorical columns from fixed-width byte keys (addresses, bitmaps, option bytes):
each distinct key numbered without sorting byte strings, formatted once."""
from __future__ import annotations

import numpy as np

from sniffsync.decode.table import Cat, factorize

__all__ = ["categorical_from_bytes", "hexstr"]


def categorical_from_bytes(keys: np.ndarray, fmt) -> Cat:
    """:class:`~sniffsync.decode.table.Cat` of ``fmt(bytes)`` per row of ``keys`` (k, m) uint8,
    formatting each distinct key once.

    Rows are numbered 8 bytes at a time (1-D integer factorisation per word), which is
    much faster than sorting fixed-width byte strings.
    """
    keys = np.ascontiguousarray(keys, np.uint8)
    k, m = keys.shape
    if k == 0:
        return Cat(np.zeros(0, np.int32), [])
    if m % 8:
        keys = np.concatenate([keys, np.zeros((k, 8 - m % 8), np.uint8)], axis=1)
    words = keys.view("<u8")
    codes = np.zeros(k, np.int64)
    for j in range(words.shape[1]):
        c, uniq = factorize(words[:, j])
        codes, _ = factorize(codes * len(uniq) + c)
    n_uniq = int(codes.max()) + 1
    first = np.empty(n_uniq, np.int64)
    first[codes[::-1]] = np.arange(k - 1, -1, -1)        # first row of each distinct key
    if fmt is hexstr:
        return _hex_cat(keys[first, :m], codes)
    names = np.array([fmt(keys[i, :m].tobytes()) for i in first], dtype=object)
    cats, remap = np.unique(names, return_inverse=True)   # distinct keys may format alike
    return Cat(remap.ravel()[codes].astype(np.int32), list(cats))


def hexstr(b: bytes) -> str:
    return b.hex()


_HEX_DIGITS = np.frombuffer(b"0123456789abcdef", np.uint8)


def _hex_cat(uniq: np.ndarray, codes: np.ndarray) -> Cat:
    """The :class:`Cat` ``categorical_from_bytes(.., hexstr)`` gives, for the distinct
    keys ``uniq`` (u, m) and the rows' ``codes`` into them: all keys are m bytes long, so
    sorting the hex text is sorting its ASCII bytes (no Python call per key)."""
    u, m = uniq.shape
    digits = np.empty((u, 2 * m), np.uint8)
    digits[:, 0::2] = _HEX_DIGITS[uniq >> 4]
    digits[:, 1::2] = _HEX_DIGITS[uniq & 0xF]
    text = digits.view(f"S{2 * m}")[:, 0] if m else np.full(u, b"", "S1")
    cats, remap = np.unique(text, return_inverse=True)
    return Cat(remap.ravel()[codes].astype(np.int32), cats.astype(str).tolist())
