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
    """Bytes ``buf[off[i] : off[i] + width]`` as an ``(n, width)`` uint8 array (zero past the end).

    A strided view of ``buf`` with one ``width``-byte item starting at every byte lets
    numpy copy each row with one fancy-index step (no ``(n, width)`` index array; about
    4x faster than byte-wise gathers). Rows reaching past either end are read byte-wise.
    """
    off = np.asarray(off, dtype=np.int64)
    n = buf.shape[0]
    inside = (off >= 0) & (off <= n - width)
    if n >= width and width > 0:
        items = np.ndarray(shape=(n - width + 1,), dtype=np.dtype((np.void, width)),
                           buffer=buf, strides=(1,))
        if inside.all():
            return items[off].view(np.uint8).reshape(-1, width)
        out = np.zeros((off.shape[0], width), dtype=np.uint8)
        out[inside] = items[off[inside]].view(np.uint8).reshape(-1, width)
    else:
        out = np.zeros((off.shape[0], width), dtype=np.uint8)
    rest = np.flatnonzero(~inside)
    if rest.size:
        idx = off[rest, None] + np.arange(width, dtype=np.int64)
        ok = (idx >= 0) & (idx < n)
        part = np.zeros(idx.shape, dtype=np.uint8)
        part[ok] = buf[idx[ok]]
        out[rest] = part
    return out


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
