"""``serve CAMPAIGN``: the runs side by side and overlaid, each linked to its own timeline.

A two-run campaign built from test captures (run a: the hand-built SACK capture; run b: the
cut ns-3 hidden-node sniffer A). Oracles: tshark's frame count of run a (its fixture: one frame per
PPDU in that hand-built capture) for the timeline a link opens, and pandas over each run's fairness
windows for the overlaid goodput lines.
"""
import re
from pathlib import Path

import pandas as pd
import pytest

from browser_util import ARTIFACTS, browser_page, serve
from conftest import CAPTURES

SACK_CAP = CAPTURES / "tcp" / "sack_hand.pcap"
SACK_TSV = CAPTURES.parent / "tshark_sack" / "sack_hand.tsv"
CUT_A = CAPTURES / "ns3-hidden-cut" / "snifferA.pcap.gz"
DOCS_IMG = Path(__file__).resolve().parents[2] / "docs" / "img"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    from sniffsync.cli.serve_campaign import build_site, is_campaign
    root = tmp_path_factory.mktemp("campaign")
    for name, cap, labels in (("a-sack", SACK_CAP, 'rts = "off"\n'), ("b-cut", CUT_A, 'rts = "on"\n')):
        (root / name).mkdir()
        (root / name / cap.name).symlink_to(cap)
        (root / name / "run.toml").write_text(labels)
    assert is_campaign([root]) and not is_campaign([SACK_CAP])
    return build_site([root], use_cache=False)


def _goodput_oracle(run) -> tuple[list, list]:
    w = run.fairness.windows
    g = w.groupby("start_ns")["goodput_bps"].sum().sort_index()
    t0 = int(run.ppdus["start_ns"].min())
    return ((g.index - t0) / 1e9).tolist(), (g / 1e6).round(4).tolist()


def test_campaign_routes_and_overlay(site):
    from web.views.campaign import create_campaign_app
    c = create_campaign_app(site).test_client()
    page = c.get("/")
    assert page.status_code == 200 and "Content-Security-Policy" in page.headers
    text = page.get_data(as_text=True)
    assert re.findall(r'<a class="run-link" href="([^"]+)">([^<]+)</a>', text) == [("run/0/", "a-sack"), ("run/1/", "b-cut")]
    assert "<script>" not in text                              # CSP: no inline script, only the JSON block
    assert c.get("/run/1").status_code == 301 and c.get("/run/1").headers["Location"].endswith("/run/1/")
    assert c.get("/run/2/").status_code == 404 and c.get("/api/meta").status_code == 404
    assert c.get("/run/0/api/meta").get_json()["title"].startswith("a-sack")
    ov = c.get("/api/campaign").get_json()["overlay"]
    good = {s["run"]: s for m in ov["metrics"] if m["id"] == "goodput" for s in m["series"]}
    for name, _, _, _, run in site.runs:
        t, y = _goodput_oracle(run)
        assert good[name]["t_s"] == pytest.approx(t, abs=1e-6) and good[name]["y"] == pytest.approx(y, abs=1e-4)


@pytest.mark.browser
def test_campaign_page_links_into_each_runs_timeline(site):
    from web.views.campaign import create_campaign_app
    ARTIFACTS.mkdir(exist_ok=True)
    with serve(create_campaign_app(site)) as url, browser_page() as (page, errors):
        page.goto(url + "/")
        page.wait_for_selector('body[data-ready="1"]', timeout=15_000)
        assert page.locator("#runs tbody tr").count() == 2
        for m in site.overlay["metrics"]:
            assert page.locator(f'.overlay-chart[data-id="{m["id"]}"] path.run-line').count() == 2
        # one time axis for all charts; a metric the runs lack says what it needs (pandas oracle)
        ts = [t for m in site.overlay["metrics"] for s in m["series"] for t in s["t_s"]]
        assert page.evaluate("() => window.__campaign.domain") == pytest.approx([min(ts), max(ts)])
        for m in site.overlay["metrics"]:
            lacking = all(pd.isna(v) for s in m["series"] for v in s["y"] if v is not None) or \
                not any(v is not None for s in m["series"] for v in s["y"])
            note = page.locator(f'.overlay-chart[data-id="{m["id"]}"] .empty-note')
            assert note.count() == int(lacking), m["id"]
        # run b has no RTT sample (pandas over its fairness windows): with run a unticked, the
        # queueing-delay chart says what it needs instead of drawing empty axes
        b_jain = next(r[-1].fairness.jain for r in site.runs if r[0] == "b-cut")
        assert b_jain["qdelay_p50_ns"].isna().all()
        page.uncheck('#run-picker input[value="a-sack"]')
        assert "RTT samples" in page.locator('.overlay-chart[data-id="qdelay"] .empty-note').text_content()
        assert page.locator('.overlay-chart[data-id="goodput"] .empty-note').count() == 0
        page.check('#run-picker input[value="a-sack"]')
        page.screenshot(path=str(DOCS_IMG / "serve-campaign.png"), full_page=True)
        # a run's name opens its timeline: the whole run drawn, one rectangle per frame tshark lists
        page.click('a.run-link:text-is("a-sack")')
        page.wait_for_selector('#app[data-ready="1"]', timeout=15_000)
        page.wait_for_function("() => window.__sniffsync.timeline.tiles > 0")
        assert page.url == url + "/run/0/" or page.url.startswith(url + "/run/0/#")
        assert page.evaluate("() => window.__sniffsync.timeline.drawn") == len(pd.read_csv(SACK_TSV, sep="\t")) == 29
        page.screenshot(path=str(ARTIFACTS / "campaign-run-a.png"), full_page=False)
        assert page.get_attribute("a.campaign-link", "href") == "../../"
        page.goto(url + "/")                 # (back would first walk the timeline's own URL states)
        page.wait_for_selector('body[data-ready="1"]', timeout=15_000)
        # a click on run b's goodput line opens run b's timeline around the clicked time
        pt = page.evaluate("""() => { const p = document.querySelector('.overlay-chart[data-id="goodput"] path.run-line[data-run="b-cut"]');
          const q = p.getPointAtLength(p.getTotalLength() / 2), m = p.getScreenCTM();
          return [q.x * m.a + m.e, q.y * m.d + m.f]; }""")
        page.mouse.click(*pt)
        page.wait_for_selector('#app[data-ready="1"]', timeout=15_000)
        assert "/run/1/#t0=" in page.url
        h = dict(x.split("=") for x in page.url.split("#", 1)[1].split("&"))
        t0, t1 = int(h["t0"]), int(h["t1"])
        assert t1 - t0 <= 500_000_000
        page.wait_for_function("([a, b]) => Math.abs(window.__sniffsync.timeline.domain[0] - a) < 1000"
                               " && Math.abs(window.__sniffsync.timeline.domain[1] - b) < 1000", arg=[t0, t1])
        assert page.evaluate("() => window.__sniffsync.meta.title").startswith("b-cut")
        assert errors == []


def test_serve_of_a_folder_without_runs_is_one_error_line(tmp_path, capsys):
    from sniffsync.cli.main import main
    (tmp_path / "empty-run").mkdir()
    assert main(["serve", str(tmp_path), "--no-cache", "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no captures" in err[0]
