"""The Block-Ack records of a frame table in numpy (no pandas): what
:func:`airtime.blockack.ba_records` tabulates and :class:`airtime.extent_ba.BaAnswers` reads,
and the answers of frames without ``ba_info`` (their ``ba_ssn`` / bitmap columns).
"""
from __future__ import annotations

import numpy as np

from airtime.framecols import _np, label_codes
from sniffsync.decode import dot11_tables as T
from sniffsync.decode.dot11_ba import walk_block_ack

__all__ = ["record_arrays", "from_columns", "bitmap_table"]


def record_arrays(frames) -> dict | None:
    """Every record of every BA / BAR frame of ``frames`` as arrays sorted by (frame_row, rec)
    (None when there is none): ``frame_row``, ``rec``, ``tcode`` (index into
    ``T.BA_TYPE_NAMES``; its length: none), ``(aid, ack_type, tid, ssn, frag, addr)`` as
    ``(values, valid)``, ``bits_per_msdu``, ``bm_code`` into ``bm_cats`` (hex, sorted; -1:
    none), ``all_acked``. Columns as :func:`airtime.blockack.ba_records` documents them."""
    info = label_codes(frames, "ba_info")
    if info is None:
        return None
    codes, cats = info                                            # (narrow: no per-frame int64 copies)
    ts = _np(frames, "type_subtype", -1, np.int16)
    rows = np.flatnonzero((codes >= 0) & ((ts == T.TS_BA) | (ts == T.TS_BAR)))
    if rows.size == 0:
        return None
    key = codes[rows].astype(np.int64) * 2 + (ts[rows] == T.TS_BA)
    uniq, inv = np.unique(key, return_inverse=True)
    blobs = [bytes.fromhex(str(cats[k // 2])) for k in uniq]       # per distinct field
    lens = np.array([len(b) for b in blobs], np.int64)
    off = np.cumsum(lens) - lens
    buf = np.frombuffer(b"".join(blobs) or b"\0", np.uint8)
    wk = walk_block_ack(buf, off, off + lens, uniq % 2 == 1)
    keep = ~wk.cut & (wk.tid >= 0)
    # one row per (frame, record): repeat each distinct field's records over its frames
    order = np.argsort(inv, kind="stable")
    count = np.bincount(inv, minlength=uniq.size)
    first = np.cumsum(count) - count
    r = np.flatnonzero(keep)
    rep = count[wk.src[r]]
    r_of = np.repeat(r, rep)
    within = np.arange(rep.sum()) - np.repeat(np.cumsum(rep) - rep, rep)
    frame_row = rows[order[first[wk.src[r_of]] + within]]
    bm = [buf[o:o + n].tobytes().hex() if n else None for o, n in zip(wk.bm_off[r], wk.bm_len[r])]  # per record
    bm_cats = sorted({b for b in bm if b is not None})         # (pandas' categories of these texts)
    at = {b: i for i, b in enumerate(bm_cats)}
    bm_code = np.full(wk.src.size, -1, np.int64)
    bm_code[r] = [at.get(b, -1) if b is not None else -1 for b in bm]
    is_ba = (uniq % 2 == 1)[wk.src[r_of]]
    t = wk.batype[wk.src[r_of]]
    ssc = wk.ssc[r_of]
    aid, ack = wk.aid[r_of], wk.ack_type[r_of]
    out = {"frame_row": frame_row, "rec": wk.rec[r_of],
           "tcode": np.where(is_ba, T.BA_TYPE_CODE[t], T.BAR_TYPE_CODE[t]),
           "aid": (aid, aid >= 0), "ack_type": (ack, ack >= 0), "tid": (wk.tid[r_of], wk.tid[r_of] >= 0),
           "ssn": (np.maximum(ssc, 0) >> 4, ssc >= 0), "frag": (np.maximum(ssc, 0) & 0xF, ssc >= 0),
           "bits_per_msdu": wk.bits_per_msdu[r_of], "bm_code": bm_code[r_of],
           "all_acked": (ack == 1) & (aid != T.MSTA_RA_AID), "addr": (wk.addr[r_of], wk.addr[r_of] != 0)}
    o = np.lexsort((out["rec"], out["frame_row"]))               # (stable)
    out = {k: (v[0][o], v[1][o]) if isinstance(v, tuple) else v[o] for k, v in out.items()}
    out["bm_cats"] = bm_cats
    return out


def from_columns(frames, ba_frame, seq) -> np.ndarray:
    """Tables without ``ba_info``: the ``ba_bitmap`` bytes, else the first 64 bits."""
    ssn = _np(frames, "ba_ssn", 0)[ba_frame]
    off = (seq - ssn) % 4096
    bm = _np(frames, "ba_bitmap_lo", 0, np.uint64)[ba_frame]
    acked = np.where(off < 64, (bm >> np.minimum(off, 63).astype(np.uint64)) & np.uint64(1), 0).astype(bool)
    bitmap = label_codes(frames, "ba_bitmap")
    if bitmap is not None:
        codes = bitmap[0].astype(np.int64)[ba_frame]
        full = codes >= 0                       # rows with the bytes: every bit counts
        if full.any():
            table, nbits = bitmap_table(bitmap[1])
            c, o = codes[full], off[full]
            byte = table[c, np.minimum(o // 8, table.shape[1] - 1)]
            acked[full] = (o < nbits[c]) & ((byte >> (o % 8).astype(np.uint8)) & 1).astype(bool)
    return acked


def bitmap_table(hex_bitmaps) -> tuple[np.ndarray, np.ndarray]:
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
