"""CRC-32 of many frames at once: does a frame end with a valid 802.11 FCS?

Used only for the radio headers that do not say whether the frame carries an FCS
(Prism, AVS). The FCS is the IEEE 802.3 CRC-32 (reflected polynomial 0xEDB88320,
initial value and final XOR 0xFFFFFFFF) of the MAC header and body, sent least
significant byte first (IEEE 802.11-2020 9.2.4.8). Algorithm: the frames are sorted
by length, longest first; byte position ``j`` of every frame still longer than ``j``
(a prefix of that order) is folded into the running CRCs with one table lookup, so
the Python loop runs over byte positions, never over frames.
"""
from __future__ import annotations

import numpy as np

from sniffsync.io.bytecols import u32le

__all__ = ["fcs_matches", "CRC_TABLE"]


def _table() -> np.ndarray:
    c = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        c = np.where(c & 1, np.uint32(0xEDB88320) ^ (c >> 1), c >> 1).astype(np.uint32)
    return c


CRC_TABLE = _table()


def fcs_matches(buf: np.ndarray, start: np.ndarray, stop: np.ndarray) -> np.ndarray:
    """Per frame ``buf[start:stop]``: True when its last 4 bytes are the CRC-32 of the rest.

    Frames shorter than 5 bytes give False.

    Examples
    --------
    >>> import zlib
    >>> body = b"\\xc4\\x00\\x00\\x00" + bytes(6)
    >>> frame = body + zlib.crc32(body).to_bytes(4, "little")
    >>> buf = np.frombuffer(frame + frame[:-1] + b"x", np.uint8)
    >>> fcs_matches(buf, np.array([0, 14]), np.array([14, 28])).tolist()
    [True, False]
    """
    start = np.asarray(start, np.int64)
    stop = np.asarray(stop, np.int64)
    body = stop - start - 4
    order = np.argsort(-body, kind="stable")
    s_start, s_len = start[order], body[order]
    crc = np.full(len(order), 0xFFFFFFFF, np.uint32)
    neg = -s_len                                   # ascending: prefix counts by searchsorted
    for j in range(int(s_len.max()) if len(s_len) else 0):
        k = int(np.searchsorted(neg, -j, side="left"))   # rows with length > j
        c = crc[:k]
        crc[:k] = CRC_TABLE[(c ^ buf[s_start[:k] + j]) & 0xFF] ^ (c >> 8)
    crc ^= np.uint32(0xFFFFFFFF)
    ok = np.zeros(len(order), bool)
    long_ = s_len > 0
    ok[long_] = crc[long_] == u32le(buf, stop[order][long_] - 4)
    out = np.zeros(len(order), bool)
    out[order] = ok
    return out
