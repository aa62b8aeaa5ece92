"""Sequence analysis of the segment table: relative sequence numbers, frontier, new
bytes, sequence class, and the in-order delivery time of every data segment.

Rows are sorted by (fd, time, input row) (:func:`sniffsync.tcp.segments.segment_arrays`).
The frontier tests run on the data rows only; the common case (every segment sent once,
in order) is recognised with a few comparisons and skips the sorts.
"""
from __future__ import annotations

import numpy as np

from sniffsync.tcp.columns import (SEQ_SPAN, fd_slices, group_starts, grouped_cummax, is_sorted, pair_order,
                                   sorted_within, unwrap32)
from sniffsync.tcp.segments import TH_FIN, TH_SYN, is_proto

__all__ = ["KIND_NAMES", "KIND", "CLASSIFY_COLUMNS", "classify_arrays", "in_order_delivery"]

# per-segment sequence class, indexed by code (a declarative table, not an if-chain)
KIND_NAMES = np.array(["none", "new", "retransmission", "out_of_order", "keepalive"])
KIND = {name: i for i, name in enumerate(KIND_NAMES)}


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
    out = seg["ts_ns"].copy()
    data = is_proto(seg, 6) & (seg["payload_len"] > 0)
    cols = [seg[c] for c in ("ts_ns", "fd", "seq_raw")]
    # per flow direction: one group of whole fds at a time (their temporaries only)
    for sl in fd_slices(cols[1]):
        _deliver(out[sl], *(c[sl] for c in cols), data[sl], tcp[sl], rel[sl])
    return out


def _deliver(out, ts, fd, seq_raw, data, tcp, rel) -> None:
    """:func:`in_order_delivery` of whole flow directions, written into ``out``."""
    di = np.flatnonzero(data)
    if not len(di):
        return
    if tcp[di].all():
        # no MAC copy, and each fd's relative sequence numbers strictly increase over less
        # than 2**32: every segment was sent once, in sequence order -> delivered when seen
        rr = rel[di]
        if int(rr.max()) - int(rr.min()) < 1 << 32 and \
                ((rr[1:] > rr[:-1]) | group_starts(fd[di])[1:]).all():
            return
    # last transmission of each (fd, raw first byte), MAC copies included: (fd, seq_raw)
    # in one int64, seq_raw rotated to start at the fd's first one (usually no wrap, so
    # the key is already sorted); -1 = null
    f = fd[di]
    sr = seq_raw[di]
    head = group_starts(f)
    base = np.zeros(int(f[-1]) + 1, np.int64)
    base[f[head]] = sr[head]
    key = sr - base[f]                                 # (in place: one temporary at a time)
    key &= 0xFFFFFFFF
    key += 1
    key[sr < 0] = 0
    del sr
    key += f << np.int64(33)
    in_tcp = tcp[di]
    rows = di[in_tcp]                                  # = flatnonzero(data & tcp)
    if is_sorted(key) and (len(key) < 2 or (key[1:] != key[:-1]).all()):
        arr = ts[rows]                                  # every segment sent once
    else:
        o = np.argsort(key, kind="stable")
        k_head = group_starts(key[o])
        del key
        last = np.maximum.reduceat(ts[di[o]], np.flatnonzero(k_head))
        gid = np.empty(len(di), np.int64)
        gid[o] = np.cumsum(k_head) - 1
        del o, k_head
        arr = last[gid[in_tcp]]                         # rows are the di with in_tcp, in order
        del gid
    fr, rr = fd[rows], rel[rows]
    starts = group_starts(fr)
    if sorted_within(starts, rr):                     # sequence order = time order
        out[rows] = arr if sorted_within(starts, arr) else grouped_cummax(fr, arr)
        return
    order = pair_order(fr, rr)                         # sequence order within each fd
    out[rows[order]] = grouped_cummax(fr[order], arr[order])


CLASSIFY_COLUMNS = ["rel_seq", "seg_end", "is_data", "frontier", "new_bytes", "kind", "deliver_ns"]


def _data_classes(fd, r, end, plen, flags, none):
    """Frontier tests on the data rows of the live TCP rows (columns ``fd``, unwrapped
    ``r``, ``end``, ``plen``, ``flags``; ``none``: below every sequence number).

    Returns ``(dd, new_bytes, kind)``: positions of the data rows, their new bytes and
    their sequence class codes.
    """
    dd = np.flatnonzero(end > r)
    # frontier of each data row: highest seg_end of the earlier data rows of its fd
    f, rd, ed, pl = fd[dd], r[dd], end[dd], plen[dd]
    syn = (flags[dd] & TH_SYN) > 0              # bool: adds as 0/1
    cm = grouped_cummax(f, ed, copy=False)            # (read only)
    prev = np.empty_like(cm)
    prev[1:] = cm[:-1]
    prev[group_starts(f)] = none
    # goodput counts payload only: bytes [r + SYN, r + SYN + payload) above the frontier
    p0 = rd + syn
    new_bytes = np.maximum(prev, p0)                  # (in place: two temporaries, not four)
    np.subtract(p0 + pl, new_bytes, out=new_bytes)
    np.clip(new_bytes, 0, pl, out=new_bytes)
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
    return dd, new_bytes, kind


def _frontier(fd_all, is_data, seg_end, tcp: np.ndarray, none: int) -> np.ndarray:
    """``frontier`` of :func:`classify_arrays` (``tcp``: its TCP rows, ``none``: below every
    sequence number), from the columns it wrote: the highest ``seg_end`` of the earlier
    data rows of each fd (-1: none)."""
    idx = None if tcp.all() else np.flatnonzero(tcp)
    fd = _sub(fd_all, idx)
    cm = grouped_cummax(fd, np.where(_sub(is_data, idx), _sub(seg_end, idx), none), copy=False)
    p = np.empty_like(cm)
    p[1:] = cm[:-1]
    p[group_starts(fd)] = none
    if idx is None:
        return np.maximum(p, -1)
    out = np.full(len(tcp), -1, np.int64)
    out[idx] = np.maximum(p, -1)
    return out


def classify_arrays(seg) -> None:
    """Relative sequence numbers, new bytes and sequence class of every segment.

    Adds :data:`CLASSIFY_COLUMNS` to ``seg`` (a :class:`~sniffsync.tcp.columns.Lazy`;
    ``frontier`` is computed when first read); meanings in
    :func:`sniffsync.tcp.frames.classify_segments`. The frontier tests run on the data
    rows only: pure ACKs neither move a frontier nor carry new bytes.
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
    r = unwrap32(_sub(seg["seq_raw"], idx), starts)
    flags = _sub(seg["flags"], idx)
    end = r + _sub(seg["payload_len"], idx)
    end += (flags & TH_SYN) > 0                      # (in place: one full-length array)
    end += (flags & TH_FIN) > 0
    data = end > r
    # "nothing sent yet": a value below every sequence number (and small enough for
    # grouped_cummax's bands)
    none = min(int(r.min()), int(end.min()), 0) - 1 if len(r) else -1
    dd, new_bytes, kind = _data_classes(fd, r, end, _sub(seg["payload_len"], idx), flags, none)

    every = slice(None)
    seg["rel_seq"] = rel = put(every, r, -1, np.int64)
    se = seg["seg_end"] = put(every, end, -1, np.int64)
    is_data = seg["is_data"] = put(every, data, False, bool)
    # from the written columns: the thunk holds none of the temporaries below
    seg.thunks["frontier"] = lambda: _frontier(fd_all, is_data, se, tcp, none)
    nb = seg["new_bytes"] = put(dd, new_bytes, 0, np.int64)
    kd = seg["kind"] = put(dd, kind, KIND["none"], np.int8)
    del fd, starts, r, flags, end, data, dd, new_bytes, kind, put, idx   # not held while the delivery runs
    seg["deliver_ns"] = in_order_delivery(seg, tcp, rel)
    # UDP: every datagram is new payload (no sequence numbers to judge by)
    udp = np.flatnonzero(is_proto(seg, 17) & ~mac_dup)
    if len(udp):
        pl = seg["payload_len"][udp]
        nb[udp] = pl
        is_data[udp] = pl > 0
        kd[udp[pl > 0]] = KIND["new"]
