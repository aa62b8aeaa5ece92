"""The IP / TCP / UDP / ICMP columns of :func:`sniffsync.decode.payload.decode_l3` from one
pass of the C extension (``sniffsync.io._walk.l3``, source ``sniffsync/io/_l3.c``).

The C pass reads every header field, its validity and the marks row by row (no window
copies, no per-field numpy pass); the address texts, the categories and the SACK text are
built here as the Python decoder builds them, so the columns are the same: valid values,
masks, category lists and codes, marks (the tests compare both decoders on every test
capture). Where a field is not valid its value is 0. Used when :mod:`sniffsync.io.walk`'s
backend is ``"c"`` (built, and ``SNIFFSYNC_WALK`` not ``python``).
"""
from __future__ import annotations

import numpy as np

from sniffsync.decode.table import Cat

__all__ = ["decode_l3_c", "l3_c_ready", "OUTPUTS"]

# the C pass's outputs, in its order (sniffsync/io/_l3.c): name, dtype, items per row
OUTPUTS = (
    ("ip_proto", np.uint8), ("ip_len", np.uint32), ("ip_id", np.uint16), ("v4_ok", bool),
    ("v6_ok", bool), ("src4", np.uint32), ("dst4", np.uint32), ("addr6", (np.uint8, 32)),
    ("sport", np.uint16), ("dport", np.uint16), ("ports_ok", bool), ("tcp_seq", np.uint32),
    ("seq_ok", bool), ("tcp_ack", np.uint32), ("ack_ok", bool), ("tcp_flags", np.uint16),
    ("flags_ok", bool), ("tcp_win", np.uint16), ("win_ok", bool), ("tcp_payload_len", np.int32),
    ("plen_ok", bool), ("udp_len", np.uint16), ("udp_ok", bool), ("tcp_mss", np.uint16),
    ("mss_ok", bool), ("tcp_wscale", np.uint8), ("wscale_ok", bool), ("tcp_tsval", np.uint32),
    ("tcp_tsecr", np.uint32), ("ts_ok", bool), ("tcp_sack", bool), ("tcp_ok", bool),
    ("sack_at", np.int64), ("udp_w0", np.uint32), ("udp_w1", np.uint32), ("udp_w2", np.uint32),
    ("udp_w0_ok", bool), ("udp_w1_ok", bool), ("udp_w2_ok", bool), ("icmp_type", np.uint8),
    ("icmp_code", np.uint8), ("icmp_ok", bool), ("icmp_id", np.uint16), ("icmp_seq", np.uint16),
    ("echo_ok", bool), ("ip_bad", bool), ("l4_bad", bool), ("fixed", bool),
)
# column -> its valid mask among the outputs (decode_l3's column order)
_VALID = {"ip_proto": "ip_ok", "ip_len": "ip_ok", "ip_id": "v4_ok", "ip_src": None, "ip_dst": None,
          "sport": "ports_ok", "dport": "ports_ok", "tcp_seq": "seq_ok", "tcp_ack": "ack_ok",
          "tcp_flags": "flags_ok", "tcp_win": "win_ok", "tcp_payload_len": "plen_ok",
          "udp_len": "udp_ok", "tcp_mss": "mss_ok", "tcp_wscale": "wscale_ok", "tcp_tsval": "ts_ok",
          "tcp_tsecr": "ts_ok", "tcp_sack": "tcp_ok", "tcp_sack_blocks": None,
          **{f"udp_w{k}": f"udp_w{k}_ok" for k in range(3)},
          "icmp_type": "icmp_ok", "icmp_code": "icmp_ok", "icmp_id": "echo_ok", "icmp_seq": "echo_ok"}
_MARKS = (("ip_bad", "IP: header truncated"), ("l4_bad", "TCP/UDP: header truncated"))


def _outputs(n: int) -> dict:
    out = {}
    for name, dt in OUTPUTS:
        shape = (n, dt[1]) if isinstance(dt, tuple) else n
        out[name] = np.zeros(shape, dt[0] if isinstance(dt, tuple) else dt)
    out["sack_at"].fill(-1)
    return out


def l3_c_ready() -> bool:
    """Whether :func:`decode_l3_c` decodes (the extension built, with this pass, and in use)."""
    from sniffsync.io import walk
    return walk.backend() == "c" and getattr(walk._c, "l3", None) is not None


def decode_l3_c(buf, off, end, ethertype, columns=None):
    """``(cols, marks)`` as :func:`sniffsync.decode.payload.decode_l3` gives them, or None
    when the C extension is not in use. Category columns not in ``columns`` (a set, None:
    all) are left out (their texts are the costly part)."""
    from sniffsync.io import walk
    # (an extension built before this pass existed has no l3: the Python decoder does it)
    if not l3_c_ready() or not len(off):
        return None
    n = len(off)
    o = _outputs(n)
    walk._c.l3(buf, np.ascontiguousarray(off, np.int64), np.ascontiguousarray(end, np.int64),
       np.ascontiguousarray(ethertype, np.uint16), list(o.values()))
    o["ip_ok"] = o["v4_ok"] | o["v6_ok"]
    o["n_l3"] = int(np.count_nonzero(off >= 0))     # rows a caller may also give as offset -1
    cols = {}
    for name, ok in _VALID.items():
        if ok is None and columns is not None and name not in columns:
            continue
        if ok is not None:
            cols[name] = (o[name], o[ok])
        elif name == "tcp_sack_blocks":
            from sniffsync.decode.payload import _sack_blocks
            cols[name] = _sack_blocks(buf, o["sack_at"])
        else:
            cat = _addresses(o, "src4" if name == "ip_src" else "dst4", 0 if name == "ip_src" else 16, n)
            cols[name] = (cat, cat.codes >= 0)
    marks = [(np.flatnonzero(o[key]), why) for key, why in _MARKS if o[key].any()]
    return cols, marks


def _addresses(o: dict, v4: str, at6: int, n: int) -> Cat:
    """The address category column, with the categories in the order the Python decoder
    gives them: sorted, except in a chunk of which at least half but not all rows have
    the fixed IPv4 + TCP/TS layout (its fixed rows' addresses first, then the others').
    Rows of offset -1 count for neither (the Python decoder is given the others only)."""
    from sniffsync.decode.payload import _ip_category, _ipv4_category
    from sniffsync.decode.table import _union_cats

    def general(rows=None):                    # (None: every row, no copies)
        sub = (lambda a: a) if rows is None else (lambda a: a[rows])
        i4, i6 = np.flatnonzero(sub(o["v4_ok"])), np.flatnonzero(sub(o["v6_ok"]))
        m = n if rows is None else len(rows)
        if len(i4) == m:                       # every row IPv4 (a wired TCP capture): the same, directly
            return _ipv4_category(sub(o[v4]))
        at = (lambda i: i) if rows is None else (lambda i: rows[i])
        return _ip_category(o[v4][at(i4)], i4, o["addr6"][at(i6), at6:at6 + 16], i6, m)

    k, n_l3 = int(np.count_nonzero(o["fixed"])), o["n_l3"]
    if k == n_l3 or k == 0 or k < n_l3 // 2:
        return general()
    fr, gr = np.flatnonzero(o["fixed"]), np.flatnonzero(~o["fixed"])
    cat = _union_cats([_ipv4_category(o[v4][fr]), general(gr)])
    codes = np.empty(n, cat.codes.dtype)
    codes[fr], codes[gr] = cat.codes[:k], cat.codes[k:]
    return Cat(codes, cat.categories)
