"""Wired link layers: hand-built frames, a slow per-frame oracle, and tshark's protocol stack."""
import shutil
import subprocess

import numpy as np
import pytest

from sniffsync.decode.linklayer import decode_link
from sniffsync.io.writers import write_pcap


def h(text: str) -> bytes:
    """Bytes from commented hex: everything after '#' on a line is a comment."""
    return bytes.fromhex("".join(line.split("#")[0] for line in text.splitlines()))


MACS = h("ff ff ff ff ff ff  00 11 22 33 44 55  # destination, source")
IPV4 = h("45 00 00 14 00 00 40 00 40 06 00 00 0a 00 00 01 0a 00 00 02  # IPv4, 20-byte header, TCP")
IPV6 = h("60 00 00 00 00 00 3b 40") + bytes(32)   # IPv6: payload 0, next header 59 (none), hop 64

# (name, linktype, frame bytes, ethertype or None, l3 offset within frame or -1, mark or None)
FRAMES = [
    ("eth ipv4", 1, MACS + h("08 00  # IPv4") + IPV4, 0x0800, 14, None),
    ("802.1Q ipv6", 1, MACS + h("81 00 00 64  # 802.1Q, VLAN 100") + h("86 dd  # IPv6") + IPV6,
     0x86DD, 18, None),
    ("QinQ ipv4", 1, MACS + h("88 a8 00 0a  # 802.1ad outer, VLAN 10") + h("81 00 00 14  # inner, VLAN 20")
     + h("08 00  # IPv4") + IPV4, 0x0800, 22, None),
    ("802.3 snap", 1, MACS + h("00 28  # 802.3 length 40") + h("aa aa 03  # LLC: SNAP")
     + h("00 00 00  # OUI 0 (encapsulated Ethernet)") + h("08 00  # IPv4") + IPV4, 0x0800, 22, None),
    ("802.3 stp", 1, MACS + h("00 26  # length 38") + h("42 42 03  # LLC: STP, not SNAP") + bytes(35),
     None, -1, None),
    ("arp", 1, MACS + h("08 06  # ARP") + bytes(28), 0x0806, -1, None),
    ("eth cut", 1, MACS[:10], None, -1, "truncated link header"),
    ("vlan cut", 1, MACS + h("81 00 00 64  # 802.1Q; the inner ethertype is missing"), None, -1,
     "truncated link header"),
    ("sll ipv4", 113, h("""
        00 00        # packet type: to us
        00 01        # ARPHRD_ETHER
        00 06        # address length 6
        00 11 22 33 44 55 00 00   # address, padded to 8
        08 00        # protocol IPv4""") + IPV4, 0x0800, 16, None),
    ("sll2 ipv6", 276, h("""
        86 dd        # protocol IPv6
        00 00        # reserved
        00 00 00 02  # interface index 2
        00 01        # ARPHRD_ETHER
        04           # packet type: outgoing
        06           # address length 6
        00 11 22 33 44 55 00 00   # address""") + IPV6, 0x86DD, 20, None),
    ("raw ipv4", 101, IPV4, 0x0800, 0, None),
    ("raw ipv6", 101, IPV6, 0x86DD, 0, None),
    ("raw junk", 101, h("00 01 02 03  # version nibble 0"), None, -1, "not an IP packet"),
    ("ipv4 link, v6 inside", 228, IPV6, None, -1, "not an IP packet"),
    ("ipv4 link", 228, IPV4, 0x0800, 0, None),
    ("ipv6 link", 229, IPV6, 0x86DD, 0, None),
    ("user dlt", 147, IPV4, None, -1, "unsupported link type 147"),
    ("radiotap", 127, h("00 00 08 00 00 00 00 00  # radiotap: decoded elsewhere"), None, -1, None),
]


def pack(frames, gap=3):
    """All frames in one buffer, with ``gap`` junk bytes between them (decoders must use end)."""
    buf, off, end = b"", [], []
    for f in frames:
        buf += b"\xa5" * gap
        off.append(len(buf))
        buf += f
        end.append(len(buf))
    return np.frombuffer(buf + b"\xa5" * 40, np.uint8), np.array(off), np.array(end)


def test_hand_built_frames():
    buf, off, end = pack([f[2] for f in FRAMES])
    lt = np.array([f[1] for f in FRAMES])
    cols, l3_off, marks = decode_link(buf, off, end, lt)
    etype, valid = cols["ethertype"]
    got = [int(e) if v else None for e, v in zip(etype, valid)]
    assert dict(zip([f[0] for f in FRAMES], got)) == {f[0]: f[3] for f in FRAMES}
    want_l3 = [off[i] + f[4] if f[4] >= 0 else -1 for i, f in enumerate(FRAMES)]
    assert dict(zip([f[0] for f in FRAMES], l3_off.tolist())) == {f[0]: w for f, w in zip(FRAMES, want_l3)}
    why = {}
    for rows, reason in marks:
        for r in np.asarray(rows).tolist():
            why.setdefault(FRAMES[r][0], reason)
    assert why == {f[0]: f[5] for f in FRAMES if f[5]}
    assert l3_off.dtype == np.int64 and etype.dtype == np.uint16


def test_scalar_linktype_and_empty_input():
    buf, off, end = pack([FRAMES[0][2], FRAMES[1][2]])
    cols, l3_off, marks = decode_link(buf, off, end, 1)
    assert cols["ethertype"][0].tolist() == [0x0800, 0x86DD] and marks == []
    cols, l3_off, marks = decode_link(buf, off[:0], end[:0], np.zeros(0, int))
    assert l3_off.size == 0 and cols["ethertype"][0].size == 0


def oracle_ethernet(frame: bytes):
    """Slow obvious decoding of one Ethernet frame: (ethertype or None, l3 offset or -1)."""
    if len(frame) < 14:
        return None, -1
    at = 12
    etype = int.from_bytes(frame[at:at + 2], "big")
    for _ in range(2):
        if etype in (0x8100, 0x88A8):
            at += 4
            if len(frame) < at + 2:
                return None, -1
            etype = int.from_bytes(frame[at:at + 2], "big")
    hdr = at + 2
    if etype <= 1500:
        if frame[hdr:hdr + 3] != b"\xaa\xaa\x03" or len(frame) < hdr + 8:
            return None, -1
        etype, hdr = int.from_bytes(frame[hdr + 6:hdr + 8], "big"), hdr + 8
    is_ip = etype in (0x0800, 0x86DD) and len(frame) > hdr
    return etype, hdr if is_ip else -1


def test_ethernet_matches_slow_oracle_on_random_frames():
    rng = np.random.default_rng(7)
    choices = [0x0800, 0x86DD, 0x0806, 0x8100, 0x88A8, 0x0030, 0x05DC, 0x88CC]
    frames = []
    for _ in range(2000):
        f = bytearray(MACS)
        for _ in range(int(rng.integers(0, 3))):
            f += int(rng.choice([0x8100, 0x88A8])).to_bytes(2, "big") + bytes(2)
        f += int(rng.choice(choices)).to_bytes(2, "big")
        if rng.random() < 0.3:
            f += b"\xaa\xaa\x03\x00\x00\x00" + int(rng.choice(choices)).to_bytes(2, "big")
        f += bytes(rng.integers(0, 256, 24, dtype=np.uint8))
        frames.append(bytes(f[:int(rng.integers(8, len(f) + 1))]))   # random cuts
    buf, off, end = pack(frames, gap=1)
    cols, l3_off, _ = decode_link(buf, off, end, 1)
    etype, valid = cols["ethertype"]
    got = [(int(e) if v else None, int(l3 - o) if l3 >= 0 else -1)
           for e, v, l3, o in zip(etype, valid, l3_off, off)]
    assert got == [oracle_ethernet(f) for f in frames]


@pytest.mark.parametrize("linktype", [1, 113, 276, 101, 228, 229])
def test_ip_detection_agrees_with_tshark(tmp_path, linktype):
    """tshark's protocol stack (frame.protocols) has ip/ipv6 exactly where l3_off >= 0."""
    if shutil.which("tshark") is None:
        pytest.skip("tshark not installed")
    # leave out IPv6 inside a link that promises IPv4: tshark dissects it as (malformed) IPv4
    frames = [f for f in FRAMES if f[1] == linktype and f[5] != "not an IP packet"]
    data = np.frombuffer(b"".join(f[2] for f in frames), np.uint8)
    off = np.concatenate([[0], np.cumsum([len(f[2]) for f in frames])])
    write_pcap(tmp_path / "l.pcap", linktype, np.arange(len(frames)), data, off)
    out = subprocess.run(["tshark", "-r", str(tmp_path / "l.pcap"), "-T", "fields", "-e", "frame.protocols"],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    tshark_ip = [bool({"ip", "ipv6"} & set(p.split(":"))) for p in out]
    cols, l3_off, _ = decode_link(data, off[:-1], off[1:], linktype)
    assert tshark_ip == (l3_off >= 0).tolist()
