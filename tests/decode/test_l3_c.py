"""The IP / TCP / UDP / ICMP headers read by the C extension (``sniffsync.io._walk.l3``,
:mod:`sniffsync.decode.l3c`) against the Python decoder (the fallback, checked against
hand-worked bytes in test_payload*.py and against tshark in test_frames_vs_tshark.py):
every column, mask, category list and mark, on random and damaged headers of every kind
the decoder follows (IPv4 options and fragments, IPv6 extension chains, TCP option lists,
UDP, ICMP echo, truncation), on chunks taking each of the Python decoder's paths. Every
test capture: test_radiotap_c.py compares the whole frame table both ways (the backend
switch selects both C passes)."""
import random
import struct

import numpy as np
import pytest

from sniffsync.decode import l3c
from sniffsync.decode.payload import decode_l3
from sniffsync.decode.table import scatter
from sniffsync.io import walk

from tests.decode.test_radiotap_c import same_cols

pytestmark = pytest.mark.skipif(getattr(walk._c, "l3", None) is None,
                                reason="sniffsync.io._walk not built (no compiler)")

TS_SEGMENT = (bytes([0x45, 0, 0, 100, 0x12, 0x34, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2])
              + struct.pack(">HHIIBBHHH", 5001, 40000, 7, 9, 0x80, 0x10, 500, 0, 0)
              + bytes([1, 1, 8, 10]) + struct.pack(">II", 11, 22))


def rand_bytes(rng, k):
    return bytes(rng.randrange(256) for _ in range(k))


def tcp_options(rng) -> bytes:
    opts = b""
    for _ in range(rng.randrange(0, 6)):
        kind = rng.choice([0, 1, 1, 2, 3, 4, 5, 5, 8, 8, 30])
        if kind in (0, 1):
            opts += bytes([kind])
        elif kind == 5:
            k = rng.randrange(0, 5)
            opts += bytes([5, rng.choice([2 + 8 * k, 2 + 8 * k, rng.randrange(256)])]) + rand_bytes(rng, 8 * k)
        else:
            size = {2: 4, 3: 3, 4: 2, 8: 10, 30: 6}[kind]
            opts += bytes([kind, rng.choice([size, size, size, rng.randrange(4)])]) + rand_bytes(rng, size - 2)
    return (opts + bytes(-len(opts) % 4))[:40]


def l4_header(rng, proto) -> bytes:
    if proto == 6:
        opts = tcp_options(rng)
        thl = rng.choice([(20 + len(opts)) // 4, (20 + len(opts)) // 4, rng.randrange(16)])
        return struct.pack(">HHIIBBHHH", *(rng.randrange(1 << 16) for _ in range(2)),
                           rng.randrange(1 << 32), rng.randrange(1 << 32), thl << 4 | rng.randrange(2),
                           rng.randrange(256), rng.randrange(1 << 16), 0, 0) + opts
    if proto == 17:
        return struct.pack(">HHHH", 53, 5001, rng.randrange(40), 0) + rand_bytes(rng, 12)
    return bytes([rng.choice([0, 8, 128, 129, 3]), rng.randrange(4), 0, 0]) + rand_bytes(rng, 8)


def packet(rng) -> tuple[bytes, int]:
    """A random IPv4 / IPv6 packet (or garbage) and its ethertype."""
    kind = rng.random()
    if kind < 0.05:
        return rand_bytes(rng, rng.randrange(0, 60)), rng.choice([0x0800, 0x86DD, 0x0806])
    if kind < 0.3:
        return TS_SEGMENT, 0x0800
    proto = rng.choice([6, 6, 17, 1, 58, 50])
    l4 = l4_header(rng, proto)
    if kind < 0.7:                         # IPv4, options and fragments sometimes
        ihl = rng.choice([5, 5, 5, 6, 15, 3])
        frag = rng.choice([0, 0, 0x4000, 0x2000, 0x0010])
        ip = struct.pack(">BBHHHBBH", 0x40 | ihl, 0, 4 * max(ihl, 5) + len(l4) + rng.randrange(0, 1400),
                         rng.randrange(1 << 16), frag, 64, proto, 0) + rand_bytes(rng, 8)
        ip += rand_bytes(rng, 4 * max(ihl - 5, 0))
        pkt = ip + l4
    else:                                  # IPv6, with an extension chain sometimes
        chain, nh = b"", proto
        for _ in range(rng.choice([0, 0, 1, 2, 9])):
            ext = rng.choice([0, 43, 60, 44])
            body = struct.pack(">BBHI", nh, 0, rng.choice([0, 8, 9]), 1) if ext == 44 else \
                bytes([nh, 0]) + rand_bytes(rng, 6)
            chain, nh = body + chain, ext
        pkt = struct.pack(">IHBB", 0x60000000, len(chain) + len(l4), nh, 64) + rand_bytes(rng, 32) + chain + l4
    if rng.random() < 0.15:                # cut short
        pkt = pkt[:rng.randrange(len(pkt) + 1)]
    return pkt, 0x0800 if kind < 0.7 else 0x86DD


def both(buf, off, end, etype):
    out = []
    for backend in ("c", "python"):
        with walk.use_backend(backend):
            out.append(decode_l3(buf, off, end, etype))
    return out


def check(buf, off, end, etype):
    (ca, ma), (cb, mb) = both(buf, off, end, etype)
    same_cols(ca, cb)
    assert list(ca) == list(cb)                    # the same column order
    assert [(r.tolist(), w) for r, w in ma] == [(np.asarray(r).tolist(), w) for r, w in mb]
    return ca


def test_random_headers():
    rng = random.Random(17)
    pkts = [packet(rng) for _ in range(4000)]
    buf = np.frombuffer(b"".join(p for p, _ in pkts), np.uint8)
    lens = np.array([len(p) for p, _ in pkts], np.int64)
    off = np.concatenate([[0], np.cumsum(lens)[:-1]])
    etype = np.array([e for _, e in pkts], np.uint16)
    cols = check(buf, off, off + lens, etype)
    # the kinds of rows the C pass must get right all occur
    for name in ("tcp_mss", "tcp_wscale", "tcp_tsval", "udp_w2", "icmp_seq", "tcp_payload_len"):
        assert cols[name][1].any() and not cols[name][1].all(), name
    assert cols["tcp_sack"][0].any() and len(cols["tcp_sack_blocks"][0].categories) > 3
    assert (cols["ip_proto"][0][cols["ip_proto"][1]] == 58).any()          # past an IPv6 chain
    # each path of the Python decoder: all fixed layout, mostly fixed (the categories of a
    # mixed chunk are unioned), mostly other, and rows with no IP (offset -1)
    fixed = np.array([p == TS_SEGMENT for p, _ in pkts])
    mixed = np.sort(np.concatenate([np.flatnonzero(fixed)[:300], np.flatnonzero(~fixed)[:200]]))
    for rows in (np.flatnonzero(fixed), mixed, np.arange(200)):
        check(buf, off[rows], off[rows] + lens[rows], etype[rows])
    # rows without IP given as offset -1 (the frame table's chunks give the C pass every
    # row): as the Python decoder's columns of the other rows, scattered
    for rows in (np.flatnonzero(fixed | (np.arange(len(off)) % 5 == 0)), np.arange(len(off))):
        sub = rows[rows % 3 != 0]
        with walk.use_backend("c"):
            cols, marks = decode_l3(buf, np.where(rows % 3 == 0, -1, off[rows]), off[rows] + lens[rows],
                                    etype[rows])
        with walk.use_backend("python"):
            py_cols, py_marks = decode_l3(buf, off[sub], off[sub] + lens[sub], etype[sub])
        at = np.flatnonzero(rows % 3 != 0)
        same_cols(cols, scatter(len(rows), at, py_cols))
        assert [r.tolist() for r, _ in marks] == [at[r].tolist() for r, _ in py_marks]


def test_past_the_buffer_reads_zero():
    # a header cut by the end of the buffer itself (not only by the record's length)
    seg = np.frombuffer(TS_SEGMENT, np.uint8)
    for cut in (10, 20, 30, 40, 51):
        buf = seg[:cut].copy()
        check(buf, np.array([0], np.int64), np.array([52], np.int64), np.array([0x0800], np.uint16))


def test_fixed_segment_by_hand():
    buf = np.frombuffer(TS_SEGMENT, np.uint8)
    with walk.use_backend("c"):
        cols, marks = decode_l3(buf, np.array([0]), np.array([len(TS_SEGMENT)]), np.array([0x0800], np.uint16))
    got = {k: v[0].tolist() for k, (v, ok) in cols.items() if ok[0] and not hasattr(v, "codes")}
    assert got == {"ip_proto": 6, "ip_len": 100, "ip_id": 0x1234, "sport": 5001, "dport": 40000,
                   "tcp_seq": 7, "tcp_ack": 9, "tcp_flags": 0x10, "tcp_win": 500,
                   "tcp_payload_len": 100 - 52, "tcp_tsval": 11, "tcp_tsecr": 22, "tcp_sack": False}
    assert np.asarray(cols["ip_src"][0]).tolist() == ["10.0.0.1"] and marks == []


def test_outputs_table_matches_the_extension():
    # a list of the wrong length or size is refused, not written past
    with pytest.raises(ValueError):
        walk._c.l3(b"", np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(1, np.uint16), [])
    o = list(l3c._outputs(2).values())
    o[3] = np.zeros(1, bool)
    with pytest.raises(ValueError):
        walk._c.l3(b"", np.zeros(2, np.int64), np.zeros(2, np.int64), np.zeros(2, np.uint16), o)



def test_extension_built_before_the_pass(monkeypatch):
    # an older build of sniffsync.io._walk (no l3): the Python decoder answers
    buf = np.frombuffer(TS_SEGMENT * 3, np.uint8)
    off = np.arange(3, dtype=np.int64) * len(TS_SEGMENT)
    args = (buf, off, off + len(TS_SEGMENT), np.full(3, 0x0800, np.uint16))
    with walk.use_backend("python"):
        py_cols, _ = decode_l3(*args)
    monkeypatch.setattr(walk, "_c", type("Old", (), {"pcap": walk._c.pcap})())
    assert not l3c.l3_c_ready() and l3c.decode_l3_c(*args) is None
    with walk.use_backend("c"):
        same_cols(decode_l3(*args)[0], py_cols)
