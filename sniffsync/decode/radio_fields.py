"""Fixed-layout radio-header fields -> frame-table columns: the shared reader of PPI, Prism and AVS.

A header kind is described by a declarative table of :class:`FixedField` rows (column,
byte offset in its block, numpy dtype with byte order, scale, the raw value meaning "not
supplied"); :func:`read_fields` reads every row of a table for all frames at once. The
few derived columns (``phy`` from the rate, channel number -> MHz) are helpers here so
the three decoders map them the same way as radiotap does.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from sniffsync.decode.radiotap_values import PHY_CODE, RATE_PHY
from sniffsync.decode.schema import DTYPES, PHY_NAMES
from sniffsync.decode.table import Cat
from sniffsync.io.bytecols import field, gather

__all__ = ["FixedField", "read_fields", "chan_to_mhz", "phy_column", "cast", "wanted", "merge_cols"]


class FixedField(NamedTuple):
    column: str
    offset: int          # byte offset inside the header block
    dtype: str           # numpy dtype with byte order: '<u2', '>i4', 'i1', ...
    scale: int = 1       # column value = raw * scale
    null: int | None = None   # raw value that means "not supplied"


def cast(name: str, values: np.ndarray) -> np.ndarray:
    """``values`` as the numpy dtype of schema column ``name``."""
    dt = DTYPES.get(name, "int64")          # "_name": a private intermediate
    if dt == "boolean":
        return values.astype(bool)
    return values.astype(np.dtype(dt.lower()))


def wanted(columns, name: str) -> bool:
    return columns is None or name in columns


def read_fields(buf, base, has, table, columns=None, width=None) -> dict:
    """``{column: (values, valid)}`` of every :class:`FixedField` of ``table``.

    ``base`` is each frame's offset of the block in ``buf``; ``has`` the rows where the
    block is present and inside the frame. A column named twice keeps its first valid value.
    """
    width = width or max(f.offset + np.dtype(f.dtype).itemsize for f in table)
    raw = gather(buf, np.where(has, base, 0), width)
    out: dict = {}
    for f in table:
        if not wanted(columns, f.column):
            continue
        v = field(raw, f.offset, f.dtype).astype(np.int64)
        ok = has if f.null is None else has & (v != f.null)
        v = cast(f.column, v * f.scale)
        if f.column in out:                       # an earlier source wins where valid
            v0, ok0 = out[f.column]
            v, ok = np.where(ok0, v0, v), ok0 | ok
        out[f.column] = (v, ok)
    return out


def chan_to_mhz(chan: np.ndarray, five_ghz: np.ndarray | bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Centre frequency of an 802.11 channel number (2.4 GHz 1-14, else 5 GHz), and validity."""
    chan = np.asarray(chan, np.int64)
    five = np.asarray(five_ghz, bool) | (chan > 14)
    mhz = np.where(five, 5000 + 5 * chan, np.where(chan == 14, 2484, 2407 + 5 * chan))
    return mhz.astype(np.uint16), (chan > 0) & (chan < 200)


def phy_column(rate_500k: np.ndarray, rate_ok: np.ndarray, ht: np.ndarray,
               chan_flags=None, chan_ok=None, fallback=None) -> Cat:
    """``phy`` as radiotap derives it: HT where an HT field is present, else the legacy
    rate's PHY, else the channel flags (OFDM 0x40, CCK 0x20), else ``fallback`` codes."""
    unknown = PHY_CODE["unknown"]
    code = np.where(rate_ok, RATE_PHY[np.clip(rate_500k, 0, 255).astype(np.int64)], unknown)
    if chan_flags is not None:
        from_chan = np.select([(chan_flags & 0x40) != 0, (chan_flags & 0x20) != 0],
                              [PHY_CODE["ofdm"], PHY_CODE["cck"]], unknown)
        code = np.where((code == unknown) & chan_ok, from_chan, code)
    if fallback is not None:
        code = np.where(code == unknown, fallback, code)
    code = np.where(ht, PHY_CODE["ht"], code)
    return Cat(code.astype(np.int16), PHY_NAMES)


def merge_cols(n: int, parts) -> dict:
    """One ``{column: (values, valid)}`` of ``n`` rows from ``[(rows, cols)]`` of disjoint row sets."""
    out: dict = {}
    for rows, cols in parts:
        for name, (v, ok) in cols.items():
            ok = np.ones(len(rows), bool) if ok is None else np.asarray(ok, bool)
            if isinstance(v, Cat):
                if name not in out:
                    out[name] = (Cat(np.full(n, -1, v.codes.dtype), v.categories), np.zeros(n, bool))
                acc, acc_ok = out[name]
                lut = np.array([acc.categories.index(c) if c in acc.categories else -1
                                for c in v.categories] + [-1], np.int64)
                acc.codes[rows] = lut[v.codes]
            else:
                v = np.asarray(v)
                if name not in out:
                    out[name] = (np.zeros(n, v.dtype), np.zeros(n, bool))
                acc, acc_ok = out[name]
                acc[rows] = v
            acc_ok[rows] = ok
    return out
