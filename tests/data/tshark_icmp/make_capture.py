"""Echo requests over raw sockets to 127.0.0.1 and ::1 (the kernel answers); ids/seqs vary,
the last IPv4 request has a wrong checksum and stays unanswered."""
import socket, struct, time, os

def csum(b):
    if len(b) % 2: b += b"\0"
    s = sum(struct.unpack(f"!{len(b)//2}H", b))
    s = (s >> 16) + (s & 0xFFFF); s += s >> 16
    return ~s & 0xFFFF

s4 = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
s6 = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
for i in range(12):
    ident, seq = 0x1234 + (i % 2), 100 + i
    pay = os.urandom(16 + 8 * i)
    h = struct.pack("!BBHHH", 8, 0, 0, ident, seq)
    h = struct.pack("!BBHHH", 8, 0, csum(h + pay), ident, seq)
    s4.sendto(h + pay, ("127.0.0.1", 0))
    s6.sendto(struct.pack("!BBHHH", 128, 0, 0, ident, seq) + pay, ("::1", 0))  # kernel fills csum
    time.sleep(0.01 * (i % 3))
# a request with a wrong checksum: the kernel drops it, so it stays unanswered
h = struct.pack("!BBHHH", 8, 0, 0xBEEF, 0x4321, 1)
s4.sendto(h + b"x" * 8, ("127.0.0.1", 0))
time.sleep(0.2)
