"""Block Ack and Block Ack Request bodies: every variant of IEEE 802.11-2020 9.3.1.8 / 9.3.1.9,
802.11ax-2021 (multi-STA, fragmentation level 3) and the 802.11be 512/1024-bit bitmaps.

A BA/BAR Information field is a sequence of records, each made of optional parts (a
per-TID or per-AID header, the Starting Sequence Control, a GCR group address or an RA,
a bitmap); the layout per BA type is declared in :mod:`sniffsync.decode.dot11_tables`.
:func:`walk_block_ack` reads the records of all frames at once, one record index per
step (vectorised over the frames that still have one), so a multi-STA BA with 9 records
costs 9 steps, not a loop over frames. The decoder keeps the first record in the frame
table and the whole field in ``ba_info``; ``airtime.blockack.ba_records`` re-walks the
distinct ``ba_info`` values to list every record.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from sniffsync.decode import dot11_tables as T
from sniffsync.decode.macs import mac_ints
from sniffsync.io.bytecols import gather, u16le

__all__ = ["BaWalk", "walk_block_ack", "first_bits"]

MAX_RECORDS = 4096      # a multi-STA BA longer than this is cut (a frame is < 12 kB)


class BaWalk(NamedTuple):
    """Per frame: ``batype`` (BA type code 0-15), ``tidinfo``, ``ctl_ok``; per record (``src``
    = index of its frame in the input): the record's fields; -1 / 0 where absent."""
    batype: np.ndarray
    tidinfo: np.ndarray
    ctl_ok: np.ndarray
    src: np.ndarray          # int64 input row
    rec: np.ndarray          # int64 record number in its frame
    aid: np.ndarray          # int64 AID11 (multi-STA), -1
    ack_type: np.ndarray     # int64 multi-STA Ack Type, -1
    tid: np.ndarray          # int64, -1
    ssc: np.ndarray          # int64 Starting Sequence Control, -1
    addr: np.ndarray         # uint64 GCR group address / multi-STA RA, 0
    bm_off: np.ndarray       # int64 bitmap offset in buf
    bm_len: np.ndarray       # int64 bitmap bytes (0: none, reserved length or not captured)
    bits_per_msdu: np.ndarray  # int64: 1, 4 (fragmentation level 3) or 16 (basic)
    reserved: np.ndarray     # bool: bitmap length is reserved (the walk stops there)
    cut: np.ndarray          # bool: the record runs past the end of the frame


def walk_block_ack(buf, ctl_off, end, is_ba) -> BaWalk:
    """Records of the BA (``is_ba``) / BAR frames whose BA/BAR Control field starts at
    ``ctl_off``; ``end`` is where each frame's bytes stop (FCS excluded)."""
    ctl_off, end = np.asarray(ctl_off, np.int64), np.asarray(end, np.int64)
    is_ba = np.asarray(is_ba, bool)
    ctl_ok = end - ctl_off >= 2
    ctl = np.where(ctl_ok, u16le(buf, ctl_off), 0).astype(np.int64)
    batype, tidinfo = (ctl >> 1) & 0xF, ctl >> 12
    layout = np.where(is_ba, T.BA_LAYOUT[batype], T.BAR_LAYOUT[batype])
    out: dict[str, list] = {k: [] for k in BaWalk._fields[3:]}
    idx = np.flatnonzero(ctl_ok & (layout != T.NONE))
    pos = ctl_off[idx] + 2
    for k in range(MAX_RECORDS):
        if idx.size == 0:
            break
        pos, alive = _step(buf, idx, pos, k, batype[idx], layout[idx], tidinfo[idx], end[idx], is_ba[idx], out)
        idx, pos = idx[alive], pos[alive]
    cat = {f: np.concatenate(v) if v else np.zeros(0, np.uint64 if f == "addr" else
                                                    bool if f in ("reserved", "cut") else np.int64)
           for f, v in out.items()}
    return BaWalk(batype, tidinfo, ctl_ok, **cat)


def _step(buf, idx, pos, k, t, layout, tidinfo, end, is_ba, out):
    """Record ``k`` of frames ``idx`` at ``pos``; appends it to ``out``; returns the
    position after it and which frames have another record."""
    m_tid, m_sta = layout == T.MULTI_TID, layout == T.MULTI_STA
    hdr = 2 * (m_tid | m_sta)
    head_ok = pos + hdr <= end
    head = np.where(hdr > 0, u16le(buf, pos), 0).astype(np.int64)
    aid = np.where(m_sta & head_ok, head & 0x7FF, -1)
    ack_type = np.where(m_sta & head_ok, (head >> 11) & 1, -1)
    tid = np.where(hdr > 0, np.where(head_ok, head >> 12, -1), tidinfo)
    named = m_sta & (aid == T.MSTA_RA_AID)             # Reserved(4) + RA(6)
    has_ssc = ~(m_sta & (named | (ack_type == 1)))
    p = pos + hdr
    ssc = np.where(has_ssc & (p + 2 <= end), u16le(buf, p).astype(np.int64), -1)
    p = p + 2 * has_ssc
    gcr = T.BA_HAS_GCR_ADDR[t]
    a_at = np.where(named, p + 4, p)
    has_addr = gcr | named
    addr = np.where(has_addr & (a_at + 6 <= end), mac_ints(gather(buf, a_at, 6), 0), np.uint64(0))
    p = p + 6 * gcr + 10 * named
    frag = np.maximum(ssc, 0) & 0xF
    want_bm = is_ba & has_ssc
    bm_len = np.where(T.BA_FIXED_BITMAP_LEN[t] > 0, T.BA_FIXED_BITMAP_LEN[t],
                      T.BITMAP_BY_FRAG[T.BA_FRAG_TABLE[t], frag])
    bm_len = np.where(want_bm, bm_len, 0)
    reserved = want_bm & (bm_len == 0) & (ssc >= 0)
    bits = np.where(t == 0, 16, np.where((T.BA_FRAG_TABLE[t] > 0) & (frag & 1 == 1), 4, 1))
    bm_off = p
    p = p + bm_len + np.where(is_ba, T.BA_TRAILER_LEN[t], 0)
    cut = (p > end) | (has_ssc & (ssc < 0)) | ~head_ok
    for name, v in (("src", idx), ("rec", np.full(idx.size, k, np.int64)), ("aid", aid),
                    ("ack_type", ack_type), ("tid", tid), ("ssc", ssc), ("addr", addr),
                    ("bm_off", bm_off), ("bm_len", np.where(bm_off + bm_len <= end, bm_len, 0)),
                    ("bits_per_msdu", bits), ("reserved", reserved), ("cut", cut)):
        out[name].append(v)
    more = np.where(m_tid, k + 1 <= tidinfo, m_sta & (p + 2 <= end))
    return p, more & ~cut & ~reserved


def first_bits(raw: np.ndarray, bits_per_msdu: int) -> np.ndarray:
    """uint64 per row of ``raw`` (k, n) bitmap bytes: bit i = fragment 0 of MSDU ssn+i
    acknowledged, for the first 64 MSDUs (bit ``i * bits_per_msdu`` of the bitmap)."""
    bits = np.unpackbits(raw, axis=1, bitorder="little")[:, ::bits_per_msdu][:, :64]
    weights = np.uint64(1) << np.arange(bits.shape[1], dtype=np.uint64)
    return (bits.astype(np.uint64) * weights).sum(1, dtype=np.uint64)
