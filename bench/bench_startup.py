"""Benchmark: start-up of `sniffsync frames tiny.pcap` and `sniffsync --help` (whole processes).

    python bench/bench_startup.py [--repeat 21] [--capture PCAP] [--frames 10]

Writes the first ``--frames`` records of ``--capture`` (default: the ns-3 hidden-node
sniffer A capture of tests/data) to a temporary pcap, then runs, interleaved and
``--repeat`` times, four whole processes with this interpreter (not a shell shim):

* ``python -c pass``                          (the peer: interpreter + site start-up)
* ``python -c 'import numpy'``                (the floor of any numpy reader)
* ``python -m sniffsync --help``
* ``python -m sniffsync frames tiny.pcap``    (CSV to /dev/null)
* ``python -m sniffsync fairness wired.pcap -o r.json``  (the 29-packet Ethernet UDP capture of
  tests/data/captures/udp: the wired fairness path, its start-up and exit)

and prints their medians and minima, each command's ratio to ``python -c pass`` and its
own cost above it. Then one ``-X importtime`` run of ``frames`` gives the biggest imports
(self and cumulative time) and the heavy libraries that must not be imported.

The package's modules are byte-compiled first (``compileall``), as in an installed
package: with ``PYTHONDONTWRITEBYTECODE`` set and no ``__pycache__``, every run would
compile ~40 modules from source (~0.1 s) and measure that instead.
"""
from __future__ import annotations

import argparse
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SRC = os.path.join(ROOT, "tests", "data", "captures", "ns3-11n-ht20-hidden-snifferA-nearAP.pcap")
WIRED = os.path.join(ROOT, "tests", "data", "captures", "udp", "iperf2_hand.pcap")
HEAVY = ("pandas", "pyarrow", "matplotlib", "flask", "duckdb", "dask")


def tiny_pcap(src: str, dst: str, frames: int) -> None:
    """The pcap global header and the first ``frames`` records of ``src`` (classic pcap)."""
    with open(src, "rb") as fh:
        head = fh.read(24)
        endian = "<" if head[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
        out = [head]
        for _ in range(frames):
            rec = fh.read(16)
            if len(rec) < 16:
                break
            caplen = struct.unpack(endian + "IIII", rec)[2]
            out.append(rec + fh.read(caplen))
    with open(dst, "wb") as fh:
        fh.write(b"".join(out))


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def run_once(cmd: list) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True,
                   cwd=ROOT, env=_env())
    return time.perf_counter() - t0


def import_times(cmd: list) -> list[tuple[str, int, int]]:
    """``(module, self_us, cumulative_us)`` of one ``-X importtime`` run."""
    res = subprocess.run([cmd[0], "-X", "importtime", *cmd[1:]], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, cwd=ROOT, env=_env(), check=True)
    out = []
    for line in res.stderr.splitlines():
        if line.startswith("import time:") and "|" in line and "self [us]" not in line:
            own, cum, name = line[len("import time:"):].split("|")
            out.append((name.strip(), int(own), int(cum)))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=21)
    ap.add_argument("--capture", default=SRC)
    ap.add_argument("--frames", type=int, default=10)
    args = ap.parse_args(argv)
    py = sys.executable
    import compileall
    for pkg in ("sniffsync", "airtime"):
        compileall.compile_dir(os.path.join(ROOT, pkg), quiet=1)
    with tempfile.TemporaryDirectory() as tmp:
        tiny = os.path.join(tmp, "tiny.pcap")
        tiny_pcap(args.capture, tiny, args.frames)
        cmds = {"python -c pass": [py, "-c", "pass"],
                "python -c 'import numpy'": [py, "-c", "import numpy"],
                "sniffsync --help": [py, "-m", "sniffsync", "--help"],
                "sniffsync frames tiny.pcap": [py, "-m", "sniffsync", "frames", tiny],
                "sniffsync fairness wired.pcap": [py, "-m", "sniffsync", "fairness", WIRED, "-o",
                                                  os.path.join(tmp, "r.json")]}
        for cmd in cmds.values():                    # warm the page cache and .pyc files
            run_once(cmd)
        times = {k: [] for k in cmds}
        for _ in range(args.repeat):
            for k, cmd in cmds.items():
                times[k].append(run_once(cmd))
        imports = import_times(cmds["sniffsync frames tiny.pcap"])
        fair_imports = import_times(cmds["sniffsync fairness wired.pcap"])
    load = os.getloadavg()
    print(f"machine: {os.cpu_count()} cores, load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
          f"{args.repeat} interleaved runs each; {args.frames}-frame capture")
    base = statistics.median(times["python -c pass"])
    print(f"{'command':28} {'median s':>9} {'min s':>7} {'x pass':>7} {'above pass s':>13}")
    for k, ts in times.items():
        med = statistics.median(ts)
        print(f"{k:28} {med:9.3f} {min(ts):7.3f} {med / base:7.2f} {med - base:13.3f}")
    np_med = statistics.median(times["python -c 'import numpy'"])
    frames_med = statistics.median(times["sniffsync frames tiny.pcap"])
    print(f"frames above `import numpy`: {frames_med - np_med:.3f} s")
    print("\nbiggest imports of `frames` (one -X importtime run, ms):")
    print(f"{'self':>7} {'cumul':>7}  module")
    for name, own, cum in sorted(imports, key=lambda r: -r[1])[:15]:
        print(f"{own / 1000:7.1f} {cum / 1000:7.1f}  {name}")
    top = [r for r in imports if "." not in r[0]]
    print("\ntop-level packages by cumulative time (ms):",
          ", ".join(f"{n} {c / 1000:.1f}" for n, _, c in sorted(top, key=lambda r: -r[2])[:8]))
    for name, imp in (("frames", imports), ("fairness (wired)", fair_imports)):
        heavy = sorted({r[0].split(".")[0] for r in imp} & set(HEAVY))
        print(f"heavy libraries imported by {name}:", ", ".join(heavy) if heavy else "none")
    return 0


if __name__ == "__main__":
    sys.exit(main())
