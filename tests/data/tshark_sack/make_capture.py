"""Write ../captures/tcp/sack_hand.pcap: a hand-built 802.11 (radiotap) capture of one TCP
transfer with two losses repaired with SACK (RFC 2018), as a sniffer beside the sender sees it.

STA 02:00:00:00:00:02 (10.0.0.2:40000) sends 12 segments of 1000 bytes to 10.0.0.1:5001
behind AP 02:00:00:00:00:01, one every 1 ms from T0 = 1700000000 s; every segment and ACK
carries NOP NOP Timestamps (the decoder's fast path), ACKs with SACK add NOP NOP SACK (the
option walk). ISN 1000 (data), 5000 (reverse). Segments 3 and 6 (relative seq 3001 and
6001) are sent but do not reach the receiver; its ACKs are:
  seg 0..2 -> 1001, 2001, 3001;  seg 4 -> 3001 SACK 4001-5001;  seg 5 -> 3001 SACK 4001-6001;
  seg 7 -> 3001 SACK 7001-8001,4001-6001;  seg 8 -> 3001 SACK 7001-9001,4001-6001;
  retransmitted seg 3 -> 6001 SACK 7001-9001;  retransmitted seg 6 -> 9001;  seg 9..11 ->
  10001, 11001, 12001.  (relative numbers; on the wire + ISN 1000.)
Each ACK follows its segment by 300 µs. Window field 1024 in the SYNs, then 40 (scale 7: 5120 bytes). 802.11 data frames (ToDS / FromDS), no FCS, no
link-layer ACKs.
"""
import struct
from pathlib import Path

T0 = 1_700_000_000
STA, AP = bytes.fromhex("020000000002"), bytes.fromhex("020000000001")
ISN_D, ISN_R = 1000, 5000
OUT = Path(__file__).resolve().parent.parent / "captures" / "tcp" / "sack_hand.pcap"


def radiotap(tsft_us):
    # present: TSFT (0), Flags (1), Rate (2); 54 Mb/s (a 1000-byte segment: ~0.17 ms on air)
    return struct.pack("<BBHIQBB", 0, 0, 18, 0b111, tsft_us, 0, 108)


def dot11(to_ap, seq_ctl, body):
    fc = b"\x08\x01" if to_ap else b"\x08\x02"
    a1, a2, a3 = (AP, STA, AP) if to_ap else (STA, AP, AP)
    return fc + struct.pack("<H", 44) + a1 + a2 + a3 + struct.pack("<H", seq_ctl << 4) + \
        b"\xaa\xaa\x03\x00\x00\x00\x08\x00" + body


def tcp(src, dst, sport, dport, seq, ack, flags, opts, payload_len, ip_id):
    opts += b"\x00" * (-len(opts) % 4)
    win = 1024 if flags & 0x02 else 40                 # x 128 (window scale 7) = 5120 bytes after the SYNs
    th = struct.pack("!HHIIBBHHH", sport, dport, seq, ack, (20 + len(opts)) // 4 << 4, flags, win, 0, 0) + opts
    body = th + b"\x5a" * payload_len
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(body), ip_id, 0x4000, 64, 6, 0,
                     bytes(map(int, src.split("."))), bytes(map(int, dst.split("."))))
    return ip + body


def ts(v, e):
    return b"\x01\x01\x08\x0a" + struct.pack("!II", v, e)


def sack(blocks):
    return b"\x01\x01\x05" + bytes([2 + 8 * len(blocks)]) + b"".join(
        struct.pack("!II", ISN_D + a, ISN_D + b) for a, b in blocks)


pkts, n = [], [0, 0]


def send(t_us, up, seq, ack, flags, opts=b"", plen=0):
    n[up] += 1
    src, dst, sp, dp = ("10.0.0.2", "10.0.0.1", 40000, 5001) if up else ("10.0.0.1", "10.0.0.2", 5001, 40000)
    pkts.append((t_us, radiotap(t_us) + dot11(up, n[up], tcp(src, dst, sp, dp, seq, ack, flags, opts, plen, n[up]))))


SYN, ACK, PSH = 0x02, 0x10, 0x08
syn_opts = b"\x02\x04\x05\xb4\x04\x02" + b"\x08\x0a" + struct.pack("!II", 1, 0) + b"\x01\x03\x03\x07"
send(0, 1, ISN_D, 0, SYN, syn_opts)
send(300, 0, ISN_R, ISN_D + 1, SYN | ACK, syn_opts)
send(600, 1, ISN_D + 1, ISN_R + 1, ACK, ts(2, 1))
acks = {0: (1001, []), 1: (2001, []), 2: (3001, []), 4: (3001, [(4001, 5001)]), 5: (3001, [(4001, 6001)]),
        7: (3001, [(7001, 8001), (4001, 6001)]), 8: (3001, [(7001, 9001), (4001, 6001)]),
        "r3": (6001, [(7001, 9001)]), "r6": (9001, []), 9: (10001, []), 10: (11001, []), 11: (12001, [])}
order = [0, 1, 2, 3, 4, 5, 6, 7, 8, "r3", "r6", 9, 10, 11]
for i, k in enumerate(order):
    t = 1000 * (i + 1)
    s = int(str(k).lstrip("r"))
    send(t, 1, ISN_D + 1 + 1000 * s, ISN_R + 1, ACK | PSH, ts(10 + i, 1), 1000)
    if k in acks:
        a, bl = acks[k]
        send(t + 300, 0, ISN_R + 1, ISN_D + a, ACK, ts(100 + i, 10 + i) + (sack(bl) if bl else b""))
OUT.parent.mkdir(parents=True, exist_ok=True)
with open(OUT, "wb") as fh:
    fh.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 127))
    for t, b in sorted(pkts, key=lambda p: p[0]):
        t += 0
        fh.write(struct.pack("<IIII", T0 + t // 10**6, t % 10**6, len(b), len(b)) + b)
