"""Block-Ack bitmaps: which sequence numbers a Block-Ack frame acknowledges.

Kept apart from :mod:`airtime.detect` so that every BA variant the standard defines is
read in one place.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["acked_in_block_ack"]


def acked_in_block_ack(frames, ba_frame, seq) -> np.ndarray:
    """Whether each ``seq`` is acknowledged in the Block-Ack frame row ``ba_frame``.

    The whole bitmap counts (64, 256, 512 or 1024 bits as sent): it is read from the
    ``ba_bitmap`` bytes, one bit table per distinct bitmap; rows without those bytes
    fall back to the first 64 bits (``ba_bitmap_lo``).
    """
    ssn = frames["ba_ssn"].to_numpy(np.int64, na_value=0)[ba_frame]
    off = (np.asarray(seq, np.int64) - ssn) % 4096
    bm = frames["ba_bitmap_lo"].to_numpy(np.uint64, na_value=0)[ba_frame]
    acked = np.where(off < 64, (bm >> np.minimum(off, 63).astype(np.uint64)) & np.uint64(1), 0).astype(bool)
    if "ba_bitmap" in frames and isinstance(frames["ba_bitmap"].dtype, pd.CategoricalDtype):
        codes = frames["ba_bitmap"].cat.codes.to_numpy(np.int64)[ba_frame]
        full = codes >= 0                       # rows with the bytes: every bit counts
        if full.any():
            table, nbits = _bitmap_table(frames["ba_bitmap"].cat.categories)
            c, o = codes[full], off[full]
            byte = table[c, np.minimum(o // 8, table.shape[1] - 1)]
            acked[full] = (o < nbits[c]) & ((byte >> (o % 8).astype(np.uint8)) & 1).astype(bool)
    return acked


def _bitmap_table(hex_bitmaps) -> tuple[np.ndarray, np.ndarray]:
    """``(table, nbits)``: row k holds the bytes of bitmap k (hex text as sent), zero-padded.
    One row per distinct bitmap, not per frame."""
    raw = [bytes.fromhex(str(h)) for h in hex_bitmaps]
    width = max([len(r) for r in raw] + [1])
    table = np.zeros((len(raw), width), np.uint8)
    nbits = np.zeros(len(raw), np.int64)
    for k, r in enumerate(raw):         # per distinct bitmap
        table[k, :len(r)] = np.frombuffer(r, np.uint8)
        nbits[k] = 8 * len(r)
    return table, nbits
