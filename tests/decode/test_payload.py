"""LLC/IP/TCP/UDP decoder: hand-built packets (hex, one comment per field) and tshark on captures."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sniffsync.decode.payload import decode_l3, decode_llc
from test_dot11 import CAPTURE_FILES, CAPTURES, compare_with_tshark, frames_buffer, h

IPV4_TCP_TS_SACK = (
    "45" "00" "00a0"          # IPv4, IHL 5; DSCP; total length 160
    "1234" "0000"             # identification 0x1234; flags/fragment offset 0
    "40" "06" "0000"          # TTL 64; protocol TCP; checksum (not checked)
    "0a000001" "0a000002"     # 10.0.0.1 -> 10.0.0.2
    "1f90" "c350"             # sport 8080, dport 50000
    "01020304" "a0b0c0d0"     # seq 0x01020304, ack 0xa0b0c0d0
    "b0" "18" "fffe"          # data offset 11 (44 bytes); flags PSH|ACK; window 65534
    "0000" "0000"             # checksum, urgent pointer
    "0101" "080a" "00000064" "000000c8"   # NOP NOP; timestamps TSval 100 TSecr 200
    "0101" "050a" "00000001" "00000002"   # NOP NOP; SACK one block 1-2
    "0000"                    # EOL padding to 24 option bytes
    "abcd"                    # first 2 of 96 payload bytes (snaplen cut the rest)
)
IPV6_HBH_TCP_SYN = (
    "60000000" "0024" "00" "40"               # IPv6; payload length 36; next header hop-by-hop; hop limit
    "20010db8000000000000000000000001"        # src 2001:db8::1
    "20010db8000000000000000000000002"        # dst 2001:db8::2
    "06" "00" "0104" "00000000"               # HbH: next header TCP; length 0 (8 bytes); PadN 4
    "c000" "0050" "00000010" "00000000"       # sport 49152, dport 80; seq 16; ack 0
    "70" "02" "ffff" "0000" "0000"            # data offset 7 (28 bytes); SYN; window 65535
    "020405b4" "01" "030307"                  # MSS 1460; NOP; window scale 7
)
IPV4_UDP = (
    "45000021" "00070000" "4011" "0000"       # IPv4 total length 33; id 7; TTL 64; UDP
    "c0a80101" "08080808"                     # 192.168.1.1 -> 8.8.8.8
    "e3d7" "0035" "000d" "0000"               # sport 58327, dport 53; UDP length 13; checksum
    "0102030405"                              # 5 payload bytes
)
IPV4_UDP_FIRST_FRAG = (
    "45" "00" "05dc" "0009" "2000"            # total length 1500; id 9; MF set, offset 0
    "40" "11" "0000" "0a000001" "0a000002"    # TTL; UDP; checksum; addresses
    "1388" "1389" "0fa0" "0000"               # sport 5000, dport 5001; UDP length 4000
)
IPV4_UDP_LATER_FRAG = (
    "45" "00" "05dc" "0009" "00b9"            # total length 1500; id 9; offset 185 (x8 = 1480)
    "40" "11" "0000" "0a000001" "0a000002"    # TTL; UDP; checksum; addresses
    "1388" "1389" "0fa0" "0000"               # payload bytes that merely look like a UDP header
)
IPV4_CUT = "4500" "0054" "0000"               # IPv4 header truncated after 6 bytes


def decode(packets, ethertypes):
    buf, off, end = frames_buffer(packets)
    cols, marks = decode_l3(buf, off, end, np.asarray(ethertypes, np.uint16))
    from sniffsync.decode.schema import DTYPES
    from sniffsync.decode.table import nullable
    df = pd.DataFrame({k: nullable(v, ok, DTYPES[k]) for k, (v, ok) in cols.items()})
    df["bad"] = None
    for rows, why in marks:
        df.loc[rows, "bad"] = why
    return df


@pytest.fixture(scope="module")
def pk():
    names = ["v4tcp", "v6tcp", "udp", "frag1", "frag2", "cut", "arp"]
    df = decode([IPV4_TCP_TS_SACK, IPV6_HBH_TCP_SYN, IPV4_UDP, IPV4_UDP_FIRST_FRAG,
                 IPV4_UDP_LATER_FRAG, IPV4_CUT, "0001080006040001"],
                [0x0800, 0x86DD, 0x0800, 0x0800, 0x0800, 0x0800, 0x0806])
    df.index = names
    return df


def test_llc_snap():
    buf, off, end = frames_buffer(["aaaa03000000" "0800" "45",     # RFC 1042 SNAP, IPv4
                                   "aaaa030000f8" "80f3",          # 802.1H bridge tunnel, AARP
                                   "424203" "000000" "0000",       # STP LLC (not SNAP)
                                   "aaaa03"])                      # truncated
    cols, l3 = decode_llc(buf, np.append(off[:3], -1), end)
    et, ok = cols["ethertype"]
    assert ok.tolist() == [True, True, False, False]
    assert et[:2].tolist() == [0x0800, 0x80F3]
    assert (l3 - np.where(l3 >= 0, off, 0)).tolist() == [8, 8, -1, -1]


def test_ipv4_tcp_options(pk):
    r = pk.loc["v4tcp"]
    assert (r.ip_src, r.ip_dst, r.ip_proto, r.ip_len, r.ip_id) == ("10.0.0.1", "10.0.0.2", 6, 160, 0x1234)
    assert (r.sport, r.dport, r.tcp_seq, r.tcp_ack) == (8080, 50000, 0x01020304, 0xA0B0C0D0)
    assert (r.tcp_flags, r.tcp_win) == (0x18, 65534)
    assert (r.tcp_tsval, r.tcp_tsecr, r.tcp_sack) == (100, 200, True)
    assert r.tcp_payload_len == 160 - 20 - 44        # from IP length, not captured bytes
    assert pd.isna(r.tcp_mss) and pd.isna(r.tcp_wscale)


def test_ipv6_hop_by_hop_tcp_syn(pk):
    r = pk.loc["v6tcp"]
    assert (r.ip_src, r.ip_dst, r.ip_proto, r.ip_len) == ("2001:db8::1", "2001:db8::2", 6, 76)
    assert pd.isna(r.ip_id)
    assert (r.sport, r.dport, r.tcp_seq, r.tcp_flags, r.tcp_win) == (49152, 80, 16, 0x02, 65535)
    assert (r.tcp_mss, r.tcp_wscale, r.tcp_sack) == (1460, 7, False)
    assert pd.isna(r.tcp_tsval)
    assert r.tcp_payload_len == 36 - 8 - 28


def test_udp_and_fragments(pk):
    r = pk.loc["udp"]
    assert (r.ip_dst, r.ip_proto, r.sport, r.dport, r.udp_len) == ("8.8.8.8", 17, 58327, 53, 13)
    assert pd.isna(r.tcp_seq) and pd.isna(r.tcp_payload_len)
    r = pk.loc["frag1"]                     # first fragment carries the UDP header
    assert (r.sport, r.dport, r.udp_len, r.ip_id) == (5000, 5001, 4000, 9)
    r = pk.loc["frag2"]                     # later fragment: IP only
    assert r.ip_len == 1500 and pd.isna(r.sport) and pd.isna(r.udp_len)


def test_truncated_and_non_ip(pk):
    assert pk.bad["cut"] == "IP: header truncated" and pd.isna(pk.ip_src["cut"])
    assert pd.isna(pk.ip_proto["arp"]) and pd.isna(pk.bad["arp"])
    assert str(pk.ip_src.dtype) == "category"
    assert set(pk.ip_src.cat.categories) == {"10.0.0.1", "2001:db8::1", "192.168.1.1"}


def test_tcp_options_walk_matches_python_oracle():
    """Random option soups: the vectorised walk equals a per-packet Python walk."""
    rng = np.random.default_rng(7)
    kinds = [b"\x01", b"\x00", b"\x02\x04\x05\xb4", b"\x03\x03\x07", b"\x04\x02",
             b"\x05\x0a" + bytes(8), b"\x08\x0a" + bytes(range(1, 9)), b"\x1e\x03\x00"]
    packets, oracle = [], []
    for _ in range(300):
        opts = b"".join(kinds[i] for i in rng.integers(0, len(kinds), rng.integers(0, 6)))[:40]
        opts += bytes(-len(opts) % 4)
        tcp = bytes.fromhex("00500051" "00000001" "00000000") + bytes([(20 + len(opts)) // 4 << 4, 0x10]) \
            + bytes(6) + opts
        ip = bytes.fromhex("4500") + (20 + len(tcp)).to_bytes(2, "big") + bytes(5) + b"\x06" + bytes(10)
        packets.append(ip + tcp)
        got, p = {}, 0                     # slow walk (RFC 793 / 7323 layout)
        while p < len(opts) and opts[p] != 0:
            if opts[p] == 1:
                p += 1
                continue
            if p + 2 > len(opts) or opts[p + 1] < 2:
                break
            k, n = opts[p], opts[p + 1]
            if p + n <= len(opts):
                if k == 2 and n == 4:
                    got["tcp_mss"] = int.from_bytes(opts[p + 2:p + 4], "big")
                if k == 3 and n == 3:
                    got["tcp_wscale"] = opts[p + 2]
                if k == 8 and n == 10:
                    got["tcp_tsval"] = int.from_bytes(opts[p + 2:p + 6], "big")
            if k == 5:
                got["tcp_sack"] = True
            p += n
        oracle.append(got)
    df = decode(packets, [0x0800] * len(packets))
    for i, got in enumerate(oracle):
        for col in ("tcp_mss", "tcp_wscale", "tcp_tsval"):
            mine = df[col].iloc[i]
            assert (None if pd.isna(mine) else int(mine)) == got.get(col), (i, col)
        assert bool(df.tcp_sack.iloc[i]) == got.get("tcp_sack", False), i


PAYLOAD_FIELDS = {
    "ip_src": ("ip.src", str, None, 0),
    "ip_dst": ("ip.dst", str, None, 0),
    "ip_len": ("ip.len", int, None, 0),
    "ip_proto": ("ip.proto", int, None, 0),
    "ip_id": ("ip.id", lambda s: int(s, 16), None, 0),
    "sport": ("tcp.srcport", int, lambda d: d.ip_proto == 6, 0),
    "dport": ("tcp.dstport", int, lambda d: d.ip_proto == 6, 0),
    "tcp_seq": ("tcp.seq", int, None, 0),
    "tcp_ack": ("tcp.ack", int, lambda d: d.tcp_flags.fillna(0).astype(int) & 0x10 > 0, 0),
    "tcp_flags": ("tcp.flags", lambda s: int(s, 16), None, 0),
    "tcp_win": ("tcp.window_size_value", int, None, 0),
    "tcp_payload_len": ("tcp.len", int, None, 0),
    "tcp_tsval": ("tcp.options.timestamp.tsval", int, None, 0),
    "tcp_tsecr": ("tcp.options.timestamp.tsecr", int, None, 0),
    "tcp_mss": ("tcp.options.mss_val", int, None, 0),
    "tcp_wscale": ("tcp.options.wscale.shift", int, None, 0),
    "udp_len": ("udp.length", int, None, 0),
    "sport#udp": ("udp.srcport", int, lambda d: d.ip_proto == 17, 0),
    "dport#udp": ("udp.dstport", int, lambda d: d.ip_proto == 17, 0),
}


@pytest.mark.tshark
@pytest.mark.parametrize("name", CAPTURE_FILES)
def test_captures_payload_match_tshark(name):
    bad, df = compare_with_tshark(CAPTURES / name, PAYLOAD_FIELDS)
    assert bad == [], bad[:10]
    if name.startswith("ns3"):
        assert df.tcp_tsval.notna().sum() > 1000        # the comparison covered real TCP
