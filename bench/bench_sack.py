"""Cost of decoding TCP SACK blocks (``tcp_sack_blocks``): ``decode_l3`` over N pure ACKs that
each carry Timestamps + a 2-block SACK option, all options distinct (the worst case: every
option formatted once), against the same ACKs with NOPs in place of the SACK option (the
same option walk, nothing to format). Interleaved runs; prints both and their ratio.

    python bench/bench_sack.py [N]
"""
import struct
import sys
import time

import numpy as np

from sniffsync.decode.payload import ETH_IPV4, decode_l3


def ack(i: int, sack: bool) -> bytes:
    opts = b"\x01\x01\x08\x0a" + struct.pack("!II", i, i)
    opts += (b"\x01\x01\x05\x12" + struct.pack("!4I", i * 3000, i * 3000 + 1000, i * 3000 + 1500, i * 3000 + 2500)
             if sack else b"\x01" * 20)
    tcp = struct.pack("!HHIIBBHHH", 1, 2, 100, 200, (20 + len(opts)) // 4 << 4, 0x10, 1000, 0, 0) + opts
    return struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 0, 0, 64, 6, 0, b"\x0a\0\0\1", b"\x0a\0\0\2") + tcp


def main(n: int = 200_000, reps: int = 3) -> None:
    inputs = {}
    for sack in (False, True):
        size = len(ack(0, sack))
        buf = np.frombuffer(b"".join(ack(i, sack) for i in range(n)), np.uint8)
        inputs[sack] = (buf, np.arange(n, dtype=np.int64) * size, np.arange(1, n + 1, dtype=np.int64) * size)
    et = np.full(n, ETH_IPV4, np.uint16)
    t = {False: [], True: []}
    for _ in range(reps):
        for sack in (False, True):
            t0 = time.perf_counter()
            decode_l3(*inputs[sack], et)
            t[sack].append(time.perf_counter() - t0)
    a, b = np.median(t[False]), np.median(t[True])
    print(f"{n} ACKs: without SACK {a:.2f} s, with distinct SACK {b:.2f} s, ratio {b / a:.2f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200_000)
