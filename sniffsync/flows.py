"""TCP/UDP flows from the frame table and per-segment sequence classification.

Columnar throughout: one sort by (flow direction, time), then diffs, cumulative
maxima and searchsorted lookups; no per-packet Python.

Vocabulary
----------
flow
    one 5-tuple, both directions paired (``flow`` id, ``dir`` 0 = the side that
    sent the first SYN, or the first packet when no SYN was captured).
fd
    flow direction, ``flow * 2 + dir``: the unit of sequence analysis.
MAC duplicate
    an 802.11 copy of an MPDU already counted: same transmitter, 802.11 sequence
    number and TCP/UDP identity, either a MAC retry (retry bit) seen by the same
    sniffer or the same transmission seen by another sniffer of a merged table.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["KIND_NAMES", "KIND", "segments", "classify_segments", "flow_table", "grouped_cummax",
           "TH_FIN", "TH_SYN", "TH_RST", "TH_ACK"]

TH_FIN, TH_SYN, TH_RST, TH_PSH, TH_ACK = 0x01, 0x02, 0x04, 0x08, 0x10

# per-segment sequence class, indexed by code (a declarative table, not an if-chain)
KIND_NAMES = np.array(["none", "new", "retransmission", "out_of_order", "keepalive"])
KIND = {name: i for i, name in enumerate(KIND_NAMES)}

SEQ_SPAN = np.int64(1) << 40     # composite key (fd, seq) = fd * SEQ_SPAN + seq; 1 TB per flow
DEDUP_MAX_GAP_NS = 1_000_000_000  # MAC copies of one MPDU are never a second apart


def _np(frames: pd.DataFrame, name: str, fill, dtype) -> np.ndarray:
    """Plain numpy column with nulls replaced by ``fill`` (absent column -> all ``fill``)."""
    if name not in frames:
        return np.full(len(frames), fill, dtype)
    col = frames[name]
    if isinstance(col.dtype, pd.CategoricalDtype):
        raise TypeError(name)
    return col.to_numpy(dtype=dtype, na_value=fill)


def _ip_codes(frames: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, pd.Index]:
    """Integer codes of ip_src / ip_dst in one shared category index (-1 = null)."""
    src = frames["ip_src"].astype("category")
    dst = frames["ip_dst"].astype("category")
    cats = src.cat.categories.union(dst.cat.categories)
    s_map = np.append(cats.get_indexer(src.cat.categories), -1)
    d_map = np.append(cats.get_indexer(dst.cat.categories), -1)
    return s_map[src.cat.codes.to_numpy()], d_map[dst.cat.codes.to_numpy()], cats


def group_starts(key: np.ndarray) -> np.ndarray:
    """Boolean mask of rows whose ``key`` differs from the previous row's (sorted input)."""
    start = np.ones(len(key), bool)
    start[1:] = key[1:] != key[:-1]
    return start


def grouped_cummax(key: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Running maximum of ``values`` restarting at each new ``key`` (rows sorted by key)."""
    if len(values) == 0:
        return values.copy()
    lo = values.min()
    # shift every group onto its own non-overlapping band, then one global cummax
    span = np.int64(values.max() - lo + 1)
    band = np.cumsum(group_starts(key)) - 1
    return np.maximum.accumulate((values - lo) + band * span) - band * span + lo


def _dedup_mac(seg: pd.DataFrame) -> np.ndarray:
    """Mask of MAC duplicates among 802.11 rows (see module docstring)."""
    ident = ["ta", "wlan_seq", "flow", "dir", "seq_raw", "ack_raw", "payload_len", "flags"]
    wifi = seg["ta"].to_numpy() >= 0
    sub = seg.loc[wifi, ident + ["ts_ns", "sniffer", "retry"]]
    order = np.lexsort([sub["ts_ns"].to_numpy()] + [sub[c].to_numpy() for c in reversed(ident)])
    s = sub.iloc[order]
    same = np.ones(len(s), bool)
    for c in ident:
        v = s[c].to_numpy()
        same[1:] &= v[1:] == v[:-1]
    same[:1] = False
    ts = s["ts_ns"].to_numpy()
    gap_ok = np.zeros(len(s), bool)
    gap_ok[1:] = (ts[1:] - ts[:-1]) <= DEDUP_MAX_GAP_NS
    sn = s["sniffer"].to_numpy()
    other_sniffer = np.zeros(len(s), bool)
    other_sniffer[1:] = sn[1:] != sn[:-1]
    dup_sorted = same & gap_ok & (s["retry"].to_numpy() | other_sniffer)
    dup = np.zeros(len(seg), bool)
    dup[np.flatnonzero(wifi)[order]] = dup_sorted
    return dup


def segments(frames: pd.DataFrame, dedup: bool = True) -> pd.DataFrame:
    """TCP and UDP rows of a frame table, with flow ids and MAC duplicates marked.

    Parameters
    ----------
    frames : DataFrame
        Frame table (columns per :mod:`sniffsync.schema`); 802.11, Ethernet or cooked.
    dedup : bool
        Mark MAC duplicates (``mac_dup``); analysis stages skip those rows.

    Returns
    -------
    DataFrame
        One row per TCP/UDP frame, sorted by (fd, ts_ns, input row): ``row`` (index into
        ``frames``), ``sniffer``, ``frame``, ``ts_ns``, ``flow``, ``dir``, ``fd``, ``proto``,
        ``src``/``dst`` (text endpoints of the flow's dir-0 side), ``payload_len``, ``flags``,
        ``seq_raw``, ``ack_raw`` (int64, -1 = null), ``win``, ``wscale``, ``tsval``, ``tsecr``,
        ``ta`` (-1 = wired), ``wlan_seq``, ``retry``, ``mcs``, ``mac_dup``.
    """
    proto = _np(frames, "ip_proto", 0, np.int64)
    sport = _np(frames, "sport", -1, np.int64)
    rows = np.flatnonzero(((proto == 6) | (proto == 17)) & (sport >= 0))
    s_code, d_code, cats = _ip_codes(frames[["ip_src", "ip_dst"]].iloc[rows])

    def col(name, fill, dtype=np.int64):
        # numpy column of the selected rows (no DataFrame copy of the frame table)
        return _np(frames, name, fill, dtype)[rows]

    sp, dp = col("sport", 0), col("dport", 0)
    pr = proto[rows]
    ep_s, ep_d = (s_code << 16) | sp, (d_code << 16) | dp
    lo, hi = np.minimum(ep_s, ep_d), np.maximum(ep_s, ep_d)
    ts = col("ts_ns", 0)
    flags = col("tcp_flags", 0)
    udp_pl = col("udp_len", 8) - 8
    payload = np.where(pr == 6, col("tcp_payload_len", 0), udp_pl)

    # flows numbered by first appearance in time
    t_order = np.lexsort((np.arange(len(rows)), ts))
    key = pd.DataFrame({"lo": lo[t_order], "hi": hi[t_order], "p": pr[t_order]})
    flow = np.empty(len(rows), np.int64)
    flow[t_order] = key.groupby(["lo", "hi", "p"], sort=False).ngroup().to_numpy()
    # initiator: sender of the first pure SYN, else of the first packet
    is_syn = (pr == 6) & ((flags & (TH_SYN | TH_ACK)) == TH_SYN)
    nflows = int(flow.max()) + 1 if len(flow) else 0
    init_ep = np.full(nflows, -1, np.int64)
    first = pd.Series(t_order).groupby(flow[t_order], sort=True).first().to_numpy()
    init_ep[:] = ep_s[first]
    syn_rows = t_order[is_syn[t_order]]
    syn_first = pd.Series(syn_rows).groupby(flow[syn_rows]).first()
    init_ep[syn_first.index.to_numpy()] = ep_s[syn_first.to_numpy()]
    direction = (ep_s != init_ep[flow]).astype(np.int64)
    fd = flow * 2 + direction

    # sort the columns once, before building the table (no DataFrame take afterwards)
    o = np.lexsort((rows, ts, fd))
    cols = {
        "row": rows.astype(np.int64),
        "sniffer": col("sniffer", 0),
        "frame": col("frame", 0),
        "ts_ns": ts, "flow": flow, "dir": direction, "fd": fd,
        "proto": pr, "sport": sp, "dport": dp,
        "payload_len": payload, "flags": flags,
        "seq_raw": col("tcp_seq", -1), "ack_raw": col("tcp_ack", -1),
        "win": col("tcp_win", -1), "wscale": col("tcp_wscale", -1),
        "tsval": col("tcp_tsval", -1), "tsecr": col("tcp_tsecr", -1),
        "ta": col("ta", -1), "wlan_seq": col("seq", -1),
        "retry": col("retry", False, bool), "mcs": col("mcs", -1),
    }
    cols = {k: v[o] for k, v in cols.items()}
    # text endpoints as one shared categorical: no per-row Python strings
    for name, code in (("src", s_code), ("dst", d_code)):
        cols[name] = pd.Categorical.from_codes(code[o], categories=cats) if len(cats) else None
    names = ["row", "sniffer", "frame", "ts_ns", "flow", "dir", "fd", "proto", "sport", "dport",
             "src", "dst", "payload_len", "flags", "seq_raw", "ack_raw", "win", "wscale", "tsval",
             "tsecr", "ta", "wlan_seq", "retry", "mcs"]
    seg = pd.DataFrame({k: cols[k] for k in names})
    # rows of one MAC identity share fd and keep their input order among equal times,
    # so marking duplicates after the sort gives the same rows as before it
    seg["mac_dup"] = _dedup_mac(seg) if dedup else False
    return seg


def _unwrap32(fd: np.ndarray, raw: np.ndarray) -> np.ndarray:
    """Unwrap 32-bit sequence numbers per fd: successive values differ by < 2**31."""
    d = np.zeros(len(raw), np.int64)
    d[1:] = ((raw[1:] - raw[:-1] + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)
    d[group_starts(fd)] = 0
    cs = np.cumsum(d)
    start_idx = np.maximum.accumulate(np.where(group_starts(fd), np.arange(len(fd)), 0))
    return cs - cs[start_idx]


def _in_order_delivery(seg: pd.DataFrame, tcp: np.ndarray, rel: np.ndarray) -> np.ndarray:
    """When each data segment's bytes reach the receiver's application, as seen on the air.

    A segment arrives with its LAST transmission (MAC retry or TCP retransmission of the
    same first byte: the ones before it failed), and the application gets its bytes once
    every earlier byte has arrived: the running maximum of arrival times in sequence order.
    So bytes sent past a lost MPDU are dated when the retry fills the hole (the receiver's
    reorder buffer), not when first seen. Other rows keep their capture time.
    """
    ts = seg["ts_ns"].to_numpy(np.int64)
    out = ts.copy()
    fd = seg["fd"].to_numpy(np.int64)
    plen = seg["payload_len"].to_numpy(np.int64)
    data = (seg["proto"].to_numpy() == 6) & (plen > 0)
    if not data.any():
        return out
    # last transmission of each (fd, raw first byte), MAC copies included
    # (fd, seq_raw) packed in one int64 (seq_raw is 32-bit, -1 = null), grouped by sorting
    di = np.flatnonzero(data)
    key = fd[di] * (np.int64(1) << 33) + seg["seq_raw"].to_numpy(np.int64)[di] + 1
    o = np.argsort(key, kind="stable")
    k = key[o]
    head = group_starts(k)
    last = np.maximum.reduceat(ts[di][o], np.flatnonzero(head))
    gid = np.empty(len(di), np.int64)
    gid[o] = np.cumsum(head) - 1
    pos = np.full(len(ts), -1, np.int64)
    pos[di] = gid
    rows = np.flatnonzero(data & tcp)
    arr = last[pos[rows]]
    order = np.lexsort((rel[rows], fd[rows]))                 # sequence order within each fd
    out[rows[order]] = grouped_cummax(fd[rows][order], arr[order].astype(np.int64))
    return out


def classify_segments(seg: pd.DataFrame) -> pd.DataFrame:
    """Relative sequence numbers, new bytes and sequence class of every TCP segment.

    Works on the non-duplicate TCP rows of :func:`segments` (MAC duplicates get kind
    ``none``). Adds ``rel_seq`` (unwrapped, 0 = first sequence number seen in the fd),
    ``seg_end`` (rel_seq + payload + SYN + FIN), ``is_data``, ``frontier`` (highest
    seg_end sent before this row), ``new_bytes`` (bytes above that frontier: goodput) and
    ``kind`` (code into :data:`KIND_NAMES`):

    * ``new``: advances the highest sequence number sent;
    * ``retransmission``: below it and its first byte was sent before (same start seen
      earlier, or not inside a hole the frontier jumped over);
    * ``out_of_order``: below it but inside a hole never sent before;
    * ``keepalive``: zero/one byte at frontier - 1.
    """
    seg = seg.copy(deep=False)    # new columns only; copy-on-write keeps the input intact
    n = len(seg)
    tcp = (seg["proto"].to_numpy() == 6) & ~seg["mac_dup"].to_numpy()
    fd_all = seg["fd"].to_numpy()
    rel = np.full(n, -1, np.int64)
    idx = np.flatnonzero(tcp)
    fd = fd_all[idx]
    raw = seg["seq_raw"].to_numpy()[idx]
    r = _unwrap32(fd, raw)
    rel[idx] = r
    flags = seg["flags"].to_numpy()[idx]
    plen = seg["payload_len"].to_numpy()[idx]
    end = r + plen + ((flags & TH_SYN) > 0) + ((flags & TH_FIN) > 0)
    data = end > r
    # frontier: highest seg_end of earlier data rows in the same fd
    vals = np.where(data, end, np.iinfo(np.int64).min // 4)
    cm = grouped_cummax(fd, vals)
    prev = np.empty_like(cm)
    prev[1:] = cm[:-1]
    starts = group_starts(fd)
    prev[starts] = np.iinfo(np.int64).min // 4
    # goodput counts payload only: bytes [r + SYN, r + SYN + payload) above the frontier
    p0 = r + ((flags & TH_SYN) > 0)
    new_bytes = np.clip(p0 + plen - np.maximum(prev, p0), 0, plen)

    kind = np.where(data, KIND["new"], KIND["none"])
    below = data & (end <= prev)
    # same first byte sent earlier in this fd -> retransmission
    d_idx = np.flatnonzero(data)
    seen = np.zeros(len(r), bool)
    seen[d_idx] = pd.DataFrame({"fd": fd[d_idx], "s": r[d_idx]}).duplicated().to_numpy()
    # hole test: first earlier row whose cummax passed rel_seq; a hole if it started above us
    comp = fd * SEQ_SPAN + np.clip(cm, -SEQ_SPAN // 2, None)
    k = np.searchsorted(comp, fd * SEQ_SPAN + r, side="right")
    k = np.minimum(k, len(r) - 1)
    in_hole = (fd[k] == fd) & (k < np.arange(len(r))) & (r < r[k]) & data[k]
    keepalive = data & (plen <= 1) & (r == prev - 1) & ((flags & (TH_SYN | TH_FIN)) == 0)
    kind = np.where(below, np.where(~seen & in_hole, KIND["out_of_order"], KIND["retransmission"]), kind)
    kind = np.where(keepalive, KIND["keepalive"], kind)
    # the frontier jumped over the hole without counting it: its first sending is goodput
    new_bytes = np.where(kind == KIND["out_of_order"], plen, new_bytes)

    out = {"rel_seq": rel, "seg_end": np.full(n, -1, np.int64), "is_data": np.zeros(n, bool),
           "frontier": np.full(n, -1, np.int64), "new_bytes": np.zeros(n, np.int64),
           "kind": np.zeros(n, np.int64)}
    out["seg_end"][idx] = end
    out["is_data"][idx] = data
    out["frontier"][idx] = np.maximum(prev, -1)
    out["new_bytes"][idx] = new_bytes
    out["kind"][idx] = kind
    for c, v in out.items():
        seg[c] = v
    seg["deliver_ns"] = _in_order_delivery(seg, tcp, rel)
    # UDP: every datagram is new payload (no sequence numbers to judge by)
    udp = (seg["proto"].to_numpy() == 17) & ~seg["mac_dup"].to_numpy()
    plen = seg["payload_len"].to_numpy()
    out["new_bytes"][udp] = plen[udp]
    out["is_data"][udp] = plen[udp] > 0
    out["kind"][udp & out["is_data"]] = KIND["new"]
    for c in ("new_bytes", "is_data", "kind"):
        seg[c] = out[c]
    return seg


def flow_table(seg: pd.DataFrame) -> pd.DataFrame:
    """Per flow direction totals from classified segments.

    Returns one row per fd that sent anything: endpoints, ``segments`` (non-duplicate
    rows), ``data_segments``, ``bytes`` (payload incl. retransmissions = throughput),
    ``goodput_bytes`` (new bytes), ``retransmissions``, ``out_of_order``, ``zero_windows``,
    ``mac_retries`` (frames with the retry bit), ``mac_duplicates`` (copies removed),
    ``first_ns``/``last_ns`` of data, ``ta`` (most frequent transmitter, -1 when wired).
    """
    keep = ~seg["mac_dup"].to_numpy()
    s = seg.assign(
        seg1=keep.astype(np.int64),
        data1=(seg["is_data"].to_numpy() & keep).astype(np.int64),
        bytes1=np.where(keep, seg["payload_len"].to_numpy(), 0),
        retx=(seg["kind"].to_numpy() == KIND["retransmission"]).astype(np.int64),
        ooo=(seg["kind"].to_numpy() == KIND["out_of_order"]).astype(np.int64),
        zw=(keep & (seg["proto"].to_numpy() == 6) & (seg["win"].to_numpy() == 0) &
            ((seg["flags"].to_numpy() & (TH_RST | TH_SYN)) == 0)).astype(np.int64),
        mretry=seg["retry"].to_numpy().astype(np.int64),
        mdup=seg["mac_dup"].to_numpy().astype(np.int64),
        dts=np.where(seg["is_data"].to_numpy() & keep, seg["ts_ns"].to_numpy(), -1),
    )
    g = s.groupby("fd", sort=True)
    ft = pd.DataFrame({
        "flow": g["flow"].first(), "dir": g["dir"].first(),
        "proto": g["proto"].first().map({6: "tcp", 17: "udp"}),
        "src": g["src"].first(), "sport": g["sport"].first(),
        "dst": g["dst"].first(), "dport": g["dport"].first(),
        "segments": g["seg1"].sum(), "data_segments": g["data1"].sum(),
        "bytes": g["bytes1"].sum(), "goodput_bytes": g["new_bytes"].sum(),
        "retransmissions": g["retx"].sum(), "out_of_order": g["ooo"].sum(),
        "zero_windows": g["zw"].sum(), "mac_retries": g["mretry"].sum(),
        "mac_duplicates": g["mdup"].sum(),
        "first_ns": s[s["dts"] >= 0].groupby("fd")["dts"].min(),
        "last_ns": s[s["dts"] >= 0].groupby("fd")["dts"].max(),
    })
    counts = s[s["ta"] >= 0].groupby(["fd", "ta"]).size().sort_values(kind="stable")
    ta = counts.reset_index().drop_duplicates("fd", keep="last").set_index("fd")["ta"]
    ft["ta"] = ta.reindex(ft.index).fillna(-1).astype(np.int64)
    ft["first_ns"] = ft["first_ns"].fillna(-1).astype(np.int64)
    ft["last_ns"] = ft["last_ns"].fillna(-1).astype(np.int64)
    ft.index.name = "fd"
    return ft.reset_index()
