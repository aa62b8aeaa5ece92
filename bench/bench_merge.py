"""Benchmark ``sniffsync merge`` against ``mergecap -w`` on the same three captures.

    python bench/bench_merge.py --frames 1000000

Builds three N-frame captures by tiling the ns-3 hidden-node sniffers A, B and C
(bench/make_capture.py, one source each, so the three files share one clock and keep
their copies of every transmission), then runs, each in its own process, timed by wall
clock with peak RSS from ``wait4``: ``mergecap -w`` (time-order merge, no sync, no
de-duplication) and ``sniffsync merge -o ... --report ...`` (sync + match + pcapng).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from make_capture import SOURCES, write_capture  # noqa: E402

NAMES = ["ns3-11n-ht20-hidden-snifferA-nearAP", "ns3-11n-ht20-hidden-snifferB-nearSTA1",
         "ns3-11n-ht20-hidden-snifferC-nearSTA2"]


def timed(cmd) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of one child process."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{cmd[0]} failed: {proc.stderr.read().decode()[-500:]}")
    return wall, usage.ru_maxrss / 1024


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--frames", type=int, default=1_000_000, help="frames per sniffer (default 1M)")
    p.add_argument("--out", type=Path, default=HERE / "out", help="work directory")
    p.add_argument("--repeat", type=int, default=1, help="runs of each tool (median reported)")
    a = p.parse_args(argv)
    inputs = []
    for name in NAMES:
        f = a.out / f"merge-{a.frames}-{name[-12:]}.pcap"
        if not f.exists():
            write_capture(f, a.frames, [SOURCES / f"{name}.pcap"])
        inputs.append(str(f))
    size_mb = sum(os.path.getsize(f) for f in inputs) / 2**20
    runs = {"mergecap": [], "sniffsync": []}
    for _ in range(a.repeat):
        runs["mergecap"].append(timed(["mergecap", "-w", str(a.out / "mergecap.pcapng"), *inputs]))
        runs["sniffsync"].append(timed([sys.executable, "-m", "sniffsync", "merge", *inputs, "-q",
                                        "-o", str(a.out / "merged.pcapng"),
                                        "--report", str(a.out / "merge-report.json")]))
    med = {k: sorted(v)[len(v) // 2] for k, v in runs.items()}
    rep = json.loads((a.out / "merge-report.json").read_text())["totals"]
    n_in = rep["frames_in"]
    print(f"inputs: 3 x {a.frames:,} frames, {size_mb:,.0f} MiB")
    for k, (wall, rss) in med.items():
        print(f"{k:10s} {wall:7.2f} s  {n_in / wall / 1e6:5.2f} M frames/s  peak RSS {rss:,.0f} MiB")
    print(f"sniffsync / mergecap time: {med['sniffsync'][0] / med['mergecap'][0]:.2f}x")
    print(f"frames in {n_in:,} = out {rep['frames_out']:,} + duplicates {rep['duplicates_removed']:,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
