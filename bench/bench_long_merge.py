"""Merge hours of capture in bounded memory, scored against the clocks applied.

    python bench/bench_long_merge.py --hours 1 3 6 --rate 500 --snaplen 160 --window-s 10

Per duration: writes a run with ``bench/make_long_run.py`` (3 sniffers, temperature-driven
drift, tcpdump snap length; the 1 h and 3 h runs are the start of the 6 h one), runs
``sniffsync merge --window-s W`` as a subprocess, samples its memory from /proc every
0.2 s (VmRSS, RssAnon, RssFile) per stage of its progress lines, then scores the
merged file against the truth file (the clocks applied, not our fit):

- frames out vs the distinct transmissions the generator sent that some sniffer heard;
- per merged frame, the copy written (its interface = sniffer s, its radiotap TSFT) gives
  the true time through s's applied clock, and so the reference TSF's reading at that
  instant; the merged ``ts_ns`` is the common clock (the reference TSF) through the epoch
  map, an affine map, which is removed by one least-squares line over all frames.
  **model** error: frames only one non-reference sniffer heard, not in an A-MPDU (the
  merged time is then its fitted clock at its own stamp: the clock model's error, the
  stamp's jitter cancels);
  **frame** error: all frames (adds the other copies' jitter and µs rounding).
Prints cores and load; ``--json`` keeps the numbers. The runs are deleted unless ``--keep``.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from make_long_run import local_ns, true_ns_of, write_run  # noqa: E402

ROOT = HERE.parent


def _proc_mem(pid: int) -> tuple[int, int, int, int]:
    """VmRSS, RssAnon, RssFile, VmHWM (KiB) of a live process, zeros once it is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0, 0, 0, 0
    got = dict(re.findall(r"^(VmRSS|RssAnon|RssFile|VmHWM):\s+(\d+)", text, re.M))
    return tuple(int(got.get(k, 0)) for k in ("VmRSS", "RssAnon", "RssFile", "VmHWM"))


def run_merge(paths, out, report, window_s, one_pass=False):
    """Run the merge; wall s, peak RSS MiB (wait4), per stage peaks (MiB) and samples."""
    cmd = [sys.executable, "-m", "sniffsync", "merge", *map(str, paths), "-o", str(out), "--report", str(report)]
    if not one_pass:
        cmd += ["--window-s", str(window_s)]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    errf = open(str(out) + ".stderr", "w+")
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=errf, env=env)
    samples = []
    while True:                                    # wait4 (not poll): its rusage has the peak
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        samples.append((time.perf_counter() - t0, *_proc_mem(proc.pid)))
        time.sleep(0.2)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    errf.seek(0)
    err = errf.read()
    errf.close()
    if proc.returncode != 0:
        raise SystemExit(f"merge failed: {err[-800:]}")
    stages = [(float(a), b) for a, b in re.findall(r"^\[\s*([\d.]+) s\] (.*)$", err, re.M)]
    peak = {}
    for t, rss, anon, file, _ in samples:            # the stage a sample falls in: the last started
        name = next((n for s, n in reversed(stages) if s <= t), "start")
        key = "pass 1" if name.startswith("pass 1") else name.split(",")[0]
        p = peak.setdefault(key, [0, 0, 0])
        p[:] = [max(p[0], rss), max(p[1], anon), max(p[2], file)]
    # the peak: VmHWM (ru_maxrss of a child starts at its parent's RSS at fork: the parent
    # holding a scored 6 h run made every later child "peak" at 4.1 GB)
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime,
            "peak_rss_mib": max([s[4] for s in samples] or [0]) / 1024,
            "stage_peak_mib": {k: [round(v / 1024) for v in p] for k, p in peak.items()},
            "samples": [(round(t, 1), r // 1024, a // 1024) for t, r, a, *_ in samples[::5]]}


def score(merged: Path, truth: dict, chunk: int = 1 << 20) -> dict:
    """Merged times vs the applied clocks (module docstring)."""
    from sniffsync.io.bytecols import gather
    from sniffsync.io.capture import read_records
    from sniffsync.sync.mergedfile import OPT_CUSTOM_BIN, epb_dtype
    clocks = truth["clocks"]
    n_s = len(clocks)
    rec = read_records(merged)
    n = len(rec.data_off)
    dt = epb_dtype(n_s)
    x = np.empty(n, np.float64)
    y = np.empty(n, np.float64)
    sniffer = np.asarray(rec.iface, np.int64)
    heard_n = np.empty(n, np.int64)
    ampdu = np.empty(n, bool)
    ts0 = int(rec.ts_ns[0])
    for lo in range(0, n, chunk):
        hi = min(n, lo + chunk)
        off = np.asarray(rec.data_off[lo:hi], np.int64)
        tsft_us = gather(rec.buf, off + 8, 8).reshape(-1, 8).copy().view("<u8")[:, 0].astype(np.int64)
        present = gather(rec.buf, off + 4, 4).reshape(-1, 4).copy().view("<u4")[:, 0]
        ampdu[lo:hi] = (present & (1 << 20)) > 0          # radiotap A-MPDU status
        cap = np.asarray(rec.caplen[lo:hi], np.int64)
        o = gather(rec.buf, off + cap + (-cap % 4), dt.itemsize).reshape(-1, dt.itemsize).copy().view(dt).ravel()
        if not (o["code"] == OPT_CUSTOM_BIN).all():
            raise SystemExit("merged file without the merge's packet option")
        heard = o["heard"].astype(np.uint64)
        heard_n[lo:hi] = sum(((heard >> np.uint64(k)) & np.uint64(1)).astype(np.int64) for k in range(n_s))
        s = sniffer[lo:hi]
        true = np.zeros(hi - lo)
        for k in range(n_s):                       # the true instant of the written copy's stamp
            m = s == k
            true[m] = true_ns_of(clocks[k], tsft_us[m] * 1000.0)
        x[lo:hi] = local_ns(clocks[0], true) - clocks[0]["offset_ns"]      # reference TSF, from 0
        y[lo:hi] = (np.asarray(rec.ts_ns[lo:hi], np.int64) - ts0).astype(np.float64)
    del rec
    b, a = np.polyfit(x - x.mean(), y, 1)          # the epoch map: affine
    err_us = (y - (a + b * (x - x.mean()))) / 1000.0
    out = {"frames_scored": n, "epoch_map_slope_minus_1_ppm": round(float(b - 1) * 1e6, 3)}
    pct = lambda v: [round(float(q), 3) for q in np.percentile(np.abs(v), [50, 99])] if len(v) else None  # noqa: E731
    out["frame_err_us_p50_p99"] = pct(err_us)
    for k in range(1, n_s):
        only = (sniffer == k) & (heard_n == 1) & ~ampdu     # an A-MPDU takes its time from its PPDU
        out[f"model_err_us_p50_p99_{truth['names'][k]}"] = pct(err_us[only])
        out[f"model_err_frames_{truth['names'][k]}"] = int(only.sum())
    out["max_abs_err_us"] = round(float(np.abs(err_us).max()), 3)
    return out


def fit_compare(paths, truth, tile_s_list=(None, 0)) -> dict:
    """Pass 1 of the streamed merge once, then its clock fit per tile length (None: the
    default, 0: one fit of the whole), each model scored at every second of the run
    against the applied clocks: |fitted common time - the reference TSF's reading| at
    each sniffer's noise-free TSF reading of that true instant (µs p50/p99/max)."""
    from sniffsync.sync import stream
    from sniffsync.sync.merge import NEEDED_COLUMNS
    from sniffsync.sync.snaplen import min_snaplen
    names = truth["names"]
    spill = tempfile.mkdtemp(prefix=".fit-", dir=os.path.dirname(os.path.abspath(paths[0])))
    ins = stream._pass1([str(p) for p in paths], list(NEEDED_COLUMNS), "auto", ("beacon", "ba", "unique"),
                        lambda s: None, stream.BATCH_ROWS, stream.ANCHOR_CAP, stream.SAMPLE_CAP,
                        min_snaplen(paths), spill)
    grid = np.arange(0, truth["hours"] * 3600e9, 1e9)[1:-1]
    ref_local = local_ns(truth["clocks"][0], grid)
    out = {}
    for tile_s in tile_s_list:
        t = time.perf_counter()
        res, *_ = stream._fit(ins, 0, ("beacon", "ba", "unique"), 1.0, False, names,
                              stream.TILE_NS if tile_s is None else int(tile_s * 1e9), spill)
        m, clocks = res.model, res.model.clocks
        ref_map = m.apply(np.rint(ref_local).astype(np.int64), np.full(len(grid), m.reference)) - np.rint(ref_local)
        row = {"fit_s": round(time.perf_counter() - t, 1), "tiles": getattr(res, "tiles", 1)}
        for s in range(1, len(names)):
            c = int(np.flatnonzero(clocks.sniffer.to_numpy() == s)[0])
            loc = np.rint(local_ns(truth["clocks"][s], grid)).astype(np.int64)
            err = (m.apply(loc, np.full(len(grid), c)) - (ref_local + ref_map)) / 1000
            row[names[s]] = [round(float(q), 3) for q in np.percentile(np.abs(err), [50, 99, 100])]
        out["one fit" if tile_s == 0 else f"tiles (at most {stream.TILE_NS / 1e9 if tile_s is None else tile_s:g} s)"] = row
        print(f"model vs applied clocks, {row}", flush=True)
    shutil.rmtree(spill, ignore_errors=True)
    return out


def _reused(d: Path, hours, a):
    """The truth of a run kept in ``d`` by an earlier ``--keep`` (or make_long_run.py), if it
    is the one asked for; else None (it is written anew)."""
    try:
        t = json.loads((d / "truth.json").read_text())
    except (OSError, ValueError):
        return None
    same = t.get("hours") == hours and t.get("rate") == a.rate and t.get("seed") == a.seed
    return t if same and all((d / f).exists() for f in t["files"]) else None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hours", type=float, nargs="+", default=[1, 3, 6])
    ap.add_argument("--rate", type=float, default=500.0, help="frames per second on the air")
    ap.add_argument("--snaplen", type=int, nargs="+", default=[160])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--window-s", type=float, default=10.0)
    ap.add_argument("--one-pass", type=float, nargs="*", default=[], metavar="HOURS",
                    help="also run the one-pass merge (no --window-s) at these durations")
    ap.add_argument("--out", type=Path, default=HERE / "out" / "long")
    ap.add_argument("--keep", action="store_true", help="keep the runs and merged files")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--reuse", action="store_true",
                    help="merge a run already in OUT/h<hours> (same hours, rate, seed) instead of writing it")
    ap.add_argument("--fit-only", action="store_true",
                    help="instead: pass 1 and the clock fit only, tiled and as one fit, each "
                         "model scored at every second against the applied clocks")
    a = ap.parse_args(argv)
    print(f"cores {os.cpu_count()}, load {os.getloadavg()[0]:.1f}; window {a.window_s} s", flush=True)
    rows = []
    for hours in a.hours:
        d = a.out / f"h{hours:g}"
        t = time.perf_counter()
        truth = _reused(d, hours, a) if a.reuse else None
        truth = truth or write_run(d, hours, 3, a.rate, a.snaplen, a.seed, progress=False)
        gen_s = time.perf_counter() - t
        paths = [d / f for f in truth["files"]]
        size_gb = sum(p.stat().st_size for p in paths) / 1e9
        row = {"hours": hours, "frames_in": sum(truth["frames_in"]), "input_gb": round(size_gb, 2),
               "transmissions": truth["transmissions"], "generate_s": round(gen_s, 1),
               "load_before": os.getloadavg()[0]}
        if a.fit_only:
            row["fit"] = fit_compare(paths, truth)
            rows.append(row)
            if not a.keep:
                shutil.rmtree(d)
            continue
        for one in ([False, True] if hours in a.one_pass else [False]):
            tag = "one_pass" if one else "windowed"
            res = run_merge(paths, d / f"{tag}.pcapng", d / f"{tag}.json", a.window_s, one_pass=one)
            rep = json.loads((d / f"{tag}.json").read_text())
            res["frames_out"] = rep["totals"]["frames_out"]
            res["anchor_sample"] = rep.get("anchor_sample")
            res["frame_sample"] = rep.get("frame_sample")
            res["drift_ppm"] = [s["model"][0].get("drift_ppm") if s["model"] else None for s in rep["sniffers"]]
            res["heldout_us"] = [s["heldout"]["abs_residual_us_p50_p95_p99"] for s in rep["sniffers"]]
            res["load_after"] = os.getloadavg()[0]
            if not one:
                res["score"] = score(d / f"{tag}.pcapng", truth)
            row[tag] = res
            print(f"{hours:g} h, {tag}: {row['frames_in']:,} frames, {size_gb:.2f} GB in, {res['wall_s']:.0f} s "
                  f"(CPU {res['cpu_s']:.0f} s), peak RSS {res['peak_rss_mib']:,.0f} MiB, per stage "
                  f"[VmRSS, anon, file] {res['stage_peak_mib']}; frames out {res['frames_out']:,} vs "
                  f"{truth['transmissions']:,} transmissions; {res.get('score', '')}; "
                  f"load {res['load_after']:.1f}", flush=True)
        rows.append(row)
        if not a.keep:
            shutil.rmtree(d)
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
