"""Benchmark: `sniffsync simulate SCENARIO --seconds S` as a whole process.

    python bench/bench_simulate.py [--scenario hidden-node] [--seconds 20] [--repeat 3]
                                   [--baseline DIR]

Runs ``python -m sniffsync simulate`` ``--repeat`` times and reports, per run, the wall
time, the CPU time (user + system, from ``os.wait4``) and the peak RSS of the child. With
``--baseline DIR`` (another checkout of the project, e.g. ``git worktree add /tmp/base
main``) the baseline runs interleaved with this checkout in the same session, the
ratios are printed, and the two outputs are compared file by file (SHA-256): the
simulator is deterministic per seed, so a speed-up must leave them identical.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(tree: str, argv: list, out: str) -> tuple[float, float, float]:
    """(wall s, cpu s, peak RSS MB) of one simulate process run from ``tree``."""
    env = dict(os.environ, PYTHONPATH=tree)
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "sniffsync", "simulate", *argv, "-o", out, "-q"],
                            cwd=tree, env=env)
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"simulate failed in {tree}")
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024


def digest(folder: str) -> dict:
    out = {}
    for base, _, files in os.walk(folder):
        for f in files:
            p = os.path.join(base, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, folder)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenario", default="hidden-node")
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--baseline", help="another checkout to compare with")
    args = ap.parse_args(argv)
    sim = [args.scenario, "--seconds", f"{args.seconds:g}"] + (
        ["--seed", str(args.seed)] if args.seed is not None else [])
    trees = {"this": ROOT, **({"baseline": os.path.abspath(args.baseline)} if args.baseline else {})}
    res = {k: [] for k in trees}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeat):
            for k, tree in trees.items():
                res[k].append(run(tree, sim, os.path.join(tmp, k)))
        same = None
        if args.baseline:
            a, b = digest(os.path.join(tmp, "this")), digest(os.path.join(tmp, "baseline"))
            same = a == b
    load = os.getloadavg()
    print(f"simulate {' '.join(sim)}: {os.cpu_count()} cores, load {load[0]:.2f} {load[1]:.2f} "
          f"{load[2]:.2f}; {args.repeat} runs each, interleaved")
    med = {}
    for k, rows in res.items():
        wall, cpu, rss = (statistics.median(r[i] for r in rows) for i in range(3))
        med[k] = (wall, cpu, rss)
        runs = ", ".join(f"{r[0]:.2f}" for r in rows)
        print(f"{k:9} wall {wall:6.2f} s (runs {runs}), cpu {cpu:6.2f} s, peak RSS {rss:6.0f} MB")
    if args.baseline:
        (w, c, m), (bw, bc, bm) = med["this"], med["baseline"]
        print(f"this / baseline: wall {w / bw:.2f}x, cpu {c / bc:.2f}x, peak RSS {m / bm:.2f}x; "
              f"outputs {'byte-identical' if same else 'DIFFERENT'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
