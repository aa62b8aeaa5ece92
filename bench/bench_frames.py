"""Reader benchmark: ``sniffsync frames`` against ``tshark -T fields``, whole process.

    python bench/bench_frames.py [CAPTURE] [--mix open|wpa2] [--frames 1000000] [--repeat 3]
                                 [--walk] [--baseline DIR] [--json out.json]

Without CAPTURE, builds the ``--mix`` capture of ``--frames`` frames once under bench/out/:
``open`` (bench/make_capture.py: the test captures tiled, open networks: tshark dissects
every IP/TCP header) or ``wpa2`` (bench/gen_wpa2_mix.py: a WPA2/CCMP BSS, tshark skips the
encrypted payloads). ``--walk`` also runs the Parquet export with the Python record walk
(``SNIFFSYNC_WALK=python``) and times the walk alone in-process, C against Python.
``--baseline DIR`` also runs the Parquet export of another checkout of the package (e.g.
``git archive`` of the commit before a change, its extension built) with ``PYTHONPATH=DIR``,
interleaved with the others: a before/after pair measured under the same load.
Prints the machine's core count and load (1-min load average) before and after.
Each run is one child process, timed wall-clock; its peak RSS and CPU time (user + system,
all threads) come from ``os.wait4`` (that child alone): the CPU-time ratio says more than
the wall-time ratio on a loaded machine. The three commands alternate within each repetition so that load
from elsewhere hits them alike; the table shows the median of the repetitions.
Target (issue 17): >= 25x tshark on both mixes at 1M frames (>= 15x at 300k), peak memory
<= 1.0x the file size.
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
MIXES = {"open": lambda out, n: [sys.executable, str(HERE / "make_capture.py"), str(out), "--frames", str(n)],
         "wpa2": lambda out, n: [sys.executable, str(HERE / "gen_wpa2_mix.py"), str(out), str(n), "7"]}

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


def commands(capture: Path, out_dir: Path, walk: bool = False, baseline: Path | None = None) -> dict[str, list]:
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
    } | ({"parquet, Python walk": ({"SNIFFSYNC_WALK": "python"}, sniffsync_cmd() + [
        "frames", str(capture), "-q", "-o", str(out_dir / "y.parquet"), "--columns", cols])} if walk else {}) \
      | ({"baseline parquet": ({"PYTHONPATH": str(baseline)}, [sys.executable, "-m", "sniffsync", "frames", str(capture),
                                "-q", "-o", str(out_dir / "z.parquet"), "--columns", cols], baseline)}
         if baseline else {})


def run_once(cmd) -> tuple[float, int, float]:
    """Wall seconds, peak RSS (bytes) and CPU seconds (user + system, all threads) of one
    child process; stdout to /dev/null. ``cmd``: argv, or ``(environment additions, argv[,
    working directory])`` (``python -m`` imports from its working directory first)."""
    env, cwd = dict(os.environ), None
    if isinstance(cmd, tuple):
        env.update(cmd[0])
        cwd = cmd[2] if len(cmd) > 2 else None
        cmd = cmd[1]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=cwd)
    stderr = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[0]} failed ({proc.returncode}): {stderr.decode()[-500:]}")
    return wall, usage.ru_maxrss * 1024, usage.ru_utime + usage.ru_stime   # Linux: ru_maxrss in KiB


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


def walk_times(capture: Path, repeat: int) -> dict:
    """Median CPU seconds, C and Python interleaved, in this process: ``loop`` is the record
    walk alone (the window calls over the whole mapped file, its pages mapped beforehand:
    the per-record loop itself); ``records`` is sniffsync.io.capture.iter_records (walk,
    page faults, header fields, checks) on a fresh mapping each time."""
    import numpy as np

    from sniffsync.io import walk
    from sniffsync.io.capture import _load, iter_records
    names = ["c", "python"] if walk._c is not None else ["python"]
    buf, _, _ = _load(capture)
    mv, last = memoryview(buf), buf.size - 16
    int(np.bitwise_xor.reduce(buf[::4096]))            # map every page once
    out = {f"{k} {n}": [] for k in ("loop", "records") for n in names}
    for _ in range(repeat + 1):
        for name in names:
            with walk.use_backend(name):
                t0 = time.process_time()
                pos = 24
                while pos <= last:
                    pos = walk.pcap_window(mv, pos, min(pos + (32 << 20), last), "<")[1]
                out[f"loop {name}"].append(time.process_time() - t0)
                t0 = time.process_time()
                for _rec in iter_records(capture, drop_walked=False):
                    pass
                out[f"records {name}"].append(time.process_time() - t0)
    return {k: round(statistics.median(v[1:]), 3) for k, v in out.items()}


def compile_package() -> None:
    """Byte-compile the package as an installed one has it (as bench_fairness.py does): with
    PYTHONDONTWRITEBYTECODE=1 (this machine) every run would otherwise compile every module
    it imports again, a cost a user does not pay after the first run."""
    import compileall
    import importlib.util
    for name in ("sniffsync", "airtime"):
        spec = importlib.util.find_spec(name)
        for d in (spec.submodule_search_locations or []) if spec else []:
            compileall.compile_dir(d, quiet=1)


def load() -> str:
    return f"{os.getloadavg()[0]:.1f}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("capture", nargs="?", type=Path)
    p.add_argument("--mix", choices=sorted(MIXES), default="open", help="capture built without CAPTURE")
    p.add_argument("--frames", type=int, default=1_000_000, help="frames of the built capture")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--walk", action="store_true", help="also the Python walk: whole process and walk alone")
    p.add_argument("--baseline", type=Path, help="also the Parquet export of the package checked out in DIR")
    p.add_argument("--no-compile", action="store_true", help="do not byte-compile the package first")
    p.add_argument("--json", type=Path, help="write the numbers here")
    args = p.parse_args(argv)
    args.capture = args.capture.resolve() if args.capture else None
    args.baseline = args.baseline.resolve() if args.baseline else None
    if not args.no_compile:
        compile_package()
        if args.baseline:
            import compileall
            compileall.compile_dir(args.baseline / "sniffsync", quiet=1)
    if args.capture is None:
        args.capture = HERE / "out" / f"{args.mix}-{args.frames}.pcap"
        if not args.capture.exists():
            args.capture.parent.mkdir(exist_ok=True)
            subprocess.run(MIXES[args.mix](args.capture, args.frames), check=True)
    elif not args.capture.exists():
        raise SystemExit(f"{args.capture}: no such file")
    if not shutil.which("tshark"):
        raise SystemExit("tshark not found")
    out_dir = HERE / "out"
    out_dir.mkdir(exist_ok=True)
    size = args.capture.stat().st_size
    n_frames = count_frames(args.capture)
    with open(args.capture, "rb") as fh:                 # warm the page cache for everyone
        while fh.read(1 << 24):
            pass
    cmds = commands(args.capture, out_dir, args.walk, args.baseline)
    load_before = load()
    runs = {name: [] for name in cmds}
    for _ in range(args.repeat):
        for name, cmd in cmds.items():
            runs[name].append(run_once(cmd))
    check_outputs(out_dir, n_frames)
    walked = walk_times(args.capture, args.repeat) if args.walk else {}
    load_after = load()

    res = {}
    for name, rr in runs.items():
        wall = statistics.median(w for w, _, _ in rr)
        rss = max(r for _, r, _ in rr)
        res[name] = {"wall_s": [round(w, 3) for w, _, _ in rr], "median_s": round(wall, 3),
                     "cpu_s": round(statistics.median(c for _, _, c in rr), 3),
                     "frames_per_s": round(n_frames / wall), "peak_rss_bytes": rss,
                     "peak_rss_vs_file": round(rss / size, 3)}
    ts, ts_cpu = res["tshark fields"]["median_s"], res["tshark fields"]["cpu_s"]
    for name in res:
        res[name]["speedup_vs_tshark"] = round(ts / res[name]["median_s"], 2)
        res[name]["cpu_ratio_vs_tshark"] = round(ts_cpu / res[name]["cpu_s"], 2)

    print(f"capture: {args.capture} ({n_frames:,} frames, {size / 1e6:.1f} MB), "
          f"{len(COLUMNS)} columns / {len(TSHARK_FIELDS)} tshark fields, median of {args.repeat}")
    print(f"machine: {os.cpu_count()} cores, load {load_before} before / {load_after} after")
    print(f"{'command':20s} {'median s':>9s} {'frames/s':>11s} {'x tshark':>9s} {'CPU s':>7s} {'CPU x':>6s} "
          f"{'peak RSS MB':>12s} {'RSS/file':>9s}")
    for name, r in res.items():
        print(f"{name:20s} {r['median_s']:9.2f} {r['frames_per_s']:11,d} {r['speedup_vs_tshark']:9.1f} "
              f"{r['cpu_s']:7.2f} {r['cpu_ratio_vs_tshark']:6.1f} {r['peak_rss_bytes'] / 1e6:12.0f} "
              f"{r['peak_rss_vs_file']:9.2f}")
    print("x tshark: wall-time ratio (the target); CPU x: CPU-time ratio (user + system, all threads: "
          "less sensitive to load)")
    for part in ("loop", "records") if walked else ():
        got = {k.split()[1]: v for k, v in walked.items() if k.startswith(part)}
        print(f"record walk, {part} (CPU s, in-process): " + ", ".join(f"{k} {v:.3f}" for k, v in got.items())
              + (f" = C {got['python'] / max(got['c'], 1e-6):.1f}x faster" if len(got) == 2 else ""))
    if args.json:
        info = {"capture": str(args.capture), "frames": n_frames, "file_bytes": size,
                "repeat": args.repeat, "cpus": os.cpu_count(), "python": platform.python_version(),
                "load": [load_before, load_after], "walk_cpu_s": walked,
                "columns": COLUMNS, "tshark_fields": TSHARK_FIELDS, "results": res}
        args.json.write_text(json.dumps(info, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
