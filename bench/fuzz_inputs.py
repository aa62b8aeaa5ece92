"""Structure-aware fuzz inputs for the reader, as Hypothesis strategies.

A capture is drawn as its parts, each of which may be wrong in a way real damage or a
hostile file makes it wrong: the container (classic pcap in its four magics, or pcapng
with interfaces whose ``if_tsresol`` / ``if_tsoffset`` are drawn, and block lengths),
the records (timestamps mostly in order, sometimes wild; lengths sometimes lying), the
radiotap header (drawn present bits and extended present-word chains, an ``it_len``
that is right or drawn), the 802.11 header (drawn type/subtype and flags, Block-Ack
bitmaps of every size), LLC/SNAP, IPv4 (IHL, total length, protocol) and TCP/UDP (data
offset, options, lengths). The whole is then optionally byte-mutated (interesting
32-bit values over length fields, flips, a cut) and gzip-compressed (possibly cut).

:func:`capture` is the strategy; :func:`build_pcap` builds the undamaged pcap that the
"records before the first damaged byte are kept" property starts from.
"""
from __future__ import annotations

import gzip
import struct

from hypothesis import strategies as st

__all__ = ["capture", "records", "build_pcap", "pcap_header", "radiotap", "dot11_frame", "FIELDS"]

# radiotap present bit -> (alignment, size), the defined fields (radiotap.org)
FIELDS = {0: (8, 8), 1: (1, 1), 2: (1, 1), 3: (2, 4), 5: (1, 1), 6: (1, 1), 11: (1, 1), 14: (2, 2),
          18: (4, 8), 19: (1, 3), 20: (4, 8), 21: (2, 12), 22: (8, 12), 23: (2, 12), 24: (2, 12),
          26: (1, 1), 27: (2, 4)}
MAGICS = [(0xA1B2C3D4, "<"), (0xA1B2C3D4, ">"), (0xA1B23C4D, "<"), (0xA1B23C4D, ">")]
SUBTYPES = [0x08, 0x88, 0x48, 0xC8, 0xB4, 0xC4, 0xD4, 0x94, 0x84, 0x80, 0x50, 0xD0, 0xE0, 0x24, 0x54, 0x74]
INTERESTING32 = [0, 1, 0x7F, 0x80, 0xFF, 0xFFFF, 0x10000, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 16 << 20,
                 (16 << 20) + 1]
MACS = [bytes([2, 0, 0, 0, 0, i]) for i in range(1, 5)] + [b"\xff" * 6]

u8, u16, u32 = (st.integers(0, 2**k - 1) for k in (8, 16, 32))


@st.composite
def radiotap(draw, body_len: int):
    """Radiotap header bytes and whether it says an FCS ends the frame."""
    bits = draw(st.sets(st.sampled_from(sorted(FIELDS)), max_size=8))
    words = [sum(1 << b for b in bits)]
    for _ in range(draw(st.integers(0, 3))):          # extended present words, namespaces
        words[-1] |= 1 << 31
        words.append(draw(st.one_of(u32, st.sampled_from([0, 1 << 29, 1 << 30, (1 << 29) | 1]))))
    pos = 8 + 4 * len(words)
    out = bytearray()
    flags = draw(st.sampled_from([0, 0x10, 0x40, 0x50, 0x02, 0x20])) if 1 in bits else 0
    for b in sorted(bits):
        align, size = FIELDS[b]
        pad = -pos % align
        out += bytes(pad)
        pos += pad
        out += bytes([flags]) if b == 1 else draw(st.binary(min_size=size, max_size=size))
        pos += size
    it_len = draw(st.one_of(st.just(pos), st.just(pos), u16, st.integers(0, 12)))
    head = struct.pack("<BBH", 0, draw(st.sampled_from([0, 0, 1])), it_len)
    head += b"".join(struct.pack("<I", w) for w in words)
    return head + bytes(out), bool(flags & 0x10)


@st.composite
def ip_payload(draw):
    """LLC/SNAP + IPv4 + TCP/UDP (fields drawn around their valid values)."""
    proto = draw(st.sampled_from([6, 6, 17, 1, 0]))
    payload = bytes(draw(st.integers(0, 64)))
    if proto == 6:
        doff = draw(st.one_of(st.just(5), st.integers(0, 15)))
        opts = draw(st.binary(max_size=40))
        l4 = struct.pack(">HHIIBBHHH", draw(st.sampled_from([80, 5001, 443])), draw(u16), draw(u32), draw(u32),
                         doff << 4, draw(u8), draw(u16), 0, 0) + opts[:max(doff - 5, 0) * 4]
    else:
        l4 = struct.pack(">HHHH", draw(u16), draw(u16), draw(st.one_of(st.just(8 + len(payload)), u16)), 0)
    ihl = draw(st.one_of(st.just(5), st.integers(0, 15)))
    tot = draw(st.one_of(st.just(20 + len(l4) + len(payload)), u16))
    ip = struct.pack(">BBHHHBBH4s4s", 0x40 | ihl, 0, tot, 0, draw(st.sampled_from([0, 0x4000, 0x2000])), 64,
                     proto, 0, bytes([10, 0, 0, draw(st.integers(1, 3))]), bytes([10, 0, 0, draw(st.integers(1, 3))]))
    ethertype = draw(st.sampled_from([0x0800, 0x0800, 0x86DD, 0x0806, 0x888E]))
    return b"\xaa\xaa\x03\x00\x00\x00" + struct.pack(">H", ethertype) + ip + bytes(max(ihl - 5, 0) * 4) + l4 + payload


@st.composite
def dot11_frame(draw):
    """An 802.11 frame: drawn type/subtype, flags, addresses, and a body fitting its kind."""
    fc = draw(st.one_of(st.sampled_from(SUBTYPES), u8))
    flags = draw(st.one_of(st.sampled_from([0, 0x01, 0x02, 0x08, 0x40, 0x80]), u8))
    hdr = bytes([fc, flags]) + struct.pack("<H", draw(u16)) + draw(st.sampled_from(MACS))
    if fc in (0xC4, 0xD4):                     # CTS / ACK: RA only
        return hdr
    hdr += draw(st.sampled_from(MACS))
    if fc in (0x94, 0x84):                     # BA / BAR: control, SSN, bitmap of any size
        hdr += struct.pack("<HH", draw(u16), draw(u16)) + bytes(draw(st.sampled_from([0, 8, 32, 64, 128, 3])))
        return hdr
    if fc == 0xB4 or fc & 0x0C == 0x04:        # RTS and other control frames
        return hdr
    hdr += draw(st.sampled_from(MACS)) + struct.pack("<H", draw(u16))
    if flags & 0x03 == 0x03:
        hdr += draw(st.sampled_from(MACS))
    if fc & 0x8C == 0x88:                      # QoS data: QoS control (+ HT control with Order)
        hdr += struct.pack("<H", draw(u16)) + (bytes(4) if flags & 0x80 else b"")
    if fc & 0x0C == 0x08 and not flags & 0x40:
        return hdr + draw(ip_payload())
    return hdr + draw(st.binary(max_size=48))


@st.composite
def frame(draw, linktype: int):
    """Link-layer bytes of one record for ``linktype``."""
    if linktype == 127:
        body = draw(dot11_frame())
        rt, fcs = draw(radiotap(len(body)))
        return rt + body + (bytes(4) if fcs else b"")
    if linktype == 105:
        return draw(dot11_frame())
    if linktype == 1:                          # Ethernet II
        return bytes(12) + b"\x08\x00" + draw(ip_payload())[8:]
    if linktype == 228:                        # raw IPv4
        return draw(ip_payload())[8:]
    return draw(st.binary(max_size=64))


@st.composite
def records(draw, linktype: int, max_records: int = 24):
    """``[(ts_ns, data, wire_len)]``: stamps in order by small steps, some wild."""
    n = draw(st.integers(0, max_records))
    t = draw(st.sampled_from([1_700_000_000 * 10**9, 0, 16 * 10**9]))
    out = []
    for _ in range(n):
        t += draw(st.sampled_from([0, 16_000, 1_000_000, 2_000_000, 100_000_000]))
        ts = draw(st.one_of(*[st.just(t)] * 6, st.integers(0, 2**32 * 10**9 - 1)))
        data = draw(frame(linktype))
        out.append((ts, data, len(data) + draw(st.sampled_from([0, 0, 0, 10]))))
    return out


def pcap_header(magic: int, order: str, linktype: int, snaplen: int = 65535) -> bytes:
    return struct.pack("<I", magic) + struct.pack(order + "HHiII", 2, 4, 0, 0, snaplen) + \
        struct.pack(order + "I", linktype)


def build_pcap(recs, magic=0xA1B2C3D4, order="<", linktype=127, snaplen=65535) -> bytes:
    """A valid classic pcap of ``recs`` (as :func:`records` draws them)."""
    per_s = 10**9 if magic == 0xA1B23C4D else 10**6
    out = [pcap_header(magic, order, linktype, snaplen)]
    for ts, data, wire in recs:
        out.append(struct.pack(order + "IIII", ts // 10**9, ts % 10**9 // (10**9 // per_s), len(data), wire) + data)
    return b"".join(out)


def _options(opts) -> bytes:
    out = b""
    for code, val in opts:
        out += struct.pack("<HH", code, len(val)) + val + bytes(-len(val) % 4)
    return out + (struct.pack("<HH", 0, 0) if opts else b"")


def _block(btype: int, body: bytes, length=None) -> bytes:
    total = 12 + len(body) if length is None else length
    return struct.pack("<II", btype, total) + body + struct.pack("<I", total)


@st.composite
def pcapng(draw, linktype: int):
    """A little-endian pcapng: SHB, IDBs with drawn time options, EPBs/SPBs, odd blocks."""
    out = _block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    n_if = draw(st.integers(1, 2))
    for _ in range(n_if):
        opts = []
        if draw(st.booleans()):
            opts.append((9, bytes([draw(st.one_of(st.sampled_from([6, 9, 0x86, 29, 0x7F, 0xFF]), u8))])))
        if draw(st.booleans()):
            opts.append((14, struct.pack("<q", draw(st.one_of(st.integers(-10**6, 10**6),
                                                               st.integers(-2**63, 2**63 - 1))))))
        out += _block(1, struct.pack("<HHI", linktype, 0, draw(st.sampled_from([0, 65535, 100]))) + _options(opts))
    for ts, data, wire in draw(records(linktype)):
        kind = draw(st.sampled_from(["epb"] * 8 + ["spb", "odd", "badlen"]))
        pad = bytes(-len(data) % 4)
        if kind == "spb":
            out += _block(3, struct.pack("<I", wire) + data + pad)
            continue
        ticks = ts // 1000
        body = struct.pack("<IIIII", draw(st.integers(0, n_if)), ticks >> 32 & 0xFFFFFFFF, ticks & 0xFFFFFFFF,
                           len(data), wire) + data + pad
        if kind == "odd":
            out += _block(draw(st.sampled_from([4, 5, 0xBAD, 0x80000001])), draw(st.binary(max_size=16)) + bytes(4))
        out += _block(6, body, draw(st.sampled_from([0, 12, 13, 0xFFFFFFFF, 1 << 24])) if kind == "badlen" else None)
    return out


@st.composite
def mutated(draw, data: bytes) -> bytes:
    """Byte-level damage: 32-bit interesting values, flipped bytes, a cut."""
    b = bytearray(data)
    for _ in range(draw(st.integers(0, 3)) if b else 0):
        at = draw(st.integers(0, len(b) - 1))
        if draw(st.booleans()) and at + 4 <= len(b):
            b[at:at + 4] = struct.pack("<I", draw(st.sampled_from(INTERESTING32)))
        else:
            b[at] = draw(u8)
    if b and draw(st.integers(0, 4)) == 0:
        b = b[:draw(st.integers(0, len(b)))]
    return bytes(b)


@st.composite
def capture(draw) -> bytes:
    """One whole input file: pcap or pcapng, maybe damaged, maybe gzip (maybe cut)."""
    linktype = draw(st.sampled_from([127] * 6 + [105, 1, 228, 0, 113, 0xFFFF]))
    if draw(st.integers(0, 3)) == 0:
        data = draw(pcapng(linktype))
    else:
        magic, order = draw(st.sampled_from(MAGICS))
        data = build_pcap(draw(records(linktype)), magic, order, linktype,
                          draw(st.sampled_from([65535, 65535, 0, 64, 2**32 - 1])))
    data = draw(mutated(data))
    if draw(st.integers(0, 7)) == 0:
        data = gzip.compress(data, 1)
        if draw(st.booleans()):
            data = draw(mutated(data))
    return data
