"""The fixed IPv4 + TCP/TS layout read from one 52-byte window (sniffsync.payload.decode_l3)
against the general decoder (the oracle) on packets built from randomised headers.

Every row kind that must not be taken for the fixed layout is mixed in: IP options,
fragments, UDP, other TCP header lengths and options, frames cut short, IPv6, garbage.
"""
import struct

import numpy as np
import pytest

from sniffsync.decode import payload
from sniffsync.decode.payload import decode_l3

RNG = np.random.default_rng(7)
ADDRS = [b"\x0a\x01\x01\x01", b"\x0a\x01\x01\x02", b"\xc0\xa8\x00\x07"]


def _tcp(doff=8, opts=b"\x01\x01\x08\x0a"):
    body = struct.pack(">HHIIBBHHH", int(RNG.integers(1, 65535)), int(RNG.integers(1, 65535)),
                       int(RNG.integers(0, 2**32)), int(RNG.integers(0, 2**32)), doff << 4 | int(RNG.integers(0, 2)),
                       int(RNG.integers(0, 256)), int(RNG.integers(0, 65536)), 0, 0)
    opt = (opts + RNG.integers(0, 256, 40, dtype=np.uint8).tobytes())[:doff * 4 - 20]
    return body + opt


def _ipv4(l4, proto=6, ihl=5, frag=0, extra=0):
    total = 4 * ihl + len(l4) + extra
    hdr = struct.pack(">BBHHHBB2s4s4s", 0x40 | ihl, 0, total, int(RNG.integers(0, 65536)), frag, 64, proto,
                      b"\0\0", ADDRS[RNG.integers(0, 3)], ADDRS[RNG.integers(0, 3)])
    return hdr + bytes(4 * ihl - 20) + l4


KINDS = {
    "fixed": lambda: _ipv4(_tcp(), extra=int(RNG.integers(0, 1400))),
    "ip_options": lambda: _ipv4(_tcp(), ihl=6),
    "later_fragment": lambda: _ipv4(_tcp(), frag=0x0010),
    "more_fragments": lambda: _ipv4(_tcp(), frag=0x2000),           # first fragment: still fixed
    "udp": lambda: _ipv4(struct.pack(">HHHH", 53, 5353, 12, 0) + b"abcd", proto=17),
    "tcp_plain": lambda: _ipv4(_tcp(doff=5)),
    "tcp_sack": lambda: _ipv4(_tcp(doff=8, opts=b"\x01\x01\x05\x0a")),
    "tcp_mss_ws": lambda: _ipv4(_tcp(doff=8, opts=b"\x02\x04\x05\xb4\x01\x03\x03\x07")),
    "tcp_ts_long": lambda: _ipv4(_tcp(doff=10)),
    "cut_short": lambda: _ipv4(_tcp())[:int(RNG.integers(1, 52))],
    "ipv6": lambda: bytes.fromhex("6000000000200640") + bytes(32) + _tcp(),
    "garbage": lambda: RNG.integers(0, 256, 60, dtype=np.uint8).tobytes(),
}


def _decode_both(packets, ethertypes):
    buf = np.frombuffer(b"".join(packets) + bytes(64), np.uint8)
    lens = np.array([len(p) for p in packets], np.int64)
    off = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)
    end = off + lens
    et = np.asarray(ethertypes, np.uint16)
    return decode_l3(buf, off, end, et), payload._decode_l3(buf, off, end, et)


def _same(got, want, categories=False):
    (gc, gm), (wc, wm) = got, want
    assert list(gc) == list(wc)
    for name in wc:
        (gv, gok), (wv, wok) = gc[name], wc[name]
        gv, wv = np.asarray(gv), np.asarray(wv)
        gok = np.ones(len(gv), bool) if gok is None else np.asarray(gok)
        wok = np.ones(len(wv), bool) if wok is None else np.asarray(wok)
        if categories and hasattr(wc[name][0], "categories"):   # the same categories, in order
            assert list(gc[name][0].categories) == list(wc[name][0].categories), name
        assert gv.dtype == wv.dtype, name
        assert np.array_equal(gok, wok), name
        assert np.array_equal(gv[wok], wv[wok]), name
    norm = sorted((int(r), why) for rows, why in gm for r in np.asarray(rows))
    assert norm == sorted((int(r), why) for rows, why in wm for r in np.asarray(rows))


@pytest.mark.parametrize("share", [1.0, 0.9, 0.6, 0.3, 0.0])
@pytest.mark.parametrize("seed", range(3))
def test_fixed_layout_equals_general_decoder(share, seed):
    global RNG
    RNG = np.random.default_rng(seed)
    others = [k for k in KINDS if k not in ("fixed", "more_fragments")]
    kinds = ["fixed" if RNG.random() < share else others[RNG.integers(0, len(others))] for _ in range(400)]
    packets = [KINDS[k]() for k in kinds]
    ethertypes = [0x86DD if k == "ipv6" else 0x0800 for k in kinds]
    # (a chunk in both paths unites their categories in first-seen order, as batches do)
    _same(*_decode_both(packets, ethertypes), categories=share == 1.0)


def test_every_kind_alone_and_the_fixed_rows_are_recognised():
    for kind, make in KINDS.items():
        packets = [make() for _ in range(20)]
        _same(*_decode_both(packets, [0x86DD if kind == "ipv6" else 0x0800] * 20), categories=True)
    packets = [KINDS["fixed"]() for _ in range(5)]
    buf = np.frombuffer(b"".join(packets), np.uint8)
    off = np.arange(5, dtype=np.int64) * 0 + np.concatenate([[0], np.cumsum([len(p) for p in packets])[:-1]])
    fixed, _ = payload._fixed_layout(buf, off, off + [len(p) for p in packets], np.full(5, 0x0800))
    assert fixed.all()
    # a non-IPv4 ethertype is never the fixed layout, whatever the bytes say
    fixed, _ = payload._fixed_layout(buf, off, off + [len(p) for p in packets], np.full(5, 0x86DD))
    assert not fixed.any()
