"""The true extent of PPDUs a sniffer caught only in part (cut A-MPDUs).

In a hidden-node collision a sniffer decodes only some subframes of an A-MPDU; the TXTIME
of what it captured is then too short. One side of the PPDU is still known from the
sniffer's stamp convention (a sniffer stamping ends knows the end, one stamping starts
knows the start); the other side is estimated from independent sources, best first:

1. ``nav``: the Duration of the RTS or CTS that opened the exchange. The data PPDU starts
   SIFS after the CTS and ends SIFS + Block-Ack before the NAV ends (802.11-2020 10.3.2.9).
2. ``response``: the Block-Ack/ACK from the receiver, which starts SIFS after the PPDU ends
   (a start-stamping sniffer; with end stamps the end is known already).
3. ``copies``: other sniffers' copies of the same A-MPDU (same TA/RA and stamp, merged
   table): the union of their subframes, and their "last" flags.
4. ``ba_span``: MPDUs after the last captured one that the Block-Ack acknowledges, and
   sequence-number gaps between captured subframes, each counted as a subframe of the
   captured subframes' mean length.

``complete``: ``complete`` (nothing suggests a missing part: not an A-MPDU, or its last
subframe is there with no sequence gap and no source says longer), ``estimated`` (a source
gave a longer extent, used for ``start_ns``/``end_ns``/``airtime_ns``), ``partial`` (known
to be cut -- no "last" subframe or a sequence gap -- and no source to size it: the
captured part's extent).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, NamedTuple

import numpy as np

from airtime.extent_ba import FRAME_CHUNK  # noqa: F401  (airtime.ppdu's, and the tests' chunk size)
from airtime.extent_ba import COPY_TOL_NS, _expand, _key, _missed_subframes, rows_by_ppdu
from airtime.framecols import Labels, _np, _np_rows, mpdu_bytes
from airtime.match import match_in_window
from airtime.phy import legacy_response_rate_kbps, ppdu_duration_ns, sifs_ns
from airtime.phy_tables import BA_BYTES, CTS_BYTES

if TYPE_CHECKING:                # pandas is imported where a table is read or built
    import pandas as pd

__all__ = ["COMPLETE", "SOURCES", "Extent", "estimate_extent"]

COMPLETE = ["complete", "estimated", "partial"]
SOURCES = ["captured", "nav", "response", "ba_span", "copies"]
SLACK_NS = 6_000              # NAV µs rounding, TSFT rounding, propagation, sync error
MAX_PPDU_NS = 5_484_000       # aPPDUMaxTime (HT/VHT/HE)


class Extent(NamedTuple):
    start_ns: np.ndarray
    end_ns: np.ndarray
    airtime_ns: np.ndarray
    complete: Labels           # codes into COMPLETE (``to_pandas()``: a Categorical)
    source: Labels             # codes into SOURCES


class PpduCols(NamedTuple):
    """Per-PPDU inputs (arrays in PPDU id order)."""
    t_ns: np.ndarray           # the stamp: end when ``ends_here`` else start
    ends_here: np.ndarray      # bool: the sniffer stamps PPDU ends
    airtime_ns: np.ndarray     # TXTIME of the captured subframes (-1 unknown)
    kind: np.ndarray           # codes into airtime.ppdu.KIND_NAMES
    ta: np.ndarray             # int64, -1 for none
    ra: np.ndarray
    clock: np.ndarray          # PPDUs with the same clock id share a clock (a merged table: all)
    freq_mhz: np.ndarray
    phy: object                # per-PPDU phy names (Categorical)
    mcs: np.ndarray
    rate_kbps: np.ndarray
    first_frame: np.ndarray    # frame row of the first MPDU


class _Ctx(NamedTuple):
    """What every source reads."""
    frames: pd.DataFrame
    fp: np.ndarray             # PPDU id of each frame row
    seq: np.ndarray            # int32 per frame row, -1 for none
    c: PpduCols
    data: np.ndarray           # bool per PPDU: a data A-MPDU with a known airtime
    start: np.ndarray          # captured extent
    end: np.ndarray
    sifs: np.ndarray
    ba_ns: np.ndarray          # airtime of the Block-Ack answering each data PPDU
    kc: dict
    mpdu: np.ndarray           # int32 MPDU bytes of each frame row (airtime.framecols.mpdu_bytes)
    rows: tuple                # the frames with a seq by PPDU (airtime.extent_ba.rows_by_ppdu)


def estimate_extent(frames: pd.DataFrame, frame_ppdu: np.ndarray, cols: PpduCols, psdu: np.ndarray,
                    txtime: Callable[[np.ndarray], np.ndarray], kind_code: dict, mpdu=None) -> Extent:
    """Start, end, airtime, ``complete`` and the source used, per PPDU.

    ``txtime(psdu_bytes, rows=None)`` gives each PPDU's (or PPDUs ``rows``') TXTIME for another
    PSDU length (its own PHY parameters); ``kind_code`` maps kind names to ``cols.kind`` codes; ``mpdu``: the frames'
    :func:`airtime.framecols.mpdu_bytes` when the caller has them.
    """
    if mpdu is None:
        mpdu = mpdu_bytes(frames)
    mpdu = np.asarray(mpdu) if np.asarray(mpdu).dtype == np.int32 else np.asarray(mpdu, np.int64)
    if mpdu.dtype != np.int32 and len(mpdu) and np.abs(mpdu).max() <= np.iinfo(np.int32).max:
        mpdu = mpdu.astype(np.int32)              # held through: 4 bytes a frame
    n = len(cols.t_ns)
    air = cols.airtime_ns
    fp = np.asarray(frame_ppdu, np.int64)
    agg, last_seen, mean_sub = _own_evidence(frames, fp, n, mpdu)
    start = np.where(cols.ends_here, cols.t_ns - np.maximum(air, 0), cols.t_ns)
    seq = _np(frames, "seq", -1, np.int32)
    data = (cols.kind == kind_code["data"]) & agg & (air > 0)
    ctx = _Ctx(frames, fp, seq, cols, data, start, start + np.maximum(air, 0),
               sifs_ns(cols.freq_mhz).astype(np.int64), _ba_ns(cols, data), kind_code, mpdu, rows_by_ppdu(fp, seq, n))
    est = np.full(n, -1, np.int64)              # the first source that sizes the PPDU wins
    src = np.zeros(n, np.int64)
    for code, cand in enumerate(_sources(ctx, psdu, mean_sub, txtime, est), start=1):
        ok = (est < 0) & ctx.data & (cand >= air - SLACK_NS) & (cand <= MAX_PPDU_NS)
        est[ok] = cand[ok]                      # in place: later sources see what is sized
        src[ok] = code
    longer = est > air + SLACK_NS // 2
    new_air = np.where(longer, est, air)
    new_start = np.where(cols.ends_here, cols.t_ns - np.maximum(new_air, 0), cols.t_ns)
    comp = np.where(longer, 1, np.where(agg & ~last_seen & (est < 0), 2, 0))
    return Extent(new_start, new_start + np.maximum(new_air, 0), new_air,
                  Labels(comp, COMPLETE, obj=False), Labels(np.where(longer, src, 0), SOURCES, obj=False))


def _ba_ns(cols: PpduCols, data) -> np.ndarray:
    """Airtime of the Block-Ack answering each data PPDU (the sources read no other; -1)."""
    out = np.full(len(data), -1, np.int64)
    d = np.flatnonzero(data)
    rate = legacy_response_rate_kbps(cols.rate_kbps[d], phy=None if cols.phy is None else cols.phy[d],
                                     mcs=cols.mcs[d])
    out[d] = ppdu_duration_ns("ofdm", np.full(len(d), BA_BYTES), freq_mhz=cols.freq_mhz[d], rate_kbps=rate)
    return out


def _own_evidence(frames, fp, n, mpdu):
    """Per PPDU: an A-MPDU (status present or > 1 MPDU), its last flag seen, the mean
    padded subframe length."""
    ok = fp >= 0
    every = ok.all()
    f = fp if every else fp[ok]
    cnt = np.bincount(f, minlength=n)
    ref, last = _np(frames, "ampdu_ref", -1) >= 0, _np(frames, "ampdu_last", 0) > 0
    sub = (mpdu.astype(np.int64) + 4 + 3) // 4 * 4
    if not every:
        ref, last, sub = ref[ok], last[ok], sub[ok]
    if len(f) and (cnt > 0).all() and (f[1:] >= f[:-1]).all():     # frames in PPDU order: runs
        at = np.r_[0, np.cumsum(cnt)[:-1]]
        agg, last_seen, total = (np.logical_or.reduceat(ref, at), np.logical_or.reduceat(last, at),
                                 np.add.reduceat(sub, at))
    else:
        agg, last_seen = np.bincount(f[ref], minlength=n) > 0, np.bincount(f[last], minlength=n) > 0
        total = np.bincount(f, weights=sub, minlength=n)
    return agg | (cnt > 1), last_seen, total / np.maximum(cnt, 1)


def _sources(ctx: _Ctx, psdu, mean_sub, txtime, est):
    """Candidate airtimes (-1 none) from each source, in the order of :data:`SOURCES`[1:].

    ``est``: the estimates so far, updated by the caller between sources; the Block-Ack
    evidence (the costliest) is gathered only for the data PPDUs no earlier source sized
    (a later source never overrides an earlier one)."""
    yield _from_nav(ctx)
    resp = _response(ctx)
    by_resp = np.full(len(ctx.data), -1, np.int64)
    has = (resp >= 0) & ~ctx.c.ends_here
    by_resp[has] = ctx.start[resp[has]] - ctx.sifs[has] - ctx.start[has]
    yield by_resp
    group, union = _copies(ctx, psdu, ctx.data & (est < 0))
    by_copies = np.full(len(ctx.data), -1, np.int64)
    more = union > psdu
    if more.any():
        more = np.flatnonzero(more)
        by_copies[more] = txtime(union[more], more)
    # the Block-Ack's evidence adds to the union of the copies
    add = _missed_subframes(ctx, resp, group, ctx.data & (est < 0))
    by_ba = np.full(len(ctx.data), -1, np.int64)
    more = (add > 0) & (union > 0)
    if more.any():
        more = np.flatnonzero(more)
        by_ba[more] = txtime(union[more] + np.rint(add[more] * mean_sub[more]).astype(np.int64), more)
    yield by_ba
    yield by_copies


def _from_nav(ctx: _Ctx) -> np.ndarray:
    """Airtime from the NAV an RTS (TA->RA) or CTS (RA = data TA) set before the data PPDU."""
    c, start, end, sifs, ba_ns = ctx.c, ctx.start, ctx.end, ctx.sifs, ctx.ba_ns
    out = np.full(len(ctx.data), -1, np.int64)
    d = np.flatnonzero(ctx.data)
    ends = c.ends_here[d]
    for kind in ("rts", "cts"):
        r = np.flatnonzero(c.kind == ctx.kc[kind])
        if not len(r) or not len(d):
            continue
        nav_us = _np_rows(ctx.frames, "duration_us", -1, c.first_frame[r])
        nav_end = end[r] + nav_us * 1000
        if kind == "rts":
            key_r, key_d = _key(c.ta[r], c.ra[r], c.clock[r]), _key(c.ta[d], c.ra[d], c.clock[d])
            cts_ns = ppdu_duration_ns("ofdm", np.full(len(r), CTS_BYTES), freq_mhz=c.freq_mhz[r],
                                      rate_kbps=legacy_response_rate_kbps(c.rate_kbps[r]))
            data_start = end[r] + 2 * sifs[r] + cts_ns
        else:
            key_r, key_d = _key(c.ra[r], 0, c.clock[r]), _key(c.ta[d], 0, c.clock[d])
            data_start = end[r] + sifs[r]
        key_r = np.where((nav_us > 0) & (nav_us < 0x8000), key_r, -2)     # bit 15 set: not a duration
        # end stamps: the data's end meets the NAV's end less SIFS + BA; start stamps: its start
        m = _match_sides(ends, key_d, key_r, (end[d] + sifs[d] + ba_ns[d], nav_end, -SLACK_NS, SLACK_NS),
                         (start[d], data_start, -SLACK_NS, SLACK_NS))
        mm = np.maximum(m, 0)
        air = np.where(ends, end[d] - data_start[mm], nav_end[mm] - sifs[d] - ba_ns[d] - start[d])
        hit = (m >= 0) & (out[d] < 0)
        out[d[hit]] = air[hit]
    return out


def _response(ctx: _Ctx) -> np.ndarray:
    """PPDU id of the Block-Ack from RA to TA answering each data PPDU, or -1.

    End stamps: it starts SIFS after the known end. Start stamps: the first one after
    the captured part, within aPPDUMaxTime."""
    c, out = ctx.c, np.full(len(ctx.data), -1, np.int64)
    ba = np.flatnonzero(c.kind == ctx.kc["ba"])
    d = np.flatnonzero(ctx.data)
    if not len(ba) or not len(d):
        return out
    kd, kb = _key(c.ta[d], c.ra[d], c.clock[d]), _key(c.ra[ba], c.ta[ba], c.clock[ba])
    t = ctx.end[d] + ctx.sifs[d]
    m = _match_sides(c.ends_here[d], kd, kb, (t, ctx.start[ba], -SLACK_NS, SLACK_NS),
                     (t, ctx.start[ba], -SLACK_NS, MAX_PPDU_NS))
    out[d[m >= 0]] = ba[m[m >= 0]]
    return out


def _match_sides(ends, key_a, key_b, end_q, start_q) -> np.ndarray:
    """:func:`match_in_window` with ``end_q`` = ``(t_a, t_b, lo, hi)`` for the queries where
    ``ends``, ``start_q`` for the others (each query is answered alone: only its side is asked)."""
    m = np.full(len(key_a), -1, np.int64)
    for side, (t_a, t_b, lo, hi) in ((ends, end_q), (~ends, start_q)):
        q = np.flatnonzero(side)
        if len(q):
            m[q] = match_in_window(key_a[q], t_a[q], key_b, t_b, lo, hi)
    return m


def _copies(ctx: _Ctx, psdu, need):
    """(group, union PSDU bytes) per PPDU: copies of one PPDU on one clock (same TA/RA and
    stamp convention, stamps within :data:`COPY_TOL_NS`) form a group; its PSDU is the
    union of their subframes (by sequence number). A PPDU alone is its own group. The union
    is built for the groups of the PPDUs in ``need`` (-1 for the rest: no source reads it)."""
    c, n = ctx.c, len(ctx.data)
    d = np.flatnonzero(ctx.data)
    key = _key(c.ta[d], c.ra[d], c.clock[d]) * 2 + c.ends_here[d]
    o = np.lexsort((c.t_ns[d], key))
    new = np.r_[True, (key[o][1:] != key[o][:-1]) | (np.diff(c.t_ns[d][o]) > COPY_TOL_NS)]
    group = np.arange(n, dtype=np.int64) + n     # alone: ids above every shared one
    if new.all():                                 # no copies (one sniffer per clock)
        return group, np.where(ctx.data, psdu, -1)
    group[d[o]] = np.cumsum(new) - 1
    key, row = _subframe_rows(ctx, group, d[np.isin(group[d], group[need])])
    if not len(key):
        return group, np.full(n, -1, np.int64)
    # each (group, seq) once (its first row), then per group: bytes less the last's padding
    o = np.argsort(key, kind="stable")                      # (nearly sorted: timsort is fast)
    ks = key[o]
    at = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]])
    g, first = ks[at] // 4096, np.minimum.reduceat(row[o], at)
    del o, ks, key, row
    sub = ctx.mpdu[first].astype(np.int64) + 4
    padded = (sub + 3) // 4 * 4
    flag = _np_rows(ctx.frames, "ampdu_last", 0, first)     # the last subframe is not padded
    b, p = padded.astype(np.int32), np.where(flag > 0, padded - sub, 0).astype(np.int8)
    heads = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    total = np.add.reduceat(b, heads) - np.maximum.reduceat(p, heads)
    gh = g[heads]
    at = np.minimum(np.searchsorted(gh, group), len(gh) - 1)
    union = np.where(gh[at] == group, total[at], -1).astype(np.int64)
    return group, union


def _subframe_rows(ctx: _Ctx, group, d):
    """``(key, row)`` of the frames with a seq of data PPDUs ``d``, by group (then PPDU, then
    capture order): key ``group * 4096 + seq``."""
    rows, first, seqs = ctx.rows
    pp = d[np.argsort(group[d], kind="stable")]
    cnt = first[pp + 1] - first[pp]
    _, r = _expand(pp, first[pp], first[pp + 1])
    return np.repeat(group[pp], cnt) * 4096 + seqs[r], rows[r]
