"""`sniffsync frames SMALL.pcap`, `sniffsync fairness SMALL.pcap` and `sniffsync --help` must
not import the heavy libraries (their imports were most of the start-up: issue 17). Checked in
a fresh interpreter."""
import csv
import io
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CAP = os.path.join(ROOT, "tests", "data", "captures", "tcpdump_ieee802.11_exthdr.pcap")   # 26 frames
WIRED = os.path.join(ROOT, "tests", "data", "captures", "udp", "iperf2_hand.pcap")   # Ethernet, UDP
WIFI = os.path.join(ROOT, "tests", "data", "captures", "ns3-11n-ht20-hidden-snifferA-nearAP.pcap")
HEAVY = ("pandas", "pyarrow", "matplotlib", "flask", "duckdb", "dask")

_PROBE = """
import json, sys
from sniffsync.cli.main import main
out = sys.stdout
sys.stdout = open(sys.argv[1], "w")
try:
    code = main(sys.argv[2:])
except SystemExit as exc:                 # --help
    code = exc.code
sys.stdout.close()
sys.stdout = out
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def _modules(tmp_path, *argv):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    res = subprocess.run([sys.executable, "-c", _PROBE, str(tmp_path / "stdout"), *argv],
                         capture_output=True, text=True, env=env, cwd=ROOT, check=True)
    got = json.loads(res.stdout.splitlines()[-1])
    return got["code"], set(got["modules"]), (tmp_path / "stdout").read_text()


@pytest.mark.parametrize("argv", [["frames", CAP], ["--help"], ["frames", "--help"]],
                         ids=["frames", "help", "frames-help"])
def test_no_heavy_imports(argv, tmp_path):
    code, mods, text = _modules(tmp_path, *argv)
    top = {m.split(".")[0] for m in mods}
    assert code == 0
    assert not set(HEAVY) & top
    if argv == ["frames", CAP]:
        assert len(list(csv.reader(io.StringIO(text)))) == 1 + 26     # it wrote the table
        assert "numpy" in top                            # (the probe sees real imports)
    if argv == ["frames", "--help"]:
        assert "sniffsync.cli.merge" not in mods and "sniffsync.cli.fairness" not in mods


# 802.11: the PPDUs are grouped on the decoded columns (airtime.framecols.Columns) and the
# cross-layer view reads three PPDU columns as numpy: no pandas either (issue 17)
@pytest.mark.parametrize("cap", [WIRED, WIFI], ids=["wired", "802.11"])
def test_fairness_imports_neither_pandas_nor_pyarrow(cap, tmp_path):
    out = tmp_path / "r.json"
    code, mods, text = _modules(tmp_path, "fairness", cap, "-o", str(out))
    assert code == 0
    assert json.loads(out.read_text())["flows"]                 # it wrote the report
    assert "Jain over" in text
    top = {m.split(".")[0] for m in mods}
    assert "numpy" in top and "sniffsync.fairness.core" in mods  # (the probe sees real imports)
    assert not {"pandas", "pyarrow"} & top
    assert "numpy.ma" not in mods        # np.unique / np.median / np.union1d load it: ~7 ms


_THREADS = """
import json, os, sys, threading, time
from sniffsync.cli.main import main
sys.stdout = open(os.devnull, "w")
code = main(sys.argv[1:])
import numpy as np
np.linalg.solve(np.eye(300) + 1, np.ones(300))     # a BLAS call, as the clock fit's
for t in threading.enumerate():                    # the command's own threads: gone
    if t is not threading.main_thread():
        t.join(5)
time.sleep(0.05)
print(json.dumps({"code": code, "threads": len(os.listdir("/proc/self/task")),
                  "env": os.environ.get("OPENBLAS_NUM_THREADS")}), file=sys.stderr)
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task") or (os.cpu_count() or 1) < 2,
                    reason="counts the process's threads in /proc; needs 2+ cores to tell")
@pytest.mark.parametrize("given", [None, "2"])
def test_cli_starts_no_blas_threads_unless_asked(given, tmp_path):
    """The commands' own pools fill the cores; OpenBLAS's idle threads only took CPU from them
    (merge 3 x 1M: -0.5 s). A user's OPENBLAS_NUM_THREADS is kept."""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    env["PYTHONPATH"] = ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")
    if given:
        env["OPENBLAS_NUM_THREADS"] = given
    res = subprocess.run([sys.executable, "-c", _THREADS, "frames", CAP], capture_output=True,
                         text=True, env=env, cwd=ROOT, check=True)
    got = json.loads(res.stderr.splitlines()[-1])
    assert got["code"] == 0
    assert got["env"] == (given or "1")
    assert got["threads"] == (1 if not given else 2)     # OpenBLAS: the caller + n - 1 workers
