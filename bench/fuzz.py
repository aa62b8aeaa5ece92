"""Long fuzz run of the reader and the stage functions: ``python bench/fuzz.py --minutes N``.

Each worker process draws structured captures with Hypothesis (:mod:`fuzz_inputs`:
containers, radiotap, 802.11, IP/TCP, timestamps, gzip) and, from each, ``--mutants``
cheap structure-aware mutants (interesting values over record lengths, timestamps,
radiotap ``it_len`` and present words, 802.11 and IP bytes; a cut at a record boundary).
Every input goes through the whole reader (:func:`fuzz_target.read_bytes`); each drawn
capture also goes through the stage functions (PPDUs, detection, fairness).

Bounds: the parent watches every worker (``/proc``): an input that does not end within
``--timeout`` s (10) or a worker above ``--max-rss`` (1 GiB) is a hang / an overrun;
its input (the worker's scratch file) is saved, the worker killed and a new one started.
An exception other than the project's own error (``SniffsyncError``) is a crash: the
input and its traceback are saved under ``--out``, one per distinct stack top.
At the end one JSON line: inputs, seconds, rate, crashes, hangs, overruns.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
INTERESTING = [0, 1, 2, 7, 8, 0x7F, 0x80, 0xFF, 0x100, 0xFFFF, 0x10000, 0x7FFFFFFF, 0x80000000,
               0xFFFFFFFF, 16 << 20, (16 << 20) + 1]


def mutants(data: bytes, starts, rng: random.Random, k: int):
    """``k`` mutants of ``data``; ``starts``: offsets where records' bytes begin (from the reader)."""
    spots = [0, 4, 8, 16, 20]
    for s in starts[:64]:
        spots += [s - 16, s - 12, s - 8, s - 4, s, s + 2, s + 4, s + 8, s + 12, s + 24, s + 40]
    spots = [p for p in spots if 0 <= p < len(data)] or [0]
    for _ in range(k):
        b = bytearray(data)
        for _ in range(rng.randint(1, 3)):
            op = rng.random()
            at = rng.choice(spots) if rng.random() < 0.8 else rng.randrange(len(b) or 1)
            if not b:
                break
            if op < 0.45:
                size = rng.choice([1, 2, 4])
                val = rng.choice(INTERESTING) & ((1 << 8 * size) - 1)
                b[at:at + size] = val.to_bytes(size, rng.choice(["little", "big"]))
            elif op < 0.75:
                b[min(at, len(b) - 1)] ^= 1 << rng.randrange(8)
            elif op < 0.85:
                del b[at:]
            else:                          # a wild timestamp in a record header
                t = rng.choice([0, 1, 0xFFFFFFFF, 0x7FFFFFFF, rng.getrandbits(32)])
                b[at:at + 4] = struct.pack("<I", t)
        if rng.random() < 0.05:
            import gzip
            b = bytearray(gzip.compress(bytes(b), 1))
            if rng.random() < 0.5:
                del b[rng.randrange(len(b)):]
        yield bytes(b)


class Worker:
    """State of one worker process: counters in a small shared file the parent reads."""

    def __init__(self, out: str, stats_path: str, seed: int, n_mutants: int, deadline: float,
                 recycle: int = 20_000):
        sys.path[:0] = [ROOT, HERE]
        import fuzz_target
        self.ft = fuzz_target
        self.out, self.stats_path, self.n_mutants, self.deadline = out, stats_path, n_mutants, deadline
        self.recycle = recycle                 # then exit: a fresh process (Hypothesis state grows)
        self.path = fuzz_target.scratch_path()
        self.rng = random.Random(seed)
        self.seed = seed
        self.counts = {"inputs": 0, "ok": 0, "error": 0, "crash": 0, "stages": 0}
        self.seen = set()
        self.last_write = 0.0

    def save_stats(self, force=False):
        now = time.monotonic()
        if force or now - self.last_write > 0.5:
            tmp = self.stats_path + ".tmp"
            with open(tmp, "w") as fh:
                json.dump({**self.counts, "t": time.time(), "scratch": self.path}, fh)
            os.replace(tmp, self.stats_path)
            self.last_write = now

    def one(self, data: bytes, with_stages: bool):
        self.counts["inputs"] += 1
        try:
            res = self.ft.run_one(data, self.path, with_stages)
            self.counts[res] += 1
            self.counts["stages"] += with_stages
        except Exception as exc:             # a crash: keep one input per stack top
            self.counts["crash"] += 1
            tb = traceback.extract_tb(exc.__traceback__)
            top = next((f for f in reversed(tb) if "sniffsync" in f.filename or "airtime" in f.filename), tb[-1])
            sig = f"{type(exc).__name__}-{os.path.basename(top.filename)}-{top.lineno}"
            if sig not in self.seen:
                self.seen.add(sig)
                name = f"crash-{sig}-{hashlib.sha1(data).hexdigest()[:8]}"
                with open(os.path.join(self.out, name + ".bin"), "wb") as fh:
                    fh.write(data)
                with open(os.path.join(self.out, name + ".txt"), "w") as fh:
                    fh.write("".join(traceback.format_exception(exc)))
        self.save_stats()

    def run(self):
        from hypothesis import HealthCheck, Phase, given, seed, settings
        from fuzz_inputs import capture

        @settings(max_examples=10**9, deadline=None, database=None, phases=[Phase.generate],
                  suppress_health_check=list(HealthCheck))
        @seed(self.seed)
        @given(capture())
        def body(data):
            if time.time() > self.deadline or self.counts["inputs"] >= self.recycle:
                raise _Done
            self.one(data, True)
            try:
                starts = self.ft.record_starts(self.path)
            except Exception:
                starts = []
            for m in mutants(data, starts, self.rng, self.n_mutants):
                self.one(m, False)

        try:
            body()
        except _Done:
            pass
        finally:
            self.save_stats(force=True)


class _Done(Exception):
    pass


def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _read(path):
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def parent(args) -> dict:
    os.makedirs(args.out, exist_ok=True)
    t0 = time.time()
    deadline = t0 + args.minutes * 60
    totals = {"inputs": 0, "ok": 0, "error": 0, "crash": 0, "stages": 0, "hang": 0, "overrun": 0}
    seed = args.seed
    procs = {}

    def start(slot):
        nonlocal seed
        seed += 1
        stats = os.path.join(args.out, f".worker{slot}.json")
        if os.path.exists(stats):
            os.remove(stats)
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--out", args.out, "--stats", stats,
               "--seed", str(seed), "--mutants", str(args.mutants), "--deadline", str(deadline)]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, HERE, os.environ.get("PYTHONPATH", "")]))
        p = subprocess.Popen(cmd, env=env, preexec_fn=lambda: os.nice(args.nice))
        procs[slot] = (p, stats, time.monotonic(), 0)

    def bank(stats):
        s = _read(stats)
        if s:
            for k in ("inputs", "ok", "error", "crash", "stages"):
                totals[k] += s[k]
        return s

    for slot in range(args.workers):
        start(slot)
    while procs:
        time.sleep(0.5)
        for slot, (p, stats, since, last_n) in list(procs.items()):
            s = _read(stats)
            n = s["inputs"] if s else 0
            if n != last_n:
                since = time.monotonic()
            procs[slot] = (p, stats, since, n)
            if p.poll() is not None:
                bank(stats)
                del procs[slot]
                if time.time() < deadline - 5 and p.returncode != 0:
                    start(slot)
                continue
            hung = time.monotonic() - since > args.timeout
            fat = _rss_bytes(p.pid) > args.max_rss
            if hung or fat:
                p.kill()
                p.wait()
                kind = "hang" if hung else "overrun"
                totals[kind] += 1
                s = bank(stats)
                scratch = s["scratch"] if s else None
                if scratch and os.path.exists(scratch):
                    data = open(scratch, "rb").read()
                    shutil.copy(scratch, os.path.join(args.out, f"{kind}-{hashlib.sha1(data).hexdigest()[:8]}.bin"))
                del procs[slot]
                if time.time() < deadline - 5:
                    start(slot)
    secs = time.time() - t0
    totals.update(seconds=round(secs, 1), rate_per_s=round(totals["inputs"] / secs, 1),
                  date=time.strftime("%Y-%m-%d", time.gmtime()), workers=args.workers)
    return totals


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=1.0)
    ap.add_argument("--out", default="fuzz-out", help="folder for crash / hang / overrun inputs")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--mutants", type=int, default=40, help="mutants run per drawn capture (reader only)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds one input may take")
    ap.add_argument("--max-rss", type=int, default=1 << 30, help="bytes a worker may hold")
    ap.add_argument("--nice", type=int, default=10)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--stats", help=argparse.SUPPRESS)
    ap.add_argument("--deadline", type=float, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        w = Worker(args.out, args.stats, args.seed, args.mutants, args.deadline)
        w.run()
        return 0 if time.time() > args.deadline else 3          # 3: recycled, start another
    print(json.dumps(parent(args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
