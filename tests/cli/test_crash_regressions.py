"""Inputs that once ended in a traceback (tests/data/crashes/README.md): each command now finishes,
and what it reports is checked against tshark's reading of the same bytes."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CRASHES = Path(__file__).parents[1] / "data" / "crashes"
needs_tshark = pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")


def _run(*args):
    return subprocess.run([sys.executable, "-m", "sniffsync", *map(str, args)], capture_output=True,
                          text=True, timeout=120)


def _tshark(path, *fields, filt=None):
    cmd = ["tshark", "-r", str(path), "-n", "-T", "fields", *sum((["-e", f] for f in fields), [])]
    out = subprocess.run(cmd + (["-Y", filt] if filt else []), capture_output=True, text=True, check=True)
    return [line.split("\t") for line in out.stdout.splitlines() if line]


@pytest.mark.tshark
@needs_tshark
def test_fairness_on_legacy_rate_udp(tmp_path):
    name = "fair-IndexError-legacy-rate-udp.pcap"
    out = tmp_path / "r.json"
    p = _run("fairness", CRASHES / name, "-o", out)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    flows = json.loads(out.read_text())["flows"]
    # tshark: UDP payload bytes per (src, sport, dst, dport)
    want = {}
    for src, sport, dst, dport, ln in _tshark(CRASHES / name, "ip.src", "udp.srcport", "ip.dst",
                                              "udp.dstport", "udp.length", filt="udp"):
        key = (f"{src}:{sport}", f"{dst}:{dport}")
        want[key] = want.get(key, 0) + int(ln) - 8
    got = {(f["src"] + ":" + str(f["sport"]), f["dst"] + ":" + str(f["dport"])): f["bytes"] for f in flows}
    assert got == want


@pytest.mark.tshark
@needs_tshark
def test_detect_on_a_capture_of_only_rts(tmp_path):
    name = "detect-IndexError-only-rts.pcap"
    p = _run("detect", CRASHES / name, "-o", tmp_path / "e.csv")
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    # tshark: how many RTS (subtype 0x1b) and CTS (0x1c) frames; each RTS without a CTS is unanswered
    kinds = [int(r[0], 16) for r in _tshark(CRASHES / name, "wlan.fc.type_subtype") if r and r[0]]
    n_rts, n_cts = kinds.count(0x1B), kinds.count(0x1C)
    assert n_cts == 0
    assert f"rts_unanswered {n_rts}," in p.stdout


@pytest.mark.parametrize("command, name", [("fairness", "fuzz-36219-fair-IndexError-_known.pcap"),
                                           ("detect", "fuzz-7653-detect-IndexError-_implied_cts.pcap")])
def test_fuzzed_reproducers_finish_without_a_traceback(tmp_path, command, name):
    # mutated bytes tshark itself cannot fully dissect: the property is that the command ends
    # normally (it raised IndexError before the fix)
    p = _run(command, CRASHES / name, "-o", tmp_path / ("r.json" if command == "fairness" else "e.csv"))
    assert p.returncode == 0 and "Traceback" not in p.stderr and "IndexError" not in p.stderr, p.stderr
