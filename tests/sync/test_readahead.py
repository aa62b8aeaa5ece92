"""``sniffsync merge`` reads its first input on a thread while the merge (pandas) is imported
(sniffsync/sync/readahead.py): the same merge, a pandas-free read, errors as before."""
from __future__ import annotations

import os
import subprocess
import sys

import pandas as pd
import pytest

from sniffsync.sync.merge import merge, write_merged
from sniffsync.sync.readahead import read_ahead

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "tests", "data", "captures")
CAPS = [os.path.join(DATA, f"ns3-11n-ht20-hidden-sniffer{x}.pcap") for x in ("A-nearAP", "B-nearSTA1", "C-nearSTA2")]


def test_merge_with_the_first_input_read_ahead_is_the_same(tmp_path):
    plain = merge(CAPS, columns=[])
    ra = read_ahead(CAPS[0], [])
    ahead = merge(CAPS, columns=[], read_ahead=ra)
    pd.testing.assert_frame_equal(plain.frames, ahead.frames)
    assert plain.report == ahead.report
    # handed over once: the holder keeps no decoded column alive through the merge
    assert ra._out is None
    with pytest.raises(RuntimeError, match="taken already"):
        ra.take()
    write_merged(tmp_path / "m.pcapng", ahead)
    assert read_ahead(tmp_path / "m.pcapng", []) is None        # a merged file is read another way


def test_the_read_ahead_needs_no_pandas():
    code = ("import sys; from sniffsync.sync.readahead import read_ahead; "
            "rec, n, cols, marks = read_ahead(sys.argv[1], []).take(); "
            "print(n, 'pandas' in sys.modules, sorted(cols)[:3])")
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", code, CAPS[0]], capture_output=True, text=True, env=env,
                         cwd=ROOT, check=True).stdout.split()
    assert int(out[0]) > 1000 and out[1] == "False"


def test_a_bad_first_input_is_one_line(tmp_path, capsys):
    from sniffsync.cli.main import main
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(b"garbage, not a capture")
    assert main(["merge", str(bad), CAPS[1], "-o", str(tmp_path / "o.pcapng")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("sniffsync: error: ") and "not a pcap or pcapng" in err[-1]
    assert "Traceback" not in "\n".join(err) and not (tmp_path / "o.pcapng").exists()
