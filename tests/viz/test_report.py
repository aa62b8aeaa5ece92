"""``sniffsync report``: one self-contained HTML file that works offline in chromium, and whose
embedded data cannot break out of its <script> block."""
import json
import re

import pytest

from viz.tiles import KINDS

from browser_util import ARTIFACTS, browser_page, offline_route
from conftest import CAPTURES

SNIFFERS = [CAPTURES / f"ns3-11n-ht20-hidden-sniffer{s}.pcap"
            for s in ("A-nearAP", "B-nearSTA1", "C-nearSTA2")]
# any src/href/action/srcset attribute in a tag, or CSS url()/@import, that is not data:/#
EXTERNAL = re.compile(r"""<[a-zA-Z][^>]*?\s(?:src|href|action|srcset|poster)\s*=\s*["']?(?!data:|#)[^"'\s>]+"""
                      r"""|url\(\s*["']?(?!data:)[^)'"]+|@import""", re.I)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    from sniffsync.cli.main import main
    out = tmp_path_factory.mktemp("report")
    rc = main(["report", *map(str, SNIFFERS), "-o", str(out / "report.html"), "--no-cache", "-q"])
    assert rc == 0
    return out / "report.html"


def test_report_is_one_file_without_external_references(report):
    assert [p.name for p in report.parent.iterdir()] == ["report.html"]     # no temp left behind
    html = report.read_text(encoding="utf-8")
    assert EXTERNAL.findall(html) == []
    assert EXTERNAL.findall('<script src="/static/x.js"></script><link href="a.css">')   # regex bites
    assert html.count("<script") == 3          # d3, the JSON data block, the bundled modules
    assert 'type="module"' not in html and "/static/" not in html
    blob = re.search(r'<script type="application/json" id="sniffsync-data">(.*?)</script>', html).group(1)
    assert json.loads(blob)["timeline"]["meta"]["kinds"] == KINDS    # the page's only kind list


@pytest.mark.browser
def test_report_opens_offline_and_draws(report):
    blocked, route = offline_route(report)
    with browser_page() as (page, errors):
        page.route("**/*", route)
        page.goto(report.as_uri())
        page.wait_for_selector('#app[data-ready="1"]', timeout=15_000)
        hook = page.evaluate("() => window.__sniffsync.timeline")
        assert hook["drawn"] > 0 and hook["tiles"] >= 1
        assert page.locator("#goodput svg path.series").count() > 0
        assert page.locator("#jain svg path.series").count() > 0
        assert page.locator("#airtime svg rect.bar").count() == 3     # AP, STA1, STA2
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "report.png"), full_page=True)
        assert errors == []
    assert blocked == []


EVIL = "</script><script>window.__pwned = 1</script><!--<script>"


@pytest.mark.browser
def test_embedded_json_cannot_break_out(tmp_path):
    from sniffsync.pipeline.run import analyse
    from viz.analysis import analysis_data
    from viz.report import build_report
    from viz.runview import RunView
    run = analyse([str(SNIFFERS[0])])
    run.names = [EVIL]                                        # a sniffer name is data too
    view = RunView(run.ppdus, run.events, lambda a, b: analysis_data(run, a, b), run.names, EVIL)
    html = build_report(view, run, title=EVIL)
    assert "window.__pwned = 1</script>" not in html
    path = tmp_path / "evil.html"
    path.write_text(html, encoding="utf-8")
    blocked, route = offline_route(path)
    with browser_page() as (page, errors):
        page.route("**/*", route)
        page.goto(path.as_uri())
        page.wait_for_selector('#app[data-ready="1"]', timeout=15_000)
        assert page.evaluate("() => window.__pwned") is None
        assert page.title() == EVIL                                    # <title> kept it as text
        assert page.text_content("#title").startswith(EVIL)            # and the JSON round-tripped
        assert page.evaluate("() => document.scripts.length") == 3
        page.select_option("#lanes", "sniffer")
        page.wait_for_function("() => document.querySelectorAll('.lane-label').length === 1")
        assert page.text_content(".lane-label") == EVIL
        assert errors == []
    assert blocked == []


@pytest.mark.browser
def test_report_selection_recomputes_offline(report):
    """Offline: unticking a frame kind recomputes the airtime shares from the embedded window's
    PPDUs; oracle: pandas over the same window of the analysed run."""
    from sniffsync.decode.macs import mac_text
    from sniffsync.pipeline.run import analyse
    from viz.report import eventful_window
    run = analyse([str(p) for p in SNIFFERS])
    w0, w1 = eventful_window(run.ppdus, run.events)
    p = run.ppdus
    sel = p[(p["end_ns"] > w0) & (p["start_ns"] < w1) & (p["start_ns"] >= w0) & p["ta"].notna()]
    sel = sel[sel["kind"].astype(str) != "data"]
    busy = ((sel["end_ns"] - sel["start_ns"]).groupby(sel["ta"].map(lambda v: mac_text(int(v)))).sum() // 1000)
    want = sorted(((k, 100.0 * v / busy.sum()) for k, v in busy.items()), key=lambda kv: -kv[1])
    blocked, route = offline_route(report)
    with browser_page() as (page, errors):
        page.route("**/*", route)
        page.goto(report.as_uri())
        page.wait_for_selector('#app[data-ready="1"]', timeout=15_000)
        page.locator('#filters fieldset[data-key="kinds"] input[value="data"]').uncheck()
        page.wait_for_function("() => window.__sniffsync.selection && window.__sniffsync.selection.filters.kinds")
        titles = page.eval_on_selector_all("#airtime svg rect.bar title", "els => els.map(e => e.textContent)")
        assert titles == [f"{k}: {round(v, 1):g}" for k, v in want]
        assert "offline report" in page.locator("#selection-note").text_content()
        page.screenshot(path=str(ARTIFACTS / "report-selection.png"), full_page=True)
        assert errors == []
    assert blocked == []
