"""Pandas-free core of :mod:`sniffsync.flows`: numpy columns in, numpy columns out.

A segment table here is a :class:`Lazy` dict of equal-length numpy arrays whose columns
are computed on first use, so the CLI pays only for what its report reads. The pandas
API (:mod:`sniffsync.flows`) wraps these functions and builds its DataFrames from them.
Algorithms: sort once by (flow direction, time) -- usually a 16-bit radix sort, or no
sort at all when the input is already ordered -- then diffs, cumulative maxima,
``reduceat`` and ``searchsorted``; no per-packet Python.
"""
from __future__ import annotations

import numpy as np

__all__ = ["KIND_NAMES", "KIND", "SEQ_SPAN", "DEDUP_MAX_GAP_NS", "TH_FIN", "TH_SYN", "TH_RST",
           "TH_PSH", "TH_ACK", "Lazy", "group_starts", "grouped_cummax", "lex_order", "is_sorted",
           "frame_getter", "cat_codes", "segment_arrays", "api_column", "is_proto", "live_tcp", "dedup_mac", "flow_arrays", "SEG_COLUMNS",
           "sorted_within", "restart_cumsum", "wrap32", "diff32"]

TH_FIN, TH_SYN, TH_RST, TH_PSH, TH_ACK = 0x01, 0x02, 0x04, 0x08, 0x10

# per-segment sequence class, indexed by code (a declarative table, not an if-chain)
KIND_NAMES = np.array(["none", "new", "retransmission", "out_of_order", "keepalive"])
KIND = {name: i for i, name in enumerate(KIND_NAMES)}

SEQ_SPAN = np.int64(1) << 40     # composite key (fd, seq) = fd * SEQ_SPAN + seq; 1 TB per flow
DEDUP_MAX_GAP_NS = 1_000_000_000  # MAC copies of one MPDU are never a second apart

# segment columns in table order; src/dst are codes into the run's endpoint names
SEG_COLUMNS = ["row", "sniffer", "frame", "ts_ns", "flow", "dir", "fd", "proto", "sport", "dport",
               "src", "dst", "payload_len", "flags", "seq_raw", "ack_raw", "win", "wscale", "tsval",
               "tsecr", "ta", "wlan_seq", "retry", "mcs"]
# frame-table column, null fill and dtype of each plain segment column
# (bounded fields are held narrow; :func:`api_column` widens them to int64 for pandas)
_FROM_FRAME = {"sniffer": ("sniffer", 0, np.int64), "frame": ("frame", 0, np.int64),
               "seq_raw": ("tcp_seq", -1, np.int64), "ack_raw": ("tcp_ack", -1, np.int64),
               "win": ("tcp_win", -1, np.int32), "wscale": ("tcp_wscale", -1, np.int16),
               "tsval": ("tcp_tsval", -1, np.int64), "tsecr": ("tcp_tsecr", -1, np.int64),
               "ta": ("ta", -1, np.int64), "wlan_seq": ("seq", -1, np.int32),
               "retry": ("retry", False, bool), "mcs": ("mcs", -1, np.int16)}


class Lazy(dict):
    """Columns by name; those in ``thunks`` are computed on first access and kept."""

    def __init__(self, cols=(), thunks=None):
        super().__init__(cols)
        self.thunks = dict(thunks or {})

    def __missing__(self, name):
        if name not in self.thunks:
            raise KeyError(name)
        value = self[name] = self.thunks.pop(name)()
        return value


def group_starts(key: np.ndarray) -> np.ndarray:
    """Boolean mask of rows whose ``key`` differs from the previous row's (sorted input)."""
    start = np.ones(len(key), bool)
    start[1:] = key[1:] != key[:-1]
    return start


def sorted_within(starts: np.ndarray, v: np.ndarray) -> bool:
    """True when ``v`` is non-decreasing within each group (``starts``: group start mask)."""
    return bool(len(v) < 2 or ((v[1:] >= v[:-1]) | starts[1:]).all())


def grouped_cummax(key: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Running maximum of ``values`` restarting at each new ``key`` (rows sorted by key)."""
    if len(values) == 0:
        return values.copy()
    starts = group_starts(key)
    if sorted_within(starts, values):          # already running maxima (e.g. ACK numbers)
        return values.copy()
    lo = values.min()
    # shift every group onto its own non-overlapping band, then one global cummax
    band = np.cumsum(starts) - 1
    span = int(values.max()) - int(lo) + 1
    if span * (int(band[-1]) + 1) >= 1 << 62:
        # the bands would overflow int64 (e.g. -inf sentinels): run on dense ranks instead
        uniq, rank = np.unique(values, return_inverse=True)
        return uniq[grouped_cummax(key, rank.ravel().astype(np.int64))]
    span = np.int64(span)
    return np.maximum.accumulate((values - lo) + band * span) - band * span + lo


def is_sorted(a: np.ndarray) -> bool:
    """True when ``a`` is non-decreasing."""
    return bool(len(a) < 2 or (a[1:] >= a[:-1]).all())


def _lex_sorted(keys) -> bool:
    bad = np.zeros(max(len(keys[0]) - 1, 0), bool)
    eq = np.ones_like(bad)
    for k in keys:
        bad |= eq & (k[1:] < k[:-1])
        eq &= k[1:] == k[:-1]
    return not bad.any()


def lex_order(*keys) -> np.ndarray:
    """Stable order by ``keys`` (most significant first): ``np.lexsort(keys[::-1])``.

    Fast paths: already in order (no sort); first key small and non-negative (one
    16-bit radix sort, when the other keys are then in order within its groups).
    """
    keys = [np.asarray(k) for k in keys]
    n = len(keys[0])
    if _lex_sorted(keys):
        return np.arange(n)
    k0 = keys[0]
    if k0.dtype.kind in "iub" and k0.min() >= 0 and k0.max() < 1 << 16:
        o = np.argsort(k0.astype(np.uint16), kind="stable")
        if len(keys) == 1 or _lex_sorted([k0[o]] + [k[o] for k in keys[1:]]):
            return o
    return np.lexsort(keys[::-1])


def frame_getter(n: int, cols: dict, consume: bool = False):
    """``get(name, fill, dtype, rows=None)`` over decoded columns (:func:`sniffsync.frames.decode_columns`).

    Values are cast through the schema dtype and nulls replaced by ``fill``, exactly as
    the frame table's nullable column ``.to_numpy(dtype, na_value=fill)`` gives them.
    With ``consume``, a column is removed from ``cols`` once read (its memory goes back
    to the analysis) and reading it again raises KeyError.
    """
    from sniffsync.decode.schema import COLUMNS
    schema = {c.name: c.dtype for c in COLUMNS}

    all_valid, consumed = {}, set()

    def get(name, fill, dtype, rows=None):
        if rows is not None and len(rows) == n and (n == 0 or rows[-1] == n - 1):
            rows = None                   # every frame, in order: no gather
        size = n if rows is None else len(rows)
        if name in consumed:
            raise KeyError(f"frame column {name} was read already (consumed)")
        if name not in cols:              # e.g. 802.11 fields of a wired capture: no memory
            return np.broadcast_to(np.asarray(fill, dtype), (size,))
        if consume:
            consumed.add(name)
        v, ok = cols.pop(name) if consume else cols[name]
        if ok is not None and all_valid.setdefault(name, bool(ok.all())):
            ok = None
        v = np.asarray(v) if rows is None else np.asarray(v)[rows]
        sd = schema.get(name, "")
        sd = "bool" if sd == "boolean" else sd.lower()
        v = v.astype(sd or dtype, copy=False).astype(dtype, copy=False)
        if ok is None:
            return v
        ok = ok if rows is None else ok[rows]
        return v if ok.all() else np.where(ok, v, np.asarray(fill, dtype))
    return get


def cat_codes(n: int, cols: dict, rows: np.ndarray, consume: bool = False):
    """Codes of ``ip_src``/``ip_dst`` on ``rows`` in one shared list of names (-1 = null);
    with ``consume``, both columns are removed from ``cols``."""
    from sniffsync.decode.table import as_cat
    names, index, out = [], {}, []
    for name in ("ip_src", "ip_dst"):
        if name not in cols:
            out.append(np.full(len(rows), -1, np.int64))
            continue
        cat = as_cat(*(cols.pop(name) if consume else cols[name]))
        remap = np.full(len(cat.categories) + 1, -1, np.int32 if len(cat.categories) < 1 << 30 else np.int64)
        for i, v in enumerate(cat.categories):
            remap[i] = index.setdefault(v, len(names))
            if remap[i] == len(names):
                names.append(v)
        codes = np.asarray(cat.codes)
        out.append(remap[codes if len(rows) == n else codes[rows]])
    return out[0], out[1], names


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
        key = (s_code + 1).astype(np.int64) << 48
        key |= (d_code + 1).astype(np.int64) << 33
        key |= sport.astype(np.int64) << 17
        key |= dport.astype(np.int64) << 1
        key |= udp
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
    rows = np.flatnonzero(((proto == 6) | (proto == 17)) & (sport >= 0))
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

    # rows -> direction codes (src, dst, ports, udp); flows are pairs of directions, so
    # the pairing, numbering and initiators are decided on the few directions
    t_sorted = is_sorted(ts)
    t_order = None if t_sorted else np.argsort(ts, kind="stable")          # None: rows in time order
    dcode, nd = _direction_codes(s_code, d_code, sp, dp, udp)
    d_first = _first_of_group(dcode if t_sorted else dcode[t_order], nd)    # position in time order
    d_row = d_first if t_sorted or not nd else t_order[d_first]             # a row of each direction
    ep_s = (np.asarray(s_code, np.int64)[d_row] << 16) | sp[d_row]
    ep_d = (np.asarray(d_code, np.int64)[d_row] << 16) | dp[d_row]
    d_udp = udp[d_row]
    code = _flow_codes(np.minimum(ep_s, ep_d), np.maximum(ep_s, ep_d), d_udp)
    k = int(code.max()) + 1 if nd else 0
    # flows numbered by first appearance in time (stable: input order among equal times)
    first_t = np.full(k, m, np.int64)
    np.minimum.at(first_t, code, d_first)
    by_first = np.argsort(first_t, kind="stable")
    renum = np.empty(k, np.int64)
    renum[by_first] = np.arange(k)
    d_flow = renum[code]
    # initiator: sender of the first pure SYN, else of the first packet
    o_d = np.lexsort((d_first, d_flow))        # each flow's directions, earliest first
    head = o_d[group_starts(d_flow[o_d])]
    init_ep = np.empty(k, np.int64)
    init_ep[d_flow[head]] = ep_s[head]
    is_syn = ~udp & ((flags & (TH_SYN | TH_ACK)) == TH_SYN)
    syn_t = np.flatnonzero(is_syn) if t_sorted else t_order[is_syn[t_order]]
    if len(syn_t):
        syn_dir = dcode[syn_t]
        fs = _first_of_group(d_flow[syn_dir], k)
        has = fs < len(syn_t)
        init_ep[has] = ep_s[syn_dir[fs[has]]]
    d_fd = d_flow * 2 + (ep_s != init_ep[d_flow])
    fd = d_fd[dcode]
    del dcode, is_syn

    # one order (fd, ts, input row); each column is gathered when first read
    o = lex_order(fd) if t_sorted else t_order[lex_order(fd[t_order])]
    counts = np.bincount(fd, minlength=2 * k)
    del fd
    fd_s = np.repeat(np.arange(2 * k, dtype=np.int64), counts)
    # endpoints, ports and protocol are the same on every row of a flow direction: kept
    # per fd (``seg.per_fd``); the full-length columns are built only when read
    present = np.flatnonzero(counts)
    one = o[(np.cumsum(counts) - counts)[present]]

    def fd_lut(v):
        lut = np.zeros(2 * k, np.int64)
        lut[present] = v[one]
        return lut
    per = {"flow": np.arange(2 * k, dtype=np.int64) >> 1, "dir": np.arange(2 * k, dtype=np.int64) & 1,
           "proto": fd_lut(pr), "sport": fd_lut(sp), "dport": fd_lut(dp), "src": fd_lut(s_code),
           "dst": fd_lut(d_code)}
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
    return seg, names


def api_column(v: np.ndarray) -> np.ndarray:
    """A core column as the pandas API gives it: integers the core holds narrow (codes,
    flags, ports, windows) widened to int64, and always a writable array of its own."""
    if v.dtype.kind == "i" and v.dtype.itemsize < 8:
        return v.astype(np.int64)
    return v if v.flags.writeable else np.array(v)


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


def dedup_mac(seg) -> np.ndarray:
    """Mask of MAC duplicates among 802.11 rows (see :mod:`sniffsync.flows`).

    Rows of one MAC identity share fd and keep their input order among equal times, so
    marking duplicates on the sorted table gives the same rows as before the sort.
    """
    ident = ["ta", "wlan_seq", "flow", "dir", "seq_raw", "ack_raw", "payload_len", "flags"]
    wifi = np.flatnonzero(seg["ta"] >= 0)
    dup = np.zeros(len(seg["ta"]), bool)
    if not len(wifi):
        return dup
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


def wrap32(d: np.ndarray) -> np.ndarray:
    """Differences of 32-bit sequence numbers taken modulo 2**32 into [-2**31, 2**31), in place."""
    d += 1 << 31
    d &= 0xFFFFFFFF
    d -= 1 << 31
    return d


def diff32(raw: np.ndarray) -> np.ndarray:
    """Successive differences of 32-bit sequence numbers (:func:`wrap32`); the first is 0."""
    d = np.empty(len(raw), np.int64)
    d[:1] = 0
    np.subtract(raw[1:], raw[:-1], out=d[1:])
    return wrap32(d)


def restart_cumsum(x: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Cumulative sum of ``x`` restarting at every ``starts`` row (the start row included)."""
    cs = np.cumsum(x)
    sp = np.flatnonzero(starts)
    if not len(sp):
        return cs
    before = cs[sp] - x[sp]                        # the running total before each group
    if len(sp) <= 64:                              # few groups (flow directions): in place
        for a, b, v in zip(sp, np.append(sp[1:], len(x)), before):
            cs[a:b] -= v
        return cs
    before = np.repeat(before, np.diff(np.append(sp, len(x))))
    if sp[0] > 0:                                  # rows before the first start: no restart
        before = np.concatenate([np.zeros(sp[0], before.dtype), before])
    cs -= before
    return cs


def _groups(fd: np.ndarray):
    """(order or None, group start positions, fd of each group) of a table sorted by fd."""
    o = None if is_sorted(fd) else np.argsort(fd, kind="stable")
    f = fd if o is None else fd[o]
    st = np.flatnonzero(group_starts(f))
    return o, st, f[st]


def flow_arrays(seg) -> dict:
    """Per flow direction totals (see ``flows.flow_table``); ``proto`` stays 6/17, ``src``/``dst`` codes."""
    fd = seg["fd"]
    o, st, fds = _groups(fd)

    def col(name):
        v = seg[name]
        return v if o is None else v[o]

    def gsum(x):
        return np.add.reduceat(x.astype(np.int64), st) if len(st) else np.zeros(0, np.int64)

    out = {"fd": fds}
    per = getattr(seg, "per_fd", None)
    for name in ("flow", "dir", "proto", "src", "sport", "dst", "dport"):
        out[name] = per[name][fds] if per is not None and name not in seg else col(name)[st]
    tcp = is_proto(seg, 6)
    dup = col("mac_dup")
    keep = ~dup
    data = col("is_data") & keep
    kind = col("kind")
    ts = col("ts_ns")
    out["segments"] = gsum(keep)
    out["data_segments"] = gsum(data)
    out["bytes"] = gsum(np.where(keep, col("payload_len"), 0))
    out["goodput_bytes"] = gsum(col("new_bytes"))
    out["retransmissions"] = gsum(kind == KIND["retransmission"])
    out["out_of_order"] = gsum(kind == KIND["out_of_order"])
    out["zero_windows"] = gsum(keep & (tcp if o is None else tcp[o]) & (col("win") == 0) &
                               ((col("flags") & (TH_RST | TH_SYN)) == 0))
    out["mac_retries"] = gsum(col("retry"))
    out["mac_duplicates"] = gsum(dup)
    big = np.iinfo(np.int64).max
    data &= ts >= 0
    if len(st):
        first = np.minimum.reduceat(np.where(data, ts, big), st)
        last = np.maximum.reduceat(np.where(data, ts, -1), st)
    else:
        first = last = np.zeros(0, np.int64)
    out["first_ns"] = np.where(first == big, -1, first)
    out["last_ns"] = last
    out["ta"] = _main_ta(fd, seg["ta"], fds)
    return out


def _main_ta(fd: np.ndarray, ta: np.ndarray, fds: np.ndarray) -> np.ndarray:
    """Most frequent transmitter of each fd in ``fds`` (ties: the larger address; -1 none)."""
    out = np.full(len(fds), -1, np.int64)
    w = np.flatnonzero(ta >= 0)
    if not len(w):
        return out
    f, t = fd[w], ta[w]
    o = np.lexsort((t, f))
    f, t = f[o], t[o]
    head = np.flatnonzero(group_starts(f) | group_starts(t))
    cnt = np.diff(np.append(head, len(f)))
    rf, rt = f[head], t[head]
    best = np.lexsort((cnt, rf))                   # stable: ties keep address order
    last = best[np.append(rf[best][1:] != rf[best][:-1], True)]
    out[np.searchsorted(fds, rf[last])] = rt[last]
    return out
