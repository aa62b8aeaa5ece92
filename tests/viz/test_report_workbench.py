"""``report.html`` offline: the time-sequence graph embedded for the report's window (with its
SACK blocks) and the selection's filters dimming the lanes, in chromium with every request but
the file aborted. Oracles: tshark's SACK edges (tests/data/tshark_sack/sack_hand.tsv) and the
PPDU table of the analysed run."""
import json
import re

import pandas as pd
import pytest

from browser_util import ARTIFACTS, browser_page
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


@pytest.mark.browser
def test_report_graph_and_lane_filters_offline(report):
    blocked = []

    def route(r):             # the file itself, nothing else
        if r.request.url == report.as_uri():
            return r.continue_()
        blocked.append(r.request.url)
        return r.abort()
    with browser_page() as (page, errors):
        page.route("**/*", route)
        page.goto(report.as_uri())
        page.wait_for_selector('#app[data-ready="1"]', timeout=15_000)
        page.click(f'#flows tbody tr:has(td:text-is("{FLOW}"))')
        page.wait_for_function("() => window.__sniffsync.tsg && window.__sniffsync.tsg.drawn.data > 0")
        ws = pd.read_csv(SACK_TSV, sep="\t", dtype=str)
        up, n = ws["ip.src"] == "10.0.0.2", pd.to_numeric(ws["tcp.len"])
        want = {"data": int((up & (n > 0)).sum()), "retx": int(ws["tcp.analysis.retransmission"].notna().sum()),
                "acks": int((~up).sum()), "sack": sum(len(v.split(",")) for v in ws["tcp.options.sack_le"].dropna())}
        assert page.evaluate("() => window.__sniffsync.tsg.drawn") | {"domain": None} == want | {"domain": None}
        assert want == {"data": 14, "retx": 2, "acks": 13, "sack": 7}
        page.locator("#tsg").screenshot(path=str(ARTIFACTS / "report-tsg-sack.png"))
        page.locator('#filters fieldset[data-key="sta"] input[value="02:00:00:00:00:01"]').uncheck()
        page.wait_for_function("() => window.__sniffsync.timeline.dimmed > 0")
        n_ap = page.evaluate("() => window.__sniffsync.timeline.dimmed")
        assert page.locator(".lane-label.dimmed").all_text_contents() == ["02:00:00:00:00:01"]
        page.screenshot(path=str(ARTIFACTS / "report-lanes-dim.png"), full_page=True)
        assert errors == []
    assert blocked == []
    from sniffsync.pipeline.run import analyse
    p = analyse([str(SACK_CAP)]).ppdus
    assert n_ap == int((p["ta"] == 0x020000000001).sum()) > 0
