"""pcapng interface timestamp options that once overflowed (tests/data/crashes/README.md):
the packets are kept, as tshark keeps them, and marked; times are checked against the bytes."""
import shutil
import struct
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sniffsync.decode.frames import read_capture
from sniffsync.io.capture import read_records
from sniffsync.io.pcapng import _ticks_to_ns

ROOT = str(Path(__file__).resolve().parents[2])
CRASHES = Path(__file__).parents[1] / "data" / "crashes"
CASES = {   # file -> (reason in the bad column, packets tshark reads)
    "read-OverflowError-if_tsoffset.pcapng": ("if_tsoffset", 1),
    "fuzz-19648-read-OverflowError-tsoffset.pcapng": ("if_tsoffset", None),
    "read-OverflowError-if_tsresol-29.pcapng": ("if_tsresol 10^-29", 1),
    "fuzz-9045-read-OverflowError-tsresol.pcapng": ("if_tsresol 10^-127", 128),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_unusable_timestamp_option_marks_packets(name):
    reason, n = CASES[name]
    t = read_capture(CRASHES / name)
    assert len(t) > 0 and (n is None or len(t) == n)
    marked = t["bad"].astype(str).str.contains("timestamp: " + reason.split()[0])
    assert marked.all()
    rec = read_records(CRASHES / name)
    assert any(reason in p for p in rec.problems)


def test_tsoffset_ignored_time_from_ticks():
    # hand-read: EPB at byte 28 + IDB length; ticks (high, low) words at +12/+16, tsresol default 10^-6
    buf = (CRASHES / "read-OverflowError-if_tsoffset.pcapng").read_bytes()
    idb_len = struct.unpack_from("<I", buf, 28 + 4)[0]
    hi, lo = struct.unpack_from("<II", buf, 28 + idb_len + 12)
    got = read_capture(CRASHES / "read-OverflowError-if_tsoffset.pcapng")["ts_ns"][0]
    assert got == ((hi << 32) | lo) * 1000


def test_ticks_to_ns_exact_for_any_resolution():
    t = np.array([0, 1, 2**40 + 7, 2**64 - 1], np.uint64)
    for base, exp in [(10, 6), (10, 9), (10, 12), (10, 19), (10, 20), (10, 29), (10, 127),
                      (2, 10), (2, 40), (2, 63), (2, 70), (2, 127)]:
        want = [int(x) * 10**9 // base**exp for x in t.tolist()]
        want = [w if w < 2**63 else w - 2**64 for w in want]     # int64 as numpy wraps it
        assert _ticks_to_ns(t, base, exp).tolist() == [w % 2**64 - (2**64 if w % 2**64 >= 2**63 else 0)
                                                       for w in want], (base, exp)


@pytest.mark.parametrize("cmd", ["frames", "airtime", "detect"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_no_traceback_from_commands(cmd, name, tmp_path):
    p = subprocess.run([sys.executable, "-m", "sniffsync", cmd, str(CRASHES / name)],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path,
                       env={**os.environ, "PYTHONPATH": ROOT})   # this tree, not an installed copy
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr


@pytest.mark.tshark
@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")
@pytest.mark.parametrize("name", sorted(CASES))
def test_same_packet_count_as_tshark(name):
    out = subprocess.run(["tshark", "-r", str(CRASHES / name), "-T", "fields", "-e", "frame.number"],
                         capture_output=True, text=True)
    cut = any("record cut at end of file" in p for p in read_records(CRASHES / name).problems)
    # we keep a packet cut by the end of the file (marked); tshark drops it
    assert len(read_capture(CRASHES / name)) == len(out.stdout.split()) + cut
