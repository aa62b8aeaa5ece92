"""TCP acknowledgements, RTT samples, retransmission kinds and bytes in flight.

Input is the classified segment table of :func:`sniffsync.flows.classify_segments`
(sorted by fd, time, input row). Cross-direction questions ("the last ACK the other side
sent before this segment") are answered with one ``searchsorted`` on a composite key
``fd * (N + 1) + time_rank``, where ``time_rank`` orders all rows by (ts_ns, input row)
so that frames sharing a timestamp (the MPDUs of one A-MPDU) keep capture order.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .flows import KIND, SEQ_SPAN, TH_ACK, TH_FIN, TH_RST, TH_SYN, group_starts, grouped_cummax

__all__ = ["RETX_NAMES", "RETX", "analyze_acks", "rtt_samples", "handshake_rtt", "rto_estimates",
           "DUPTHRESH", "MIN_RTO_NS"]

RETX_NAMES = np.array(["none", "fast", "timeout", "other"])
RETX = {name: i for i, name in enumerate(RETX_NAMES)}
DUPTHRESH = 3                    # RFC 5681 duplicate-ACK threshold
MIN_RTO_NS = 200_000_000         # Linux TCP_RTO_MIN; RFC 6298 says 1 s


def _time_rank(seg: pd.DataFrame) -> np.ndarray:
    order = np.lexsort((seg["row"].to_numpy(), seg["ts_ns"].to_numpy()))
    rank = np.empty(len(seg), np.int64)
    rank[order] = np.arange(len(seg))
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


def analyze_acks(seg: pd.DataFrame, min_rto_ns: int = MIN_RTO_NS,
                 dupthresh: int = DUPTHRESH) -> pd.DataFrame:
    """Acknowledgement analysis of classified segments.

    Adds ``tr`` (global time rank), ``ack_rel`` (ACK number in the *other* direction's
    relative sequence space, -1 without ACK flag), ``dup_ack`` and ``dup_ack_num``
    (Wireshark's definition: no payload, no SYN/FIN/RST, same ACK and window as the
    previous ACK of the same direction), ``acked`` (highest ACK the other side sent
    before this row), ``bytes_in_flight`` (data rows: frontier incl. this row minus
    ``acked``), ``retx_kind`` (code into :data:`RETX_NAMES`: ``fast`` when the last ACK
    from the other side before it was its ``dupthresh``-th or later duplicate ACK for this
    sequence number; else ``timeout`` when the gap since the previous data segment of the
    direction exceeds :func:`rto_estimates`; else ``other``) and ``spurious`` (data
    already ACKed before it was retransmitted, or the first ACK covering it echoes a
    TSval older than the retransmission's: Eifel, RFC 3522).
    """
    seg = seg.copy(deep=False)    # new columns only; copy-on-write keeps the input intact
    n = len(seg)
    fd = seg["fd"].to_numpy()
    tr = _time_rank(seg)
    seg["tr"] = tr
    live = (seg["proto"].to_numpy() == 6) & ~seg["mac_dup"].to_numpy()
    flags = seg["flags"].to_numpy()
    rel = seg["rel_seq"].to_numpy()
    seq_raw = seg["seq_raw"].to_numpy()

    # base of each fd's sequence space = raw seq of its first live TCP row
    nfd = int(fd.max()) + 2 if n else 2
    base = np.full(nfd, -1, np.int64)
    li = np.flatnonzero(live)
    firsts = li[group_starts(fd[li])]
    base[fd[firsts]] = seq_raw[firsts] - rel[firsts]

    # ACK numbers unwrapped into the other direction's space
    ai = np.flatnonzero(live & ((flags & TH_ACK) > 0))
    afd = fd[ai]
    araw = seg["ack_raw"].to_numpy()[ai]
    d = np.zeros(len(ai), np.int64)
    d[1:] = ((araw[1:] - araw[:-1] + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)
    st = group_starts(afd)
    ob = base[afd ^ 1]
    first_off = np.where(ob >= 0, ((araw - ob + (1 << 31)) & 0xFFFFFFFF) - (1 << 31), 0)
    d[st] = first_off[st]
    # cumsum restarted per group: subtract the running total before each group start
    cs = np.cumsum(d)
    start_pos = np.maximum.accumulate(np.where(st, np.arange(len(ai)), 0))
    ack = cs - cs[start_pos] + d[start_pos]
    ack_rel = np.full(n, -1, np.int64)
    ack_rel[ai] = ack

    # duplicate ACKs and their running count per ACK value
    plen = seg["payload_len"].to_numpy()[ai]
    win = seg["win"].to_numpy()[ai]
    same_prev = np.zeros(len(ai), bool)
    same_prev[1:] = (ack[1:] == ack[:-1]) & (win[1:] == win[:-1])
    same_prev &= ~st
    dup = same_prev & (plen == 0) & ((flags[ai] & (TH_SYN | TH_FIN | TH_RST)) == 0)
    run_start = np.ones(len(ai), bool)
    run_start[1:] = ack[1:] != ack[:-1]
    run_start |= st
    cd = np.cumsum(dup)
    run_pos = np.maximum.accumulate(np.where(run_start, np.arange(len(ai)), 0))
    dup_num = cd - cd[run_pos] + dup[run_pos]
    dup_all = np.zeros(n, bool)
    dup_all[ai] = dup
    seg["dup_ack"] = dup_all
    dup_num_all = np.zeros(n, np.int64)
    dup_num_all[ai] = np.where(dup, dup_num, 0)
    seg["dup_ack_num"] = dup_num_all
    seg["ack_rel"] = ack_rel

    # highest ACK from the other side before each row (cummax within each ACK fd)
    acm = grouped_cummax(afd, ack) if len(ai) else ack
    atr = tr[ai]
    j = _last_before(afd, atr, fd ^ 1, tr, n)
    acked = _take(acm, j, -1)
    seg["acked"] = acked

    data = seg["is_data"].to_numpy() & live
    end = seg["seg_end"].to_numpy()
    # Wireshark counts neither the SYN nor the FIN sequence number as bytes in flight
    pend = end - ((flags & TH_FIN) > 0)
    front = np.maximum(seg["frontier"].to_numpy() - 0, pend)
    # like Wireshark's tcp.analysis.bytes_in_flight: highest end sent - highest ACK seen
    seg["bytes_in_flight"] = np.where(data & ((flags & TH_SYN) == 0), front - np.maximum(acked, 0), -1)

    # retransmission kind
    retx = seg["kind"].to_numpy() == KIND["retransmission"]
    last_ack = _take(ack, j, -2)
    last_dup = _take(dup_num * dup, j, 0)
    fast = retx & (last_ack == rel) & (last_dup >= dupthresh)
    di = np.flatnonzero(data)
    prev_ts = np.full(n, -1, np.int64)
    dts = seg["ts_ns"].to_numpy()[di]
    p = np.full(len(di), -1, np.int64)
    p[1:] = dts[:-1]
    p[group_starts(fd[di])] = -1
    prev_ts[di] = p
    gap = np.where(prev_ts >= 0, seg["ts_ns"].to_numpy() - prev_ts, 0)
    rto = rto_estimates(seg, min_rto_ns)
    rto_row = rto.reindex(fd).fillna(min_rto_ns).to_numpy()
    timeout = retx & ~fast & (gap > rto_row)
    kind = np.select([fast, timeout, retx], [RETX["fast"], RETX["timeout"], RETX["other"]], RETX["none"])
    seg["retx_kind"] = kind

    # spurious: (a) already ACKed at the capture point; (b) Eifel via TSecr
    already = retx & (acked >= end)
    comp = afd * SEQ_SPAN + np.clip(acm, -SEQ_SPAN // 2, None)
    k = np.searchsorted(comp, (fd ^ 1) * SEQ_SPAN + end, side="left")
    k = np.maximum(k, j + 1)
    kk = np.minimum(k, max(len(ai) - 1, 0))
    found = (k < len(ai)) & (afd[kk] == (fd ^ 1)) if len(ai) else np.zeros(n, bool)
    tsecr = seg["tsecr"].to_numpy()[ai][kk] if len(ai) else np.full(n, -1)
    tsval = seg["tsval"].to_numpy()
    older = ((tsecr - tsval + (1 << 31)) & 0xFFFFFFFF) - (1 << 31) < 0
    eifel = retx & ~already & found & (tsecr >= 0) & (tsval >= 0) & older
    seg["spurious"] = already | eifel
    return seg


def rto_estimates(seg: pd.DataFrame, min_rto_ns: int = MIN_RTO_NS) -> pd.Series:
    """Per-fd retransmission timeout estimate: max(min_rto, median RTT + 4 * mean |RTT - median|).

    A robust stand-in for RFC 6298's SRTT + 4 RTTVAR, from Karn-filtered samples
    (needs ``ack_rel``; returns an empty Series before :func:`analyze_acks` added it).
    """
    if "ack_rel" not in seg:
        return pd.Series(dtype=np.int64)
    s = rtt_samples(seg, karn=True, tsecr=False)
    if s.empty:
        return pd.Series(dtype=np.int64)
    g = s.groupby("fd")["rtt_ns"]
    med = g.transform("median")
    mad = (s["rtt_ns"] - med).abs().groupby(s["fd"]).mean()
    est = g.median() + 4 * mad
    return np.maximum(est, min_rto_ns).astype(np.int64)


def rtt_samples(seg: pd.DataFrame, karn: bool = True, tsecr: bool = True) -> pd.DataFrame:
    """RTT samples as seen at the capture point.

    ``source == 'ack'``: an ACK that raises the cumulative ACK to exactly the end of an
    earlier segment (as tcptrace and Wireshark's ``tcp.analysis.ack_rtt``); with ``karn``
    no sample when that segment end was sent more than once before the ACK or any
    retransmission of the direction happened between segment and ACK (Karn's rule).
    ``source == 'tsecr'``: the first ACK advancing the cumulative ACK that echoes a TSval,
    timed from the first segment carrying that TSval.

    Returns
    -------
    DataFrame
        ``fd`` (data direction), ``flow``, ``ts_ns`` (ACK time), ``rtt_ns``, ``source``,
        ``data_row``, ``ack_row`` (indices into the frame table).
    """
    n = len(seg)
    fd = seg["fd"].to_numpy()
    tr = seg["tr"].to_numpy()
    ts = seg["ts_ns"].to_numpy()
    live = (seg["proto"].to_numpy() == 6) & ~seg["mac_dup"].to_numpy()
    ack = seg["ack_rel"].to_numpy()
    ai = np.flatnonzero(live & (ack >= 0))
    prev = np.full(len(ai), -1, np.int64)
    if len(ai):
        cm = grouped_cummax(fd[ai], ack[ai])
        prev[1:] = cm[:-1]
        prev[group_starts(fd[ai])] = -1
    adv = ai[ack[ai] > prev]                       # ACKs that acknowledge new data
    out = []
    # data rows keyed by (fd, seg_end), in time order within a key
    di = np.flatnonzero(live & seg["is_data"].to_numpy())
    end = seg["seg_end"].to_numpy()
    o = np.lexsort((tr[di], end[di], fd[di]))
    di = di[o]
    key = fd[di] * SEQ_SPAN + end[di]
    q = (fd[adv] ^ 1) * SEQ_SPAN + ack[adv]
    lo = np.searchsorted(key, q, side="left")
    hit = (lo < len(di)) & (key[np.minimum(lo, max(len(di) - 1, 0))] == q) if len(di) else np.zeros(len(adv), bool)
    lo_c = np.minimum(lo, max(len(di) - 1, 0))
    first = di[lo_c] if len(di) else lo_c
    ok = hit & (tr[first] < tr[adv]) if len(di) else hit
    if karn and len(di):
        nxt = np.minimum(lo_c + 1, len(di) - 1)
        second_before = (lo_c + 1 < len(di)) & (key[nxt] == q) & (tr[di[nxt]] < tr[adv])
        rx = np.flatnonzero(live & (seg["kind"].to_numpy() == KIND["retransmission"]))
        rcomp = fd[rx] * (n + 1) + tr[rx]       # sorted: seg is sorted by (fd, ts, row)
        dfd = fd[first]
        between = (np.searchsorted(rcomp, dfd * (n + 1) + tr[adv]) -
                   np.searchsorted(rcomp, dfd * (n + 1) + tr[first], side="right"))
        ok &= ~second_before & (between == 0)
    a, f = adv[ok], first[ok]
    out.append(pd.DataFrame({"fd": fd[f], "flow": seg["flow"].to_numpy()[f], "ts_ns": ts[a],
                             "rtt_ns": ts[a] - ts[f], "source": "ack",
                             "data_row": seg["row"].to_numpy()[f], "ack_row": seg["row"].to_numpy()[a]}))
    if tsecr:
        tv = seg["tsval"].to_numpy()
        dv = np.flatnonzero(live & seg["is_data"].to_numpy() & (tv >= 0))
        firsts = (pd.DataFrame({"fd": fd[dv], "tsval": tv[dv], "i": dv})
                  .sort_values("i").drop_duplicates(["fd", "tsval"]))
        te = seg["tsecr"].to_numpy()
        ea = adv[te[adv] >= 0]
        echoes = (pd.DataFrame({"fd": fd[ea] ^ 1, "tsval": te[ea], "a": ea})
                  .drop_duplicates(["fd", "tsval"]))
        m = echoes.merge(firsts, on=["fd", "tsval"], how="inner")
        m = m[tr[m["i"].to_numpy()] < tr[m["a"].to_numpy()]]
        a, f = m["a"].to_numpy(), m["i"].to_numpy()
        out.append(pd.DataFrame({"fd": fd[f], "flow": seg["flow"].to_numpy()[f], "ts_ns": ts[a],
                                 "rtt_ns": ts[a] - ts[f], "source": "tsecr",
                                 "data_row": seg["row"].to_numpy()[f],
                                 "ack_row": seg["row"].to_numpy()[a]}))
    res = pd.concat(out, ignore_index=True)
    return res.sort_values(["fd", "ts_ns", "source"], kind="stable").reset_index(drop=True)


def handshake_rtt(seg: pd.DataFrame) -> pd.DataFrame:
    """SYN -> SYN/ACK -> ACK timing per TCP flow, as seen at the capture point.

    Uses the last SYN before the first SYN/ACK (Karn: a retransmitted SYN restarts the
    clock) and the first ACK from the initiator after it. ``hs_rtt_ns`` = ACK - SYN
    (Wireshark's ``tcp.analysis.initial_rtt``); ``server_ns`` = SYN/ACK - SYN (capture
    point to responder and back); ``client_ns`` = ACK - SYN/ACK.
    """
    live = (seg["proto"].to_numpy() == 6) & ~seg["mac_dup"].to_numpy()
    fl = seg["flags"].to_numpy()
    d = seg["dir"].to_numpy()
    cols = ["flow", "ts_ns", "tr"]
    synack = seg.loc[live & ((fl & (TH_SYN | TH_ACK)) == (TH_SYN | TH_ACK)) & (d == 1), cols]
    synack = synack.sort_values("tr").drop_duplicates("flow").set_index("flow")
    syn = seg.loc[live & ((fl & (TH_SYN | TH_ACK)) == TH_SYN) & (d == 0), cols]
    ack = seg.loc[live & ((fl & (TH_SYN | TH_ACK)) == TH_ACK) & (d == 0), cols]
    syn = syn.join(synack["tr"].rename("sa_tr"), on="flow", how="inner")
    syn = syn[syn["tr"] < syn["sa_tr"]].sort_values("tr").drop_duplicates("flow", keep="last")
    ack = ack.join(synack["tr"].rename("sa_tr"), on="flow", how="inner")
    ack = ack[ack["tr"] > ack["sa_tr"]].sort_values("tr").drop_duplicates("flow")
    hs = pd.DataFrame({"syn_ns": syn.set_index("flow")["ts_ns"], "synack_ns": synack["ts_ns"],
                       "ack_ns": ack.set_index("flow")["ts_ns"]}).dropna().astype(np.int64)
    hs["hs_rtt_ns"] = hs["ack_ns"] - hs["syn_ns"]
    hs["server_ns"] = hs["synack_ns"] - hs["syn_ns"]
    hs["client_ns"] = hs["ack_ns"] - hs["synack_ns"]
    hs.index.name = "flow"
    return hs.reset_index()
