"""Sequence analysis of the segment columns (pandas-free core of
``flows.classify_segments``): relative sequence numbers, frontier, new bytes, sequence
class, and the in-order delivery time of every data segment.

Rows are sorted by (fd, time, input row) (:func:`sniffsync.flows_core.segment_arrays`).
The frontier tests run on the data rows only; the common case (every segment sent once,
in order) is recognised with a few comparisons and skips the sorts.
"""
from __future__ import annotations

import numpy as np

from sniffsync.tcp.core import (KIND, SEQ_SPAN, TH_FIN, TH_SYN, diff32, group_starts, grouped_cummax,
                         is_proto, is_sorted, lex_order, restart_cumsum, sorted_within)

__all__ = ["CLASSIFY_COLUMNS", "classify_arrays", "in_order_delivery"]


def _unwrap32(raw: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Unwrap 32-bit sequence numbers per fd: successive values differ by < 2**31."""
    d = diff32(raw)
    d[starts] = 0
    return restart_cumsum(d, starts)


def _sub(a: np.ndarray, idx) -> np.ndarray:
    return a if idx is None else a[idx]


def _seen_before(key: np.ndarray) -> np.ndarray:
    """True where ``key`` occurred at an earlier position (``DataFrame.duplicated``)."""
    o = np.arange(len(key)) if is_sorted(key) else np.argsort(key, kind="stable")
    dup = np.empty(len(key), bool)
    dup[o] = ~group_starts(key[o])
    return dup


def in_order_delivery(seg, tcp: np.ndarray, rel: np.ndarray) -> np.ndarray:
    """When each data segment's bytes reach the receiver's application, as seen on the air.

    A segment arrives with its LAST transmission (MAC retry or TCP retransmission of the
    same first byte: the ones before it failed), and the application gets its bytes once
    every earlier byte has arrived: the running maximum of arrival times in sequence order.
    So bytes sent past a lost MPDU are dated when the retry fills the hole (the receiver's
    reorder buffer), not when first seen. Other rows keep their capture time.
    """
    ts = seg["ts_ns"]
    out = ts.copy()
    fd = seg["fd"]
    plen = seg["payload_len"]
    data = is_proto(seg, 6) & (plen > 0)
    di = np.flatnonzero(data)
    if not len(di):
        return out
    if tcp[di].all():
        # no MAC copy, and each fd's relative sequence numbers strictly increase over less
        # than 2**32: every segment was sent once, in sequence order -> delivered when seen
        rr = rel[di]
        if int(rr.max()) - int(rr.min()) < 1 << 32 and \
                ((rr[1:] > rr[:-1]) | group_starts(fd[di])[1:]).all():
            return out
    # last transmission of each (fd, raw first byte), MAC copies included: (fd, seq_raw)
    # in one int64, seq_raw rotated to start at the fd's first one (usually no wrap, so
    # the key is already sorted); -1 = null
    f = fd[di]
    sr = seg["seq_raw"][di]
    head = group_starts(f)
    base = np.zeros(int(f[-1]) + 1, np.int64)
    base[f[head]] = sr[head]
    key = f * (np.int64(1) << 33) + np.where(sr >= 0, ((sr - base[f]) & 0xFFFFFFFF) + 1, 0)
    rows = np.flatnonzero(data & tcp)
    if is_sorted(key) and (len(key) < 2 or (key[1:] != key[:-1]).all()):
        arr = ts[rows]                                  # every segment sent once
    else:
        o = np.argsort(key, kind="stable")
        k_head = group_starts(key[o])
        last = np.maximum.reduceat(ts[di][o], np.flatnonzero(k_head))
        gid = np.empty(len(di), np.int64)
        gid[o] = np.cumsum(k_head) - 1
        pos = np.full(len(ts), -1, np.int64)
        pos[di] = gid
        arr = last[pos[rows]]
    fr, rr = fd[rows], rel[rows]
    starts = group_starts(fr)
    if sorted_within(starts, rr):                     # sequence order = time order
        if sorted_within(starts, arr):
            out[rows] = arr
        else:
            out[rows] = grouped_cummax(fr, arr)
        return out
    order = lex_order(fr, rr)                          # sequence order within each fd
    out[rows[order]] = grouped_cummax(fr[order], arr[order])
    return out


CLASSIFY_COLUMNS = ["rel_seq", "seg_end", "is_data", "frontier", "new_bytes", "kind", "deliver_ns"]


def classify_arrays(seg) -> None:
    """Relative sequence numbers, new bytes and sequence class (see ``flows.classify_segments``).

    Adds :data:`CLASSIFY_COLUMNS` to ``seg`` (a :class:`Lazy`; ``frontier`` is computed
    when first read). The frontier tests run on the data rows only: pure ACKs neither
    move a frontier nor carry new bytes. With a thread ``pool``, ``deliver_ns`` is
    computed on it (reading it waits).
    """
    fd_all = seg["fd"]
    n = len(fd_all)
    mac_dup = seg["mac_dup"]
    tcp = is_proto(seg, 6) & ~mac_dup
    idx = None if tcp.all() else np.flatnonzero(tcp)     # None: every row

    def put(rows, values, fill, dtype):
        """Full-length column of ``values`` on ``rows`` (indices into the TCP rows)."""
        if isinstance(rows, slice) and idx is None:
            return values.astype(dtype, copy=False)
        full = np.full(n, fill, dtype)
        full[rows if idx is None else idx[rows]] = values
        return full

    fd = _sub(fd_all, idx)
    starts = group_starts(fd)
    r = _unwrap32(_sub(seg["seq_raw"], idx), starts)
    flags = _sub(seg["flags"], idx)
    plen = _sub(seg["payload_len"], idx)
    syn = (flags & TH_SYN) > 0                  # bool: adds as 0/1
    end = r + plen + syn + ((flags & TH_FIN) > 0)
    data = end > r
    # "nothing sent yet": a value below every sequence number (and small enough for
    # grouped_cummax's bands)
    none = min(int(r.min()), int(end.min()), 0) - 1 if len(r) else -1

    # frontier of each data row: highest seg_end of the earlier data rows of its fd
    dd = np.flatnonzero(data)
    f, rd, ed, pl = fd[dd], r[dd], end[dd], plen[dd]
    d_starts = group_starts(f)
    cm = grouped_cummax(f, ed)
    prev = np.empty_like(cm)
    prev[1:] = cm[:-1]
    prev[d_starts] = none
    # goodput counts payload only: bytes [r + SYN, r + SYN + payload) above the frontier
    p0 = rd + syn[dd]
    new_bytes = np.clip(p0 + pl - np.maximum(prev, p0), 0, pl)
    kind = np.full(len(dd), KIND["new"], np.int8)         # codes: one byte per row
    below = np.flatnonzero(ed <= prev)
    if len(below):
        # same first byte sent earlier in this fd -> retransmission
        seen = _seen_before(f * SEQ_SPAN + rd)
        # hole test: first earlier row whose cummax passed rel_seq; a hole if it started above us
        comp = f * SEQ_SPAN + np.clip(cm, -SEQ_SPAN // 2, None)
        b = below
        k = np.minimum(np.searchsorted(comp, f[b] * SEQ_SPAN + rd[b], side="right"), len(dd) - 1)
        in_hole = (f[k] == f[b]) & (k < b) & (rd[b] < rd[k])
        kind[b] = np.where(~seen[b] & in_hole, KIND["out_of_order"], KIND["retransmission"])
    # keepalive: zero/one byte at frontier - 1
    ka = np.flatnonzero(pl <= 1)
    ka = ka[(rd[ka] == prev[ka] - 1) & ((flags[dd[ka]] & (TH_SYN | TH_FIN)) == 0)]
    kind[ka] = KIND["keepalive"]
    # the frontier jumped over the hole without counting it: its first sending is goodput
    ooo = below[kind[below] == KIND["out_of_order"]]
    new_bytes[ooo] = pl[ooo]
    del f, rd, ed, pl, cm, prev, p0, d_starts, below, ka, ooo, syn, plen, flags   # (a lower peak)

    def frontier():
        cm_all = grouped_cummax(fd, np.where(data, end, none))
        p = np.empty_like(cm_all)
        p[1:] = cm_all[:-1]
        p[starts] = none
        return put(slice(None), np.maximum(p, -1), -1, np.int64)

    every = slice(None)
    seg["rel_seq"] = rel = put(every, r, -1, np.int64)
    seg["seg_end"] = put(every, end, -1, np.int64)
    is_data = seg["is_data"] = put(every, data, False, bool)
    seg.thunks["frontier"] = frontier
    nb = seg["new_bytes"] = put(dd, new_bytes, 0, np.int64)
    kd = seg["kind"] = put(dd, kind, KIND["none"], np.int8)
    del new_bytes, kind, dd
    seg["deliver_ns"] = in_order_delivery(seg, tcp, rel)
    # UDP: every datagram is new payload (no sequence numbers to judge by)
    udp = np.flatnonzero(is_proto(seg, 17) & ~mac_dup)
    if len(udp):
        pl = seg["payload_len"][udp]
        nb[udp] = pl
        is_data[udp] = pl > 0
        kd[udp[pl > 0]] = KIND["new"]
