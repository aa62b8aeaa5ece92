"""Write ../captures/udp/iperf2_hand.pcap: hand-built Ethernet/IPv4/UDP datagrams whose
payload is an iperf2 UDP header (int32 seq, uint32 sec, uint32 usec), 10.0.0.1:40000 ->
10.0.0.2:5001, sent every 10 ms from T0 = 1700000000 s.

Designed answers (worked by hand in tests/tcp/test_udp.py):
  sequence 0..19 sent; 5 lost; 9 arrives before 8 (one reordered); 12 arrives twice (one
  duplicate); the last datagram carries -19 (iperf2's end marker).
  Arrival = send + 1 ms, + 2 ms more on odd sequence numbers (8 and 9 swap places).
A second direction 10.0.0.3:7000 -> 10.0.0.2:7001 carries no iperf header (zeros): its IP
IDs run 100..109 with 104 missing (the IP ID fallback: 1 lost of 10).
"""
import struct

T0 = 1_700_000_000


def ip_udp(src, dst, sport, dport, ip_id, payload):
    udp = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), ip_id, 0, 64, 17, 0,
                     bytes(map(int, src.split("."))), bytes(map(int, dst.split("."))))
    return b"\x00\x11\x22\x33\x44\x55" + b"\x66\x77\x88\x99\xaa\xbb" + b"\x08\x00" + ip + udp


def iperf2(seq, send_us):
    return struct.pack("!iII", seq, T0 + send_us // 10**6, send_us % 10**6) + b"\x00" * 20


pkts = []                                     # (arrival µs since T0, bytes)
for seq in range(20):
    if seq == 5:
        continue
    send = seq * 10_000
    arrive = send + 1000 + (2000 if seq % 2 else 0)
    if seq == 8:
        arrive = 9 * 10_000 + 3000 + 500          # after 9 (which arrives at 93 ms)
    s = -seq if seq == 19 else seq
    pkt = ip_udp("10.0.0.1", "10.0.0.2", 40000, 5001, 1000 + seq, iperf2(s, send))
    pkts.append((arrive, pkt))
    if seq == 12:
        pkts.append((arrive + 200, ip_udp("10.0.0.1", "10.0.0.2", 40000, 5001, 2000, iperf2(s, send))))
for i, ip_id in enumerate(x for x in range(100, 110) if x != 104):
    pkts.append((5000 + i * 20_000, ip_udp("10.0.0.3", "10.0.0.2", 7000, 7001, ip_id, b"\x00" * 32)))
pkts.sort(key=lambda p: p[0])
with open("../captures/udp/iperf2_hand.pcap", "wb") as fh:
    fh.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
    for t, b in pkts:
        fh.write(struct.pack("<IIII", T0 + t // 10**6, t % 10**6, len(b), len(b)) + b)
