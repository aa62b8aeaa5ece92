"""What went wrong on the air: unanswered RTS, RTS/CTS collisions, overlaps, failed MPDUs.

Works on a PPDU table (:func:`airtime.ppdu.group_ppdus`) and the frame table it came
from, one capture or a merged one. Every detector is a keyed time-window join
(:mod:`airtime.match`) or an interval-overlap join; nothing loops over frames.

Conventions (times in ns on the table's clock):
- a response (CTS, ACK, Block-Ack) starts one SIFS after the end of the frame it
  answers, within ``slack_ns`` (sync error, TSFT rounding, propagation);
- CTS and ACK carry no TA: their transmitter is the RA of the frame they answer;
- MPDU ``seq`` offsets into a Block-Ack bitmap modulo 4096 (802.11-2020 10.25.6).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pandas as pd

from airtime.blockack import acked_in_block_ack
from airtime.match import match_in_window, overlapping_pairs
from airtime.phy import legacy_response_rate_kbps, ppdu_duration_ns, sifs_ns
from airtime.phy_tables import ACK_BYTES, BA_BYTES, CTS_BYTES
from sniffsync.decode.quality import with_fcs_bad

__all__ = ["detect", "DetectResult", "EVENT_KINDS"]

FATES = ["delivered", "retried_delivered", "retried_lost", "lost"]
EVENT_KINDS = ["rts_unanswered", "rts_cts_collision", "overlap", "mpdu_failed", "ba_missing"]
from sniffsync.decode.table import GOLDEN64 as _HASH  # noqa: E402  (the one hash multiplier)


def _u64(s) -> np.ndarray:
    """Nullable MAC column -> uint64 with 0 for null."""
    return pd.array(s, dtype="UInt64").fillna(0).to_numpy(np.uint64)


def _pair(a, b) -> np.ndarray:
    """Order-sensitive hash of two 48-bit addresses (uint64 wraparound on purpose)."""
    with np.errstate(over="ignore"):
        return a * _HASH + b


@dataclass
class DetectResult:
    """What :func:`detect` finds."""
    events: pd.DataFrame       # kind, time_us, start_ns, ppdu, ta, ra, seq, other_ppdu, other_ta, ...
    mpdus: pd.DataFrame        # one row per data MPDU transmission and its fate
    stations: pd.DataFrame     # per-transmitter counters (:func:`station_stats`)


def _band_sifs_ns(frames) -> int:
    """SIFS of the capture's band (its median channel); 5 GHz when no frame has one."""
    f = frames["freq_mhz"].dropna() if "freq_mhz" in frames else pd.Series([], dtype=float)
    return int(sifs_ns(float(f.median()) if len(f) else None))


class _Air(NamedTuple):
    """PPDU columns in start order, as the detectors read them."""
    p: pd.DataFrame            # the PPDU table sorted by start
    start: np.ndarray
    end: np.ndarray
    ta: np.ndarray             # uint64, 0 for none
    ra: np.ndarray
    kind: np.ndarray           # kind names (object)
    tx: np.ndarray             # transmitter: ``ta``, or for CTS/ACK the RA of the frame answered


def detect(frames: pd.DataFrame, ppdus: pd.DataFrame, frame_ppdu, *, sifs_ns: int | None = None,
           slack_ns: int = 6_000, chain_gap_ns: int = 200_000_000,
           overlap_tol_ns: int = 2_000) -> DetectResult:
    """Find the events a Wi-Fi engineer hunts for by hand.

    Parameters
    ----------
    frames : DataFrame
        Frame table (``seq``, ``tid``, ``retry``, ``type``, ``ba_ssn``, ``ba_bitmap_lo`` ...).
    ppdus : DataFrame
        PPDU table (``ppdu``, ``start_ns``, ``end_ns``, ``ta``, ``ra``, ``kind``, ``n_mpdus``).
    frame_ppdu : array of int
        PPDU id of every frame row (-1 for none).
    sifs_ns : int, optional
        Default from the band: 16 µs at 5/6 GHz, 10 µs at 2.4 GHz.
    slack_ns : int
        Tolerance on response timing.
    overlap_tol_ns : int
        An unanswered RTS within this distance of a PPDU from/to its receiver collided
        with it (the timeline cannot resolve shorter gaps).

    Returns
    -------
    DetectResult
        ``events``: kind, time_us, start_ns, ppdu, ta, ra, seq, other_ppdu, other_ta, detail.
        ``mpdus``: one row per data MPDU sent in a PPDU that drew (or should have drawn) a
        Block-Ack: ppdu, ta, ra, tid, seq, retry, acked, fate. ``stations``: per-TA counters.
    """
    sifs = _band_sifs_ns(frames) if sifs_ns is None else int(sifs_ns)
    air = _air(ppdus, sifs, slack_ns)
    unanswered = _unanswered_rts(frames, air, sifs, slack_ns)
    i, j = _overlaps(air)
    coll_rts, coll_with = _rts_collisions(air, unanswered, overlap_tol_ns)
    mpdus, ba_missing = _block_acks(frames, air, np.asarray(frame_ppdu), sifs, slack_ns, chain_gap_ns)
    p, ta, ra, tx, kind, start, end = air.p, air.ta, air.ra, air.tx, air.kind, air.start, air.end
    failed = mpdus[~mpdus["acked"].to_numpy(bool)] if len(mpdus) else mpdus
    pid = p["ppdu"].to_numpy(np.int64)
    row_of = np.full(int(pid.max()) + 1 if len(pid) else 0, -1, np.int64)
    row_of[pid] = np.arange(len(pid))                   # PPDU id -> row of p
    f_rows = row_of[failed["ppdu"].to_numpy(np.int64)] if len(failed) else np.zeros(0, np.int64)
    events = _event_table([
        _events("rts_unanswered", p, unanswered, ta, ra, detail="no CTS"),
        _events("rts_cts_collision", p, coll_rts, ta, ra, other=coll_with, other_ta=tx,
                detail=pd.Categorical(np.char.add("overlapped ", kind[coll_with].astype(str)))),
        _events("overlap", p, j, tx, ra, other=i, other_ta=tx, detail="overlap",
                overlap_ns=np.minimum(end[i], end[j]) - start[j]),
        _events("ba_missing", p, ba_missing, ta, ra, detail="no Block-Ack"),
        _events("mpdu_failed", p, f_rows, ta, ra, seq=failed["seq"].to_numpy(np.int64) if len(failed) else None,
                detail=failed["fate"].to_numpy() if len(failed) else ""),
    ])
    return DetectResult(events=events, mpdus=mpdus,
                        stations=with_fcs_bad(station_stats(tx, kind, unanswered, coll_rts, mpdus, ba_missing),
                                              frames))


def _air(ppdus: pd.DataFrame, sifs: int, slack: int) -> _Air:
    """The PPDU table in start order; CTS/ACK get the RA of the frame one SIFS before as TX."""
    p = ppdus.sort_values("start_ns", kind="stable").reset_index(drop=True)
    start, end = p["start_ns"].to_numpy(np.int64), p["end_ns"].to_numpy(np.int64)
    ta, ra = _u64(p["ta"]), _u64(p["ra"])
    kc = p["kind"].astype("category").cat
    kind = np.append(np.asarray(kc.categories, object), "nan")[kc.codes]   # take, no str()
    tx = ta.copy()
    resp = np.isin(kind, ("cts", "ack")) & (ta == 0)
    has_ta = np.flatnonzero(ta != 0)
    m = match_in_window(ra[resp], start[resp], ta[has_ta], end[has_ta], -sifs - slack, -sifs + slack)
    r_idx = np.flatnonzero(resp)
    tx[r_idx[m >= 0]] = ra[has_ta[m[m >= 0]]]
    return _Air(p, start, end, ta, ra, kind, tx)


def _unanswered_rts(frames, air: _Air, sifs: int, slack: int) -> np.ndarray:
    """Rows of RTS without a CTS to their transmitter one SIFS after their end."""
    kind, ta, ra, start, end = air.kind, air.ta, air.ra, air.start, air.end
    rts = np.flatnonzero(kind == "rts")
    cts = np.flatnonzero(kind == "cts")
    got = match_in_window(ta[rts], end[rts], ra[cts], start[cts], sifs - slack, sifs + slack)
    # A CTS the sniffer did not decode (missed, or overlapped at the sniffer only) is implied
    # when the RTS sender's next frame to the same receiver starts SIFS after that CTS's end.
    got = np.where(got < 0, _implied_cts(frames, air.p, rts, kind, ta, ra, start, end, sifs, slack), got)
    return rts[got < 0]


def _overlaps(air: _Air) -> tuple[np.ndarray, np.ndarray]:
    """Overlapping PPDUs of different transmitters (visible once sniffers are merged)."""
    i, j = overlapping_pairs(air.start, air.end)
    diff = (air.tx[i] != air.tx[j]) | (air.tx[i] == 0)
    return i[diff], j[diff]


def _rts_collisions(air: _Air, unanswered: np.ndarray, tol: int) -> tuple[np.ndarray, np.ndarray]:
    """(RTS row, partner row): an unanswered RTS collided when it overlapped a transmission
    from/to its receiver; overlaps shorter than the timeline's resolution (µs TSFT, sync
    error, ``tol``) still count. One pair per RTS: its first partner."""
    tx, ta, ra = air.tx, air.ta, air.ra
    if not len(unanswered):              # (the pairs of all PPDUs can be ~n^2: none are needed)
        none = np.zeros(0, np.int64)
        return none, none
    ci, cj = overlapping_pairs(air.start - tol, air.end + tol)
    keep = (tx[ci] != tx[cj]) | (tx[ci] == 0)
    ci, cj = ci[keep], cj[keep]
    both_i = np.concatenate([ci, cj])
    both_j = np.concatenate([cj, ci])
    is_un = np.zeros(len(air.p), bool)
    is_un[unanswered] = True
    hit = is_un[both_i] & ((tx[both_j] == ra[both_i]) | (ra[both_j] == ra[both_i]))
    hit &= tx[both_j] != ta[both_i]
    coll_rts, coll_with = both_i[hit], both_j[hit]
    first = np.unique(coll_rts, return_index=True)[1]
    return coll_rts[first], coll_with[first]


def _event_table(parts: list) -> pd.DataFrame:
    """The events of every detector in one table, in time order."""
    events = pd.concat(parts, ignore_index=True)
    for c in ("kind", "detail"):
        events[c] = events[c].astype("category")
    events = events.sort_values(["start_ns", "kind"], kind="stable").reset_index(drop=True)
    events.insert(1, "time_us", events["start_ns"] // 1000)
    return events


def _implied_cts(frames, p, rts, kind, ta, ra, start, end, sifs, slack) -> np.ndarray:
    """Row of a frame from an RTS's TA to its RA that implies a CTS the sniffer missed, or -1.

    The CTS goes at the response rate of the RTS (802.11-2020 10.6.6.5), so its airtime is
    known; a station sends that frame only after decoding the CTS.
    """
    if not len(rts):
        return np.zeros(0, np.int64)
    first = p["first_frame"].to_numpy(np.int64)[rts]
    rate = frames["rate_kbps"].to_numpy(np.int64, na_value=-1)[first] if "rate_kbps" in frames \
        else np.full(len(rts), -1, np.int64)
    freq = frames["freq_mhz"].to_numpy(np.int64, na_value=5180)[first] if "freq_mhz" in frames \
        else np.full(len(rts), 5180, np.int64)
    phy = p["phy"].astype(object).fillna("ofdm").to_numpy()[rts] if "phy" in p else "ofdm"
    cts_ns = ppdu_duration_ns(phy, np.full(len(rts), CTS_BYTES), rate_kbps=legacy_response_rate_kbps(rate),
                              freq_mhz=freq)
    nxt = np.flatnonzero(~np.isin(kind, ("rts", "cts", "ack")) & (ta != 0))
    key_r, key_n = _pair(ta[rts], ra[rts]), _pair(ta[nxt], ra[nxt])
    lo = 2 * sifs + cts_ns - slack
    m = match_in_window(key_r, end[rts], key_n, start[nxt], lo, lo + 2 * slack)
    # A missed A-MPDU subframe shortens the computed airtime (start too late) but not the
    # end: the RTS Duration covers CTS + data + response, so the data ends Duration - SIFS
    # - response airtime (a Block-Ack or an ACK) after the RTS.
    nav = frames["duration_us"].to_numpy(np.int64, na_value=0)[first] * 1000 \
        if "duration_us" in frames else np.zeros(len(rts), np.int64)
    resp = legacy_response_rate_kbps(rate)
    ba_ns = ppdu_duration_ns(phy, np.full(len(rts), BA_BYTES), rate_kbps=resp, freq_mhz=freq)
    ack_ns = ppdu_duration_ns(phy, np.full(len(rts), ACK_BYTES), rate_kbps=resp, freq_mhz=freq)
    by_end = match_in_window(key_r, end[rts], key_n, end[nxt], nav - sifs - ba_ns - slack,
                             nav - sifs - ack_ns + slack)
    m = np.where((m < 0) & (nav > 0) & (ba_ns > 0), by_end, m)
    out = np.full(len(rts), -1, np.int64)
    hit = (cts_ns > 0) & (m >= 0)
    out[hit] = nxt[m[hit]]              # only matched rows index nxt (it may be empty)
    return out


def _na_int(values, valid, dtype="Int64"):
    values = np.asarray(values)
    return pd.arrays.IntegerArray(values.astype(dtype.lower()), ~np.asarray(valid, bool))


def _events(kind, p, rows, ta, ra, other=None, other_ta=None, detail="", seq=None, overlap_ns=None):
    """Event rows for PPDU rows ``rows`` (numeric columns; text only as categories)."""
    rows = np.asarray(rows, np.int64)
    n = len(rows)
    none = np.zeros(n, bool)
    oth = np.asarray(other, np.int64) if other is not None else None
    return pd.DataFrame({
        "kind": pd.Categorical.from_codes(np.full(n, EVENT_KINDS.index(kind)), categories=EVENT_KINDS),
        "start_ns": p["start_ns"].to_numpy(np.int64)[rows],
        "ppdu": p["ppdu"].to_numpy(np.int64)[rows],
        "ta": _na_int(ta[rows], ta[rows] != 0, "UInt64"),
        "ra": _na_int(ra[rows], ra[rows] != 0, "UInt64"),
        "seq": _na_int(seq if seq is not None else np.zeros(n), none if seq is None else np.ones(n, bool)),
        "other_ppdu": p["ppdu"].to_numpy(np.int64)[oth] if oth is not None else np.full(n, -1),
        "other_ta": _na_int(other_ta[oth] if oth is not None else np.zeros(n),
                            (other_ta[oth] != 0) if oth is not None else none, "UInt64"),
        "overlap_ns": _na_int(overlap_ns if overlap_ns is not None else np.zeros(n),
                              none if overlap_ns is None else np.ones(n, bool)),
        "detail": pd.Categorical(np.broadcast_to(np.asarray(detail, dtype=object), (n,))
                                 if np.ndim(detail) == 0 else detail),
    })


def _block_acks(frames, air: _Air, frame_ppdu, sifs, slack, chain_gap):
    """MPDUs of data PPDUs against the receiver's Block-Ack bitmap (or ACK); PPDU rows of
    aggregates that drew no response."""
    p, ta, ra, kind, start, end = air.p, air.ta, air.ra, air.kind, air.start, air.end
    unicast = (ra >> np.uint64(40)) & np.uint64(1) == 0
    pid = p["ppdu"].to_numpy(np.int64)
    # the response to every unicast data PPDU: a BA from its RA to its TA, or an ACK to its TA
    data = np.flatnonzero((kind == "data") & unicast & (ta != 0))
    ba = np.flatnonzero(kind == "ba")
    ack = np.flatnonzero(kind == "ack")
    got_ba = match_in_window(_pair(ta[data], ra[data]), end[data], _pair(ra[ba], ta[ba]), start[ba],
                             sifs - slack, sifs + slack)
    got_ack = match_in_window(ta[data], end[data], ra[ack], start[ack], sifs - slack, sifs + slack)
    n_mpdus = p["n_mpdus"].to_numpy(np.int64)[data]
    ba_missing = data[(got_ba < 0) & (got_ack < 0) & (n_mpdus > 1)]

    rows, pos, s = _data_mpdus(frames, pid, frame_ppdu, data)
    b, a = got_ba[s], got_ack[s]
    seq = frames["seq"].to_numpy(np.int64, na_value=0)[rows]
    responded = (b >= 0) | (a >= 0)
    rows, pos, b, a, seq = rows[responded], pos[responded], b[responded], a[responded], seq[responded]
    acked = a >= 0
    if len(b) and (b >= 0).any():
        ba_frame = p["first_frame"].to_numpy(np.int64)[ba[b[b >= 0]]]
        tid_all = frames["tid"].to_numpy(np.int64, na_value=-1) if "tid" in frames else None
        hit = b >= 0        # the record of the MPDU's TID (multi-TID) and station (multi-STA)
        acked[hit] = acked_in_block_ack(frames, ba_frame, seq[hit], ta=ta[pos[hit]],
                                        tid=None if tid_all is None else tid_all[rows[hit]])
    tid = frames["tid"].to_numpy(np.int64, na_value=0)[rows] if "tid" in frames else np.zeros(len(rows), np.int64)
    retry = frames["retry"].to_numpy(bool, na_value=False)[rows]
    mp = pd.DataFrame({"ppdu": pid[pos], "start_ns": start[pos], "ta": pd.array(ta[pos], dtype="UInt64"),
                       "ra": pd.array(ra[pos], dtype="UInt64"), "tid": tid, "seq": seq, "retry": retry,
                       "acked": acked, "frame": rows})
    mp["fate"] = _fates(mp, chain_gap)
    return mp, ba_missing


def _data_mpdus(frames, pid, frame_ppdu, data):
    """Data MPDU frame rows in the data PPDUs ``data``: (rows, their PPDU's row, index into ``data``)."""
    f_type = frames["type"].to_numpy(dtype=float, na_value=-1)
    rows = np.flatnonzero((f_type == 2) & (frame_ppdu >= 0) & frames["seq"].notna().to_numpy())
    pos = np.searchsorted(pid, frame_ppdu[rows]) if np.all(np.diff(pid) >= 0) else None
    if pos is None:
        order = np.argsort(pid)
        pos = order[np.searchsorted(pid[order], frame_ppdu[rows])]
    pos = np.clip(pos, 0, len(pid) - 1)
    keep = (pid[pos] == frame_ppdu[rows])
    rows, pos = rows[keep], pos[keep]
    slot = np.full(len(pid), -1, np.int64)          # index into `data` for each PPDU
    slot[data] = np.arange(len(data))
    in_data = slot[pos] >= 0
    rows, pos = rows[in_data], pos[in_data]
    return rows, pos, slot[pos]


def _fates(mp: pd.DataFrame, chain_gap: int) -> np.ndarray:
    """'delivered' / 'retried_delivered' / 'retried_lost' / 'lost' for each MPDU transmission.

    Transmissions of one (TA, TID, seq) closer than ``chain_gap`` form a chain (seq
    numbers wrap every 4096 MPDUs); a failed one is later delivered when any later
    transmission of its chain was acknowledged.
    """
    n = len(mp)
    if n == 0:
        return np.zeros(0, object)
    ta = mp["ta"].to_numpy(np.uint64)
    key = _pair(ta, (mp["tid"].to_numpy(np.uint64) << np.uint64(12)) | mp["seq"].to_numpy(np.uint64))
    t = mp["start_ns"].to_numpy(np.int64)
    o = np.lexsort((t, key))
    k, ts, ack = key[o], t[o], mp["acked"].to_numpy(bool)[o]
    new_chain = np.ones(n, bool)
    new_chain[1:] = (k[1:] != k[:-1]) | (np.diff(ts) > chain_gap)
    chain = np.cumsum(new_chain) - 1
    heads = np.flatnonzero(new_chain)
    acks = ack.astype(np.int64)
    total = np.add.reduceat(acks, heads)                       # acks per chain
    upto = np.cumsum(acks) - np.repeat(np.cumsum(acks)[heads] - acks[heads], np.diff(np.r_[heads, n]))
    later = (total[chain] - upto) > 0                          # acked after this row
    later_any = np.r_[chain[1:] == chain[:-1], False]          # retransmitted after this row
    # codes into FATES (integers, not per-row strings)
    fate = np.where(ack, 0, np.where(later, 1, np.where(later_any, 2, 3)))
    out = np.empty(n, np.int64)
    out[o] = fate
    return pd.Categorical.from_codes(out, categories=FATES)


def station_stats(tx, kind, unanswered, coll_rts, mpdus, ba_missing) -> pd.DataFrame:
    """Per transmitter: PPDUs, RTS sent / CTS received, MPDUs, retries, failed, BA missing."""
    df = pd.DataFrame({"ta": pd.array(tx, dtype="UInt64"), "kind": kind})
    g = df.groupby("ta", observed=True)
    out = pd.DataFrame({"ppdus": g.size()})
    out["rts"] = df[df.kind == "rts"].groupby("ta").size()
    un = pd.Series(1, index=pd.Index(pd.array(tx[unanswered], dtype="UInt64"))).groupby(level=0).size()
    out["rts_unanswered"] = un
    co = pd.Series(1, index=pd.Index(pd.array(tx[coll_rts], dtype="UInt64"))).groupby(level=0).size()
    out["rts_cts_collisions"] = co
    out = out.fillna(0).astype("int64")
    out["cts_received"] = out["rts"] - out["rts_unanswered"]
    out["cts_per_rts"] = np.where(out["rts"] > 0, out["cts_received"] / out["rts"].where(out["rts"] > 0, 1), np.nan)
    if len(mpdus):
        mg = mpdus.groupby("ta")
        out["mpdus"] = mg.size()
        out["mpdu_retries"] = mg["retry"].sum()
        out["mpdus_failed"] = mg["acked"].apply(lambda a: int((~a).sum()))
        out["mpdus_lost"] = mpdus[mpdus.fate == "lost"].groupby("ta").size()
    bm = pd.Series(1, index=pd.Index(pd.array(tx[ba_missing], dtype="UInt64"))).groupby(level=0).size()
    out["ba_missing"] = bm
    out = out.fillna(0)
    for c in out.columns:
        if c != "cts_per_rts":
            out[c] = out[c].astype("int64")
    out.index.name = "ta"
    return out.reset_index()
