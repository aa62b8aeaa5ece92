"""A data PPDU's Block-Ack window as one 64-bit mask (for :mod:`airtime.extent_ba`): bit ``k``
stands for sequence number ``(base + k) % 4096``, so each rule of the missed-subframe count
is a few word operations per PPDU instead of array operations per window position (the
window is at most ``BA_REACH`` = 64 positions).
"""
from __future__ import annotations

import numpy as np

__all__ = ["ONES", "low_bits", "span_bits", "popcount", "top_bit", "set_bits", "pack_rows", "bitmap_words",
           "window_words"]

ONES = np.uint64(0xFFFF_FFFF_FFFF_FFFF)
_ONE = np.uint64(1)
_ZERO = np.uint64(0)


def _u(x) -> np.ndarray:
    return np.asarray(x).astype(np.uint64)


def low_bits(x) -> np.ndarray:
    """Masks of the bits ``k < x`` (``x`` clipped to 0..64; a shift by 64 is undefined)."""
    x = np.clip(np.asarray(x, np.int64), 0, 64)
    return np.where(x >= 64, ONES, (_ONE << _u(np.minimum(x, 63))) - _ONE)


def span_bits(a, b) -> np.ndarray:
    """Masks of the bits ``a <= k < b``."""
    return low_bits(b) & ~low_bits(a)


def popcount(m) -> np.ndarray:
    """Set bits of each mask (int64)."""
    m = np.asarray(m, np.uint64)
    if hasattr(np, "bitwise_count"):              # numpy >= 2.0
        return np.bitwise_count(m).astype(np.int64)
    m = m - ((m >> _ONE) & np.uint64(0x5555_5555_5555_5555))
    m = (m & np.uint64(0x3333_3333_3333_3333)) + ((m >> np.uint64(2)) & np.uint64(0x3333_3333_3333_3333))
    m = (m + (m >> np.uint64(4))) & np.uint64(0x0F0F_0F0F_0F0F_0F0F)
    return ((m * np.uint64(0x0101_0101_0101_0101)) >> np.uint64(56)).astype(np.int64)


def top_bit(m) -> np.ndarray:
    """Index of each mask's highest set bit, -1 where none."""
    m = np.array(m, np.uint64)
    for s in (1, 2, 4, 8, 16, 32):               # every bit below the highest set too
        m |= m >> np.uint64(s)
    return popcount(m) - 1


def set_bits(n: int, i, k) -> np.ndarray:
    """``n`` masks with bit ``k[j]`` set in mask ``i[j]`` (``k`` outside 0..63 ignored; ``i``
    ascending: runs, no scatter)."""
    out = np.zeros(n, np.uint64)
    i, k = np.asarray(i, np.int64), np.asarray(k, np.int64)
    if not len(i):
        return out
    bits = np.where((k >= 0) & (k < 64), _ONE << _u(np.clip(k, 0, 63)), _ZERO)
    if (i[1:] >= i[:-1]).all():
        at = np.flatnonzero(np.r_[True, i[1:] != i[:-1]])
        out[i[at]] = np.bitwise_or.reduceat(bits, at)
    else:
        np.bitwise_or.at(out, i, bits)
    return out


def pack_rows(flags) -> np.ndarray:
    """Rows of 64 bools as masks (bit ``k`` = column ``k``)."""
    b = np.packbits(np.asarray(flags, bool).reshape(-1, 64), axis=1, bitorder="little")
    return np.ascontiguousarray(b).view("<u8").reshape(-1).astype(np.uint64)


def bitmap_words(table) -> np.ndarray:
    """Bitmap bytes (one bitmap per row, zero-padded) as little-endian uint64 words, with a zero
    word after the longest and a zero row at the end (the row of "no bitmap")."""
    table = np.asarray(table, np.uint8)
    w = -(-table.shape[1] // 8) + 1
    out = np.zeros((table.shape[0] + 1, 8 * w), np.uint8)
    out[:table.shape[0], :table.shape[1]] = table
    return out.view("<u8").astype(np.uint64)


def window_words(words, code, off) -> np.ndarray:
    """Masks whose bit ``k`` is bit ``(off + k) % 4096`` of bitmap ``code`` (a row of
    :func:`bitmap_words`; -1: none, no bit set)."""
    code, off = np.asarray(code, np.int64), np.asarray(off, np.int64)
    nw = words.shape[1]                           # (its last word is zero)
    row = np.where(code >= 0, code, words.shape[0] - 1)
    w0, sh = off // 64, _u(off % 64)
    x = words[row, np.minimum(w0, nw - 1)] >> sh
    x |= np.where(sh > 0, words[row, np.minimum(w0 + 1, nw - 1)] << ((np.uint64(64) - sh) % np.uint64(64)), _ZERO)
    x &= low_bits(4096 - off)                     # positions past 4095 wrap to bit 0
    wrap = 4096 - off
    x |= np.where(wrap < 64, words[row, 0] << _u(np.clip(wrap, 0, 63)), _ZERO)
    return x
