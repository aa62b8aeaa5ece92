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

from typing import Callable, NamedTuple

import numpy as np
import pandas as pd

from airtime.blockack import acked_in_block_ack, ba_records
from airtime.match import match_in_window
from airtime.phy import legacy_response_rate_kbps, ppdu_duration_ns, sifs_ns
from airtime.phy_tables import BA_BYTES, CTS_BYTES

__all__ = ["COMPLETE", "SOURCES", "Extent", "estimate_extent"]

COMPLETE = ["complete", "estimated", "partial"]
SOURCES = ["captured", "nav", "response", "ba_span", "copies"]
SLACK_NS = 6_000              # NAV µs rounding, TSFT rounding, propagation, sync error
COPY_TOL_NS = 3_000           # copies of one PPDU on a merged/common clock
MAX_PPDU_NS = 5_484_000       # aPPDUMaxTime (HT/VHT/HE)
BA_REACH = 64                 # sequence numbers of a Block-Ack window read
QUERY_CHUNK = 1 << 17         # Block-Ack queries answered at a time (memory, not results)
WINDOW_CHUNK = 1 << 12        # data PPDUs whose Block-Ack windows are listed at a time (the same)
FRAME_CHUNK = 1 << 18         # frame rows whose temporaries are built at a time (the same)


class Extent(NamedTuple):
    start_ns: np.ndarray
    end_ns: np.ndarray
    airtime_ns: np.ndarray
    complete: pd.Categorical
    source: pd.Categorical


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
    seq: np.ndarray            # per frame row, -1 for none
    c: PpduCols
    data: np.ndarray           # bool per PPDU: a data A-MPDU with a known airtime
    start: np.ndarray          # captured extent
    end: np.ndarray
    sifs: np.ndarray
    ba_ns: np.ndarray          # airtime of the Block-Ack answering each PPDU
    kc: dict
    mpdu: np.ndarray           # int32 MPDU bytes of each frame row (airtime.ppdu.mpdu_bytes)


def estimate_extent(frames: pd.DataFrame, frame_ppdu: np.ndarray, cols: PpduCols, psdu: np.ndarray,
                    txtime: Callable[[np.ndarray], np.ndarray], kind_code: dict, mpdu=None) -> Extent:
    """Start, end, airtime, ``complete`` and the source used, per PPDU.

    ``txtime(psdu_bytes)`` gives each PPDU's TXTIME for another PSDU length (its own PHY
    parameters); ``kind_code`` maps kind names to ``cols.kind`` codes; ``mpdu``: the frames'
    :func:`airtime.ppdu.mpdu_bytes` when the caller has them.
    """
    if mpdu is None:
        from airtime.ppdu import mpdu_bytes       # late: ppdu imports this module
        mpdu = mpdu_bytes(frames)
    mpdu = np.asarray(mpdu) if np.asarray(mpdu).dtype == np.int32 else np.asarray(mpdu, np.int64)
    if mpdu.dtype != np.int32 and len(mpdu) and np.abs(mpdu).max() <= np.iinfo(np.int32).max:
        mpdu = mpdu.astype(np.int32)              # held through: 4 bytes a frame
    n = len(cols.t_ns)
    air = cols.airtime_ns
    fp = np.asarray(frame_ppdu, np.int64)
    agg, last_seen, mean_sub = _own_evidence(frames, fp, n, mpdu)
    start = np.where(cols.ends_here, cols.t_ns - np.maximum(air, 0), cols.t_ns)
    ctx = _Ctx(frames, fp, _col(frames, "seq", -1), cols, (cols.kind == kind_code["data"]) & agg & (air > 0),
               start, start + np.maximum(air, 0), sifs_ns(cols.freq_mhz).astype(np.int64),
               ppdu_duration_ns("ofdm", np.full(n, BA_BYTES), freq_mhz=cols.freq_mhz,
                                rate_kbps=legacy_response_rate_kbps(cols.rate_kbps, phy=cols.phy, mcs=cols.mcs)),
               kind_code, mpdu)
    est = np.full(n, -1, np.int64)              # the first source that sizes the PPDU wins
    src = np.zeros(n, np.int64)
    for code, cand in enumerate(_sources(ctx, psdu, mean_sub, txtime), start=1):
        ok = (est < 0) & ctx.data & (cand >= air - SLACK_NS) & (cand <= MAX_PPDU_NS)
        est = np.where(ok, cand, est)
        src = np.where(ok, code, src)
    longer = est > air + SLACK_NS // 2
    new_air = np.where(longer, est, air)
    new_start = np.where(cols.ends_here, cols.t_ns - np.maximum(new_air, 0), cols.t_ns)
    comp = np.where(longer, 1, np.where(agg & ~last_seen & (est < 0), 2, 0))
    return Extent(new_start, new_start + np.maximum(new_air, 0), new_air,
                  pd.Categorical.from_codes(comp, COMPLETE),
                  pd.Categorical.from_codes(np.where(longer, src, 0), SOURCES))


def _own_evidence(frames, fp, n, mpdu):
    """Per PPDU: an A-MPDU (status present or > 1 MPDU), its last flag seen, the mean
    padded subframe length."""
    ok = fp >= 0
    cnt = np.bincount(fp[ok], minlength=n)
    agg = (np.bincount(fp[ok], weights=_col(frames, "ampdu_ref", -1)[ok] >= 0, minlength=n) > 0) | (cnt > 1)
    last_seen = np.bincount(fp[ok], weights=_col(frames, "ampdu_last", 0)[ok] > 0, minlength=n) > 0
    sub = (mpdu.astype(np.int64) + 4 + 3) // 4 * 4
    mean_sub = np.bincount(fp[ok], weights=sub[ok], minlength=n) / np.maximum(cnt, 1)
    return agg, last_seen, mean_sub


def _col(frames, name, fill):
    return frames[name].to_numpy(np.int64, na_value=fill) if name in frames else np.full(len(frames), fill, np.int64)


def _sources(ctx: _Ctx, psdu, mean_sub, txtime):
    """Candidate airtimes (-1 none) from each source, in the order of :data:`SOURCES`[1:]."""
    yield _from_nav(ctx)
    resp = _response(ctx)
    by_resp = np.full(len(ctx.data), -1, np.int64)
    has = (resp >= 0) & ~ctx.c.ends_here
    by_resp[has] = ctx.start[resp[has]] - ctx.sifs[has] - ctx.start[has]
    yield by_resp
    group, union = _copies(ctx, psdu)
    by_copies = np.full(len(ctx.data), -1, np.int64)
    more = union > psdu
    if more.any():
        by_copies[more] = txtime(union)[more]
    # the Block-Ack's evidence adds to the union of the copies
    add = _missed_subframes(ctx, resp, group)
    by_ba = np.full(len(ctx.data), -1, np.int64)
    more = (add > 0) & (union > 0)
    if more.any():
        by_ba[more] = txtime(union + np.rint(add * mean_sub).astype(np.int64))[more]
    yield by_ba
    yield by_copies


def _from_nav(ctx: _Ctx) -> np.ndarray:
    """Airtime from the NAV an RTS (TA->RA) or CTS (RA = data TA) set before the data PPDU."""
    c, start, end, sifs, ba_ns = ctx.c, ctx.start, ctx.end, ctx.sifs, ctx.ba_ns
    dur = _col(ctx.frames, "duration_us", -1)
    out = np.full(len(ctx.data), -1, np.int64)
    d = np.flatnonzero(ctx.data)
    ends = c.ends_here[d]
    for kind in ("rts", "cts"):
        r = np.flatnonzero(c.kind == ctx.kc[kind])
        if not len(r) or not len(d):
            continue
        nav_us = dur[c.first_frame[r]]
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
        m_end = match_in_window(key_d, end[d] + sifs[d] + ba_ns[d], key_r, nav_end, -SLACK_NS, SLACK_NS)
        m_start = match_in_window(key_d, start[d], key_r, data_start, -SLACK_NS, SLACK_NS)
        m = np.where(ends, m_end, m_start)
        mm = np.maximum(m, 0)
        air = np.where(ends, end[d] - data_start[mm], nav_end[mm] - sifs[d] - ba_ns[d] - start[d])
        hit = (m >= 0) & (out[d] < 0)
        out[d[hit]] = air[hit]
    return out


def _key(a, b, clock) -> np.ndarray:
    """Order-sensitive key of two 48-bit addresses on one clock (int64 wraparound on purpose)."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    with np.errstate(over="ignore"):
        return (a * np.int64(-7046029254386353131) + b) * np.int64(31) + np.asarray(clock, np.int64)


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
    m_end = match_in_window(kd, t, kb, ctx.start[ba], -SLACK_NS, SLACK_NS)
    m_start = match_in_window(kd, t, kb, ctx.start[ba], -SLACK_NS, MAX_PPDU_NS)
    m = np.where(c.ends_here[d], m_end, m_start)
    out[d[m >= 0]] = ba[m[m >= 0]]
    return out


def _copies(ctx: _Ctx, psdu):
    """(group, union PSDU bytes) per PPDU: copies of one PPDU on one clock (same TA/RA and
    stamp convention, stamps within :data:`COPY_TOL_NS`) form a group; its PSDU is the
    union of their subframes (by sequence number). A PPDU alone is its own group."""
    c, n = ctx.c, len(ctx.data)
    d = np.flatnonzero(ctx.data)
    key = _key(c.ta[d], c.ra[d], c.clock[d]) * 2 + c.ends_here[d]
    o = np.lexsort((c.t_ns[d], key))
    new = np.r_[True, (key[o][1:] != key[o][:-1]) | (np.diff(c.t_ns[d][o]) > COPY_TOL_NS)]
    group = np.arange(n, dtype=np.int64) + n     # alone: ids above every shared one
    if new.all():                                 # no copies (one sniffer per clock)
        return group, np.where(ctx.data, psdu, -1)
    group[d[o]] = np.cumsum(new) - 1
    key, b, p = _subframe_rows(ctx, group)
    if not len(key):
        return group, np.full(n, -1, np.int64)
    # each (group, seq) once (its first row), then per group: bytes less the last's padding
    o = np.argsort(key, kind="stable")                      # (np.unique's return_index: stable)
    ks = key[o]
    first = o[np.r_[True, ks[1:] != ks[:-1]]]
    del o, ks
    g, b, p = key[first] // 4096, b[first], p[first]
    heads = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    total = np.add.reduceat(b, heads) - np.maximum.reduceat(p, heads)
    gh = g[heads]
    at = np.minimum(np.searchsorted(gh, group), len(gh) - 1)
    union = np.where(gh[at] == group, total[at], -1).astype(np.int64)
    return group, union


def _subframe_rows(ctx: _Ctx, group):
    """Per frame row of a data PPDU with a seq, in row order: key ``group * 4096 + seq``,
    padded subframe bytes (int32), padding of a last subframe (int8); built in chunks."""
    last = ctx.frames["ampdu_last"] if "ampdu_last" in ctx.frames else None
    out = [(np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int8))]
    for lo in range(0, len(ctx.fp), FRAME_CHUNK):
        fp, sq = ctx.fp[lo:lo + FRAME_CHUNK], ctx.seq[lo:lo + FRAME_CHUNK]
        rows = np.flatnonzero((fp >= 0) & (sq >= 0))
        rows = rows[ctx.data[fp[rows]]]
        sub = ctx.mpdu[lo + rows].astype(np.int64) + 4
        padded = (sub + 3) // 4 * 4
        # the last subframe (its flag) is not padded
        flag = (last.iloc[lo:lo + FRAME_CHUNK].to_numpy(np.int64, na_value=0)[rows] if last is not None
                else np.zeros(len(rows), np.int64))
        out.append((group[fp[rows]] * 4096 + sq[rows], padded.astype(np.int32),
                    np.where(flag > 0, padded - sub, 0).astype(np.int8)))
    return tuple(np.concatenate(c) for c in zip(*out))


def _missed_subframes(ctx: _Ctx, resp, group) -> np.ndarray:
    """Subframes of each data PPDU no copy captured, from Block-Ack evidence: sequence
    numbers in the window, captured by no copy, not acknowledged by the pair's previous
    Block-Ack nor captured since (an originator never resends those), and acknowledged by
    this PPDU's Block-Ack, or between two captured subframes, or before the first captured
    one and after every one known sent before (the oldest pending MPDUs go first)."""
    frames, c, n = ctx.frames, ctx.c, len(ctx.data)
    add = np.zeros(n, np.int64)
    ba_now = np.where(ctx.data & (resp >= 0), c.first_frame[np.maximum(resp, 0)], -1)
    ba_prev, prev_t = _previous_ba(ctx)
    d = np.flatnonzero(ctx.data & ((ba_now >= 0) | (ba_prev >= 0)))
    if not len(d) or "ba_ssn" not in frames:
        return add
    captured, lo, hi = _captured_bounds(ctx, group, 2 * n)
    lo, hi = lo[group[d]], hi[group[d]]
    ssn = _col(frames, "ba_ssn", -1)[np.where(ba_now[d] >= 0, ba_now[d], ba_prev[d])]
    # the window the evidence covers: the Block-Ack's, unless the captured ones lie beyond it;
    # it ends at the last captured seq or the BA's highest set bit (first 64 bits)
    in_ba = (ssn >= 0) & ((lo - ssn) % 4096 < BA_REACH)
    base = np.where(in_ba, ssn, (lo - BA_REACH // 2) % 4096)
    bm = frames["ba_bitmap_lo"].to_numpy(np.uint64, na_value=0)[np.maximum(ba_now[d], 0)] \
        if "ba_bitmap_lo" in frames else np.zeros(len(d), np.uint64)
    top = np.where((ba_now[d] >= 0) & in_ba & (bm > 0),
                   np.minimum(np.floor(np.log2(np.maximum(bm, 1).astype(float))), 63), -1).astype(np.int64)
    width = np.minimum(np.maximum((hi - base) % 4096, top) + 1, BA_REACH)
    has_ssn = ssn >= 0

    def windows():
        """The not-captured window positions, :data:`WINDOW_CHUNK` data PPDUs at a time."""
        for a in range(0, len(d), WINDOW_CHUNK):
            sl = slice(a, a + WINDOW_CHUNK)
            rows, k, s = _not_captured(group[d[sl]], base[sl], width[sl], has_ssn[sl], captured)
            yield rows + a, k, s
    code = np.unique(_key(c.ta, c.ra, c.clock), return_inverse=True)[1].astype(np.int64)
    queried = np.unique(np.concatenate([np.zeros(0, np.int64)] + [np.unique(code[d[r]] * 4096 + s)
                                                                   for r, _, s in windows()]))
    table = _capture_table(ctx, code, queried)
    del queried
    last_known = np.full(len(d), -1, np.int64)
    records = ba_records(frames) if "ba_info" in frames else None      # once for every chunk
    for rows, k, s in windows():           # (the answers per query: chunks change no result)
        pid = d[rows]
        now, prev = ba_now[pid], ba_prev[pid]
        acked_now = np.zeros(len(s), bool)
        acked_now[now >= 0] = _acked(frames, now[now >= 0], s[now >= 0], records)
        known = np.zeros(len(s), bool)
        known[prev >= 0] = _acked(frames, prev[prev >= 0], s[prev >= 0], records)
        known |= _sent_since(table, code[pid] * 4096 + s, c.t_ns[pid] - COPY_TOL_NS, prev_t[pid])
        np.maximum.at(last_known, rows[known], k[known])     # (a PPDU's rows are in one chunk)
        between = ((s - lo[rows]) % 4096 < (hi[rows] - lo[rows]) % 4096) & (hi[rows] >= 0)
        before = (k > last_known[rows]) & (k < (lo[rows] - base[rows]) % 4096) & (prev >= 0)
        missed = ~known & (acked_now | between | before)
        np.add.at(add, pid[missed], 1)
    return add


def _not_captured(group_d, base, width, has_ssn, captured):
    """``(rows, k, s)``: the window positions (data PPDU ``rows``, offset ``k`` from ``base``,
    sequence number ``s``) that no copy captured, for PPDUs with a known SSN; built
    :data:`WINDOW_CHUNK` PPDUs at a time (the whole windows would be ~64 rows per PPDU)."""
    out = []
    last = max(len(captured) - 1, 0)
    for lo in range(0, len(group_d), WINDOW_CHUNK):
        w = width[lo:lo + WINDOW_CHUNK]
        rows = np.repeat(np.arange(lo, lo + len(w)), w)
        k = np.arange(len(rows)) - np.repeat(np.cumsum(w) - w, w)
        s = (base[rows] + k) % 4096
        key = group_d[rows] * 4096 + s
        at = np.minimum(np.searchsorted(captured, key), last)
        cand = ((captured[at] != key) if len(captured) else np.ones(len(key), bool)) & has_ssn[rows]
        out.append((rows[cand], k[cand], s[cand]))
    return tuple(np.concatenate(c) for c in zip(*out)) if out else (np.zeros(0, np.int64),) * 3


def _acked(frames, ba_frame, seq, records=None) -> np.ndarray:
    """:func:`acked_in_block_ack` of each distinct (Block-Ack, seq) query once, in chunks of
    :data:`QUERY_CHUNK` (its tables hold ~150 bytes per query: a bounded peak)."""
    key, inv = _unique_inverse(ba_frame * 4096 + seq)
    out = np.zeros(len(key), bool)
    if records is None and len(key) > QUERY_CHUNK:
        records = ba_records(frames)            # once for every chunk
    for lo in range(0, len(key), QUERY_CHUNK):
        k = key[lo:lo + QUERY_CHUNK]
        out[lo:lo + QUERY_CHUNK] = acked_in_block_ack(frames, k // 4096, k % 4096, records=records)
    return out[inv.ravel()]


def _unique_inverse(key):
    """``np.unique(key, return_inverse=True)`` by a stable sort: the keys come nearly
    sorted (PPDUs in time order), where timsort is ~3x numpy's default."""
    o = np.argsort(key, kind="stable")
    ks = key[o]
    new = np.r_[True, ks[1:] != ks[:-1]] if len(ks) else np.zeros(0, bool)
    inv = np.empty(len(key), np.int64)
    inv[o] = np.cumsum(new) - 1
    return ks[new], inv


def _captured_bounds(ctx: _Ctx, group, n):
    """``(captured, lo, hi)``: the sorted keys ``group * 4096 + seq`` of the captured rows, and
    the first and last captured sequence number per group (mod 4096, around the seq of the
    group's first row), -1 where none; frames read :data:`FRAME_CHUNK` rows at a time."""
    first = np.full(n, -1, np.int64)
    keys = [np.zeros(0, np.int64)]
    for gf, sq in _captured_rows(ctx, group):
        keys.append(gf * 4096 + sq)
        u, at = np.unique(gf, return_index=True)           # each group's first row in the chunk
        new = first[u] < 0
        first[u[new]] = sq[at[new]]
    captured = np.sort(np.concatenate(keys), kind="stable")   # (nearly sorted: timsort is fastest)
    del keys
    lo_off = np.zeros(n, np.int64)                           # (each group holds its first row: 0)
    hi_off = np.zeros(n, np.int64)
    for gf, sq in _captured_rows(ctx, group):
        off = (sq - first[gf]) % 4096
        off = np.where(off > 2048, off - 4096, off)          # before the first row's seq
        np.minimum.at(lo_off, gf, off)
        np.maximum.at(hi_off, gf, off)
    has = first >= 0
    return captured, np.where(has, (first + lo_off) % 4096, -1), np.where(has, (first + hi_off) % 4096, -1)


def _captured_rows(ctx: _Ctx, group):
    """``(group, seq)`` of the rows in a PPDU with a sequence number, a chunk of frames at a time."""
    for lo in range(0, len(ctx.fp), FRAME_CHUNK):
        fp, sq = ctx.fp[lo:lo + FRAME_CHUNK], ctx.seq[lo:lo + FRAME_CHUNK]
        ok = (fp >= 0) & (sq >= 0)
        yield group[fp[ok]], sq[ok]


def _capture_table(ctx: _Ctx, code, queried):
    """What :func:`_sent_since` searches: ``(rk, times)``, the captures of the ``queried``
    (pair code * 4096 + seq) keys as sorted int64 ``key * m + rank`` (``rank``: where the
    capture's stamp lies in ``times``, the sorted stamps and stamps less :data:`COPY_TOL_NS`;
    ``m = len(times) + 1``; the stamp is ``times[rank]``); frames read in chunks."""
    c = ctx.c
    times = np.sort(np.concatenate([c.t_ns, c.t_ns - COPY_TOL_NS]), kind="stable")
    m = len(times) + 1
    rk = [np.zeros(0, np.int64)]
    for lo in range(0, len(ctx.fp) if len(queried) else 0, FRAME_CHUNK):
        fp, sq = ctx.fp[lo:lo + FRAME_CHUNK], ctx.seq[lo:lo + FRAME_CHUNK]
        rows = np.flatnonzero((fp >= 0) & (sq >= 0))
        key = code[fp[rows]] * 4096 + sq[rows]
        hit = queried[np.minimum(np.searchsorted(queried, key), len(queried) - 1)] == key
        rk.append(key[hit] * m + np.searchsorted(times, c.t_ns[fp[rows[hit]]]))
    rk = np.concatenate(rk)
    rk.sort(kind="stable")
    return rk, times


def _sent_since(table, q, t_q, since) -> np.ndarray:
    """Whether key ``q`` (pair code * 4096 + seq; a data PPDU's pair, stamp ``t_q`` + :data:`COPY_TOL_NS`)
    was captured in an earlier PPDU (stamp more than :data:`COPY_TOL_NS` before, not a copy)
    stamped after ``since``: answered by an ACK or by a Block-Ack the sniffer missed, or failed
    and resent in this PPDU -- which cannot be told apart, so it is not counted (an estimate
    may stay one retransmission short). ``table``: :func:`_capture_table`."""
    rk, times = table
    if not len(rk):
        return np.zeros(len(q), bool)
    m = len(times) + 1
    # the last capture of the same key before each query
    pos = np.searchsorted(rk, q * m + np.searchsorted(times, t_q), "left") - 1
    last = rk[np.maximum(pos, 0)]
    return (pos >= 0) & (last // m == q) & (times[last % m] > since)


def _previous_ba(ctx: _Ctx):
    """(first frame row, stamp) of the last Block-Ack from RA to TA stamped before each
    data PPDU (same clock); -1 and the minimum int64 where none."""
    c, n = ctx.c, len(ctx.data)
    out = np.full(n, -1, np.int64)
    t_out = np.full(n, np.iinfo(np.int64).min, np.int64)
    ba = np.flatnonzero(c.kind == ctx.kc["ba"])
    d = np.flatnonzero(ctx.data)
    if not len(ba) or not len(d):
        return out, t_out
    q = pd.DataFrame({"k": _key(c.ta[d], c.ra[d], c.clock[d]), "t": ctx.start[d], "i": d})
    b = pd.DataFrame({"k": _key(c.ra[ba], c.ta[ba], c.clock[ba]), "t": ctx.start[ba],
                      "row": c.first_frame[ba], "t_ba": c.t_ns[ba]})
    m = pd.merge_asof(q.sort_values("t"), b.sort_values("t"), on="t", by="k", allow_exact_matches=False)
    i = m["i"].to_numpy()
    out[i] = m["row"].fillna(-1).to_numpy(np.int64)
    t_out[i] = m["t_ba"].fillna(np.iinfo(np.int64).min).to_numpy(np.int64)
    return out, t_out
