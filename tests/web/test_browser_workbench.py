"""Workbench features in headless chromium, served as ``serve`` builds the view (make_view), and
in ``report.html`` offline: SACK blocks in the time-sequence graph, the selection's filters on
the lanes, the bytes-in-flight and queueing-delay tracks.

Oracles: tshark's SACK edges (fixture tests/data/tshark_sack/sack_hand.tsv) and pandas over the
analysed run's PPDU table; the dimming is read back from the canvas pixels, not from the page's
own bookkeeping alone. Screenshots go to tests/artifacts/ (git-ignored) and docs/img/.
"""
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from browser_util import ARTIFACTS, browser_page, serve
from conftest import CAPTURES

pytestmark = pytest.mark.browser

SACK_CAP = CAPTURES / "tcp" / "sack_hand.pcap"
SACK_TSV = CAPTURES.parent / "tshark_sack" / "sack_hand.tsv"
NS3_A = CAPTURES / "ns3-11n-ht20-hidden-snifferA-nearAP.pcap"
DOCS_IMG = Path(__file__).resolve().parents[2] / "docs" / "img"
FLOW = "10.0.0.2:40000→10.0.0.1:5001"
PIXEL = """(id) => { const p = window.__sniffsync.tl.itemScreenPos(id); if (!p) return null;
  const c = document.querySelector('#timeline canvas'), r = c.getBoundingClientRect(), d = window.devicePixelRatio || 1;
  return Array.from(c.getContext('2d').getImageData(Math.round((p.x - r.left) * d), Math.round((p.y - r.top) * d), 1, 1).data); }"""


@pytest.fixture(scope="module")
def runs():
    from sniffsync.cli.serve import make_view
    from sniffsync.pipeline.run import analyse
    from sniffsync.pipeline.uicols import attach_frame_columns
    out = {}
    for name, cap in (("sack", SACK_CAP), ("ns3", NS3_A)):
        run = attach_frame_columns(analyse([str(cap)]))
        out[name] = (run, make_view(run, name))
    return out


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    from sniffsync.cli.main import main
    out = tmp_path_factory.mktemp("report") / "report.html"
    assert main(["report", str(SACK_CAP), "-o", str(out), "--no-cache", "-q"]) == 0
    return out


@pytest.fixture(scope="module")
def ui(runs):
    """One browser and one server per run for the module: name -> (url, page, errors)."""
    from web import create_app
    ARTIFACTS.mkdir(exist_ok=True)
    with serve(create_app(runs["sack"][1])) as u1, serve(create_app(runs["ns3"][1])) as u2, \
            browser_page() as (page, errors):
        yield {"sack": u1, "ns3": u2}, page, errors


def _open(ui, name):
    urls, page, errors = ui
    errors.clear()
    page.goto(urls[name])
    page.wait_for_selector('#app[data-ready="1"]', timeout=15_000)
    page.wait_for_function("() => window.__sniffsync.timeline && window.__sniffsync.timeline.tiles > 0")
    return page, errors


def _sack_oracle(t0_abs: int, a=None, b=None):
    ws = pd.read_csv(SACK_TSV, sep="\t", dtype=str)
    t = ws["frame.time_epoch"].str.replace(".", "", regex=False).astype(np.int64) - t0_abs
    isn = int(ws["tcp.seq"].iloc[0])
    rows = ws["tcp.options.sack_le"].notna()
    out = [(int(tt), int(x) - isn, int(y) - isn) for tt, le, re_ in
           zip(t[rows], ws["tcp.options.sack_le"][rows], ws["tcp.options.sack_re"][rows])
           for x, y in zip(le.split(","), re_.split(","))]
    return [o for o in out if a is None or a <= o[0] <= b]


def test_sack_blocks_in_the_served_graph(ui, runs):
    page, errors = _open(ui, "sack")
    t0_abs = runs["sack"][1].meta()["t0_abs_ns"]
    page.click(f'#flows tbody tr:has(td:text-is("{FLOW}"))')
    page.wait_for_function("() => window.__sniffsync.tsg && window.__sniffsync.tsg.drawn.data > 0")
    assert page.evaluate("() => document.querySelectorAll('#tsg line.sack').length") == len(_sack_oracle(t0_abs)) == 7
    page.locator("#tsg").screenshot(path=str(DOCS_IMG / "tsg-sack.png"))
    # zoomed to 5-7 ms: the two ACKs there carry one block each; the bars sit at the ACK's time
    a, b = 5_000_000, 7_000_000
    page.evaluate(f"() => window.__sniffsync.tl.zoomTo({a}, {b})")
    page.wait_for_function(f"() => Math.abs(window.__sniffsync.tsg.drawn.domain[0] - {a}) < 2")
    want = _sack_oracle(t0_abs, a, b)
    assert page.evaluate("() => window.__sniffsync.tsg.drawn.sack") == len(want) == 2
    # y: the bar of the block 4001-6001 is twice as tall as that of 4001-5001 (same axis)
    ys = page.eval_on_selector_all("#tsg line.sack", "els => els.map(e => [+e.getAttribute('y1'), +e.getAttribute('y2')])")
    h = sorted(abs(y1 - y2) for y1, y2 in ys)
    assert h[1] == pytest.approx(2 * h[0], rel=0.05)
    assert errors == []


def test_station_and_kind_filters_dim_the_lanes(ui, runs):
    page, errors = _open(ui, "sack")
    run = runs["sack"][0]
    p = run.ppdus
    sta = "02:00:00:00:00:02"
    from sniffsync.decode.macs import mac_text
    ta = p["ta"].map(lambda v: mac_text(int(v)) if pd.notna(v) else None)
    ids_sta, ids_ap = p["ppdu"][ta == sta].astype(int).tolist(), p["ppdu"][ta != sta].astype(int).tolist()
    assert page.evaluate(HOOK_DIMMED) == 0
    before = page.evaluate(PIXEL, ids_sta[3])
    page.locator(f'#filters fieldset[data-key="sta"] input[value="{sta}"]').uncheck()
    page.wait_for_function("() => window.__sniffsync.timeline.dimmed > 0")
    # every PPDU the station sends is dimmed, none of the AP's (the lanes are per transmitter)
    assert page.evaluate(HOOK_DIMMED) == len(ids_sta)
    after, other = page.evaluate(PIXEL, ids_sta[3]), page.evaluate(PIXEL, ids_ap[3])
    assert min(before[:3]) < 200 and min(after[:3]) > 200          # full colour -> faded
    assert min(other[:3]) < 200
    assert page.locator(".lane-label.dimmed").all_text_contents() == [sta]
    assert "dims the lanes of other stations" in page.locator("#selection-note").text_content()
    page.screenshot(path=str(ARTIFACTS / "lanes-dim-station.png"), full_page=True)
    # the SVG export keeps the dimming: the station's rectangles carry the fill opacity
    with page.expect_download(timeout=30_000) as dl:
        page.click("#export-svg")
    svg = Path(dl.value.path()).read_text()
    assert len(re.findall(r'<rect [^>]*fill-opacity="0.12"', svg)) == len(ids_sta)
    # sniffer lanes (one sniffer here: one lane): the station's PPDUs by their sender, no lane label struck
    page.select_option("#lanes", "sniffer")
    page.wait_for_function("() => window.__sniffsync.timeline.mode && document.querySelectorAll('.lane-label').length === 1")
    page.wait_for_function(f"() => window.__sniffsync.timeline.dimmed === {len(ids_sta)}")
    assert page.evaluate(PIXEL, ids_sta[3])[0] > 200 and min(page.evaluate(PIXEL, ids_ap[3])[:3]) < 200
    assert page.locator(".lane-label.dimmed").count() == 0
    page.select_option("#lanes", "station")
    page.wait_for_function("() => document.querySelectorAll('.lane-label').length === 2")
    page.locator(f'#filters fieldset[data-key="sta"] input[value="{sta}"]').check()
    page.wait_for_function("() => window.__sniffsync.timeline.dimmed === 0")
    page.locator('#filters fieldset[data-key="kinds"] input[value="data"]').uncheck()
    page.wait_for_function("() => window.__sniffsync.timeline.dimmed > 0")
    assert page.evaluate(HOOK_DIMMED) == int((p["kind"].astype(str) == "data").sum()) == len(p)
    assert errors == []


HOOK_DIMMED = "() => window.__sniffsync.timeline.dimmed"


def test_flow_selection_dims_other_senders_and_tracks_show_inflight_and_qdelay(ui, runs):
    page, errors = _open(ui, "ns3")
    run = runs["ns3"][0]
    for tid in ("inflight", "qdelay"):
        page.wait_for_function("(id) => (window.__sniffsync.tracks.drawn[id] || 0) > 0", arg=tid)
    flows = run.fairness.flows
    page.locator('#filters fieldset[data-key="flows"] input').nth(0).scroll_into_view_if_needed()
    for i in range(1, len(flows)):           # keep flow 0 only: its data sender's lane stays
        page.locator(f'#filters fieldset[data-key="flows"] input[value="{i}"]').uncheck()
    page.wait_for_function("() => window.__sniffsync.timeline.dimmed > 0")
    keep = flows["ta"].iloc[0]
    dimmed = page.locator(".lane-label.dimmed").all_text_contents()
    lanes = runs["ns3"][1].meta()["lanes"]["station"]
    assert sorted(dimmed) == sorted(l for l in lanes if l != keep)
    # the per-flow tracks keep only flow 0's series in their legends
    lab = f"{flows['src'].iloc[0]}:{flows['sport'].iloc[0]}→{flows['dst'].iloc[0]}:{flows['dport'].iloc[0]}"
    page.wait_for_function(       # tracks redraw once the view has rested
        "() => document.querySelectorAll('.track[data-id=\"inflight\"] .track-legend span:not(.off)').length === 1",
        timeout=5000)
    on = page.eval_on_selector_all('.track[data-id="inflight"] .track-legend span:not(.off)', "els => els.map(e => e.textContent)")
    assert on == [lab]
    page.screenshot(path=str(DOCS_IMG / "ui-lanes-flow-filter.png"), full_page=False)
    assert errors == []


def test_report_graph_and_lane_filters_offline(ui, report, runs):
    """report.html offline (every request but the file aborted): the embedded graph draws
    tshark's counts; a station filter dims the AP's PPDUs."""
    blocked = []

    def route(r):             # the file itself, nothing else
        if r.request.url == report.as_uri():
            return r.continue_()
        blocked.append(r.request.url)
        return r.abort()
    _, page, errors = ui
    errors.clear()
    page.route("**/*", route)
    try:
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
    finally:
        page.unroute("**/*")
    assert blocked == []
    p = runs["sack"][0].ppdus
    assert n_ap == int((p["ta"] == 0x020000000001).sum()) > 0


def test_filters_live_in_the_url(ui, runs):
    """Unticking a station writes it into the hash; the link opens with the same boxes and the
    same lanes dimmed; back restores every box."""
    from urllib.parse import parse_qs, urlparse
    page, errors = _open(ui, "sack")
    p = runs["sack"][0].ppdus
    n_sta = int((p["ta"] == 0x020000000002).sum())
    page.locator('#filters fieldset[data-key="sta"] input[value="02:00:00:00:00:02"]').uncheck()
    page.wait_for_function("() => location.hash.includes('sta=')")
    link = page.url
    assert parse_qs(urlparse(link).fragment)["sta"] == ["02:00:00:00:00:01"]
    page.go_back()
    page.wait_for_function("() => window.__sniffsync.timeline.dimmed === 0")
    assert page.locator('#filters fieldset[data-key="sta"] input:not(:checked)').count() == 0
    page.goto("about:blank")
    page.goto(link)
    page.wait_for_selector('#app[data-ready="1"]', timeout=15_000)
    page.wait_for_function("() => window.__sniffsync.timeline.dimmed > 0")
    assert page.evaluate(HOOK_DIMMED) == n_sta > 0
    off = page.eval_on_selector_all('#filters input:not(:checked)', "els => els.map(e => e.value)")
    assert off == ["02:00:00:00:00:02"]
    assert "stations 02:00:00:00:00:01" in page.locator("#selection-note").text_content()
    assert errors == []
