"""Vectorised LLC/SNAP, IPv4/IPv6, TCP, UDP and ICMP (type, echo id/seq) decoding.

Link-layer agnostic: 802.11 gives ``llc_off`` -> :func:`decode_llc` -> ``l3_off``;
Ethernet / cooked / raw-IP readers give ``l3_off`` and ``ethertype`` directly.
Rows with offset -1 are skipped. Lengths come from the IP header, not from the
captured bytes, so snaplen-cut frames still get the right ``tcp_payload_len``.
"""
from __future__ import annotations

import struct

import numpy as np

from sniffsync.io.bytecols import be, gather
from sniffsync.decode.table import Cat, Cols, Marks, factorize

__all__ = ["decode_llc", "decode_l3", "ETH_IPV4", "ETH_IPV6"]

ETH_IPV4, ETH_IPV6 = 0x0800, 0x86DD
PROTO_TCP, PROTO_UDP = 6, 17
PROTO_ICMP, PROTO_ICMPV6 = 1, 58
UDP_WORDS = 3                              # udp_w0..2
ICMP_ECHO_TYPES = (0, 8, 128, 129)         # echo reply/request (ICMPv4), request/reply (ICMPv6)
SNAP_OUIS = (0x000000, 0x0000F8)           # RFC 1042 and 802.1H bridge-tunnel
IPV6_EXT_SKIP = {0: "hop-by-hop", 43: "routing", 60: "destination options"}
IPV6_FRAG = 44
IPV6_MAX_EXT = 8                           # extension headers followed before giving up
TCP_OPT_MSS, TCP_OPT_WSCALE, TCP_OPT_SACK, TCP_OPT_TS = 2, 3, 5, 8
L3_WINDOW = 40                             # IPv6 fixed header
L4_WINDOW = 32                             # TCP fixed header + 12 option bytes (fast path)
TS_ONLY = (1, 1, 8, 10)                    # NOP NOP Timestamps: the usual 12-byte option block
SACK_LENS = (10, 18, 26, 34)               # option 5: 2 + 8 bytes per block, 1-4 blocks


def decode_llc(buf, off, end):
    """LLC/SNAP header (AA AA 03, OUI, ethertype) of every row with ``off >= 0``.

    Returns
    -------
    cols : Cols
        ``{"ethertype": (uint16, valid)}``.
    l3_off : int64[n]
        Start of the network-layer packet; -1 when the payload is not SNAP-encapsulated.
    """
    off = np.asarray(off, np.int64)
    end = np.asarray(end, np.int64)
    ok = (off >= 0) & (off + 8 <= end)
    w = gather(buf, np.where(ok, off, 0), 8)
    oui = (w[:, 3].astype(np.int64) << 16) | (w[:, 4].astype(np.int64) << 8) | w[:, 5]
    snap = ok & (w[:, 0] == 0xAA) & (w[:, 1] == 0xAA) & (w[:, 2] == 0x03) & np.isin(oui, SNAP_OUIS)
    ethertype = be(w, 6, 2)
    return {"ethertype": (ethertype, snap)}, np.where(snap, off + 8, -1)


def _dotted(addrs: np.ndarray) -> list:
    """Dotted-quad text of 32-bit IPv4 addresses."""
    return [f"{u >> 24}.{u >> 16 & 255}.{u >> 8 & 255}.{u & 255}" for u in addrs.tolist()]


def _ipv4_category(addr) -> Cat:
    """:func:`_ip_category` of rows that all hold an IPv4 address (``addr``: their 32-bit values)."""
    c, uniq = factorize(addr)
    names = _dotted(uniq)
    order = sorted(range(len(names)), key=names.__getitem__)      # text order, as np.unique
    remap = np.empty(len(names), np.int32)
    remap[order] = np.arange(len(names), dtype=np.int32)
    return Cat(remap[c], [names[i] for i in order])


def _ip_category(v4, r4, v6, r6, n):
    """Category column of the IPv4 (``v4``: 32-bit values of rows ``r4``) / IPv6 (``v6``:
    (k, 16) bytes of rows ``r6``) address of each of ``n`` rows."""
    codes = np.full(n, -1, np.int64)
    names: list = []
    if r4.size:      # IPv4: hash the 32-bit value, format each distinct address once
        c, uniq = factorize(v4)
        codes[r4] = c
        names += _dotted(uniq)
    if r6.size:
        import socket

        from sniffsync.decode.bytecat import categorical_from_bytes  # (IPv6 only: wired IPv4 captures skip both)
        cat = categorical_from_bytes(v6, lambda b: socket.inet_ntop(socket.AF_INET6, b))
        codes[r6] = cat.codes + len(names)
        names += list(cat.categories)
    cats, remap = np.unique(np.array(names, dtype=object), return_inverse=True)
    codes = np.where(codes >= 0, remap.ravel()[np.maximum(codes, 0)] if names else -1, -1)
    return Cat(codes.astype(np.int32), list(cats))


# IPv4 without options, first fragment, TCP with a 32-byte header holding NOP NOP TS: the
# layout of nearly every segment of a Linux TCP transfer. Its fields sit at fixed offsets,
# so one 52-byte gather per row reads them all (see :func:`_fixed_layout`).
FIXED_LEN = 20 + 32


def _fixed_layout(buf, off, end, ethertype):
    """Rows in the fixed IPv4 + TCP/TS layout, and every row's first ``FIXED_LEN`` bytes."""
    ok = (off >= 0) & (ethertype == ETH_IPV4) & (end - off >= FIXED_LEN)
    w = gather(buf, np.where(ok, off, 0), FIXED_LEN)
    ok &= (w[:, 0] == 0x45) & (w[:, 9] == PROTO_TCP) & ((w[:, 6] & 0x1F) == 0) & (w[:, 7] == 0)
    ok &= (w[:, 32] >> 4) == 8
    for j, byte in enumerate(TS_ONLY):
        ok &= w[:, 40 + j] == byte
    return ok, w


def _fixed_cols(w) -> Cols:
    """The columns :func:`decode_l3` gives rows of the fixed layout (``w``: their bytes)."""
    n = len(w)
    yes, no = np.ones(n, bool), np.zeros(n, bool)
    ip_len = be(w, 2, 2).astype(np.int64)
    cols: Cols = {"ip_proto": (w[:, 9].copy(), yes), "ip_len": (ip_len.astype(np.uint32), yes),
                  "ip_id": (be(w, 4, 2), yes)}
    for name, at in (("ip_src", 12), ("ip_dst", 16)):
        cols[name] = (_ipv4_category(be(w, at, 4)), yes)
    cols.update({
        "sport": (be(w, 20, 2), yes), "dport": (be(w, 22, 2), yes),
        "tcp_seq": (be(w, 24, 4), yes), "tcp_ack": (be(w, 28, 4), yes),
        "tcp_flags": (((w[:, 32].astype(np.uint16) & 1) << 8) | w[:, 33], yes),
        "tcp_win": (be(w, 34, 2), yes), "tcp_payload_len": ((ip_len - FIXED_LEN).astype(np.int32), yes),
        "udp_len": (be(w, 24, 2), no), "tcp_mss": (np.zeros(n, np.uint16), no),
        "tcp_wscale": (np.zeros(n, np.uint8), no), "tcp_tsval": (be(w, 44, 4), yes),
        "tcp_tsecr": (be(w, 48, 4), yes), "tcp_sack": (no.copy(), yes),
        "tcp_sack_blocks": (Cat(np.full(n, -1, np.int32), []), no)})
    cols.update({f"udp_w{k}": (np.zeros(n, np.uint32), no) for k in range(UDP_WORDS)})
    cols.update({k: (np.zeros(n, dt), no) for k, dt in ICMP_DTYPES.items()})
    return cols


def _place(n: int, parts) -> Cols:
    """Full-length columns from ``[(rows, cols)]`` parts that partition ``0..n-1``."""
    from sniffsync.decode.table import _union_cats
    out: Cols = {}
    for name in parts[0][1]:
        cells = [(rows, cols[name]) for rows, cols in parts]
        like = cells[0][1][0]
        ok = np.empty(n, bool)
        for rows, (_, valid) in cells:
            ok[rows] = True if valid is None else valid
        if isinstance(like, Cat):
            cat = _union_cats([v for _, (v, _) in cells])
            codes = np.empty(n, cat.codes.dtype)
            at = 0
            for rows, _ in cells:
                codes[rows] = cat.codes[at:at + len(rows)]
                at += len(rows)
            out[name] = (Cat(codes, cat.categories), ok)
            continue
        vals = np.empty(n, np.result_type(*[v.dtype for _, (v, _) in cells]))
        for rows, (v, _) in cells:
            vals[rows] = v
        out[name] = (vals, ok)
    return out


def decode_l3(buf, off, end, ethertype, columns=None):
    """IPv4 / IPv6 and the TCP / UDP header above them.

    With the C extension, one pass over the headers (:mod:`sniffsync.decode.l3c`). Else
    rows in the fixed IPv4 + TCP/TS layout (most of a TCP capture) are read from one
    52-byte window each; the others take the general path; all give the same columns.

    Parameters
    ----------
    buf : np.ndarray of uint8
    off : int64[n]
        Start of the network-layer packet (-1: none).
    end : int64[n]
        End of the captured bytes (FCS excluded).
    ethertype : uint16[n]
        0x0800 IPv4, 0x86DD IPv6; other values are skipped.
    columns : set of str, optional
        Columns wanted (default all): the C pass builds no other category column.

    Returns
    -------
    cols : Cols
        ``ip_*``, ``sport``, ``dport``, ``tcp_*`` and ``udp_len`` columns of the schema.
    marks : Marks
    """
    off = np.asarray(off, np.int64)
    end = np.asarray(end, np.int64)
    ethertype = np.asarray(ethertype)
    from sniffsync.decode.l3c import decode_l3_c        # the same columns, one C pass
    fast = decode_l3_c(buf, off, end, ethertype, columns)
    if fast is not None:
        return fast
    n = off.shape[0]
    fixed, w = _fixed_layout(buf, off, end, ethertype)
    k = int(fixed.sum())
    if k == n:
        return _zero_invalid(_fixed_cols(w)), []
    if k == 0 or k < n // 2:             # mostly other layouts: one general pass
        cols, marks = _decode_l3(buf, off, end, ethertype)
        return _zero_invalid(cols), marks
    fr, gr = np.flatnonzero(fixed), np.flatnonzero(~fixed)
    g_cols, g_marks = _decode_l3(buf, off[gr], end[gr], ethertype[gr])
    return (_zero_invalid(_place(n, [(fr, _fixed_cols(w[fr])), (gr, g_cols)])),
            [(gr[r], why) for r, why in g_marks])


def _zero_invalid(cols: Cols) -> Cols:
    """Values 0 where not valid (the windows held other bytes there), as the C pass gives them."""
    return {k: (v if isinstance(v, Cat) else np.where(ok, v, np.zeros(1, v.dtype)), ok)
            for k, (v, ok) in cols.items()}


def _decode_l3(buf, off, end, ethertype):
    """:func:`decode_l3` for any layout."""
    n = off.shape[0]
    marks: Marks = []
    w = gather(buf, np.where(off >= 0, off, 0), L3_WINDOW)
    ver = w[:, 0] >> 4
    caplen = end - off
    v4 = (off >= 0) & (ethertype == ETH_IPV4) & (ver == 4)
    v6 = (off >= 0) & (ethertype == ETH_IPV6) & (ver == 6)
    ihl = (w[:, 0] & 0xF).astype(np.int64) * 4
    v4_ok = v4 & (caplen >= 20) & (ihl >= 20)
    v6_ok = v6 & (caplen >= 40)
    bad = np.flatnonzero((v4 & ~v4_ok) | (v6 & ~v6_ok))
    if bad.size:
        marks.append((bad, "IP: header truncated"))

    frag = be(w, 6, 2)
    proto = np.where(v4, w[:, 9], w[:, 6]).astype(np.uint8)
    ip_len = np.where(v4, be(w, 2, 2).astype(np.int64), be(w, 4, 2).astype(np.int64) + 40)
    l4_off = np.where(v4, off + ihl, off + 40)
    first_frag = np.where(v4, (frag & 0x1FFF) == 0, True)

    # IPv6 extension headers: one step per header, over the rows still inside the chain.
    rows6 = np.flatnonzero(v6_ok)
    nh, p = proto[rows6].copy(), l4_off[rows6].copy()
    idx = np.arange(rows6.size)
    for _ in range(IPV6_MAX_EXT if rows6.size else 0):
        walk = np.isin(nh[idx], list(IPV6_EXT_SKIP) + [IPV6_FRAG]) & (p[idx] + 8 <= end[rows6[idx]])
        idx = idx[walk]
        if idx.size == 0:
            break
        hb = gather(buf, p[idx], 4)
        is_frag = nh[idx] == IPV6_FRAG
        frag_off = be(hb, 2, 2).astype(np.int64) >> 3
        first_frag[rows6[idx[is_frag & (frag_off != 0)]]] = False
        nh[idx] = hb[:, 0]
        p[idx] += np.where(is_frag, 8, (hb[:, 1].astype(np.int64) + 1) * 8)
    proto[rows6], l4_off[rows6] = nh, p

    ip_ok = v4_ok | v6_ok
    cols: Cols = {
        "ip_proto": (proto, ip_ok),
        "ip_len": (ip_len.astype(np.uint32), ip_ok),
        "ip_id": (be(w, 4, 2), v4_ok),
    }
    r4, r6 = np.flatnonzero(v4_ok), np.flatnonzero(v6_ok)
    for name, a4, a6 in (("ip_src", 12, 8), ("ip_dst", 16, 24)):
        cat = _ip_category(be(w[r4, a4:a4 + 4], 0, 4), r4, w[r6, a6:a6 + 16], r6, n)
        cols[name] = (cat, cat.codes >= 0)

    l4 = ip_ok & first_frag & (l4_off < end)
    is_tcp = l4 & (proto == PROTO_TCP)
    is_udp = l4 & (proto == PROTO_UDP)
    cols.update(_l4(buf, l4_off, end, is_tcp, is_udp, ip_len - (l4_off - off), marks))
    is_icmp = l4 & ((v4 & (proto == PROTO_ICMP)) | (v6 & (proto == PROTO_ICMPV6)))
    cols.update(_icmp(buf, l4_off, end, is_icmp))
    return cols, marks


ICMP_DTYPES = {"icmp_type": np.uint8, "icmp_code": np.uint8, "icmp_id": np.uint16, "icmp_seq": np.uint16}


def _icmp(buf, l4_off, end, is_icmp) -> Cols:
    """ICMP / ICMPv6 type and code; identifier and sequence number of echo messages."""
    w = gather(buf, np.where(is_icmp, l4_off, 0), 8)
    cap = end - l4_off
    ok = is_icmp & (cap >= 2)
    echo = is_icmp & (cap >= 8) & np.isin(w[:, 0], ICMP_ECHO_TYPES)
    return {"icmp_type": (w[:, 0].copy(), ok), "icmp_code": (w[:, 1].copy(), ok),
            "icmp_id": (be(w, 4, 2), echo), "icmp_seq": (be(w, 6, 2), echo)}


def _l4(buf, l4_off, end, is_tcp, is_udp, l4_len, marks):
    """TCP and UDP headers at ``l4_off``; ``l4_len`` = IP payload bytes after IP headers."""
    w = gather(buf, np.where(is_tcp | is_udp, l4_off, 0), L4_WINDOW)
    cap = end - l4_off
    tcp_ok = is_tcp & (cap >= 20)
    udp_ok = is_udp & (cap >= 8)
    bad = np.flatnonzero((is_tcp & ~tcp_ok) | (is_udp & ~udp_ok))
    if bad.size:
        marks.append((bad, "TCP/UDP: header truncated"))
    ports_ok = (is_tcp | is_udp) & (cap >= 4)
    thl = (w[:, 12] >> 4).astype(np.int64) * 4
    flags = ((w[:, 12].astype(np.uint16) & 1) << 8) | w[:, 13]
    cols: Cols = {
        "sport": (be(w, 0, 2), ports_ok),
        "dport": (be(w, 2, 2), ports_ok),
        "tcp_seq": (be(w, 4, 4), is_tcp & (cap >= 8)),
        "tcp_ack": (be(w, 8, 4), is_tcp & (cap >= 12)),
        "tcp_flags": (flags, is_tcp & (cap >= 14)),
        "tcp_win": (be(w, 14, 2), is_tcp & (cap >= 16)),
        "tcp_payload_len": ((l4_len - thl).astype(np.int32), is_tcp & (cap >= 13) & (thl >= 20)),
        "udp_len": (be(w, 4, 2), udp_ok),
    }

    # Fast path: exactly NOP NOP TS (Linux, ns-3 data segments) needs no walk.
    ts_only = tcp_ok & (thl == 32) & (cap >= 32)
    for j, byte in enumerate(TS_ONLY):
        ts_only &= w[:, 20 + j] == byte
    walk = np.flatnonzero(tcp_ok & (thl > 20) & ~ts_only)
    opts = _tcp_options(buf, l4_off, end, walk, thl, tcp_ok)
    tsval, tsval_ok = opts["tcp_tsval"]
    tsecr, _ = opts["tcp_tsecr"]
    opts["tcp_tsval"] = (np.where(ts_only, be(w, 24, 4), tsval), tsval_ok | ts_only)
    opts["tcp_tsecr"] = (np.where(ts_only, be(w, 28, 4), tsecr), tsval_ok | ts_only)
    cols.update(opts)
    # the UDP payload's first three 32-bit words: iperf2 (seq, sec, usec) / iperf3 (sec, usec, seq)
    ulen = be(w, 4, 2).astype(np.int64)
    for k in range(UDP_WORDS):
        at = 8 + 4 * k
        cols[f"udp_w{k}"] = (be(w, at, 4), udp_ok & (cap >= at + 4) & (ulen >= at + 4))
    return cols


def _tcp_options(buf, l4_off, end, rows, thl, tcp_ok):
    """Walk TCP options one option position at a time, masks over all rows with options."""
    n = l4_off.shape[0]
    mss = np.zeros(n, np.uint16)
    wscale = np.zeros(n, np.uint8)
    tsval = np.zeros(n, np.uint32)
    tsecr = np.zeros(n, np.uint32)
    sack = np.zeros(n, bool)
    sack_at = np.full(n, -1, np.int64)       # offset of the first well-formed SACK option
    got = {k: np.zeros(n, bool) for k in ("mss", "wscale", "ts")}
    opt_end = np.minimum(l4_off[rows] + thl[rows], end[rows])
    pos = l4_off[rows] + 20
    idx = np.arange(rows.size)
    for _ in range(40):                       # at most 40 option bytes
        alive = pos < opt_end[idx]
        idx, pos = idx[alive], pos[alive]
        if idx.size == 0:
            break
        ob = gather(buf, pos, 10)
        kind, olen = ob[:, 0], ob[:, 1].astype(np.int64)
        stop = (kind == 0) | ((kind != 1) & ((olen < 2) | (pos + 2 > opt_end[idx])))
        inside = pos + olen <= opt_end[idx]
        r = rows[idx]
        for key, code, size in (("mss", TCP_OPT_MSS, 4), ("wscale", TCP_OPT_WSCALE, 3),
                                ("ts", TCP_OPT_TS, 10)):
            hit = (kind == code) & (olen == size) & inside & ~stop
            got[key][r[hit]] = True
            if key == "mss":
                mss[r[hit]] = be(ob[hit], 2, 2)
            elif key == "wscale":
                wscale[r[hit]] = ob[hit, 2]
            else:
                tsval[r[hit]] = be(ob[hit], 2, 4)
                tsecr[r[hit]] = be(ob[hit], 6, 4)
        sack[r[(kind == TCP_OPT_SACK) & ~stop]] = True
        blocks = (kind == TCP_OPT_SACK) & np.isin(olen, SACK_LENS) & inside & ~stop
        sack_at[r[blocks]] = np.where(sack_at[r[blocks]] < 0, pos[blocks], sack_at[r[blocks]])
        step = np.where(kind == 1, 1, olen)
        keep = ~stop
        idx, pos = idx[keep], pos[keep] + step[keep]
    return {
        "tcp_mss": (mss, got["mss"]),
        "tcp_wscale": (wscale, got["wscale"]),
        "tcp_tsval": (tsval, got["ts"]),
        "tcp_tsecr": (tsecr, got["ts"]),
        "tcp_sack": (sack, tcp_ok),     # no option 5 seen -> False
        "tcp_sack_blocks": _sack_blocks(buf, sack_at),
    }


_U32S = [struct.Struct(f">{2 * k}I") for k in range(5)]     # the edges of 0..4 blocks


def _sack_text(b: bytes) -> str:
    """Option 5's length byte and blocks -> ``"LE-RE,LE-RE"`` (raw sequence numbers)."""
    v = _U32S[(b[0] - 2) // 8].unpack_from(b, 1)
    return ",".join(map("{}-{}".format, v[::2], v[1::2]))


def _sack_blocks(buf, at):
    """Category column of the SACK blocks of the option at ``at`` (-1: none), RFC 2018;
    each distinct option formatted once (rows with SACK only: loss recovery)."""
    codes = np.full(at.shape[0], -1, np.int32)
    rows = np.flatnonzero(at >= 0)
    if not rows.size:
        return Cat(codes, []), at >= 0
    from sniffsync.decode.bytecat import categorical_from_bytes      # (rows with SACK only)
    w = gather(buf, at[rows] + 1, 33)                        # length byte + up to 4 blocks
    w[np.arange(33) >= w[:, :1].astype(np.int64) - 1] = 0    # bytes past the option
    cat = categorical_from_bytes(w, _sack_text)
    codes[rows] = cat.codes
    return Cat(codes, cat.categories), at >= 0
