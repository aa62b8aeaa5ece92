"""Round-trip times at the capture point: ACK samples (Karn's rule), TSval/TSecr echoes,
a per-direction RTO estimate, and SYN -> SYN/ACK -> ACK handshake timing.

Works on the segment table after :func:`sniffsync.tcp.acks.ack_arrays` (``ack_rel``,
``tr``) or, for the handshake, after :func:`sniffsync.tcp.segments.segment_arrays` and a
time rank. Pairs are found with ``searchsorted`` on composite integer keys, such as
``fd * SEQ_SPAN + seg_end`` for "the data segment this ACK acknowledges".
"""
from __future__ import annotations

import numpy as np

from sniffsync.tcp.columns import (SEQ_SPAN, group_median, group_starts, grouped_cummax, is_sorted,
                                   lex_order, rank_span, sorted_within)
from sniffsync.tcp.segments import TH_ACK, TH_SYN, live_tcp
from sniffsync.tcp.sequence import KIND

__all__ = ["MIN_RTO_NS", "SOURCES", "rto_arrays", "rtt_arrays", "advancing_rows", "ack_sample_rows",
           "handshake_arrays"]

MIN_RTO_NS = 200_000_000         # Linux TCP_RTO_MIN; RFC 6298 says 1 s
SOURCES = np.array(["ack", "tsecr"], dtype=object)   # rtt sample ``source`` codes


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
    """RTT samples at the capture point (see :func:`sniffsync.tcp.frames.rtt_samples`).

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
        a0, f0 = ack_sample_rows(seg, live, adv, karn)
    parts = [(a0, f0, 0)]
    if tsecr:
        parts.append(_tsecr_pairs(seg, live, adv, tsecr_fds) + (1,))
    a = np.concatenate([p[0] for p in parts])
    f = np.concatenate([p[1] for p in parts])
    src = np.concatenate([np.full(len(p[0]), p[2], np.int64) for p in parts])
    fd, ts, row = seg["fd"], seg["ts_ns"], seg["row"]
    f_fd, a_ts = fd[f], ts[a]                      # (each gathered once)
    o = lex_order(f_fd, a_ts, src) if len(a) else np.zeros(0, np.int64)
    if len(o) and (o[1:] > o[:-1]).all():          # already in order: no reordering copies
        o = slice(None)
    a, f, f_fd, a_ts = a[o], f[o], f_fd[o], a_ts[o]
    return {"fd": f_fd, "flow": f_fd >> 1, "ts_ns": a_ts, "rtt_ns": a_ts - ts[f],
            "source": src[o], "data_row": row[f], "ack_row": row[a]}


def _advancing_acks(seg, live) -> np.ndarray:
    """Rows of ACKs that raise their direction's cumulative ACK (acknowledge new data)."""
    ai = np.flatnonzero(live & (seg["ack_rel"] >= 0))
    return advancing_rows(ai, seg["fd"][ai], seg["ack_rel"][ai])


def advancing_rows(ai: np.ndarray, afd: np.ndarray, ack: np.ndarray) -> np.ndarray:
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


def ack_sample_rows(seg, live, adv, karn: bool):
    """(ACK row, data row) of every ACK sample: the ACK raises the cumulative ACK to
    exactly the end of an earlier data segment (Karn: sent once, no retransmission between)."""
    fd, tr = seg["fd"], seg["tr"]
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
            span = rank_span(tr)
            rcomp = fd[rx] * span + tr[rx]          # sorted: seg is sorted by (fd, ts, row)
            dfd = fa ^ 1                               # = fd[first] where ok
            between = (np.searchsorted(rcomp, dfd * span + t_adv) -
                       np.searchsorted(rcomp, dfd * span + tr[first], side="right"))
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


_FEW_HANDSHAKES = 64       # SYN/ACKs looked up one by one in their flow's rows (no full-length key)


def _few_handshakes(fd, tr, live, fl, sa):
    """``(syn, ack, ok)`` rows of :func:`handshake_arrays` for a few SYN/ACKs ``sa``, each
    searched in its initiator direction's rows only (``fd`` sorted, time ranks rising
    within each fd): the last live SYN before the SYN/ACK, the first live ACK after it."""
    syn, ack, ok = np.zeros(len(sa), np.int64), np.zeros(len(sa), np.int64), np.zeros(len(sa), bool)
    for i, s in enumerate(sa):
        g = int(fd[s]) ^ 1                               # the initiator's direction (dir 0)
        lo, hi = np.searchsorted(fd, g), np.searchsorted(fd, g, side="right")
        at = lo + int(np.searchsorted(tr[lo:hi], tr[s]))
        before = np.flatnonzero(live[lo:at] & (fl[lo:at] == TH_SYN))
        after = live[at:hi] & (fl[at:hi] == TH_ACK)
        j = int(np.argmax(after)) if len(after) else 0
        if len(before) and len(after) and after[j]:
            syn[i], ack[i], ok[i] = lo + before[-1], at + j, True
    return syn, ack, ok


def handshake_arrays(seg) -> dict:
    """SYN -> SYN/ACK -> ACK timing per TCP flow (see :func:`sniffsync.tcp.frames.handshake_rtt`)."""
    live = live_tcp(seg)
    fl = seg["flags"] & (TH_SYN | TH_ACK)
    fd = seg["fd"]
    d = fd & 1                                  # fd = 2 * flow + dir
    tr, ts = seg["tr"], seg["ts_ns"]
    span = rank_span(tr)

    def flow(rows):
        return fd[rows] >> 1
    # rows of one (flow, dir) are in time order: the first SYN/ACK of each flow
    sa = np.flatnonzero(live & (fl == (TH_SYN | TH_ACK)) & (d == 1))
    sa = sa[group_starts(flow(sa))]
    if len(sa) <= _FEW_HANDSHAKES and is_sorted(fd):
        syn, ack, ok = _few_handshakes(fd, tr, live, fl, sa)
        syn_ns, sa_ns, ack_ns = ts[syn[ok]], ts[sa[ok]], ts[ack[ok]]
        return {"flow": flow(sa[ok]), "syn_ns": syn_ns, "synack_ns": sa_ns, "ack_ns": ack_ns,
                "hs_rtt_ns": ack_ns - syn_ns, "server_ns": sa_ns - syn_ns, "client_ns": ack_ns - sa_ns}
    # rows are sorted by (fd, time): the row where the SYN/ACK's time falls in the
    # initiator's direction is one search over the (fd, time rank) key of every row
    at = np.searchsorted(fd * span + tr, (fd[sa] ^ 1) * span + tr[sa])
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
