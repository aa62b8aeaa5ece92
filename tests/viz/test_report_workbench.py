"""``report.html``: the time-sequence graph embedded for the report's window (with its SACK
blocks), bounded in size. Oracle: tshark's SACK edges and segments
(tests/data/tshark_sack/sack_hand.tsv). In chromium: tests/web/test_browser_workbench.py."""
import json
import re

import pandas as pd
import pytest

from conftest import CAPTURES

SACK_CAP = CAPTURES / "tcp" / "sack_hand.pcap"
SACK_TSV = CAPTURES.parent / "tshark_sack" / "sack_hand.tsv"
FLOW = "10.0.0.2:40000→10.0.0.1:5001"


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    from sniffsync.cli.main import main
    out = tmp_path_factory.mktemp("report") / "report.html"
    assert main(["report", str(SACK_CAP), "-o", str(out), "--no-cache", "-q"]) == 0
    return out


def _data(path):
    m = re.search(r'id="sniffsync-data">(.*?)</script>', path.read_text(), re.S)
    return json.loads(m.group(1))


def test_embedded_graph_is_the_windows_and_bounded(report, monkeypatch):
    d = _data(report)
    g = d["tsg"][0]
    assert g["label"] == FLOW and g["stride"] == 1
    ws = pd.read_csv(SACK_TSV, sep="\t", dtype=str)
    assert len(g["sack"]["t_ns"]) == sum(len(v.split(",")) for v in ws["tcp.options.sack_le"].dropna())
    data = ws[(ws["ip.src"] == "10.0.0.2") & (pd.to_numeric(ws["tcp.len"]) > 0)]
    assert g["data"]["seq"] == [int(s) - 1000 for s in data["tcp.seq"]]
    # size bound: with 5 points allowed, every k-th point of each kind
    import viz.report as R
    monkeypatch.setattr(R, "MAX_TSG_POINTS", 5)
    cut, k = R._cut({"t_ns": list(range(0, 140, 10)), "seq": list(range(14))}, 0, 1000, 0)
    assert k == 3 and cut["seq"] == [0, 3, 6, 9, 12] and cut["t_ns"] == [0, 30, 60, 90, 120]
