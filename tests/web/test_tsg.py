"""``/api/tsg``: a TCP flow's time-sequence graph against Wireshark's TCP analysis.

Oracle: tshark's ``tcp.seq``, ``tcp.len``, ``tcp.ack``, ``tcp.window_size`` (value << scale)
and ``tcp.analysis.retransmission`` per frame of the ns-3 hidden-node capture A
(tests/data/tshark_tcp/ns3-hidden-tsg-snifferA-nearAP.tsv, make_tsg_fixture.sh; re-run when
tshark is on PATH). Every point of the graph must be a frame tshark shows with the same
numbers at the same time, and every distinct data segment / ACK value tshark shows must be
in the graph (the graph leaves out only 802.11 duplicate copies).
"""
import csv
import shutil
import subprocess
from decimal import Decimal

import pytest

from conftest import CAPTURES, DATA

A = CAPTURES / "ns3-11n-ht20-hidden-snifferA-nearAP.pcap"
FIXTURE = DATA / "tshark_tcp" / "ns3-hidden-tsg-snifferA-nearAP.tsv"
FLOWS = ["10.1.1.2:49153→10.1.1.1:5001", "10.1.1.1:49153→10.1.1.2:5001"]


def _rows(text: str) -> list[dict]:
    return list(csv.DictReader(text.splitlines(), delimiter="\t"))


def _ns(x: str) -> int:
    return int(Decimal(x) * 10**9)


@pytest.fixture(scope="module")
def graphs():
    from sniffsync.decode.frames import read_capture
    from viz.tsg import TsgIndex
    idx = TsgIndex(lambda: read_capture(str(A)), 0)
    return {f: idx.graph(f) for f in FLOWS}


def _oracle(rows, label):
    (a, ap), (b, bp) = (x.rsplit(":", 1) for x in label.split("→"))
    fwd = [r for r in rows if (r["ip.src"], r["tcp.srcport"], r["ip.dst"], r["tcp.dstport"]) == (a, ap, b, bp)]
    rev = [r for r in rows if (r["ip.src"], r["tcp.srcport"], r["ip.dst"], r["tcp.dstport"]) == (b, bp, a, ap)]
    data = {(_ns(r["frame.time_epoch"]), int(r["tcp.seq"]), int(r["tcp.len"]), r["tcp.analysis.retransmission"] != "")
            for r in fwd if int(r["tcp.len"]) > 0}
    acks = {(_ns(r["frame.time_epoch"]), int(r["tcp.ack"]), int(r["tcp.window_size"])) for r in rev if r["tcp.ack"]}
    return data, acks


def _check(graph, rows, label):
    want_data, want_acks = _oracle(rows, label)
    d, k = graph["data"], graph["acks"]
    got_data = set(zip(d["t_ns"], d["seq"], d["len"], d["retx"]))
    got_acks = set(zip(k["t_ns"], k["ack"], k["win"]))
    assert len(got_data) > 100 and len(got_acks) > 100
    assert got_data <= want_data                                   # each point as tshark reads it
    assert got_acks <= want_acks
    assert {(s, n) for _, s, n, _ in got_data} == {(s, n) for _, s, n, _ in want_data}   # every segment
    assert {a for _, a, _ in got_acks} == {a for _, a, _ in want_acks}                  # every ACK value
    assert sum(d["retx"]) == sum(1 for x in want_data if x[3] and x[:3] in {g[:3] for g in got_data})


@pytest.mark.parametrize("label", FLOWS)
def test_graph_equals_fixture(graphs, label):
    _check(graphs[label], _rows(FIXTURE.read_text()), label)


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not on PATH")
def test_fixture_is_still_tsharks_answer():
    args = ["tshark", "-r", str(A), "-Y", "tcp", "-o", "tcp.relative_sequence_numbers:TRUE",
            "-o", "tcp.analyze_sequence_numbers:TRUE", "-T", "fields", "-E", "header=y", "-E", "separator=/t"]
    for f in FIXTURE.read_text().splitlines()[0].split("\t"):
        args += ["-e", f]
    out = subprocess.run(args, capture_output=True, text=True, timeout=60).stdout
    assert out == FIXTURE.read_text()


def test_endpoint(graphs):
    """``/api/tsg?flow=N`` answers the graph of the N-th flow of the analysis; strict integers."""
    import pandas as pd

    from viz.runview import RunView
    from viz.tsg import TsgIndex
    from sniffsync.decode.frames import read_capture
    from web import create_app
    ppdus = pd.DataFrame({"ppdu": [0], "start_ns": [10], "end_ns": [20], "kind": ["data"], "sniffer": 0,
                          "heard_mask": 1, "ta": pd.array([1], dtype="UInt64"), "ra": pd.array([2], dtype="UInt64")})
    view = RunView(ppdus, None, lambda a=None, b=None: {"flows": [{"label": f} for f in FLOWS]}, ["A"])
    view.tsg = TsgIndex(lambda: read_capture(str(A)), 0)
    c = create_app(view).test_client()
    r = c.get("/api/tsg?flow=1")
    assert r.status_code == 200
    assert r.get_json()["acks"]["ack"] == graphs[FLOWS[1]]["acks"]["ack"]
    for q in ("flow=2", "flow=+1", "flow=1_0", "flow=-1", "flow=%D9%A1", ""):
        assert c.get("/api/tsg?" + q).status_code == 400, q


@pytest.mark.browser
def test_click_a_flow_shows_its_graph_on_the_timeline_axis():
    """Served as `serve` builds it: a click on a flow's row opens the graph; it shows the data
    segments and ACKs in the timeline's range (counted here from the fixture); a zoom moves it."""
    from browser_util import ARTIFACTS, browser_page, serve
    from sniffsync.cli.serve import make_view
    from sniffsync.pipeline.run import analyse
    from web import create_app
    view = make_view(analyse([str(A)]), "A")
    t0_abs = view.meta()["t0_abs_ns"]
    label = FLOWS[0]
    want_data, want_acks = _oracle(_rows(FIXTURE.read_text()), label)
    ARTIFACTS.mkdir(exist_ok=True)
    with serve(create_app(view)) as url, browser_page() as (page, errors):
        page.goto(url)
        page.wait_for_selector('#app[data-ready="1"]', timeout=15_000)
        page.click(f'#flows tbody tr:has(td:text-is("{label}"))')
        page.wait_for_function("() => window.__sniffsync.tsg && window.__sniffsync.tsg.drawn.data > 0")
        assert page.is_visible("#tsg")
        whole = page.evaluate("() => window.__sniffsync.tsg.drawn")
        page.locator("#tsg").screenshot(path=str(ARTIFACTS / "tsg-whole.png"))
        a, b = 650_000_000, 700_000_000
        page.evaluate(f"() => window.__sniffsync.tl.zoomTo({a}, {b})")
        page.wait_for_function("() => { const d = window.__sniffsync.tsg.drawn.domain;"
                               f" return Math.abs(d[0] - {a}) < 2 && Math.abs(d[1] - {b}) < 2; }}")
        zoomed = page.evaluate("() => window.__sniffsync.tsg.drawn")
        n_lines = page.evaluate("() => document.querySelectorAll('#tsg line.seg').length")
        page.locator("#tsg").screenshot(path=str(ARTIFACTS / "tsg-zoomed.png"))
        page.screenshot(path=str(ARTIFACTS / "tsg-page.png"), full_page=True)
        assert errors == []
    # the graph's points de-duplicate 802.11 copies: count distinct (seq, len) / tshark frames in range
    d0, d1 = whole["domain"]
    in_whole = {(t, s, n) for t, s, n, _ in want_data if d0 <= t - t0_abs <= d1}
    assert len({(s, n) for _, s, n in in_whole}) <= whole["data"] <= len(in_whole)
    in_zoom = {(t, s, n) for t, s, n, _ in want_data if a <= t - t0_abs <= b}
    assert 0 < zoomed["data"] <= len(in_zoom) and zoomed["data"] == n_lines
    assert zoomed["data"] >= len({(s, n) for _, s, n in in_zoom})
    assert 0 < zoomed["acks"] <= sum(1 for t, *_ in want_acks if a <= t - t0_abs <= b)
