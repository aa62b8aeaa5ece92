"""Block-Ack evidence for :mod:`airtime.extent` (its source 4, ``ba_span``): the MPDUs of a
data PPDU a sniffer missed, read from the Block-Ack that answers it (or the one before),
less those captured in an earlier PPDU of the same pair. Per-frame temporaries are built
:data:`FRAME_CHUNK` rows at a time (memory, not results); each data PPDU's window is one 64-bit
mask (:mod:`airtime.extent_bits`), answered from the Block-Ack's records in numpy
(:class:`BaAnswers`).
"""
from __future__ import annotations

import numpy as np

from airtime.framecols import _np_rows, label_codes
from sniffsync.decode import dot11_tables as T
from sniffsync.nomask import distinct
from airtime.extent_bits import ONES, bitmap_words, low_bits, pack_rows, popcount, set_bits, span_bits, top_bit, \
    window_words

_ZERO = np.uint64(0)
_ONE = np.uint64(1)

COPY_TOL_NS = 3_000           # copies of one PPDU on a merged/common clock
BA_REACH = 64                 # sequence numbers of a Block-Ack window read
_MULTI_TID = T.BA_TYPE_NAMES.index("multi_tid")
FRAME_CHUNK = 1 << 18         # frame rows whose temporaries are built at a time (the same)


def _key(a, b, clock) -> np.ndarray:
    """Order-sensitive key of two 48-bit addresses on one clock (int64 wraparound on purpose)."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    with np.errstate(over="ignore"):
        return (a * np.int64(-7046029254386353131) + b) * np.int64(31) + np.asarray(clock, np.int64)


def _missed_subframes(ctx, resp, group, need=None) -> np.ndarray:
    """Subframes of each data PPDU no copy captured, from Block-Ack evidence: sequence
    numbers in the window, captured by no copy, not acknowledged by the pair's previous
    Block-Ack nor captured since (an originator never resends those), and acknowledged by
    this PPDU's Block-Ack, or between two captured subframes, or before the first captured
    one and after every one known sent before (the oldest pending MPDUs go first).

    ``need``: the data PPDUs to answer for (default all); each PPDU's answer depends only
    on its own window and the frames, so the others are left at 0 without changing any.
    Each window (at most :data:`BA_REACH` positions) is one 64-bit mask (:mod:`airtime.extent_bits`)."""
    frames, c, n = ctx.frames, ctx.c, len(ctx.data)
    add = np.zeros(n, np.int64)
    ba_now = np.where(ctx.data & (resp >= 0), c.first_frame[np.maximum(resp, 0)], -1)
    ba_prev, prev_t = _previous_ba(ctx)
    d = np.flatnonzero(ctx.data & ((ba_now >= 0) | (ba_prev >= 0)) & (True if need is None else need))
    if not len(d) or "ba_ssn" not in frames:
        return add
    now, prev = ba_now[d], ba_prev[d]
    ssn = _np_rows(frames, "ba_ssn", -1, np.where(now >= 0, now, prev))
    lo, hi, base, caught = _captured(ctx, group, d, ssn)
    # the window the evidence covers (_window_base); it ends at the last captured seq or
    # the BA's highest set bit (first 64 bits)
    in_ba = (ssn >= 0) & ((lo - ssn) % 4096 < BA_REACH)
    bm = _np_rows(frames, "ba_bitmap_lo", 0, np.maximum(now, 0), np.uint64)
    top = np.where((now >= 0) & in_ba & (bm > 0),
                   np.minimum(np.floor(np.log2(np.maximum(bm, 1).astype(float))), 63), -1).astype(np.int64)
    width = np.minimum(np.maximum((hi - base) % 4096, top) + 1, BA_REACH)
    # the positions asked about: in the window, captured by no copy
    open_ = np.where(ssn >= 0, low_bits(width), _ZERO) & ~caught
    acked = BaAnswers(frames)
    acked_now, known = acked.window_of(now, base), acked.window_of(prev, base)
    known |= _sent_bits(ctx, d, base, prev_t[d])
    known &= open_
    e, span = (base - lo) % 4096, (hi - lo) % 4096           # (s - lo) % 4096 = (e + k) % 4096
    between = np.where(hi >= 0, span_bits(0, span - e) | span_bits(4096 - e, 4096 - e + span), _ZERO)
    before = np.where(prev >= 0, span_bits(top_bit(known) + 1, (lo - base) % 4096), _ZERO)
    add[d] = popcount(open_ & ~known & (acked_now | between | before))
    return add


def _window_base(lo, ssn) -> np.ndarray:
    """The window's first seq: the Block-Ack's SSN, unless the captured ones lie beyond it."""
    in_ba = (ssn >= 0) & ((lo - ssn) % 4096 < BA_REACH)
    return np.where(in_ba, ssn, (lo - BA_REACH // 2) % 4096)


def _captured(ctx, group, d, ssn):
    """``(lo, hi, base, caught)`` per data PPDU ``d``: the first and last captured sequence
    number of its group (its copies; mod 4096, around the seq of the group's first frame; -1
    where none), its window's first seq (:func:`_window_base`), and the window positions whose
    seq a frame of the group holds (a mask). Per-frame temporaries :data:`FRAME_CHUNK` frames
    at a time."""
    rows, first, seqs = ctx.rows
    dd = np.flatnonzero(ctx.data)                            # (only data PPDUs share a group)
    o = np.argsort(group[dd], kind="stable")
    gs = group[dd][o]
    i, m = _expand(np.arange(len(d)), np.searchsorted(gs, group[d]), np.searchsorted(gs, group[d], "right"))
    p = dd[o[m]]                                             # (data PPDU, PPDU of its group)
    frames_of = np.bincount(i, weights=first[p + 1] - first[p], minlength=len(d)).astype(np.int64)
    cum = np.cumsum(frames_of)
    edges = np.r_[0, np.searchsorted(cum, np.arange(FRAME_CHUNK, cum[-1] if len(cum) else 0, FRAME_CHUNK)), len(d)]
    edges = edges[np.r_[True, edges[1:] != edges[:-1]]]     # ascending: distinct (np.unique imports numpy.ma)
    lo, hi = np.full(len(d), -1, np.int64), np.full(len(d), -1, np.int64)
    caught = np.zeros(len(d), np.uint64)
    for x0, x1 in zip(edges[:-1], edges[1:]):
        y0, y1 = np.searchsorted(i, (x0, x1))
        ii, r = _expand(i[y0:y1], first[p[y0:y1]], first[p[y0:y1] + 1])
        if not len(ii):
            continue
        sq = seqs[r]
        who = x0 + np.flatnonzero(frames_of[x0:x1])           # the data PPDUs with frames, their runs
        size = frames_of[who]
        at = np.cumsum(size) - size
        # the seq of the group's first frame (one PPDU: its first entry)
        alone = (np.diff(i[y0:y1]) > 0).all()
        f = sq[at] if alone else \
            (np.minimum.reduceat((rows[r].astype(np.int64) << 12) | sq, at) & 4095).astype(np.int32)
        off = sq - np.repeat(f, size)
        off %= 4096
        off[off > 2048] -= 4096                              # before the first frame's seq
        lo[who] = (f + np.minimum.reduceat(off, at)) % 4096
        hi[who] = (f + np.maximum.reduceat(off, at)) % 4096
        k = sq - np.repeat(_window_base(lo[who], ssn[who]).astype(np.int32), size)
        k %= 4096
        bits = np.where(k < 64, _ONE << np.minimum(k, 63).astype(np.uint64), _ZERO)
        caught[who] = np.bitwise_or.reduceat(bits, at)
    return lo, hi, _window_base(lo, ssn), caught


def _sent_bits(ctx, d, base, since) -> np.ndarray:
    """Per data PPDU ``d``: the window positions whose (pair, seq) :func:`_sent_since` finds,
    i.e. a frame with it was captured in a PPDU of the pair stamped after ``since`` and more than
    :data:`COPY_TOL_NS` before ``d``: those PPDUs lie between two ``searchsorted`` positions in
    (pair, stamp rank) order, scanned :data:`FRAME_CHUNK` frames at a time. A data PPDU with more
    such frames (or PPDUs) than :data:`SENT_SCAN` is asked per position instead
    (:func:`_sent_positions`: the same answer, no long scan)."""
    c, n = ctx.c, len(ctx.c.t_ns)
    code = _pair_codes(c)
    ts = np.sort(c.t_ns)
    key = code * (n + 1) + np.searchsorted(ts, c.t_ns)      # a stamp's rank: the stamps below it
    by = np.argsort(key, kind="stable")
    key = key[by]
    q = code[d] * (n + 1)
    a = np.searchsorted(key, q + np.searchsorted(ts, since, "right"))              # stamp > since
    b = np.maximum(np.searchsorted(key, q + np.searchsorted(ts, c.t_ns[d] - COPY_TOL_NS)), a)
    rows, first, seqs = ctx.rows
    per = np.r_[0, np.cumsum(np.diff(first)[by])]          # frames of the PPDUs in ``by`` order
    scan = per[b] - per[a]
    short = (scan <= SENT_SCAN) & (b - a <= SENT_SCAN)
    lo, hi = _seq_range(first, seqs)
    out = np.zeros(len(d), np.uint64)
    # the scans of FRAME_CHUNK frames (or PPDUs) at a time; each data PPDU's in one
    todo = np.flatnonzero(short)
    cum = np.cumsum(scan[todo] + (b - a)[todo])
    for part in np.split(todo, np.searchsorted(cum, np.arange(FRAME_CHUNK, cum[-1] if len(cum) else 0, FRAME_CHUNK))):
        i, p = _expand(part, a[part], b[part])                   # (data PPDU, PPDU of its pair)
        p = by[p]
        # only PPDUs whose seqs (between their least and greatest) reach into the window
        b0 = base[i]
        reach = np.where(b0 + 63 < 4096, (lo[p] <= b0 + 63) & (hi[p] >= b0),
                         (hi[p] >= b0) | (lo[p] <= b0 + 63 - 4096))
        i, p = i[reach], p[reach]
        i, r = _expand(i, first[p], first[p + 1])               # (data PPDU, frame)
        out |= set_bits(len(d), i, (seqs[r] - base[i]) % 4096)
    if not short.all():
        out[~short] |= _sent_positions(ctx, code, d[~short], base[~short], since[~short])
    return out


SENT_SCAN = 4096              # frames (PPDUs) scanned per data PPDU before asking per position (the same)


def _seq_range(first, seqs):
    """Least and greatest seq of each PPDU's frames (4096 and -1 where none)."""
    n = len(first) - 1
    lo, hi = np.full(n, 4096, np.int64), np.full(n, -1, np.int64)
    has = np.flatnonzero(first[1:] > first[:-1])
    if len(has):
        lo[has], hi[has] = np.minimum.reduceat(seqs, first[has]), np.maximum.reduceat(seqs, first[has])
    return lo, hi


def _expand(i, a, b):
    """``(i, j)`` for every ``j`` in ``a[x]:b[x]`` of each ``i[x]``."""
    cnt = b - a
    ii = np.repeat(i, cnt)
    return ii, np.repeat(a - np.cumsum(cnt) + cnt, cnt) + np.arange(len(ii))


def _pair_codes(c) -> np.ndarray:
    """Dense code of each PPDU's (TA, RA, clock) (codes of the sorted keys: only equality counts)."""
    from sniffsync.decode.table import factorize
    return np.asarray(factorize(_key(c.ta, c.ra, c.clock))[0], np.int64)


def rows_by_ppdu(fp, seq, n):
    """``(rows, first, seqs)``: the frame rows in a PPDU with a sequence number, by PPDU
    (capture order within one; int32 where they fit), and their seqs (int32); PPDU ``p``'s
    are ``rows[first[p]:first[p + 1]]``."""
    rows = np.flatnonzero((fp >= 0) & (seq >= 0))
    if len(fp) < 1 << 31:
        rows = rows.astype(np.int32)     # (held through the extent: 4 bytes a frame)
    fpr = fp[rows]
    if len(fpr) and not (fpr[1:] >= fpr[:-1]).all():
        rows = rows[np.argsort(fpr, kind="stable")]
        fpr = fp[rows]
    return rows, np.r_[0, np.cumsum(np.bincount(fpr, minlength=n))], seq[rows].astype(np.int32, copy=False)


def _sent_positions(ctx, code, d, base, since) -> np.ndarray:
    """:func:`_sent_bits` of data PPDUs ``d`` asked per window position (:func:`_sent_since`)."""
    pairs = np.zeros(int(code.max()) + 1, bool)
    pairs[code[d]] = True
    table = _capture_table(ctx, code, pairs)
    s = (base[:, None] + np.arange(BA_REACH)) % 4096
    q = (code[d][:, None] * 4096 + s).reshape(-1)
    t_q = np.repeat(ctx.c.t_ns[d] - COPY_TOL_NS, BA_REACH)
    return pack_rows(_sent_since(table, q, t_q, np.repeat(since, BA_REACH)))


class BaAnswers:
    """``acked_in_block_ack(frames, ba_frame, seq)`` (no TID, TA or fragment given) in numpy:
    the Block-Ack records listed once (:func:`ba_records`), each query joined to its frame's
    records by ``searchsorted`` and its bit read from the record's bitmap -- the same rules
    (a multi-TID frame answers by its first record, a multi-STA "all acknowledged" record
    for everything; frames without ``ba_info`` by their ``ba_ssn`` / bitmap columns)."""

    def __init__(self, frames):
        from airtime.barecords import bitmap_table, record_arrays
        self.frames = frames
        info = label_codes(frames, "ba_info")
        self.has_info = None if info is None else info[0] >= 0
        if info is None:
            return
        rec = record_arrays(frames)                        # sorted by (frame_row, rec)
        if rec is None:
            z = np.zeros(0, np.int64)
            rec = {"frame_row": z, "rec": z, "tcode": z, "all_acked": z.astype(bool), "bm_code": z,
                   "ssn": (z, z.astype(bool)), "bits_per_msdu": z, "bm_cats": []}
        self.row = rec["frame_row"].astype(np.int64)
        self.match = (rec["tcode"] != _MULTI_TID) | (rec["rec"].astype(np.int64) == 0)
        self.all_acked = rec["all_acked"].astype(bool)
        self.bm = rec["bm_code"].astype(np.int64)
        ssn, ok = rec["ssn"]
        self.ssn = np.where(ok, ssn, 0).astype(np.int64)
        self.per = rec["bits_per_msdu"].astype(np.int64)
        self.table, self.nbits = bitmap_table(rec["bm_cats"])
        self.words = bitmap_words(self.table)

    def __call__(self, ba_frame, seq) -> np.ndarray:
        from airtime.barecords import from_columns as _from_columns
        ba_frame, seq = np.asarray(ba_frame, np.int64), np.asarray(seq, np.int64)
        if self.has_info is None:
            return _from_columns(self.frames, ba_frame, seq)
        acked = np.zeros(len(ba_frame), bool)
        has = self.has_info[ba_frame]
        if not has.all():                   # rows built without the field (hand-made tables)
            acked[~has] = _from_columns(self.frames, ba_frame[~has], seq[~has])
        i, j = self._records(np.flatnonzero(has), ba_frame)
        hit = self.all_acked[j] | self._bit_set(j, seq[i])
        acked[i[self.match[j] & hit]] = True
        return acked

    def window(self, ba_frame, base) -> np.ndarray:
        """Masks (:mod:`airtime.extent_bits`): bit ``k`` = ``self(ba_frame, (base + k) % 4096)``.
        A record with one bit per MSDU gives its 64 bits at once from the bitmap's words; other
        records and frames without ``ba_info`` are asked per position."""
        ba_frame, base = np.asarray(ba_frame, np.int64), np.asarray(base, np.int64)
        if self.has_info is None:
            return self._positions(ba_frame, base)
        out = np.zeros(len(ba_frame), np.uint64)
        has = self.has_info[ba_frame]
        i, j = self._records(np.flatnonzero(has), ba_frame)
        i, j = i[self.match[j]], j[self.match[j]]
        fast = self.all_acked[j] | (self.per[j] == 1) | (self.bm[j] < 0)
        i, j, slow = i[fast], j[fast], distinct(np.r_[np.flatnonzero(~has), i[~fast]])
        bits = window_words(self.words, np.where(self.all_acked[j], -1, self.bm[j]), (base[i] - self.ssn[j]) % 4096)
        np.bitwise_or.at(out, i, np.where(self.all_acked[j], ONES, bits))
        if len(slow):
            out[slow] |= self._positions(ba_frame[slow], base[slow])
        return out

    def window_of(self, ba_frame, base) -> np.ndarray:
        """:meth:`window` where ``ba_frame`` >= 0, else no bit set."""
        out = np.zeros(len(ba_frame), np.uint64)
        q = np.flatnonzero(ba_frame >= 0)
        out[q] = self.window(ba_frame[q], base[q])
        return out

    def _positions(self, ba_frame, base) -> np.ndarray:
        """:meth:`window` asked position by position."""
        s = (base[:, None] + np.arange(64)) % 4096
        return pack_rows(self(np.repeat(ba_frame, 64), s.reshape(-1)))

    def _records(self, q, ba_frame):
        """``(i, j)``: query ``i`` (of ``q``) and each record ``j`` of its frame."""
        f = ba_frame[q]
        return _expand(q, np.searchsorted(self.row, f, "left"), np.searchsorted(self.row, f, "right"))

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
    k_d, k_b = _key(c.ta[d], c.ra[d], c.clock[d]), _key(c.ra[ba], c.ta[ba], c.clock[ba])
    t_d, t_b = ctx.start[d], ctx.start[ba]
    # per pair key, the last Block-Ack started strictly before the data PPDU: one search over
    # (key code, stamp rank) of the Block-Acks (the later one of equal stamps)
    keys, code = np.unique(np.concatenate([k_b, k_d]), return_inverse=True)
    times = distinct(t_b)
    m = len(times) + 1
    cb = code[:len(ba)] * m + np.searchsorted(times, t_b)
    o = np.argsort(cb, kind="stable")
    cb = cb[o]
    cq = code[len(ba):] * m + np.searchsorted(times, t_d, "left")
    pos = np.searchsorted(cb, cq, "left") - 1
    hit = (pos >= 0) & (cb[np.maximum(pos, 0)] // m == cq // m)
    j = o[pos[hit]]
    out[d[hit]] = c.first_frame[ba][j]
    t_out[d[hit]] = c.t_ns[ba][j]
    return out, t_out
