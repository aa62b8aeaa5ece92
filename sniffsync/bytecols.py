"""Vectorised reads of little/big-endian integers at many offsets of one byte buffer.

The whole reader rests on this: given the capture as one ``uint8`` array and an
array of offsets, read the same field of every frame in one numpy operation.
Offsets past the end of the buffer read as zero; callers mask those rows with
their own bounds (``off + size <= end``), so a short frame never raises.
"""
from __future__ import annotations

import numpy as np

__all__ = ["read", "u8", "u16le", "u32le", "u64le", "u16be", "u32be", "gather", "in_bounds"]


def gather(buf: np.ndarray, off: np.ndarray, width: int) -> np.ndarray:
    """Bytes ``buf[off[i] : off[i] + width]`` as an ``(n, width)`` uint8 array (zero past the end)."""
    off = np.asarray(off, dtype=np.int64)
    idx = off[:, None] + np.arange(width, dtype=np.int64)
    n = buf.shape[0]
    if idx.size and (idx.max() >= n or idx.min() < 0):
        out = np.zeros(idx.shape, dtype=np.uint8)
        ok = (idx >= 0) & (idx < n)
        out[ok] = buf[idx[ok]]
        return out
    return buf[idx]


def read(buf: np.ndarray, off: np.ndarray, dtype: str) -> np.ndarray:
    """Values of numpy ``dtype`` (e.g. ``'<u4'``) starting at each offset."""
    dt = np.dtype(dtype)
    if dt.itemsize == 1:
        return gather(buf, off, 1)[:, 0].view(dt)
    return np.ascontiguousarray(gather(buf, off, dt.itemsize)).view(dt)[:, 0]


def u8(buf, off):
    return read(buf, off, "u1")


def u16le(buf, off):
    return read(buf, off, "<u2")


def u32le(buf, off):
    return read(buf, off, "<u4")


def u64le(buf, off):
    return read(buf, off, "<u8")


def u16be(buf, off):
    return read(buf, off, ">u2")


def u32be(buf, off):
    return read(buf, off, ">u4")


def in_bounds(off: np.ndarray, size: int, end: np.ndarray) -> np.ndarray:
    """Mask of rows whose field ``[off, off + size)`` lies before ``end``."""
    return np.asarray(off) + size <= np.asarray(end)
