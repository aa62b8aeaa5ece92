"""The segment table: TCP and UDP rows of a frame table, numbered into flows and flow
directions, sorted by (flow direction, time), with MAC duplicates marked.

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

The table is a :class:`~sniffsync.tcp.columns.Lazy` mapping: each column is gathered
from the frame columns when a stage first reads it. One sort by (fd, time) -- usually a
16-bit radix sort, or none when the input is already ordered; flows are paired and
numbered on the few distinct directions, not on the rows.
"""
from __future__ import annotations

import numpy as np

from sniffsync.tcp.columns import Lazy, dense_codes, group_starts, is_sorted, lex_order

__all__ = ["TH_FIN", "TH_SYN", "TH_RST", "TH_ACK", "DEDUP_MAX_GAP_NS", "SEG_COLUMNS",
           "segment_arrays", "part_tables", "copy_part", "join_parts", "is_proto", "live_tcp", "dedup_mac"]

TH_FIN, TH_SYN, TH_RST, TH_ACK = 0x01, 0x02, 0x04, 0x10
DEDUP_MAX_GAP_NS = 1_000_000_000  # MAC copies of one MPDU are never a second apart

# segment columns in table order; src/dst are codes into the run's endpoint names
SEG_COLUMNS = ["row", "sniffer", "frame", "ts_ns", "flow", "dir", "fd", "proto", "sport", "dport",
               "src", "dst", "payload_len", "flags", "seq_raw", "ack_raw", "win", "wscale", "tsval",
               "tsecr", "ta", "wlan_seq", "retry", "mcs"]
# frame-table column, null fill and dtype of each plain segment column
# (bounded fields are held narrow; the pandas layer widens them to int64)
_FROM_FRAME = {"sniffer": ("sniffer", 0, np.int64), "frame": ("frame", 0, np.int64),
               "seq_raw": ("tcp_seq", -1, np.int64), "ack_raw": ("tcp_ack", -1, np.int64),
               "win": ("tcp_win", -1, np.int32), "wscale": ("tcp_wscale", -1, np.int16),
               "tsval": ("tcp_tsval", -1, np.int64), "tsecr": ("tcp_tsecr", -1, np.int64),
               "ta": ("ta", -1, np.int64), "wlan_seq": ("seq", -1, np.int32),
               "retry": ("retry", False, bool), "mcs": ("mcs", -1, np.int16)}


def _first_of_group(codes: np.ndarray, k: int) -> np.ndarray:
    """Index of the first row of each code ``0..k-1`` (``len(codes)`` when absent)."""
    first = np.full(k, len(codes), np.int64)
    np.minimum.at(first, codes, np.arange(len(codes)))
    return first


def _direction_codes(s_code, d_code, sport, dport, udp):
    """Dense codes (any order) of the rows' (src, dst, sport, dport, udp) and their count."""
    from sniffsync.decode.table import factorize
    m = len(sport)
    if not m:
        return np.zeros(0, np.int64), 0
    s_code, d_code = np.asarray(s_code), np.asarray(d_code)
    if int(s_code.min()) >= -1 and int(d_code.min()) >= -1 and \
            max(int(s_code.max()), int(d_code.max())) < (1 << 15) - 1:
        # addresses in 15 bits each, ports in 16, udp in 1: one non-negative int64
        # (built in place with one scratch array: no widened copy per field)
        key = s_code.astype(np.int64)
        key += 1
        key <<= 48
        part = np.empty(m, np.int64)
        for v, add, shift in ((d_code, 1, 33), (sport, 0, 17), (dport, 0, 1)):
            part[...] = v
            if add:
                part += add
            part <<= shift
            key |= part
        del part
        key |= udp
        codes = dense_codes(key)
        if codes is not None:
            return codes
    else:
        ep_s = factorize((np.asarray(s_code, np.int64) << 16) | sport)[0]
        ep_d = factorize((np.asarray(d_code, np.int64) << 16) | dport)[0]
        key = (np.asarray(ep_s, np.int64) * (int(ep_d.max()) + 1) + ep_d) * 2 + udp
    codes, uniq = factorize(key)
    return np.asarray(codes, np.int64), len(uniq)


def _flow_codes(lo: np.ndarray, hi: np.ndarray, udp: np.ndarray) -> np.ndarray:
    """Dense codes of the (lo, hi, udp) triples of the few flow directions (any order)."""
    from sniffsync.decode.table import factorize
    m = len(lo)
    if not m:
        return np.zeros(0, np.int64)
    ep = np.asarray(factorize(np.concatenate([lo, hi]))[0], np.int64)
    n_ep = int(ep.max()) + 1
    return np.asarray(factorize((ep[:m] * n_ep + ep[m:]) * 2 + udp)[0], np.int64)


def _flow_directions(s_code, d_code, sp, dp, udp, flags, t_order):
    """``(fd of every row, number of flows)``: directions paired into flows, flows numbered
    by first appearance in time, dir 0 = the initiator (first pure SYN, else first packet).

    ``t_order``: the rows in time order, or None when they are already. The pairing,
    numbering and initiators are decided on the few distinct directions.
    """
    m = len(sp)
    dcode, nd = _direction_codes(s_code, d_code, sp, dp, udp)
    d_first = _first_of_group(dcode if t_order is None else dcode[t_order], nd)   # in time order
    d_row = d_first if t_order is None or not nd else t_order[d_first]            # a row of each
    ep_s = (np.asarray(s_code, np.int64)[d_row] << 16) | sp[d_row]
    ep_d = (np.asarray(d_code, np.int64)[d_row] << 16) | dp[d_row]
    code = _flow_codes(np.minimum(ep_s, ep_d), np.maximum(ep_s, ep_d), udp[d_row])
    k = int(code.max()) + 1 if nd else 0
    # flows numbered by first appearance in time (stable: input order among equal times)
    first_t = np.full(k, m, np.int64)
    np.minimum.at(first_t, code, d_first)
    renum = np.empty(k, np.int64)
    renum[np.argsort(first_t, kind="stable")] = np.arange(k)
    d_flow = renum[code]
    # initiator: sender of the first pure SYN, else of the first packet
    o_d = np.lexsort((d_first, d_flow))        # each flow's directions, earliest first
    head = o_d[group_starts(d_flow[o_d])]
    init_ep = np.empty(k, np.int64)
    init_ep[d_flow[head]] = ep_s[head]
    is_syn = ~udp & ((flags & (TH_SYN | TH_ACK)) == TH_SYN)
    syn_t = np.flatnonzero(is_syn) if t_order is None else t_order[is_syn[t_order]]
    if len(syn_t):
        syn_dir = dcode[syn_t]
        fs = _first_of_group(d_flow[syn_dir], k)
        has = fs < len(syn_t)
        init_ep[has] = ep_s[syn_dir[fs[has]]]
    d_fd = d_flow * 2 + (ep_s != init_ep[d_flow])
    return d_fd[dcode], k


def _per_fd_values(o: np.ndarray, counts: np.ndarray, cols: dict) -> dict:
    """``flow``, ``dir`` and ``cols`` (constant within a flow direction) by fd, 0 for an
    fd without rows (``o``: rows in fd order, ``counts``: rows per fd)."""
    fds = np.arange(len(counts), dtype=np.int64)
    present = np.flatnonzero(counts)
    one = o[(np.cumsum(counts) - counts)[present]]          # the first row of each fd
    out = {"flow": fds >> 1, "dir": fds & 1}
    for name, v in cols.items():
        out[name] = np.zeros(len(counts), np.int64)
        out[name][present] = v[one]
    return out


def segment_arrays(get, ip_codes, dedup: bool = True) -> tuple[Lazy, list]:
    """TCP and UDP rows of a frame table: flow ids, direction, MAC duplicates.

    Parameters
    ----------
    get : callable
        ``get(name, fill, dtype, rows=None)``: a frame column (nulls -> ``fill``).
    ip_codes : callable
        ``ip_codes(rows)`` -> ``(src_codes, dst_codes, names)`` of the rows' IP addresses.
    dedup : bool
        Mark MAC duplicates (``mac_dup``).

    Returns
    -------
    seg : Lazy
        Columns :data:`SEG_COLUMNS` + ``mac_dup``, rows sorted by (fd, ts_ns, input row).
    names : list
        Endpoint text of the ``src``/``dst`` codes.
    """
    proto = get("ip_proto", 0, np.int16)
    sport = get("sport", -1, np.int32)
    # a frame that failed its FCS carries no segment (sniffsync.decode.quality)
    rows = np.flatnonzero(((proto == 6) | (proto == 17)) & (sport >= 0) & ~get("fcs_bad", False, bool))
    m = len(rows)
    s_code, d_code, names = ip_codes(rows)
    every = m == len(proto)                   # usually: every frame is TCP/UDP
    sp, pr = (sport, proto) if every else (sport[rows], proto[rows])
    del proto, sport
    dp = get("dport", 0, np.int32, rows)
    ts = get("ts_ns", 0, np.int64, rows)
    flags = get("tcp_flags", 0, np.int16, rows)
    udp = pr == 17
    rows = None if every else rows          # (every row: the order below indexes frames directly)
    t_sorted = is_sorted(ts)
    t_order = None if t_sorted else np.argsort(ts, kind="stable")          # None: rows in time order
    fd, k = _flow_directions(s_code, d_code, sp, dp, udp, flags, t_order)

    # one order (fd, ts, input row); each column is gathered when first read
    o = lex_order(fd) if t_sorted else t_order[lex_order(fd[t_order])]
    counts = np.bincount(fd, minlength=2 * k)
    del fd
    fd_s = np.repeat(np.arange(2 * k, dtype=np.int64), counts)
    # endpoints, ports and protocol are the same on every row of a flow direction: kept
    # per fd (``seg.per_fd``); the full-length columns are built only when read
    per = _per_fd_values(o, counts, {"proto": pr, "sport": sp, "dport": dp, "src": s_code, "dst": d_code})
    idx = o if every else rows[o]
    seg = Lazy({"ts_ns": ts[o], "fd": fd_s, "flags": flags[o]},
               {name: (lambda v=v: v[fd_s]) for name, v in per.items()})
    del flags
    seg.per_fd = per
    seg["payload_len"] = np.where((per["proto"] == 6)[fd_s], get("tcp_payload_len", 0, np.int32, idx),
                                  get("udp_len", 8, np.int32, idx) - 8) if udp.any() else \
        get("tcp_payload_len", 0, np.int32, idx)
    seg.thunks["row"] = lambda: idx.astype(np.int64, copy=False)
    if every and t_sorted:      # every frame a segment, in time order: time rank = frame index
        seg["tr"] = idx
    for name, (col, fill, dtype) in _FROM_FRAME.items():
        seg.thunks[name] = (lambda c=col, f=fill, d=dtype: get(c, f, d, idx))
    seg.thunks["mac_dup"] = (lambda: dedup_mac(seg)) if dedup else (lambda: np.zeros(m, bool))
    seg.dedup, seg.frame = dedup, (get, idx)
    return seg, names


def part_tables(seg: Lazy, parts: list, lock) -> list:
    """The rows of each slice of ``parts`` (whole flows, :func:`sniffsync.tcp.columns.flow_parts`)
    of ``seg`` as a table of their own, to analyse its flows on another thread.

    Columns already computed are views. A frame column is gathered for each part's rows
    when the getter can read without consuming (``get.peek``: the parts gather at once;
    the column is freed once every part has), else computed once on ``seg`` (under
    ``lock``) and sliced, as other lazy columns. MAC duplicates are marked on each part
    (an MPDU identity includes its fd). Time ranks ``tr`` are the capture's
    (:func:`sniffsync.tcp.columns.rank_span`), computed by the first group that needs them.
    """
    get, idx = getattr(seg, "frame", (None, None))
    peek = getattr(get, "peek", None)
    left = {k: len(parts) for k in _FROM_FRAME}      # parts yet to gather each frame column

    def shared(name, sl):
        with lock:
            return seg[name][sl]

    def gather(k, rows):
        c, f, d = _FROM_FRAME[k]
        v = peek(c, f, d, rows)
        with lock:
            left[k] -= 1
            if not left[k]:
                get.drop(c)               # every part holds its rows
        return v

    tables = []
    for sl in parts:
        part = Lazy({k: v[sl] for k, v in dict.items(seg)})
        part.thunks = {k: (lambda k=k, sl=sl: shared(k, sl)) for k in seg.thunks}
        if peek is not None:
            part.thunks.update({k: (lambda k=k, rows=idx[sl]: gather(k, rows))
                                for k in _FROM_FRAME if k in seg.thunks})
        if "mac_dup" not in part:
            part.thunks["mac_dup"] = (lambda part=part: dedup_mac(part)) if getattr(seg, "dedup", True) else \
                (lambda n=sl.stop - sl.start: np.zeros(n, bool))
        part.per_fd = getattr(seg, "per_fd", None)
        tables.append(part)
    return tables


def copy_part(part: Lazy, sl: slice, n: int, keep, into: dict, lock) -> None:
    """On a part's own thread, once it ran: its columns of ``keep`` (not broadcast from a
    fill value) copied into ``into``'s full-length arrays (``name -> (array, slices
    done)``, created by the first part), so that :func:`join_parts` need not concatenate."""
    for name in keep:
        v = part.get(name) if name in part else None
        if v is None or v.strides == (0,):
            continue
        with lock:
            full, done = into.setdefault(name, (np.empty(n, v.dtype), []))
        if full.dtype == v.dtype:
            full[sl] = v
            done.append(sl)


def join_parts(seg: Lazy, tables: list, keep, copied=None) -> None:
    """After the parts of :func:`part_tables` ran: the columns in ``keep`` that every part
    computed become ``seg``'s (copied by :func:`copy_part`, else concatenated; a column
    broadcast from a fill value stays lazy); frame columns the parts gathered and ``seg``
    does not keep are freed."""
    copied = copied or {}
    for name in keep:
        if name not in seg and all(name in t for t in tables) and \
                not any(t[name].strides == (0,) for t in tables):
            full, done = copied.get(name, (None, ()))
            seg[name] = full if len(done) == len(tables) else np.concatenate([t[name] for t in tables])
            seg.thunks.pop(name, None)
    get = getattr(seg, "frame", (None,))[0]
    if getattr(get, "peek", None) is None:
        return
    for k, (c, _, _) in _FROM_FRAME.items():
        if any(k in t for t in tables) and (k not in keep or k in seg):
            seg.thunks.pop(k, None)       # gathered by the parts; seg holds it or never reads it
            get.drop(c)


def is_proto(seg, proto: int) -> np.ndarray:
    """Rows of IP protocol ``proto``: looked up per flow direction when ``seg`` keeps
    ``per_fd`` values (:func:`segment_arrays`), so no full-length ``proto`` is built."""
    per = getattr(seg, "per_fd", None)
    if per is not None and "proto" not in seg:
        return (per["proto"] == proto)[seg["fd"]]
    return seg["proto"] == proto


def live_tcp(seg) -> np.ndarray:
    """TCP rows that are not MAC duplicates (what the TCP analyses read; kept on a
    :class:`Lazy` table after the first call, as neither input changes)."""
    live = getattr(seg, "live_tcp", None)
    if live is None:
        live = is_proto(seg, 6) & ~seg["mac_dup"]
        if isinstance(seg, Lazy):
            seg.live_tcp = live
    return live


_IDENT = ["ta", "wlan_seq", "flow", "dir", "seq_raw", "ack_raw", "payload_len", "flags"]
_MIX = [np.uint64(k) for k in (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9,
                               0xD6E8FEB86659FD93, 0xFF51AFD7ED558CCD)]


def dedup_mac(seg) -> np.ndarray:
    """Mask of MAC duplicates among 802.11 rows (see the module docstring).

    Rows of one MAC identity share fd and keep their input order among equal times, so
    marking duplicates on the sorted table gives the same rows as before the sort. Each
    row is compared with the previous row of its identity (in time order): found by one
    stable sort of (fd, 802.11 seq, hash of the other fields), which keeps each fd's
    rows nearly in order (cheap); a hash shared by two identities falls back to sorting
    every field.
    """
    wifi = np.flatnonzero(seg["ta"] >= 0)
    dup = np.zeros(len(seg["ta"]), bool)
    if not len(wifi):
        return dup
    wifi = _retried_identities(seg, wifi)
    if not len(wifi):
        return dup
    every = len(wifi) == len(dup)

    def col(c):
        return seg[c] if every else seg[c][wifi]
    fd, ws = col("fd"), col("wlan_seq").astype(np.int64)
    ws += 1
    if int(fd.max()) < 1 << 19 and int(ws.min()) >= 0 and int(ws.max()) < 1 << 13:
        rest = [seg[c] for c in ("ta", "seq_raw", "ack_raw", "payload_len", "flags")]
        h = np.zeros(len(fd), np.uint64)
        x = np.empty(len(fd), np.int64)              # one scratch array for every field
        xu = x.view(np.uint64)
        for v, k in zip(rest, _MIX):
            x[...] = v if every else v[wifi]
            xu *= k
            h ^= xu
        del x, xu
        h >>= np.uint64(33)
        key = fd << 44
        ws <<= 31
        key |= ws
        key |= h.view(np.int64)
        del h, ws
        order = np.argsort(key, kind="stable")
        ks = key[order]
        at = np.flatnonzero(ks[1:] == ks[:-1])
        del ks
        a, b = order[at], order[at + 1]               # b follows a of the same key
        if not every:
            a, b = wifi[a], wifi[b]                    # rows of seg
        # a row's previous one of its identity is at most as far back as the previous
        # one of its key: pairs over the gap hold no duplicate, whatever their fields
        ts = seg["ts_ns"]
        near = np.flatnonzero(ts[b] - ts[a] <= DEDUP_MAX_GAP_NS)
        a, b = a[near], b[near]
        if all((v[a] == v[b]).all() for v in rest):
            sn = seg["sniffer"]
            dup[b[seg["retry"][b] | (sn[b] != sn[a])]] = True
            return dup
    return _dedup_sorted(seg, wifi, dup)


def _retried_identities(seg, wifi: np.ndarray) -> np.ndarray:
    """``wifi`` without the rows no duplicate can involve when all are of one sniffer (a
    duplicate is then a retry): only rows sharing (fd, 802.11 seq), which holds an identity,
    with a retried row (~20 % of the rows on a busy capture: less to hash and sort)."""
    sn = seg["sniffer"]
    fd, ws = seg["fd"][wifi], seg["wlan_seq"][wifi]
    lo, span = int(fd.min()), int(fd.max()) - int(fd.min()) + 1
    if sn.min() != sn.max() or span > 1 << 12 or int(ws.min()) < -1 or int(ws.max()) > 4095:
        return wifi                       # (several sniffers, too many (fd, seq) pairs, odd seqs)
    pair = (fd - lo) * 4097 + ws + 1
    retried = np.zeros(span * 4097, bool)
    retried[pair[seg["retry"][wifi]]] = True
    return wifi[retried[pair]]


def _dedup_sorted(seg, wifi, dup) -> np.ndarray:
    """:func:`dedup_mac` by one lexicographic sort of every identity field."""
    ident = _IDENT
    fd = seg["fd"][wifi]
    derived = {"flow": lambda: fd >> 1, "dir": lambda: fd & 1}      # fd = 2 * flow + dir
    cols = {c: derived[c]() if c in derived else seg[c][wifi] for c in ident + ["ts_ns", "sniffer", "retry"]}
    order = np.lexsort([cols["ts_ns"]] + [cols[c] for c in reversed(ident)])
    s = {c: v[order] for c, v in cols.items()}
    same = np.ones(len(order), bool)
    for c in ident:
        same[1:] &= s[c][1:] == s[c][:-1]
    same[:1] = False
    gap_ok = np.zeros(len(order), bool)
    gap_ok[1:] = (s["ts_ns"][1:] - s["ts_ns"][:-1]) <= DEDUP_MAX_GAP_NS
    other_sniffer = np.zeros(len(order), bool)
    other_sniffer[1:] = s["sniffer"][1:] != s["sniffer"][:-1]
    dup[wifi[order]] = same & gap_ok & (s["retry"] | other_sniffer)
    return dup
