"""Time `airtime.ppdu.group_ppdus` in-process, this tree against a peer tree, runs interleaved.

    python bench/bench_grouping.py CAPTURE --peer OTHER_TREE [--repeat 3]

Each run is a fresh interpreter started from a neutral directory with its tree first on
PYTHONPATH; it reads CAPTURE with the columns the `fairness` command reads
(`airtime.columns.GROUPING_COLUMNS`) and times one `group_ppdus(frames, release=True)` (wall
and this thread's CPU). Prints each tree's median, the ratio, the cores and the load, and the md5
of the PPDU table and frame -> PPDU map (must be equal: the peer is the oracle of "the same PPDUs").
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_PROBE = r"""
import hashlib, json, pickle, sys, time
import numpy as np
from airtime.columns import GROUPING_COLUMNS
from airtime.ppdu import group_ppdus
from sniffsync import read_capture
frames = read_capture(sys.argv[1], columns=list(GROUPING_COLUMNS))
w, c = time.perf_counter(), time.thread_time()
g = group_ppdus(frames, release=True)
w, c = time.perf_counter() - w, time.thread_time() - c
h = hashlib.md5(np.ascontiguousarray(g.frame_ppdu).tobytes())
for name in g.ppdus.columns:
    h.update(name.encode() + pickle.dumps(g.ppdus[name].array, protocol=5))
print(json.dumps({"wall": w, "cpu": c, "ppdus": len(g.ppdus), "md5": h.hexdigest()}))
"""


def _run(tree: str, capture: str) -> dict:
    env = dict(os.environ, PYTHONPATH=tree)
    out = subprocess.run([sys.executable, "-c", _PROBE, os.path.abspath(capture)], env=env,
                         cwd=tempfile.gettempdir(), capture_output=True, text=True, check=True)
    return json.loads(out.stdout.splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("capture")
    ap.add_argument("--peer", required=True, help="another checkout (e.g. a worktree of main)")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)
    runs = {"this": [], "peer": []}
    for _ in range(a.repeat):                        # interleaved: both see the same load
        runs["peer"].append(_run(os.path.abspath(a.peer), a.capture))
        runs["this"].append(_run(HERE, a.capture))
    med = {k: {m: statistics.median(r[m] for r in v) for m in ("wall", "cpu")} for k, v in runs.items()}
    md5 = {r["md5"] for v in runs.values() for r in v}
    print(f"{a.capture}: {runs['this'][0]['ppdus']} PPDUs; {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    for k in ("peer", "this"):
        cpus = ", ".join("%.3f" % r["cpu"] for r in runs[k])
        print(f"  {k}: group_ppdus wall {med[k]['wall']:.3f} s, CPU {med[k]['cpu']:.3f} s "
              f"(median of {a.repeat}; CPU runs {cpus})")
    print(f"  ratio peer/this: wall {med['peer']['wall'] / med['this']['wall']:.2f}x, "
          f"CPU {med['peer']['cpu'] / med['this']['cpu']:.2f}x; same PPDUs: {len(md5) == 1}")
    return 0 if len(md5) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
