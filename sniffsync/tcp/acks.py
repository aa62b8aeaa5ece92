"""Pandas-free core of :mod:`sniffsync.tcp_rtt`: ACK analysis, RTT samples, RTO, handshake.

Works on the segment columns of :mod:`sniffsync.flows_core` (rows sorted by fd, time,
input row). Cross-direction questions ("the last ACK the other side sent before this
segment") are one ``searchsorted`` on a composite key ``fd * (N + 1) + time_rank``.
:func:`ack_arrays` adds its columns to the segment mapping it is given; the others
return new columns.
"""
from __future__ import annotations

import numpy as np

from sniffsync.tcp.core import (KIND, SEQ_SPAN, TH_ACK, TH_FIN, TH_RST, TH_SYN, diff32, group_starts,
                         grouped_cummax, is_sorted, lex_order, live_tcp, restart_cumsum, sorted_within,
                         wrap32)

__all__ = ["RETX_NAMES", "RETX", "DUPTHRESH", "MIN_RTO_NS", "SOURCES", "ACK_COLUMNS", "time_rank",
           "ack_arrays", "rtt_arrays", "rto_arrays", "group_median", "handshake_arrays"]

RETX_NAMES = np.array(["none", "fast", "timeout", "other"])
RETX = {name: i for i, name in enumerate(RETX_NAMES)}
DUPTHRESH = 3                    # RFC 5681 duplicate-ACK threshold
MIN_RTO_NS = 200_000_000         # Linux TCP_RTO_MIN; RFC 6298 says 1 s
SOURCES = np.array(["ack", "tsecr"], dtype=object)   # rtt sample ``source`` codes


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


def _last_before(key_fd, key_tr, q_fd, q_tr, n) -> np.ndarray:
    """Index into the (fd, tr)-sorted keys of the last row of fd ``q_fd`` with tr < ``q_tr``; -1 if none."""
    if not len(key_fd):
        return np.full(len(q_fd), -1, np.int64)
    comp = key_fd * (n + 1) + key_tr
    j = np.searchsorted(comp, q_fd * (n + 1) + q_tr, side="left") - 1
    ok = (j >= 0) & (key_fd[np.maximum(j, 0)] == q_fd)
    return np.where(ok, j, -1)


def _take(arr: np.ndarray, j: np.ndarray, fill) -> np.ndarray:
    """``arr[j]`` where ``j >= 0``, else ``fill`` (works for an empty ``arr``)."""
    padded = np.append(arr, np.asarray(fill, arr.dtype))
    return padded[np.where(j >= 0, j, len(arr))]


ACK_COLUMNS = ["tr", "dup_ack", "dup_ack_num", "ack_rel", "acked", "bytes_in_flight", "retx_kind",
               "spurious"]


def ack_arrays(seg, min_rto_ns: int = MIN_RTO_NS, dupthresh: int = DUPTHRESH):
    """Acknowledgement analysis (see ``tcp_rtt.analyze_acks``) of classified segments.

    Adds :data:`ACK_COLUMNS` to ``seg`` (a :class:`sniffsync.flows_core.Lazy`);
    ``dup_ack``, ``dup_ack_num``, ``acked`` and ``bytes_in_flight`` are computed when
    first read (the fairness report needs them only at retransmissions). Returns the
    rows (ACK, data) of the Karn ACK samples and of all advancing ACKs (``ack_pairs``
    of :func:`rtt_arrays`).
    """
    fd = seg["fd"]
    n = len(fd)
    ts = seg["ts_ns"]
    tr = seg["tr"] if "tr" in seg else time_rank(seg["row"], ts)
    seg["tr"] = tr
    live = live_tcp(seg)
    flags = seg["flags"]
    rel = seg["rel_seq"]

    # base of each fd's sequence space = raw seq of its first live TCP row
    base = np.full(int(fd.max()) + 2 if n else 2, -1, np.int64)
    li = np.flatnonzero(live)
    firsts = li[group_starts(fd[li])]
    base[fd[firsts]] = seg["seq_raw"][firsts] - rel[firsts]

    # ACK numbers unwrapped into the other direction's space
    ai = np.flatnonzero(live & ((flags & TH_ACK) > 0))
    every = len(ai) == n                       # every row an ACK: no gathers
    afd = fd if every else fd[ai]
    araw = seg["ack_raw"] if every else seg["ack_raw"][ai]
    d = diff32(araw)
    st = group_starts(afd)
    ob = base[afd[st] ^ 1]
    d[st] = np.where(ob >= 0, wrap32(araw[st] - ob), 0)
    ack = restart_cumsum(d, st)
    if every:
        ack_rel = seg["ack_rel"] = ack
    else:
        ack_rel = seg["ack_rel"] = np.full(n, -1, np.int64)
        ack_rel[ai] = ack
    memo = {}

    def dups():
        """Duplicate ACKs (over ``ai``) and their running count per ACK value."""
        if "dup" not in memo:
            win = seg["win"][ai]
            same_prev = np.zeros(len(ai), bool)
            same_prev[1:] = (ack[1:] == ack[:-1]) & (win[1:] == win[:-1])
            same_prev &= ~st
            dup = same_prev & (seg["payload_len"][ai] == 0) & ((flags[ai] & (TH_SYN | TH_FIN | TH_RST)) == 0)
            run_start = np.ones(len(ai), bool)
            run_start[1:] = ack[1:] != ack[:-1]
            run_start |= st
            memo["dup"] = dup, restart_cumsum(dup.astype(np.int64), run_start)
        return memo["dup"]

    def acm():
        """Highest ACK so far within each ACK fd."""
        if "acm" not in memo:
            memo["acm"] = grouped_cummax(afd, ack) if len(ai) else ack
        return memo["acm"]

    def before(rows):
        """Index into ``ai`` of the last ACK the other side sent before each row (-1: none)."""
        return _last_before(afd, tr[ai], fd[rows] ^ 1, tr[rows], n)

    def scatter(rows, values, fill, dtype):
        out = np.full(n, fill, dtype)
        out[rows] = values
        return out

    def acked():
        return _take(acm(), before(np.arange(n)), -1)

    def in_flight():
        # like Wireshark's tcp.analysis.bytes_in_flight: highest end sent - highest ACK seen,
        # counting neither the SYN nor the FIN sequence number
        front = np.maximum(seg["frontier"], seg["seg_end"] - ((flags & TH_FIN) > 0))
        ok = seg["is_data"] & live & ((flags & TH_SYN) == 0)
        return np.where(ok, front - np.maximum(seg["acked"], 0), -1)

    seg.thunks.update({"dup_ack": lambda: scatter(ai, dups()[0], False, bool),
                       "dup_ack_num": lambda: scatter(ai, np.where(dups()[0], dups()[1], 0), 0, np.int64),
                       "acked": acked, "bytes_in_flight": in_flight})
    adv = _advancing(ai, afd, ack)
    pairs = _ack_pairs(seg, live, adv, karn=True) + (adv,)

    # retransmission kind and spurious retransmissions, on the retransmitted rows only
    r = np.flatnonzero(seg["kind"] == KIND["retransmission"])
    kind = np.full(len(r), RETX["other"], np.int8)
    spur = np.zeros(len(r), bool)
    if len(r):
        j = before(r)
        dup, dup_num = dups()
        fast = (_take(ack, j, -2) == rel[r]) & (_take(dup_num * dup, j, 0) >= dupthresh)
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
        # spurious: (a) already ACKed at the capture point; (b) Eifel via TSecr
        end = seg["seg_end"][r]
        spur = _take(acm(), j, -1) >= end
        e = np.flatnonzero(~spur)
        if len(e) and len(ai):
            comp = afd * SEQ_SPAN + np.clip(acm(), -SEQ_SPAN // 2, None)
            k = np.searchsorted(comp, (fd[r[e]] ^ 1) * SEQ_SPAN + end[e], side="left")
            k = np.maximum(k, j[e] + 1)
            kk = np.minimum(k, len(ai) - 1)
            found = (k < len(ai)) & (afd[kk] == (fd[r[e]] ^ 1))
            tsecr = seg["tsecr"][ai[kk]]
            tsval = seg["tsval"][r[e]]
            older = wrap32(tsecr - tsval) < 0
            spur[e] = found & (tsecr >= 0) & (tsval >= 0) & older
    seg["retx_kind"] = scatter(r, kind, RETX["none"], np.int8)
    seg["spurious"] = scatter(r, spur, False, bool)
    return pairs


def group_median(key: np.ndarray, values: np.ndarray):
    """``(keys, medians)`` per distinct ``key`` (ascending), as pandas' groupby median.

    The median of an even group is ``(a + b) / 2`` of its two middle values in float64.
    """
    if not len(key):
        return key[:0], np.zeros(0)
    if is_sorted(key) and key[-1] - key[0] < 64:
        # few groups, already together: select the middle values of each (no sort)
        head = np.flatnonzero(group_starts(key))
        bounds = np.append(head, len(key))
        med = np.empty(len(head))
        for g, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
            c = b - a
            mid = np.partition(values[a:b], [(c - 1) // 2, c // 2])
            med[g] = (float(mid[(c - 1) // 2]) + float(mid[c // 2])) / 2
        return key[head], med
    vmin = int(values.min())
    span = int(values.max()) - vmin + 1
    if int(key.min()) >= 0 and (int(key.max()) + 1) * span < 1 << 62:
        comp = np.sort(key * np.int64(span) + (values - vmin))
        k, v = comp // span, comp % span + vmin
    else:
        o = np.lexsort((values, key))
        k, v = key[o], values[o]
    head = np.flatnonzero(group_starts(k))
    cnt = np.diff(np.append(head, len(k)))
    a = v[head + (cnt - 1) // 2].astype(np.float64)
    b = v[head + cnt // 2].astype(np.float64)
    return k[head], (a + b) / 2


def rto_arrays(fd: np.ndarray, rtt_ns: np.ndarray, min_rto_ns: int = MIN_RTO_NS):
    """Per-fd RTO estimate ``max(min_rto, median + 4 * mean |RTT - median|)``: ``(fds, rto_ns)``."""
    fds, med = group_median(fd, rtt_ns)
    if not len(fds):
        return fds, np.zeros(0, np.int64)
    gid = np.searchsorted(fds, fd)
    # twice |rtt - median| is an integer: the sums are exact, as pandas' (Kahan) sums are
    dev2 = np.abs(2 * rtt_ns - (2 * med)[gid].astype(np.int64))
    o = np.argsort(gid, kind="stable") if not is_sorted(gid) else slice(None)
    g = gid[o]
    head = np.flatnonzero(group_starts(g))
    tot = np.add.reduceat(dev2[o], head)
    cnt = np.diff(np.append(head, len(g)))
    if tot.max() >= 1 << 53:                      # beyond exact float sums: let pandas decide
        import pandas as pd
        s = pd.Series(rtt_ns)
        mad = (s - pd.Series(med[gid])).abs().groupby(fd).mean().to_numpy()
    else:
        mad = tot.astype(np.float64) / 2 / cnt
    est = med + 4 * mad
    return fds, np.maximum(est, min_rto_ns).astype(np.int64)


def rtt_arrays(seg, karn: bool = True, tsecr: bool = True, tsecr_fds=None, ack_pairs=None) -> dict:
    """RTT samples at the capture point (see ``tcp_rtt.rtt_samples``).

    ``tsecr_fds``: boolean lookup by fd limiting the TSecr samples to those data
    directions (the fairness report keeps them only for flows without ACK samples);
    ``ack_pairs``: the ACK samples' rows when already known (:func:`ack_arrays`).
    Returns ``fd``, ``flow``, ``ts_ns``, ``rtt_ns``, ``source`` (code into
    :data:`SOURCES`), ``data_row``, ``ack_row``, sorted by (fd, ts_ns, source).
    """
    live = live_tcp(seg)
    if ack_pairs is not None:
        a0, f0, adv = ack_pairs
    else:
        adv = _advancing_acks(seg, live)
        a0, f0 = _ack_pairs(seg, live, adv, karn)
    parts = [(a0, f0, 0)]
    if tsecr:
        parts.append(_tsecr_pairs(seg, live, adv, tsecr_fds) + (1,))
    a = np.concatenate([p[0] for p in parts])
    f = np.concatenate([p[1] for p in parts])
    src = np.concatenate([np.full(len(p[0]), p[2], np.int64) for p in parts])
    fd, ts, row = seg["fd"], seg["ts_ns"], seg["row"]
    o = lex_order(fd[f], ts[a], src) if len(a) else np.zeros(0, np.int64)
    a, f = a[o], f[o]
    return {"fd": fd[f], "flow": fd[f] >> 1, "ts_ns": ts[a], "rtt_ns": ts[a] - ts[f],
            "source": src[o], "data_row": row[f], "ack_row": row[a]}


def _advancing_acks(seg, live) -> np.ndarray:
    """Rows of ACKs that raise their direction's cumulative ACK (acknowledge new data)."""
    ai = np.flatnonzero(live & (seg["ack_rel"] >= 0))
    return _advancing(ai, seg["fd"][ai], seg["ack_rel"][ai])


def _advancing(ai: np.ndarray, afd: np.ndarray, ack: np.ndarray) -> np.ndarray:
    """The rows ``ai`` (ACK numbers ``ack``, fds ``afd``) whose ACK is >= 0 and above every
    earlier one of its fd."""
    ok = ack >= 0
    if not ok.all():
        ai, afd, ack = ai[ok], afd[ok], ack[ok]
    if not len(ai):
        return ai
    starts = group_starts(afd)
    cm = ack if sorted_within(starts, ack) else grouped_cummax(afd, ack)
    up = np.empty(len(ai), bool)
    up[0] = True                                   # ack >= 0 > "nothing acknowledged yet"
    np.greater(ack[1:], cm[:-1], out=up[1:])
    up |= starts
    return ai[up]


def _ack_pairs(seg, live, adv, karn: bool):
    """(ACK row, data row) of every ACK sample: the ACK raises the cumulative ACK to
    exactly the end of an earlier data segment (Karn: sent once, no retransmission between)."""
    fd, tr = seg["fd"], seg["tr"]
    n = len(fd)
    # data rows keyed by (fd, seg_end), in time order within a key
    di = np.flatnonzero(live & seg["is_data"])
    if not len(di):
        return adv[:0], adv[:0]
    f, e = fd[di], seg["seg_end"][di]
    if e.min() >= -SEQ_SPAN // 2 and e.max() < SEQ_SPAN // 2 and f[-1] < 1 << 21:
        key = f * SEQ_SPAN + e
        if not is_sorted(key):
            o = np.argsort(key, kind="stable")
            di, key = di[o], key[o]
    else:
        o = np.lexsort((e, f))
        di, key = di[o], f[o] * SEQ_SPAN + e[o]
    fa = fd[adv]
    q = (fa ^ 1) * SEQ_SPAN + seg["ack_rel"][adv]
    lo = np.searchsorted(key, q, side="left")
    lo_c = np.minimum(lo, len(di) - 1)
    first = di[lo_c]
    t_adv = tr[adv]
    ok = (lo < len(di)) & (key[lo_c] == q) & (tr[first] < t_adv)
    if karn:
        nxt = np.minimum(lo_c + 1, len(di) - 1)
        ok &= ~((lo_c + 1 < len(di)) & (key[nxt] == q) & (tr[di[nxt]] < t_adv))
        rx = np.flatnonzero(live & (seg["kind"] == KIND["retransmission"]))
        if len(rx):
            rcomp = fd[rx] * (n + 1) + tr[rx]       # sorted: seg is sorted by (fd, ts, row)
            dfd = fa ^ 1                               # = fd[first] where ok
            between = (np.searchsorted(rcomp, dfd * (n + 1) + t_adv) -
                       np.searchsorted(rcomp, dfd * (n + 1) + tr[first], side="right"))
            ok &= between == 0
    return adv[ok], first[ok]


def _first_rows(key: np.ndarray) -> np.ndarray:
    """Positions of the first occurrence of each distinct ``key``, in position order."""
    o = np.arange(len(key)) if is_sorted(key) else np.argsort(key, kind="stable")
    return np.sort(o[group_starts(key[o])])


def _tsecr_pairs(seg, live, adv, tsecr_fds):
    """(ACK row, data row) pairs: the first advancing ACK echoing each data direction's first TSval."""
    fd, tr = seg["fd"], seg["tr"]
    tv = seg["tsval"]
    dmask = live & seg["is_data"] & (tv >= 0)
    te = seg["tsecr"]
    ea = adv[te[adv] >= 0]
    if tsecr_fds is not None:                     # only the directions the caller keeps
        dmask &= tsecr_fds[fd]
        ea = ea[tsecr_fds[fd[ea] ^ 1]]
    dv = np.flatnonzero(dmask)
    if not len(dv) or not len(ea):
        return ea[:0], ea[:0]
    # (fd, tsval) in one int64: tsval is 32-bit
    fkey = fd[dv] * (np.int64(1) << 32) + tv[dv]
    fi = dv[_first_rows(fkey)]
    fk = fd[fi] * (np.int64(1) << 32) + tv[fi]
    o = np.argsort(fk, kind="stable")
    fk, fi = fk[o], fi[o]
    # inner join on the key, in ACK order: keep the ACKs whose key has a data row, then
    # the first ACK of each key (the data rows are unique per key)
    ekey = (fd[ea] ^ 1) * (np.int64(1) << 32) + te[ea]
    pos = np.minimum(np.searchsorted(fk, ekey), len(fk) - 1)
    hit = fk[pos] == ekey
    ea, pos = ea[hit], pos[hit]
    first = _first_rows(ekey[hit])
    a, f = ea[first], fi[pos[first]]
    keep = tr[f] < tr[a]
    return a[keep], f[keep]


def handshake_arrays(seg) -> dict:
    """SYN -> SYN/ACK -> ACK timing per TCP flow (see ``tcp_rtt.handshake_rtt``)."""
    live = live_tcp(seg)
    fl = seg["flags"] & (TH_SYN | TH_ACK)
    fd = seg["fd"]
    d = fd & 1                                  # fd = 2 * flow + dir
    tr, ts = seg["tr"], seg["ts_ns"]
    n = len(tr)

    def flow(rows):
        return fd[rows] >> 1
    # rows of one (flow, dir) are in time order: the first SYN/ACK of each flow
    sa = np.flatnonzero(live & (fl == (TH_SYN | TH_ACK)) & (d == 1))
    sa = sa[group_starts(flow(sa))]
    # rows are sorted by (fd, time): the row where the SYN/ACK's time falls in the
    # initiator's direction is one search over the (fd, time rank) key of every row
    at = np.searchsorted(fd * (n + 1) + tr, (fd[sa] ^ 1) * (n + 1) + tr[sa])
    init = live & (d == 0)

    def lookup(mask, side):
        rows = np.flatnonzero(init & mask)
        j = np.searchsorted(rows, at) - (side == "left")
        jc = np.clip(j, 0, max(len(rows) - 1, 0))
        ok = (j >= 0) & (j < len(rows)) & (flow(rows[jc]) == flow(sa)) if len(rows) else np.zeros(len(sa), bool)
        return (rows[jc] if len(rows) else jc), ok

    syn, ok_s = lookup(fl == TH_SYN, "left")        # the last SYN before the SYN/ACK
    ack, ok_a = lookup(fl == TH_ACK, "right")       # the first ACK after it
    ok = ok_s & ok_a
    syn_ns, sa_ns, ack_ns = ts[syn[ok]], ts[sa[ok]], ts[ack[ok]]
    return {"flow": flow(sa[ok]), "syn_ns": syn_ns, "synack_ns": sa_ns, "ack_ns": ack_ns,
            "hs_rtt_ns": ack_ns - syn_ns, "server_ns": sa_ns - syn_ns, "client_ns": ack_ns - sa_ns}
