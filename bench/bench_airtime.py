"""Time PPDU grouping + detection on a frame table, on top of reading it.

    python bench/bench_airtime.py [CAPTURE]   (default bench/out/1m.pcap, see make_capture.py)

Target (issue "airtime"): airtime + detection over a 1M-frame table <= 1 s beyond reading.
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import sniffsync  # noqa: E402
from airtime.detect import detect  # noqa: E402
from airtime.ppdu import group_ppdus  # noqa: E402


def main(path="bench/out/1m.pcap", repeat=3):
    t = time.perf_counter()
    frames = sniffsync.read_capture(path)
    read_s = time.perf_counter() - t
    g, d = [], []
    for _ in range(repeat):
        t = time.perf_counter()
        ppdus, fp, _ = group_ppdus(frames)
        t1 = time.perf_counter()
        res = detect(frames, ppdus, fp)
        t2 = time.perf_counter()
        g.append(t1 - t)
        d.append(t2 - t1)
    g.sort(), d.sort()
    print(f"{path}: {len(frames)} frames, {len(ppdus)} PPDUs, {len(res.events)} events; load {os.getloadavg()[0]:.1f}")
    print(f"read {read_s:.2f} s | group_ppdus {g[len(g) // 2]:.3f} s | detect {d[len(d) // 2]:.3f} s | "
          f"airtime+detect {g[len(g) // 2] + d[len(d) // 2]:.3f} s (median of {repeat})")


if __name__ == "__main__":
    main(*sys.argv[1:2])
