"""Reader benchmark: ``sniffsync frames`` against ``tshark -T fields``, whole process.

    python bench/bench_frames.py [CAPTURE] [--repeat 3] [--json out.json]

Without CAPTURE, builds bench/out/1m.pcap (bench/make_capture.py, 1M frames) once.
Each run is one child process, timed wall-clock; its peak RSS comes from ``os.wait4``
(that child alone). The three commands alternate within each repetition so that load
from elsewhere hits them alike; the table shows the median of the repetitions.
Target (FACTS.md): >= 25x tshark, peak memory <= 1.5x the file size.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_CAPTURE = HERE / "out" / "1m.pcap"

# The 17 fields of FACTS.md's reader comparison and our columns holding the same facts
# (our mcs / nss hold HT, VHT and HE alike, so 16 columns carry tshark's 17 fields).
COLUMNS = ["ts_ns", "tsft_us", "rt_flags", "rate_kbps", "freq_mhz", "signal_dbm", "mcs", "nss",
           "ampdu_ref", "type_subtype", "duration_us", "ra", "ta", "seq", "ba_ssn", "ba_bitmap"]
TSHARK_FIELDS = ["frame.time_epoch", "radiotap.mactime", "radiotap.flags", "radiotap.datarate",
                 "radiotap.channel.freq", "radiotap.dbm_antsignal", "radiotap.mcs.index",
                 "radiotap.vht.mcs.0", "radiotap.vht.nss.0", "radiotap.ampdu.reference",
                 "wlan.fc.type_subtype", "wlan.duration", "wlan.ra", "wlan.ta", "wlan.seq",
                 "wlan.fixed.ssc.sequence", "wlan.ba.bm"]


def sniffsync_cmd() -> list[str]:
    """The installed console script next to this interpreter (no pyenv shim in the timing)."""
    script = Path(sys.executable).resolve().parent / "sniffsync"
    return [str(script)] if script.exists() else [sys.executable, "-m", "sniffsync"]


def commands(capture: Path, out_dir: Path) -> dict[str, list[str]]:
    cols = ",".join(COLUMNS)
    tshark = ["tshark", "-r", str(capture), "-n", "-T", "fields", "-E", "occurrence=f"]
    for f in TSHARK_FIELDS:
        tshark += ["-e", f]
    return {
        "sniffsync parquet": sniffsync_cmd() + ["frames", str(capture), "-q", "-o",
                                                str(out_dir / "x.parquet"), "--columns", cols],
        "sniffsync csv": sniffsync_cmd() + ["frames", str(capture), "-q", "-o",
                                            str(out_dir / "x.csv"), "--columns", cols],
        "tshark fields": tshark,
    }


def run_once(cmd: list[str]) -> tuple[float, int]:
    """Wall seconds and peak RSS (bytes) of one child process; stdout to /dev/null."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    stderr = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[0]} failed ({proc.returncode}): {stderr.decode()[-500:]}")
    return wall, usage.ru_maxrss * 1024          # Linux: ru_maxrss in KiB


def count_frames(capture: Path) -> int:
    out = subprocess.run(["capinfos", "-c", "-M", str(capture)], capture_output=True, text=True)
    for line in out.stdout.splitlines():
        if "Number of packets" in line:
            return int(line.split(":")[1].strip())
    raise SystemExit(f"capinfos could not count {capture}")


def check_outputs(out_dir: Path, n_frames: int) -> None:
    """The timed runs really produced every frame (a fast wrong run proves nothing)."""
    import pyarrow.parquet as pq
    rows = pq.read_metadata(out_dir / "x.parquet").num_rows
    with open(out_dir / "x.csv", "rb") as fh:
        lines = sum(1 for _ in fh) - 1
    assert rows == n_frames == lines, (rows, lines, n_frames)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("capture", nargs="?", type=Path, default=DEFAULT_CAPTURE)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json", type=Path, help="write the numbers here")
    args = p.parse_args(argv)
    if not args.capture.exists():
        if args.capture != DEFAULT_CAPTURE:
            raise SystemExit(f"{args.capture}: no such file")
        subprocess.run([sys.executable, str(HERE / "make_capture.py"), str(args.capture),
                        "--frames", "1000000"], check=True)
    if not shutil.which("tshark"):
        raise SystemExit("tshark not found")
    out_dir = HERE / "out"
    out_dir.mkdir(exist_ok=True)
    size = args.capture.stat().st_size
    n_frames = count_frames(args.capture)
    with open(args.capture, "rb") as fh:                 # warm the page cache for everyone
        while fh.read(1 << 24):
            pass
    cmds = commands(args.capture, out_dir)
    runs = {name: [] for name in cmds}
    for _ in range(args.repeat):
        for name, cmd in cmds.items():
            runs[name].append(run_once(cmd))
    check_outputs(out_dir, n_frames)

    res = {}
    for name, rr in runs.items():
        wall = statistics.median(w for w, _ in rr)
        rss = max(r for _, r in rr)
        res[name] = {"wall_s": [round(w, 3) for w, _ in rr], "median_s": round(wall, 3),
                     "frames_per_s": round(n_frames / wall), "peak_rss_bytes": rss,
                     "peak_rss_vs_file": round(rss / size, 3)}
    ts = res["tshark fields"]["median_s"]
    for name in res:
        res[name]["speedup_vs_tshark"] = round(ts / res[name]["median_s"], 2)

    print(f"capture: {args.capture} ({n_frames:,} frames, {size / 1e6:.1f} MB), "
          f"{len(COLUMNS)} columns / {len(TSHARK_FIELDS)} tshark fields, median of {args.repeat}")
    print(f"{'command':20s} {'median s':>9s} {'frames/s':>11s} {'x tshark':>9s} {'peak RSS MB':>12s} {'RSS/file':>9s}")
    for name, r in res.items():
        print(f"{name:20s} {r['median_s']:9.2f} {r['frames_per_s']:11,d} {r['speedup_vs_tshark']:9.1f} "
              f"{r['peak_rss_bytes'] / 1e6:12.0f} {r['peak_rss_vs_file']:9.2f}")
    if args.json:
        info = {"capture": str(args.capture), "frames": n_frames, "file_bytes": size,
                "repeat": args.repeat, "cpus": os.cpu_count(), "python": platform.python_version(),
                "columns": COLUMNS, "tshark_fields": TSHARK_FIELDS, "results": res}
        args.json.write_text(json.dumps(info, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
