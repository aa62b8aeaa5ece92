"""Block-Ack bitmaps: which sequence numbers a Block-Ack frame acknowledges.

Every BA variant of IEEE 802.11-2020 / 802.11ax-2021 (and the 802.11be 512/1024-bit
bitmaps) is read in one place: :func:`ba_records` lists the records of each BA/BAR frame
(one for basic / compressed / extended compressed / GCR, one per TID for multi-TID, one
per Per AID TID Info for multi-STA) by re-walking the distinct ``ba_info`` fields with the
decoder's own walk; :func:`acked_in_block_ack` picks, per data MPDU, the record that
answers it (its TID; for multi-STA its transmitter's AID, learnt from the association
responses in the capture) and reads its bit. See docs/blockack.md.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from sniffsync.decode import dot11_tables as T
from airtime.barecords import bitmap_table as _bitmap_table, from_columns as _from_columns, record_arrays

__all__ = ["acked_in_block_ack", "ba_records", "station_aids"]

RECORD_COLUMNS = ["frame_row", "rec", "ba_type", "aid", "ack_type", "tid", "ssn", "frag",
                  "bits_per_msdu", "bitmap", "all_acked", "addr"]


def ba_records(frames) -> pd.DataFrame:
    """Every record of every BA / BAR frame of ``frames`` (needs ``ba_info``, ``type_subtype``).

    Columns: ``frame_row`` (position in ``frames``), ``rec`` (record number), ``ba_type``,
    ``aid`` (AID11, multi-STA), ``ack_type`` (multi-STA), ``tid``, ``ssn``, ``frag`` (the SSC
    fragment number subfield), ``bits_per_msdu`` (1; 4 with fragmentation level 3; 16 for
    basic), ``bitmap`` (hex as sent, BA only), ``all_acked`` (multi-STA record with Ack Type 1:
    every MPDU it answers was received), ``addr`` (GCR group address, or the RA of a
    multi-STA record with AID 2045). Null where a record lacks the part.
    """
    rec = record_arrays(frames)
    if rec is None:
        return _empty()
    names = np.array(T.BA_TYPE_NAMES + [None], dtype=object)
    return pd.DataFrame({
        "frame_row": rec["frame_row"], "rec": rec["rec"],
        "ba_type": pd.Categorical(names[rec["tcode"]], categories=T.BA_TYPE_NAMES),
        "aid": _na(*rec["aid"], "UInt16"), "ack_type": _na(*rec["ack_type"], "UInt8"),
        "tid": _na(*rec["tid"], "UInt8"), "ssn": _na(*rec["ssn"], "UInt16"), "frag": _na(*rec["frag"], "UInt8"),
        "bits_per_msdu": rec["bits_per_msdu"],
        "bitmap": pd.Categorical.from_codes(rec["bm_code"], categories=rec["bm_cats"]),
        "all_acked": rec["all_acked"], "addr": _na(*rec["addr"], "UInt64"),
    })


def station_aids(frames) -> pd.DataFrame:
    """``(frame_row, ap, sta, aid)`` of every (re)association response in ``frames`` that
    assigns an AID (a refused one carries 0)."""
    if "assoc_aid" not in frames:
        return pd.DataFrame({"frame_row": [], "ap": [], "sta": [], "aid": []}, dtype=np.int64)
    aid = frames["assoc_aid"].to_numpy(np.int64, na_value=0)
    ok = (aid > 0) & frames["ta"].notna().to_numpy() & frames["ra"].notna().to_numpy()   # 0: refused
    rows = np.flatnonzero(ok)
    return pd.DataFrame({"frame_row": rows,
                         "ap": frames["ta"].to_numpy(np.uint64, na_value=0)[rows].astype(np.int64),
                         "sta": frames["ra"].to_numpy(np.uint64, na_value=0)[rows].astype(np.int64),
                         "aid": frames["assoc_aid"].to_numpy(np.int64, na_value=0)[rows]})


def acked_in_block_ack(frames, ba_frame, seq, *, tid=None, ta=None, frag=None, records=None) -> np.ndarray:
    """Whether each ``seq`` is acknowledged in the Block-Ack frame row ``ba_frame``.

    Optional, per query: ``tid`` (the MPDU's TID: picks a multi-TID / multi-STA record),
    ``ta`` (its transmitter: picks the multi-STA record of its AID), ``frag`` (fragment
    number: basic and fragmentation-level-3 bitmaps have a bit per fragment; default 0).
    Without them the first record counts (multi-TID) or any record may (multi-STA). The
    whole bitmap counts (64 to 1024 bits). ``records``: :func:`ba_records` of ``frames``
    when already computed. Tables without ``ba_info`` use ``ba_ssn`` / ``ba_bitmap``.
    """
    ba_frame = np.asarray(ba_frame, np.int64)
    seq = np.asarray(seq, np.int64)
    info = _categorical(frames, "ba_info")
    if info is None:
        return _from_columns(frames, ba_frame, seq)
    has_info = info.cat.codes.to_numpy(np.int64)[ba_frame] >= 0
    acked = np.zeros(ba_frame.shape[0], bool)
    if (~has_info).any():                   # rows built without the field (hand-made tables)
        acked[~has_info] = _from_columns(frames, ba_frame[~has_info], seq[~has_info])
    if has_info.any():
        pick = np.flatnonzero(has_info)
        acked[pick] = _from_records(frames, ba_frame[pick], seq[pick], _sub(tid, pick), _sub(ta, pick),
                                    _sub(frag, pick), records)
    return acked


def _sub(v, pick):
    return None if v is None else np.asarray(pd.array(v))[pick]


def _from_records(frames, ba_frame, seq, tid, ta, frag, records) -> np.ndarray:
    n = ba_frame.shape[0]
    rec = ba_records(frames) if records is None else records
    q = pd.DataFrame({"i": np.arange(n), "frame_row": ba_frame, "seq": seq,
                      "q_tid": _opt(tid, n), "q_ta": _opt(ta, n),
                      "q_frag": np.zeros(n, np.int64) if frag is None else np.asarray(frag, np.int64)})
    q["q_aid"] = _query_aid(frames, q)
    m = q.merge(rec, on="frame_row", how="inner")
    if m.empty:
        return np.zeros(n, bool)
    match = _record_matches(m, tid is not None, ta is not None)
    m = m[match]
    hit = m["all_acked"].to_numpy(bool) | _bit_set(m)
    acked = np.zeros(n, bool)
    np.logical_or.at(acked, m["i"].to_numpy(np.int64), hit)
    return acked


def _record_matches(m: pd.DataFrame, by_tid: bool, by_ta: bool) -> np.ndarray:
    """Which (query, record) pairs answer each other (declared per BA layout)."""
    kind = m["ba_type"].astype(object).to_numpy()
    multi_tid, multi_sta = kind == "multi_tid", kind == "multi_sta"
    r_tid = m["tid"].to_numpy(np.int64, na_value=-1)
    q_tid = m["q_tid"].to_numpy(np.int64)
    rec0 = m["rec"].to_numpy(np.int64) == 0
    ack1 = m["ack_type"].to_numpy(np.int64, na_value=0) == 1
    # multi-STA Ack Type 1 with TID 14/15 names no QoS TID: it acknowledges what that STA
    # sent (a single MPDU by the standard; ns-3.44 sends it for a whole TB A-MPDU)
    tid_ok = (r_tid == q_tid) | (ack1 & (r_tid >= 8)) if by_tid else np.ones(len(m), bool)
    q_aid = m["q_aid"].to_numpy(np.int64)
    addr = m["addr"].to_numpy(np.uint64, na_value=0).astype(np.int64)
    sta_ok = ((m["aid"].to_numpy(np.int64, na_value=-1) == q_aid) | (addr == m["q_ta"].to_numpy(np.int64))
              | (q_aid < 0)) if by_ta else np.ones(len(m), bool)
    return np.where(multi_sta, tid_ok & sta_ok, np.where(multi_tid, tid_ok if by_tid else rec0, True))


def _bit_set(m: pd.DataFrame) -> np.ndarray:
    codes = m["bitmap"].cat.codes.to_numpy(np.int64)
    out = np.zeros(len(m), bool)
    has = codes >= 0
    if not has.any():
        return out
    table, nbits = _bitmap_table(m["bitmap"].cat.categories)
    c = codes[has]
    off = (m["seq"].to_numpy(np.int64)[has] - m["ssn"].to_numpy(np.int64, na_value=0)[has]) % 4096
    per = m["bits_per_msdu"].to_numpy(np.int64)[has]
    fr = m["q_frag"].to_numpy(np.int64)[has]
    bit = off * per + np.where(fr < per, fr, 0)
    # one bit per MSDU covers all its fragments; level 3 / basic have a bit per fragment
    inside = (bit < nbits[c]) & ((per == 1) | (fr < per))
    byte = table[c, np.minimum(bit // 8, table.shape[1] - 1)]
    out[has] = inside & ((byte >> (bit % 8).astype(np.uint8)) & 1).astype(bool)
    return out


def _query_aid(frames, q: pd.DataFrame) -> np.ndarray:
    """AID of each query's transmitter at the BA's sender, from the latest (re)association
    response before the BA (-1: unknown)."""
    aids = station_aids(frames)
    out = np.full(len(q), -1, np.int64)
    ta_q = q["q_ta"].to_numpy(np.int64)
    if aids.empty or (ta_q < 0).all():
        return out
    ap = frames["ta"].to_numpy(np.uint64, na_value=0)[q["frame_row"].to_numpy(np.int64)].astype(np.int64)
    left = pd.DataFrame({"i": np.arange(len(q)), "frame_row": q["frame_row"].to_numpy(np.int64),
                         "ap": ap, "sta": ta_q}).sort_values("frame_row", kind="stable")
    got = pd.merge_asof(left, aids.sort_values("frame_row"), on="frame_row", by=["ap", "sta"],
                        direction="backward")
    ok = got["aid"].notna().to_numpy()
    out[got["i"].to_numpy(np.int64)[ok]] = got["aid"].to_numpy(np.float64)[ok].astype(np.int64)
    return out


def _opt(v, n) -> np.ndarray:
    """An optional per-query integer column as int64 with -1 for missing / not given."""
    if v is None:
        return np.full(n, -1, np.int64)
    return pd.Series(pd.array(v)).astype("Int64").fillna(-1).to_numpy(np.int64)


def _categorical(frames, name):
    """Column ``name`` as a categorical of hex text (a table read back may hold plain
    strings); None when absent."""
    if name not in frames:
        return None
    col = frames[name]
    return col if isinstance(col.dtype, pd.CategoricalDtype) else col.astype("category")


def _na(values, valid, dtype):
    return pd.arrays.IntegerArray(np.asarray(values).astype(dtype.lower()), ~np.asarray(valid, bool))


def _empty() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series([], dtype=object) for c in RECORD_COLUMNS})
