"""Acknowledgement analysis of the classified segment table: ACK numbers in the other
direction's sequence space, duplicate ACKs, highest ACK seen, bytes in flight,
retransmission kinds (fast / timeout / other) and spurious retransmissions.

Rows are sorted by (fd, time, input row). Cross-direction questions ("the last ACK the
other side sent before this segment") are one ``searchsorted`` on a composite key
``fd * (N + 1) + time_rank``, where ``time_rank`` orders all rows by (ts_ns, input row)
so that frames sharing a timestamp (the MPDUs of one A-MPDU) keep capture order.
"""
from __future__ import annotations

from functools import cached_property

import numpy as np

from sniffsync.tcp.columns import (SEQ_SPAN, group_starts, grouped_cummax, is_sorted, rank_span, restart_cumsum,
                                   sorted_within, unwrap32, wrap32)
from sniffsync.tcp.holes import inferred_arrays
from sniffsync.tcp.rtt import MIN_RTO_NS, ack_sample_rows, advancing_rows, rto_arrays
from sniffsync.tcp.segments import TH_ACK, TH_FIN, TH_RST, TH_SYN, live_tcp
from sniffsync.tcp.sequence import KIND

__all__ = ["RETX_NAMES", "RETX", "DUPTHRESH", "ACK_COLUMNS", "time_rank", "ack_arrays"]

RETX_NAMES = np.array(["none", "fast", "timeout", "other"])
RETX = {name: i for i, name in enumerate(RETX_NAMES)}
DUPTHRESH = 3                    # RFC 5681 duplicate-ACK threshold


def time_rank(row: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """Rank of every row in (ts_ns, input row) order.

    Usually the input rows are already in time order: then the rank is the rank of
    ``row``, found by one scatter over the row numbers instead of a sort.
    """
    n = len(row)
    rank = np.empty(n, np.int64)
    if n and row.min() >= 0 and row.max() < 4 * n + 1024:
        pos = np.full(int(row.max()) + 1, -1, np.int64)
        pos[row] = np.arange(n)
        o = pos[pos >= 0]
        if len(o) == n and is_sorted(ts[o]):
            if len(pos) == n:         # rows are 0..n-1 (every frame a segment): rank = row
                return row
            rank[o] = np.arange(n)
            return rank
    rank[np.lexsort((row, ts))] = np.arange(n)
    return rank


def _last_before(key_fd, key_tr, q_fd, q_tr, span) -> np.ndarray:
    """Index into the (fd, tr)-sorted keys of the last row of fd ``q_fd`` with tr < ``q_tr``
    (``span``: :func:`rank_span` of the ranks); -1 if none."""
    if not len(key_fd):
        return np.full(len(q_fd), -1, np.int64)
    comp = key_fd * np.int64(span)                       # (in place: one temporary less each)
    comp += key_tr
    q = q_fd * np.int64(span)
    q += q_tr
    j = np.searchsorted(comp, q, side="left")
    del comp, q
    j -= 1
    ok = (j >= 0) & (key_fd[np.maximum(j, 0)] == q_fd)
    return np.where(ok, j, -1)


def _take(arr: np.ndarray, j: np.ndarray, fill) -> np.ndarray:
    """``arr[j]`` where ``j >= 0``, else ``fill`` (works for an empty ``arr``; no copy of
    ``arr``: ``j`` is usually far shorter, e.g. the retransmitted rows)."""
    if not len(arr):
        return np.full(len(j), fill, arr.dtype)
    out = arr[np.maximum(j, 0)]
    out[j < 0] = fill
    return out


ACK_COLUMNS = ["tr", "dup_ack", "dup_ack_num", "ack_rel", "acked", "bytes_in_flight", "retx_kind",
               "spurious"]


def _scatter(n: int, rows, values, fill, dtype) -> np.ndarray:
    out = np.full(n, fill, dtype)
    out[rows] = values
    return out


class _AckRows:
    """The live ACK rows ``ai`` of a segment table (their fds ``afd``, start mask ``st``),
    their ACK numbers unwrapped into the other direction's relative sequence space, and
    what is derived from them, each computed once when first needed."""

    def __init__(self, seg, live):
        fd, flags = seg["fd"], seg["flags"]
        self.seg, self.n, self.tr = seg, len(fd), seg["tr"]
        self.span = rank_span(self.tr)
        # base of each fd's sequence space = raw seq of its first live TCP row
        base = np.full(int(fd.max()) + 2 if self.n else 2, -1, np.int64)
        if live.all():                                # (no MAC copy, no UDP: no gathers)
            firsts = np.flatnonzero(group_starts(fd))
        else:
            li = np.flatnonzero(live)
            firsts = li[group_starts(fd[li])]
            del li
        base[fd[firsts]] = seg["seq_raw"][firsts] - seg["rel_seq"][firsts]
        is_ack = (flags & TH_ACK) > 0
        is_ack &= live
        self.ai = ai = np.flatnonzero(is_ack)
        del is_ack
        self.every = len(ai) == self.n                # every row an ACK: no gathers
        self.afd = afd = fd if self.every else fd[ai]
        araw = seg["ack_raw"] if self.every else seg["ack_raw"][ai]
        self.st = st = group_starts(afd)
        ob = base[afd[st] ^ 1]
        self.ack = unwrap32(araw, st, np.where(ob >= 0, wrap32(araw[st] - ob), 0))

    @cached_property
    def dups(self):
        """Duplicate ACKs (over ``ai``) and their running count per ACK value."""
        seg, ai, ack, st = self.seg, self.ai, self.ack, self.st
        win = seg["win"][ai]
        same_prev = np.zeros(len(ai), bool)
        same_prev[1:] = (ack[1:] == ack[:-1]) & (win[1:] == win[:-1])
        same_prev &= ~st
        dup = same_prev & (seg["payload_len"][ai] == 0) & ((seg["flags"][ai] & (TH_SYN | TH_FIN | TH_RST)) == 0)
        run_start = np.ones(len(ai), bool)
        run_start[1:] = ack[1:] != ack[:-1]
        run_start |= st
        return dup, restart_cumsum(dup.astype(np.int64), run_start, inplace=True)

    @cached_property
    def acm(self):
        """Highest ACK so far within each ACK fd (``ack`` itself when it never falls: no copy)."""
        if not len(self.ai) or sorted_within(self.st, self.ack):
            return self.ack
        return grouped_cummax(self.afd, self.ack)

    def before(self, rows):
        """Index into ``ai`` of the last ACK the other side sent before each row (-1: none)."""
        tr = self.tr if self.every else self.tr[self.ai]
        return _last_before(self.afd, tr, self.seg["fd"][rows] ^ 1, self.tr[rows], self.span)


def ack_arrays(seg, min_rto_ns: int = MIN_RTO_NS, dupthresh: int = DUPTHRESH, free_raw: bool = False):
    """Acknowledgement analysis (see :func:`sniffsync.tcp.frames.analyze_acks`) of classified segments.

    Adds :data:`ACK_COLUMNS` to ``seg`` (a :class:`~sniffsync.tcp.columns.Lazy`);
    ``dup_ack``, ``dup_ack_num``, ``acked`` and ``bytes_in_flight`` are computed when
    first read (the fairness report needs them only at retransmissions). Returns the
    rows (ACK, data) of the Karn ACK samples and of all advancing ACKs (``ack_pairs``
    of :func:`sniffsync.tcp.rtt.rtt_arrays`); sets ``seg.inferred``
    (:func:`sniffsync.tcp.holes.inferred_arrays`). ``free_raw``: ``seq_raw`` and ``ack_raw``
    are removed from ``seg`` once read (a lower peak when no later stage reads them).
    """
    n = len(seg["fd"])
    if "tr" not in seg and "tr" not in getattr(seg, "thunks", ()):    # (a thunk: a group's share)
        seg["tr"] = time_rank(seg["row"], seg["ts_ns"])
    live = live_tcp(seg)
    flags = seg["flags"]
    a = _AckRows(seg, live)
    if free_raw:
        for name in ("seq_raw", "ack_raw"):
            if dict.__contains__(seg, name):
                del seg[name]
    seg["ack_rel"] = a.ack if a.every else _scatter(n, a.ai, a.ack, -1, np.int64)
    # bytes the sniffer missed that the receiver acknowledged (goodput across holes)
    seg.inferred = inferred_arrays(seg, live, a.ai, a.afd, a.acm)

    def in_flight():
        # like Wireshark's tcp.analysis.bytes_in_flight: highest end sent - highest ACK seen,
        # counting neither the SYN nor the FIN sequence number
        front = np.maximum(seg["frontier"], seg["seg_end"] - ((flags & TH_FIN) > 0))
        ok = seg["is_data"] & live & ((flags & TH_SYN) == 0)
        return np.where(ok, front - np.maximum(seg["acked"], 0), -1)

    seg.thunks.update({"dup_ack": lambda: _scatter(n, a.ai, a.dups[0], False, bool),
                       "dup_ack_num": lambda: _scatter(n, a.ai, np.where(a.dups[0], a.dups[1], 0), 0, np.int64),
                       "acked": lambda: _take(a.acm, a.before(np.arange(n)), -1),
                       "bytes_in_flight": in_flight})
    adv = advancing_rows(a.ai, a.afd, a.ack)
    pairs = ack_sample_rows(seg, live, adv, karn=True) + (adv,)
    # retransmission kind and spurious retransmissions, on the retransmitted rows only
    r = np.flatnonzero(seg["kind"] == KIND["retransmission"])
    kind = np.full(len(r), RETX["other"], np.int8)
    spur = np.zeros(len(r), bool)
    if len(r):
        j = a.before(r)
        kind = _retx_kinds(seg, live, a, r, j, pairs, min_rto_ns, dupthresh)
        spur = _spurious(seg, a, r, j)
    seg["retx_kind"] = _scatter(n, r, kind, RETX["none"], np.int8)
    seg["spurious"] = _scatter(n, r, spur, False, bool)
    return pairs


def _retx_kinds(seg, live, a: _AckRows, r, j, pairs, min_rto_ns: int, dupthresh: int) -> np.ndarray:
    """Kind codes of the retransmitted rows ``r`` (``j``: :meth:`_AckRows.before` of them):
    fast after ``dupthresh`` duplicate ACKs, timeout after a gap above the RTO, else other."""
    fd, ts = seg["fd"], seg["ts_ns"]
    kind = np.full(len(r), RETX["other"], np.int8)
    dup, dup_num = a.dups
    fast = (_take(a.ack, j, -2) == seg["rel_seq"][r]) & \
        (np.where(_take(dup, j, False), _take(dup_num, j, 0), 0) >= dupthresh)     # (dup_num * dup)[j]
    # gap since the previous data segment of the direction
    di = np.flatnonzero(seg["is_data"] & live)
    p = np.searchsorted(di, r) - 1
    pc = di[np.maximum(p, 0)]
    gap = np.where((p >= 0) & (fd[pc] == fd[r]), ts[r] - ts[pc], 0)
    rfd, rto = rto_arrays(fd[pairs[1]], ts[pairs[0]] - ts[pairs[1]], min_rto_ns)
    lut = np.full(max(int(fd.max()) + 1, int(rfd.max()) + 1 if len(rfd) else 1), min_rto_ns, np.int64)
    lut[rfd] = rto
    kind[fast] = RETX["fast"]
    kind[~fast & (gap > lut[fd[r]])] = RETX["timeout"]
    return kind


def _spurious(seg, a: _AckRows, r, j) -> np.ndarray:
    """Spurious retransmissions among the rows ``r``: (a) already ACKed at the capture
    point; (b) Eifel (RFC 3522): the first ACK covering it echoes an older TSval."""
    fd = seg["fd"]
    end = seg["seg_end"][r]
    spur = _take(a.acm, j, -1) >= end
    e = np.flatnonzero(~spur)
    ai, afd = a.ai, a.afd
    if len(e) and len(ai):
        comp = np.maximum(a.acm, -SEQ_SPAN // 2)         # (fd, highest ACK), one temporary less
        comp += afd * SEQ_SPAN
        k = np.searchsorted(comp, (fd[r[e]] ^ 1) * SEQ_SPAN + end[e], side="left")
        k = np.maximum(k, j[e] + 1)
        kk = np.minimum(k, len(ai) - 1)
        found = (k < len(ai)) & (afd[kk] == (fd[r[e]] ^ 1))
        tsecr = seg["tsecr"][ai[kk]]
        tsval = seg["tsval"][r[e]]
        older = wrap32(tsecr - tsval) < 0
        spur[e] = found & (tsecr >= 0) & (tsval >= 0) & older
    return spur
