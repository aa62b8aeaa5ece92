"""Block-Ack evidence for :mod:`airtime.extent` (its source 4, ``ba_span``): the MPDUs of a
data PPDU a sniffer missed, read from the Block-Ack that answers it (or the one before),
less those captured in an earlier PPDU of the same pair. Per-frame temporaries are built
:data:`FRAME_CHUNK` rows at a time and the Block-Ack windows :data:`WINDOW_CHUNK` data PPDUs
at a time (memory, not results); each window position is answered from the Block-Ack's
records in numpy (:class:`BaAnswers`).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from airtime.blockack import _bitmap_table, _categorical, _from_columns, ba_records

COPY_TOL_NS = 3_000           # copies of one PPDU on a merged/common clock
BA_REACH = 64                 # sequence numbers of a Block-Ack window read
WINDOW_CHUNK = 1 << 12        # data PPDUs whose Block-Ack windows are listed at a time (the same)
FRAME_CHUNK = 1 << 18         # frame rows whose temporaries are built at a time (the same)


def _key(a, b, clock) -> np.ndarray:
    """Order-sensitive key of two 48-bit addresses on one clock (int64 wraparound on purpose)."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    with np.errstate(over="ignore"):
        return (a * np.int64(-7046029254386353131) + b) * np.int64(31) + np.asarray(clock, np.int64)


def _col(frames, name, fill):
    return frames[name].to_numpy(np.int64, na_value=fill) if name in frames else np.full(len(frames), fill, np.int64)


def _col_rows(frames, name, fill, rows):
    """``_col(frames, name, fill)[rows]`` without the whole column's int64 copy."""
    if name not in frames:
        return np.full(len(rows), fill, np.int64)
    return pd.Series(frames[name].array.take(rows)).to_numpy(np.int64, na_value=fill)


def _missed_subframes(ctx, resp, group, need=None) -> np.ndarray:
    """Subframes of each data PPDU no copy captured, from Block-Ack evidence: sequence
    numbers in the window, captured by no copy, not acknowledged by the pair's previous
    Block-Ack nor captured since (an originator never resends those), and acknowledged by
    this PPDU's Block-Ack, or between two captured subframes, or before the first captured
    one and after every one known sent before (the oldest pending MPDUs go first).

    ``need``: the data PPDUs to answer for (default all); each PPDU's answer depends only
    on its own window and the frames, so the others are left at 0 without changing any."""
    frames, c, n = ctx.frames, ctx.c, len(ctx.data)
    add = np.zeros(n, np.int64)
    ba_now = np.where(ctx.data & (resp >= 0), c.first_frame[np.maximum(resp, 0)], -1)
    ba_prev, prev_t = _previous_ba(ctx)
    d = np.flatnonzero(ctx.data & ((ba_now >= 0) | (ba_prev >= 0)) & (True if need is None else need))
    if not len(d) or "ba_ssn" not in frames:
        return add
    captured, lo, hi = _captured_bounds(ctx, group, 2 * n)
    lo, hi = lo[group[d]], hi[group[d]]
    ssn = _col_rows(frames, "ba_ssn", -1, np.where(ba_now[d] >= 0, ba_now[d], ba_prev[d]))
    # the window the evidence covers: the Block-Ack's, unless the captured ones lie beyond it;
    # it ends at the last captured seq or the BA's highest set bit (first 64 bits)
    in_ba = (ssn >= 0) & ((lo - ssn) % 4096 < BA_REACH)
    base = np.where(in_ba, ssn, (lo - BA_REACH // 2) % 4096)
    bm = pd.Series(frames["ba_bitmap_lo"].array.take(np.maximum(ba_now[d], 0))).to_numpy(np.uint64, na_value=0) \
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
    pairs = np.zeros(int(code.max()) + 1 if len(code) else 1, bool)
    pairs[code[d]] = True                  # the pairs of the data PPDUs asked about
    table = _capture_table(ctx, code, pairs)
    last_known = np.full(len(d), -1, np.int64)
    acked = BaAnswers(frames)              # once for every chunk
    for rows, k, s in windows():           # (the answers per query: chunks change no result)
        pid = d[rows]
        now, prev = ba_now[pid], ba_prev[pid]
        acked_now = np.zeros(len(s), bool)
        acked_now[now >= 0] = acked(now[now >= 0], s[now >= 0])
        known = np.zeros(len(s), bool)
        known[prev >= 0] = acked(prev[prev >= 0], s[prev >= 0])
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


class BaAnswers:
    """``acked_in_block_ack(frames, ba_frame, seq)`` (no TID, TA or fragment given) in numpy:
    the Block-Ack records listed once (:func:`ba_records`), each query joined to its frame's
    records by ``searchsorted`` and its bit read from the record's bitmap -- the same rules
    (a multi-TID frame answers by its first record, a multi-STA "all acknowledged" record
    for everything; frames without ``ba_info`` by their ``ba_ssn`` / bitmap columns)."""

    def __init__(self, frames):
        self.frames = frames
        info = _categorical(frames, "ba_info")
        self.has_info = None if info is None else np.asarray(info.cat.codes) >= 0
        if info is None:
            return
        rec = ba_records(frames)                           # sorted by (frame_row, rec)
        self.row = rec["frame_row"].to_numpy(np.int64)
        kind = rec["ba_type"].astype(object).to_numpy()
        self.match = (kind != "multi_tid") | (rec["rec"].to_numpy(np.int64) == 0)
        self.all_acked = rec["all_acked"].to_numpy(bool)
        self.bm = rec["bitmap"].cat.codes.to_numpy(np.int64) if len(rec) else np.zeros(0, np.int64)
        self.ssn = rec["ssn"].to_numpy(np.int64, na_value=0)
        self.per = rec["bits_per_msdu"].to_numpy(np.int64)
        self.table, self.nbits = _bitmap_table(rec["bitmap"].cat.categories if len(rec) else [])

    def __call__(self, ba_frame, seq) -> np.ndarray:
        ba_frame, seq = np.asarray(ba_frame, np.int64), np.asarray(seq, np.int64)
        if self.has_info is None:
            return _from_columns(self.frames, ba_frame, seq)
        acked = np.zeros(len(ba_frame), bool)
        has = self.has_info[ba_frame]
        if not has.all():                   # rows built without the field (hand-made tables)
            acked[~has] = _from_columns(self.frames, ba_frame[~has], seq[~has])
        q = np.flatnonzero(has)
        lo = np.searchsorted(self.row, ba_frame[q], "left")
        cnt = np.searchsorted(self.row, ba_frame[q], "right") - lo
        i = np.repeat(q, cnt)                              # (query, record) pairs
        j = np.repeat(lo - np.cumsum(cnt) + cnt, cnt) + np.arange(len(i))
        hit = self.all_acked[j] | self._bit_set(j, seq[i])
        acked[i[self.match[j] & hit]] = True
        return acked

    def _bit_set(self, j, seq) -> np.ndarray:
        out = np.zeros(len(j), bool)
        c = self.bm[j]
        has = np.flatnonzero(c >= 0)
        if not len(has):
            return out
        c, j = c[has], j[has]
        per = self.per[j]
        bit = (seq[has] - self.ssn[j]) % 4096 * per        # fragment 0: its MSDU's first bit
        inside = (bit < self.nbits[c]) & ((per == 1) | (per > 0))
        byte = self.table[c, np.minimum(bit // 8, self.table.shape[1] - 1)]
        out[has] = inside & ((byte >> (bit % 8).astype(np.uint8)) & 1).astype(bool)
        return out


def _captured_bounds(ctx, group, n):
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


def _captured_rows(ctx, group):
    """``(group, seq)`` of the rows in a PPDU with a sequence number, a chunk of frames at a time."""
    for lo in range(0, len(ctx.fp), FRAME_CHUNK):
        fp, sq = ctx.fp[lo:lo + FRAME_CHUNK], ctx.seq[lo:lo + FRAME_CHUNK]
        ok = (fp >= 0) & (sq >= 0)
        yield group[fp[ok]], sq[ok]


def _capture_table(ctx, code, pairs):
    """What :func:`_sent_since` searches: ``(rk, times)``, the captures of the (pair code *
    4096 + seq) keys of the pairs in ``pairs`` (bool by code) as sorted int64 ``key * m +
    rank`` (``rank``: where the capture's stamp lies in ``times``, the sorted stamps and
    stamps less :data:`COPY_TOL_NS`; ``m = len(times) + 1``; the stamp is ``times[rank]``);
    frames read in chunks. (Keys never asked about only add rows no search lands on.)"""
    c = ctx.c
    times = np.sort(np.concatenate([c.t_ns, c.t_ns - COPY_TOL_NS]), kind="stable")
    m = len(times) + 1
    rk = [np.zeros(0, np.int64)]
    for lo in range(0, len(ctx.fp), FRAME_CHUNK):
        fp, sq = ctx.fp[lo:lo + FRAME_CHUNK], ctx.seq[lo:lo + FRAME_CHUNK]
        rows = np.flatnonzero((fp >= 0) & (sq >= 0))
        rows = rows[pairs[code[fp[rows]]]]
        key = code[fp[rows]] * 4096 + sq[rows]
        rk.append(key * m + np.searchsorted(times, c.t_ns[fp[rows]]))
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


def _previous_ba(ctx):
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
