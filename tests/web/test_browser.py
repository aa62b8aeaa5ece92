"""The web UI in real headless chromium, on the merged ns-3 hidden-node run (sniffers A/B/C).

Oracles are computed in Python from ``run.ppdus`` / ``run.events`` (overlap counts, TA as
colon-hex, airtime = end - start), never from what the page or the tile code returned.
Screenshots of every view go to tests/artifacts/ (git-ignored) for a human to look at.
"""
import re
import time
from urllib.parse import parse_qs, urlparse

import numpy as np
import pytest

from browser_util import ARTIFACTS, browser_page, serve
from conftest import CAPTURES

pytestmark = pytest.mark.browser

SNIFFERS = [CAPTURES / f"ns3-11n-ht20-hidden-sniffer{s}.pcap"
            for s in ("A-nearAP", "B-nearSTA1", "C-nearSTA2")]
HOOK = "() => window.__sniffsync.timeline"
COLLISION_RGB = (0xb0, 0x00, 0x20)     # SEVERITY_COLOR[4] in web/static/js/colors.js


def _mac(v) -> str:
    return ":".join(f"{(int(v) >> s) & 0xFF:02x}" for s in range(40, -8, -8))


def _js_number(v: float) -> str:
    """How JavaScript's String() prints a float the API sent (123.0 -> '123')."""
    return str(int(v)) if float(v).is_integer() else repr(float(v))


@pytest.fixture(scope="module")
def run():
    from sniffsync.pipeline.run import analyse
    try:
        return analyse([str(p) for p in SNIFFERS])
    except Exception:          # merging is another stage's job: the UI still needs testing
        return analyse([str(SNIFFERS[0])])


@pytest.fixture(scope="module")
def ui(run):
    """(base url, page, console errors) — one server and one browser for the module."""
    from viz.analysis_index import AnalysisIndex
    from viz.runview import RunView, with_legacy_rates
    from web import create_app
    from viz.drill import DrillIndex
    from viz.tracks import TrackIndex
    view = RunView(with_legacy_rates(run.ppdus, run.frames), run.events, AnalysisIndex(run), run.names,
                   "hidden-node A+B+C", tracks=TrackIndex(run), drill=DrillIndex(run))
    ARTIFACTS.mkdir(exist_ok=True)
    with serve(create_app(view)) as url, browser_page() as (page, errors):
        yield url, page, errors


@pytest.fixture
def page(ui):
    url, page, errors = ui
    errors.clear()
    page.goto(url)
    page.wait_for_selector('#app[data-ready="1"]', timeout=15_000)
    page.wait_for_function("() => window.__sniffsync.timeline && window.__sniffsync.timeline.tiles > 0")
    yield page
    assert errors == [], f"console errors: {errors}"


def _rel(run):
    """PPDU starts/ends relative to the run start (what the UI's time axis shows)."""
    p = run.ppdus
    base = int(p["start_ns"].min())
    return p["start_ns"].to_numpy(np.int64) - base, p["end_ns"].to_numpy(np.int64) - base


def _zoom(page, t0, t1):
    page.evaluate("([a, b]) => window.__sniffsync.tl.zoomTo(a, b)", [int(t0), int(t1)])
    return page.evaluate(HOOK)


def _ticks(page):
    return page.eval_on_selector_all("#timeline svg .axis .tick text", "els => els.map(e => e.textContent)")


def test_page_loads_whole_run_without_console_errors(page, run):
    hook = page.evaluate(HOOK)
    start, end = _rel(run)
    assert hook["domain"] == [0, int(end.max())]
    assert hook["mode"] == "items" and hook["drawn"] == len(run.ppdus)   # 851 PPDUs fit in items mode
    assert page.text_content("#title") == "hidden-node A+B+C"
    page.screenshot(path=str(ARTIFACTS / "ui-whole-run.png"), full_page=True)


def test_drawn_count_equals_ppdus_overlapping_window(page, run):
    start, end = _rel(run)
    # a 3 ms window in the busy part; ns-3 times are whole µs, so edges at +500 ns are never
    # on a PPDU boundary and floor/ceil rounding in the page cannot change the answer
    # the busiest 3 ms: the PPDU start followed by the most starts within 3 ms
    order = np.sort(start)
    busiest = int(np.argmax(np.searchsorted(order, order + 3_000_000) - np.arange(len(order))))
    mid = int(order[busiest]) // 1000 * 1000 - 1000
    t0, t1 = mid + 500, mid + 3_000_500
    want = int(((start < t1) & (end > t0)).sum())
    assert 5 < want < 200
    hook = _zoom(page, t0, t1)
    assert hook["mode"] == "items"
    assert hook["drawn"] == want
    api = page.evaluate("async ([a, b]) => (await (await fetch(`/api/tile?t0=${a}&t1=${b}&px=1000`)).json())",
                        [t0, t1])
    ids = run.ppdus["ppdu"].to_numpy()[(start < t1) & (end > t0)]
    assert sorted(api["items"]["ppdu"]) == sorted(ids.tolist())
    assert abs(hook["domain"][0] - t0) < 1 and abs(hook["domain"][1] - t1) < 1
    page.screenshot(path=str(ARTIFACTS / "ui-zoom-3ms.png"))


def test_wheel_zoom_changes_domain_and_tick_labels_keeping_cursor_time(page):
    before, ticks_before = page.evaluate(HOOK)["domain"], _ticks(page)
    box = page.locator("#timeline canvas").bounding_box()
    mx, my = box["x"] + 150 + (box["width"] - 164) * 0.7, box["y"] + 30   # 70 % across the plot
    page.mouse.move(mx, my)
    d0 = page.evaluate("() => window.__sniffsync.tl.domain()")
    for _ in range(3):
        page.mouse.wheel(0, -400)
        page.wait_for_timeout(60)
    page.wait_for_function("(w) => { const d = window.__sniffsync.timeline.domain; return d[1] - d[0] < w; }",
                           arg=(before[1] - before[0]) / 2)
    after, ticks_after = page.evaluate(HOOK)["domain"], _ticks(page)
    assert after[1] - after[0] < (before[1] - before[0]) / 2
    assert ticks_after != ticks_before and all(t.strip() for t in ticks_after)
    # zooming about the cursor: the time under the mouse stays put (same fraction of the domain)
    frac = (mx - (box["x"] + 150)) / (box["width"] - 164)
    t_before = d0[0] + frac * (d0[1] - d0[0])
    t_after = after[0] + frac * (after[1] - after[0])
    assert abs(t_after - t_before) < (d0[1] - d0[0]) / (box["width"] - 164) * 2   # within 2 px
    page.wait_for_function("() => window.__sniffsync.timeline.tiles > 1")
    page.screenshot(path=str(ARTIFACTS / "ui-wheel-zoom.png"))


def _pick_ppdu(run, kind="data"):
    p = run.ppdus
    start, end = _rel(run)
    ok = (p["kind"].astype(str) == kind).to_numpy() & p["ta"].notna().to_numpy()
    i = int(np.flatnonzero(ok)[len(np.flatnonzero(ok)) // 2])
    return i, int(start[i]), int(end[i])


def test_hover_shows_ta_and_airtime(page, run):
    i, s, e = _pick_ppdu(run, "data")
    row = run.ppdus.iloc[i]
    _zoom(page, s - 200_000, e + 200_000)
    pos = page.evaluate("(id) => window.__sniffsync.tl.itemScreenPos(id)", int(row["ppdu"]))
    assert pos is not None
    page.mouse.move(pos["x"], pos["y"])
    ta = _mac(row["ta"])
    page.wait_for_function("(ta) => (window.__sniffsync.timeline.tip || '').includes(ta)", arg=ta)
    tip = page.locator("#timeline .tip")
    assert tip.is_visible()
    text = tip.text_content()
    assert f"TA{ta}" in text and "kinddata" in text                    # kind named from meta.kinds
    assert f"airtime{_js_number((e - s) / 1000)} µs" in text          # end_ns - start_ns, in µs
    page.screenshot(path=str(ARTIFACTS / "ui-hover.png"))


def test_collision_is_marked_in_its_colour(page, run):
    ev = run.events[run.events["kind"] == "rts_cts_collision"]
    assert len(ev)
    pid = int(ev["ppdu"].iloc[len(ev) // 2])
    start, end = _rel(run)
    i = int(np.flatnonzero(run.ppdus["ppdu"].to_numpy() == pid)[0])
    hook = _zoom(page, start[i] - 300_000, end[i] + 300_000)
    assert hook["markers"] > 0
    pos = page.evaluate("(id) => window.__sniffsync.tl.itemScreenPos(id)", pid)
    box = page.locator("#timeline canvas").bounding_box()
    # the marker bar and triangle sit in the top 6 px of the PPDU's lane (26 px high)
    x0, y0 = int(pos["x"] - box["x"]) - 12, int(pos["y"] - box["y"]) - 13
    px = page.evaluate("""([x, y]) => Array.from(document.querySelector('#timeline canvas')
        .getContext('2d').getImageData(x, y, 24, 8).data)""", [x0, y0])
    rgb = {tuple(px[k:k + 3]) for k in range(0, len(px), 4)}
    assert COLLISION_RGB in rgb
    page.screenshot(path=str(ARTIFACTS / "ui-collision.png"))


def test_lane_toggle_to_sniffers(page, run):
    page.select_option("#lanes", "sniffer")
    page.wait_for_function("() => window.__sniffsync.timeline.drawn > 0 && "
                           "document.querySelectorAll('.lane-label').length === 3")
    labels = page.eval_on_selector_all(".lane-label", "els => els.map(e => e.textContent)")
    assert labels == list(run.names)
    # each PPDU is drawn once per sniffer that heard it (heard_mask bits)
    page.wait_for_function("() => window.__sniffsync.timeline.tiles > 1")
    mask = run.ppdus["heard_mask"].to_numpy(np.int64)
    want = int(sum(((mask >> s) & 1).sum() for s in range(len(run.names))))
    page.wait_for_function("(n) => window.__sniffsync.timeline.drawn === n", arg=want, timeout=5000)
    page.screenshot(path=str(ARTIFACTS / "ui-sniffer-lanes.png"), full_page=True)


def test_fairness_charts_render(page, run):
    page.wait_for_function("() => window.__sniffsync.analysis && window.__sniffsync.analysis.rendered")
    n_goodput = page.locator("#goodput svg path.series").count()
    flows = run.fairness.windows.groupby(["run", "fd"]).ngroups
    assert n_goodput == flows > 0
    assert page.locator("#jain svg path.series").count() >= 1
    d = page.eval_on_selector_all("#goodput svg path.series, #jain svg path.series",
                                  "els => els.map(e => e.getAttribute('d') || '')")
    assert all(re.match(r"M[\d.]+,[\d.]+L", x) for x in d)       # real polylines, not empty paths
    page.locator("#analysis").screenshot(path=str(ARTIFACTS / "ui-charts.png"))


def test_shift_brush_requests_range_and_rerenders(page):
    seen = []
    page.on("request", lambda r: seen.append(r.url) if "/api/analysis?" in r.url else None)
    page.evaluate("() => { window.__old = document.querySelector('#airtime svg rect.bar'); }")
    box = page.locator("#timeline canvas").bounding_box()
    plot_w = box["width"] - 164
    xa, xb, y = box["x"] + 150 + plot_w * 0.5, box["x"] + 150 + plot_w * 0.8, box["y"] + 40
    dom = page.evaluate(HOOK)["domain"]
    page.keyboard.down("Shift")
    page.mouse.move(xa, y)
    page.mouse.down()
    page.mouse.move(xb, y, steps=6)
    page.mouse.up()
    page.keyboard.up("Shift")
    page.wait_for_function("() => document.querySelector('#status').textContent.includes('selection')")
    assert page.locator('#selection-note').text_content().startswith('Analysis views below: range ')
    page.wait_for_function("() => !document.contains(window.__old)")      # the bars were redrawn
    assert len(seen) == 1
    q = parse_qs(urlparse(seen[0]).query)
    t0, t1 = int(q["t0"][0]), int(q["t1"][0])
    ns_per_px = (dom[1] - dom[0]) / plot_w
    assert abs(t0 - (dom[0] + 0.5 * (dom[1] - dom[0]))) <= 2 * ns_per_px
    assert abs(t1 - (dom[0] + 0.8 * (dom[1] - dom[0]))) <= 2 * ns_per_px
    # the bars now show the brushed range's airtime shares
    a = page.evaluate("async (u) => (await (await fetch(u)).json())", seen[0])
    titles = page.eval_on_selector_all("#airtime svg rect.bar title", "els => els.map(e => e.textContent)")
    assert titles == [f"{s['station']}: {_js_number(round(s['share_pct'], 1))}" for s in a["airtime_share"]]
    page.screenshot(path=str(ARTIFACTS / "ui-brushed.png"), full_page=True)


def test_token_url_loads_the_ui_then_leaves_the_address_bar(ui, run):
    """Served beyond loopback: the printed URL (with the token) opens the full UI; the token
    moves to a cookie, every fetch of the page carries it; without it, no data."""
    from viz.analysis_index import AnalysisIndex
    from viz.runview import RunView
    from web import create_app
    _, page, errors = ui
    view = RunView(run.ppdus, run.events, AnalysisIndex(run), run.names, "token")
    app = create_app(view, {"TOKEN": "tok-" + "s" * 30, "TOKEN_COOKIE": "sniffsync_token_b"})
    with serve(app) as url:
        page.context.clear_cookies()
        r = page.goto(f"{url}/?lanes=x")
        assert r.status == 403 and "n_ppdus" not in page.content()
        page.goto("about:blank")            # the 403 page's own console line is flushed before the clear
        errors.clear()
        statuses = []
        page.on("response", lambda resp: statuses.append(resp.status) if "/api/" in resp.url else None)
        page.goto(f"{url}/?token=tok-{'s' * 30}")
        page.wait_for_selector('#app[data-ready="1"]', timeout=15_000)
        page.wait_for_function("() => window.__sniffsync.analysis && window.__sniffsync.analysis.rendered")
        assert "token" not in page.url
        assert statuses and set(statuses) == {200}
        assert page.evaluate(HOOK)["tiles"] > 0
        page.screenshot(path=str(ARTIFACTS / "ui-token.png"))
        assert errors == []
        page.context.clear_cookies()


# ---- issue 15: resizing, chart widths, tooltips, legacy rates, empty states --------------------

def test_resize_keeps_the_visible_time_range(page, run):
    s, e = _rel(run)
    t0, t1 = int(s[len(s) // 3]), int(s[len(s) // 3]) + 3_000_000
    before = _zoom(page, t0, t1)["domain"]
    for w in (900, 1600, 1400):
        page.set_viewport_size({"width": w, "height": 1000})
        page.wait_for_function("(w) => document.getElementById('timeline').clientWidth < w", arg=w)
        page.wait_for_timeout(150)
        after = page.evaluate(HOOK)["domain"]
        # the range we zoomed to, to within a nanosecond-scale rounding, whatever the width
        assert abs(after[0] - t0) < 10 and abs(after[1] - t1) < 10, (w, before, after)
        if w == 900:
            page.screenshot(path=str(ARTIFACTS / "ui-resized-900.png"), full_page=True)


def test_charts_fill_their_panels_after_a_resize(page):
    for w in (1400, 900):
        page.set_viewport_size({"width": w, "height": 1000})
        page.wait_for_timeout(300)
        got = page.eval_on_selector_all(
            "#analysis section > div", "els => els.filter(e => e.querySelector('svg')).map(e => "
            "[e.id, e.clientWidth, +e.querySelector('svg').getAttribute('width'), "
            "e.closest('section').scrollWidth <= e.closest('section').clientWidth])")
        assert len(got) >= 7
        for cid, div_w, svg_w, no_clip in got:
            assert abs(svg_w - div_w) <= 1 and no_clip, (w, cid, div_w, svg_w)
        clipped = page.eval_on_selector_all("#analysis section", "els => els.filter(e => e.scrollWidth > "
                                            "e.clientWidth).map(e => e.querySelector('h2').textContent)")
        assert clipped == [], (w, clipped)                      # tables too: nothing wider than its panel
    page.locator("#analysis").screenshot(path=str(ARTIFACTS / "ui-charts-900.png"))
    page.set_viewport_size({"width": 1400, "height": 1000})


def test_tooltip_goes_when_its_item_leaves_the_view(page, run):
    i, s, e = _pick_ppdu(run, "data")
    ppdu = int(run.ppdus.iloc[i]["ppdu"])
    _zoom(page, s - 200_000, e + 200_000)
    pos = page.evaluate("(id) => window.__sniffsync.tl.itemScreenPos(id)", ppdu)
    page.mouse.click(pos["x"], pos["y"])                          # pin it
    page.wait_for_function("() => document.querySelector('#timeline .tip.pinned') !== null")
    _zoom(page, s - 400_000, e + 400_000)                         # still in view: the tip follows
    assert page.locator("#timeline .tip").is_visible()
    new = page.evaluate("(id) => window.__sniffsync.tl.itemScreenPos(id)", ppdu)
    tip_x = page.locator("#timeline .tip").bounding_box()["x"]
    assert abs(tip_x - new["x"]) < 80                             # next to the item, not where it was
    _zoom(page, e + 50_000_000, e + 60_000_000)                   # zoomed away: the item is off screen
    assert not page.locator("#timeline .tip").is_visible()
    page.screenshot(path=str(ARTIFACTS / "ui-tip-gone.png"))


def test_legacy_phy_shows_its_rate_in_mbps_from_tshark(page, run):
    """Oracle: tshark's radiotap.datarate for the PPDU's first frame (tests/data/tshark fixture)."""
    import pandas as pd
    from conftest import DATA
    p, f = run.ppdus, run.frames
    legacy = p[(p["phy"].astype(str) == "ofdm") & (p["kind"].astype(str) == "ack")]
    row = legacy.iloc[len(legacy) // 2]
    fr = f.iloc[int(row["first_frame"])]
    name = SNIFFERS[int(fr["sniffer"])].name
    ts = pd.read_csv(DATA / "tshark" / f"{name}.tsv.gz", sep="\t", dtype=str, usecols=["frame.number", "radiotap.datarate"])
    rate = ts.loc[ts["frame.number"] == str(int(fr["frame"])), "radiotap.datarate"].iloc[0]
    s, e = _rel(run)
    k = int(np.flatnonzero(p["ppdu"].to_numpy() == row["ppdu"])[0])
    _zoom(page, s[k] - 100_000, e[k] + 100_000)
    pos = page.evaluate("(id) => window.__sniffsync.tl.itemScreenPos(id)", int(row["ppdu"]))
    page.mouse.move(pos["x"], pos["y"])
    page.wait_for_function("() => (window.__sniffsync.timeline.tip || '').includes('Mb/s')")
    text = page.locator("#timeline .tip").text_content()
    assert f"PHYofdm {_js_number(float(rate))} Mb/s" in text and "MCS" not in text
    page.screenshot(path=str(ARTIFACTS / "ui-legacy-rate.png"))


def test_empty_views_say_what_is_missing(ui):
    """An encrypted capture: tshark counts 35 protected data frames (wlan.fc.type_subtype 0x20-0x2f
    with wlan.fc.protected = 1 in tests/data/tshark/fragattacks_*.tsv.gz); no axes labelled 0."""
    import pandas as pd
    from conftest import DATA
    from sniffsync.pipeline.run import analyse
    from viz.analysis_index import AnalysisIndex
    from viz.runview import RunView, with_legacy_rates
    from web import create_app
    name = "fragattacks_ping_D_BP_bcast_ra-fromap.pcapng"
    ts = pd.read_csv(DATA / "tshark" / f"{name}.tsv.gz", sep="\t", dtype=str)
    sub = ts["wlan.fc.type_subtype"].map(lambda v: int(v, 16)).astype(int)
    n_enc = int(((sub // 16 == 2) & (ts["wlan.fc.protected"] == "1")).sum())
    r = analyse([str(CAPTURES / name)])
    view = RunView(with_legacy_rates(r.ppdus, r.frames), r.events, AnalysisIndex(r), r.names, "encrypted")
    _, page, errors = ui
    errors.clear()
    with serve(create_app(view)) as url:
        page.goto(url)
        page.wait_for_selector('#app[data-ready="1"]', timeout=15_000)
        msg = f"no TCP/UDP: {n_enc} encrypted data frames"
        for cid in ("goodput", "jain", "rtt", "flows"):
            assert page.locator(f"#{cid}").text_content().count(msg) == 1, cid
        ticks = page.eval_on_selector_all("#analysis .tick text", "els => els.map(e => e.textContent)")
        assert not any("0.0 µs" in t for t in ticks)
        page.locator("#analysis").screenshot(path=str(ARTIFACTS / "ui-empty-states.png"))
    assert errors == []


# ---- counter tracks on the timeline's time axis -------------------------------------------------

def _tracks_at(page, t0, t1):
    _zoom(page, t0, t1)
    page.wait_for_function("([a, b]) => { const d = window.__sniffsync.tracks.domain; "
                           "return d && Math.abs(d[0] - a) < 2 && Math.abs(d[1] - b) < 2; }", arg=[int(t0), int(t1)])
    return page.evaluate("() => window.__sniffsync.tracks")


def test_tracks_follow_the_timeline_and_count_what_happened(page, run):
    """Failed MPDUs per bucket summed over the view == mpdu_failed events in it (pandas mask over
    run.events); channel utilisation of a bucket == airtime clipped to it (a per-PPDU loop here)."""
    s, e = _rel(run)
    base = int(run.ppdus["start_ns"].min())
    ev = run.events
    t_fail = ev.loc[ev["kind"].astype(str) == "mpdu_failed", "start_ns"].to_numpy(np.int64) - base
    t0 = int(np.median(t_fail)) - 5_000_000
    t1 = t0 + 10_000_000
    hook = _tracks_at(page, t0, t1)
    n = hook["n"]
    u = urlparse(page.url)
    url = f"{u.scheme}://{u.netloc}/api/tracks?t0={t0}&t1={t1}&n={n}"
    d = page.evaluate("async (u) => (await (await fetch(u)).json())", url)
    tr = {t["id"]: t for t in d["tracks"]}
    assert {"goodput", "rtt", "mcs", "ampdu", "util", "jain", "failed"} <= set(tr)
    assert sum(tr["failed"]["series"][0]["y"]) == int(((t_fail >= t0) & (t_fail < t1)).sum()) > 0
    edges = np.linspace(t0, t1, n + 1).round().astype(np.int64)
    for k in (0, n // 3, n // 2, n - 1):
        cover = sum(max(0, min(b, edges[k + 1]) - max(a, edges[k])) for a, b in zip(s, e)
                    if a < edges[k + 1] and b > edges[k])
        assert abs(tr["util"]["series"][0]["y"][k] - min(1.0, cover / (edges[k + 1] - edges[k]))) < 2e-3
    # payload ~ pixels: a bucket per 2 px of plot, whatever the number of PPDUs
    plot_w = page.locator("#timeline canvas").bounding_box()["width"] - 164
    assert abs(n - round(plot_w / 2)) <= 1
    assert hook["drawn"]["failed"] > 0 and hook["drawn"]["util"] > 0
    page.screenshot(path=str(ARTIFACTS / "ui-tracks.png"), full_page=True)
    hook2 = _tracks_at(page, t0 + 2_000_000, t1 + 2_000_000)          # a pan moves every track
    assert hook2["fetches"] > hook["fetches"]


def test_tracks_fold_and_unfold(page):
    page.wait_for_function("() => window.__sniffsync.tracks.fetches > 0")
    btn = page.locator('.track[data-id="rtt"] button.fold')
    btn.click()
    assert not page.locator('.track[data-id="rtt"] canvas').is_visible()
    assert page.evaluate("() => window.__sniffsync.tracks.folded") == ["rtt"]
    page.screenshot(path=str(ARTIFACTS / "ui-tracks-folded.png"))
    btn.click()
    assert page.locator('.track[data-id="rtt"] canvas').is_visible()


# ---- drill-down -----------------------------------------------------------------------------------

def test_click_a_ppdu_drills_down_to_mpdus_bitmap_and_exchange(page, run):
    """Oracles: the MPDU rows (seq) of run.mpdus for the PPDU; the Block-Ack bitmap and SSN of
    the answering BA frame as tshark prints them (wlan.ba.bm, wlan.fixed.ssc.sequence in the
    tests/data/tshark fixture of the sniffer that captured it), bit i = bit i % 8 of byte i // 8."""
    import pandas as pd
    from conftest import DATA
    m, p, f = run.mpdus, run.ppdus, run.frames
    # a data PPDU (an A-MPDU, the largest one that can be clicked alone) with a BA right after it
    bad = m["ppdu"].value_counts().index.to_numpy()           # most MPDUs first
    s, e = _rel(run)
    pid = None
    for cand in bad:
        k = int(np.flatnonzero(p["ppdu"].to_numpy() == cand)[0])
        nxt = np.flatnonzero((s > e[k]) & (s < e[k] + 60_000) & (p["kind"].astype(str) == "ba").to_numpy())
        alone = (s == s[k]).sum() == 1          # a PPDU sharing its start with another cannot be told apart by a click
        if len(nxt) and p["kind"].iloc[k] == "data" and alone:
            pid, k_ba = int(cand), int(nxt[0])
            break
    assert pid is not None
    fr = f.iloc[int(p["first_frame"].iloc[k_ba])]
    ts = pd.read_csv(DATA / "tshark" / f"{SNIFFERS[int(fr['sniffer'])].name}.tsv.gz", sep="\t", dtype=str,
                     usecols=["frame.number", "wlan.ba.bm", "wlan.fixed.ssc.sequence"])
    tsrow = ts[ts["frame.number"] == str(int(fr["frame"]))].iloc[0]
    raw = bytes.fromhex(tsrow["wlan.ba.bm"].replace(":", ""))
    bits = "".join(str(raw[i // 8] >> (i % 8) & 1) for i in range(8 * len(raw)))
    _zoom(page, s[k] - 300_000, e[k] + 300_000)
    pos = page.evaluate("(id) => window.__sniffsync.tl.itemScreenPos(id)", pid)
    page.mouse.click(pos["x"], pos["y"])
    page.wait_for_function("(id) => window.__sniffsync.drill && window.__sniffsync.drill.ppdu === id", arg=pid)
    hook = page.evaluate("() => window.__sniffsync.drill")
    want = sorted(int(v) for v in m.loc[m["ppdu"] == pid, "seq"])
    cells = page.eval_on_selector_all("#drill .mpdus tbody tr td:first-child", "els => els.map(e => +e.textContent)")
    assert sorted(cells) == want and hook["mpdus"] == len(want)
    assert hook["bits"] == bits
    assert page.locator("#drill .bitmap text").first.text_content().count(f"SSN {int(tsrow['wlan.fixed.ssc.sequence'])}") == 1
    assert page.locator("#drill .bitmap rect.bit").count() == len(bits)
    assert "data" in hook["exchange"] and "ba" in hook["exchange"]
    assert page.locator("#drill .exchange line.link").count() == len(hook["exchange"]) - 1
    assert "capture" in page.locator("#drill .facts").text_content()
    page.locator("#drill").screenshot(path=str(ARTIFACTS / "ui-drill.png"))
    page.evaluate("() => window.scrollTo(0, 0)")                # the element screenshot scrolled the page
    pos = page.evaluate("(id) => window.__sniffsync.tl.itemScreenPos(id)", pid)
    page.mouse.click(pos["x"], pos["y"])                          # unpin: the panel goes
    page.wait_for_function("() => document.getElementById('drill').hidden")


# ---- state in the URL, keyboard, find next ---------------------------------------------------------

def _hash(page):
    return dict(parse_qs(urlparse(page.url).fragment))


def test_view_lives_in_the_url_and_back_forward_walk_it(ui, page, run):
    s, e = _rel(run)
    i, a, b = _pick_ppdu(run, "data")
    pid = int(run.ppdus.iloc[i]["ppdu"])
    t0, t1 = a - 300_000, b + 300_000
    _zoom(page, t0, t1)
    page.wait_for_function("(a) => location.hash.includes('t0=' + a)", arg=t0)
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    for attempt in range(3):     # under load a click can land before the zoomed frame is drawn
        pos = page.evaluate("(id) => window.__sniffsync.tl.itemScreenPos(id)", pid)
        page.mouse.click(pos["x"], pos["y"])
        try:
            page.wait_for_function("(id) => location.hash.includes('ppdu=' + id)", arg=pid, timeout=10_000)
            break
        except PlaywrightTimeout:
            assert attempt < 2, "the PPDU's click never pinned it"
    link = page.url
    # back: the view before the pin (same range, no panel); forward: the pin again
    page.evaluate("() => window.__sniffsync.tl.zoomTo(0, window.__sniffsync.meta.span_ns)")
    page.wait_for_function("() => location.hash.includes('t0=0&')")
    page.go_back()
    page.wait_for_function("(a) => Math.abs(window.__sniffsync.timeline.domain[0] - a) < 10", arg=t0)
    page.wait_for_function("(id) => window.__sniffsync.drill && window.__sniffsync.drill.ppdu === id", arg=pid)
    assert _hash(page)["ppdu"] == [str(pid)]
    page.go_back()
    page.wait_for_function("() => document.getElementById('drill').hidden")
    assert "ppdu" not in _hash(page)
    page.go_forward()
    page.wait_for_function("(id) => !document.getElementById('drill').hidden && window.__sniffsync.drill.ppdu === id",
                           arg=pid)
    # the link alone reproduces the view: range, lanes and the pinned PPDU's panel
    page.goto("about:blank")
    page.goto(link)
    page.wait_for_selector('#app[data-ready="1"]', timeout=15_000)
    d = page.evaluate(HOOK)["domain"]
    assert abs(d[0] - t0) < 10 and abs(d[1] - t1) < 10
    page.wait_for_function("(id) => window.__sniffsync.drill && window.__sniffsync.drill.ppdu === id", arg=pid)
    assert page.locator("#drill").is_visible()
    page.screenshot(path=str(ARTIFACTS / "ui-from-link.png"), full_page=True)


def test_two_quick_back_steps_leave_the_drill_as_the_url_says(page, run):
    """Back twice without waiting, the PPDU's details answering late: the earlier step's pin
    (open the drill) must not land after the later step's unpin (the URL has no PPDU)."""
    i, a, b = _pick_ppdu(run, "data")
    pid = int(run.ppdus.iloc[i]["ppdu"])
    t0, t1 = a - 300_000, b + 300_000
    _zoom(page, t0, t1)
    page.wait_for_function("(a) => location.hash.includes('t0=' + a)", arg=t0)
    page.evaluate("(id) => window.__sniffsync.tl.pick(id)", pid)
    page.wait_for_function("(id) => location.hash.includes('ppdu=' + id)", arg=pid)
    page.evaluate("() => window.__sniffsync.tl.zoomTo(0, window.__sniffsync.meta.span_ns)")
    page.wait_for_function("() => location.hash.includes('t0=0&')")

    def late(route):
        time.sleep(0.6)
        route.continue_()
    page.route("**/api/ppdu/**", late)
    try:
        page.evaluate("() => { history.back(); history.back(); }")
        page.wait_for_function("() => !location.hash.includes('ppdu=') && !location.hash.includes('t0=0&')")
        page.wait_for_timeout(2_000)                       # past the late answers
        assert page.evaluate("() => document.getElementById('drill').hidden")
        assert page.evaluate("() => window.__sniffsync.tl.pinned()") is None
    finally:
        page.unroute("**/api/ppdu/**", late)


def test_keyboard_zooms_pans_and_esc_clears(page, run):
    s, e = _rel(run)
    t0, t1 = int(s[len(s) // 2]), int(s[len(s) // 2]) + 8_000_000
    _zoom(page, t0, t1)
    page.locator("body").click(position={"x": 5, "y": 300})       # focus the page, not a control
    page.keyboard.press("w")
    page.wait_for_function("(w) => { const d = window.__sniffsync.timeline.domain; return Math.abs(d[1] - d[0] - w) < 10; }",
                           arg=(t1 - t0) / 2)
    d = page.evaluate(HOOK)["domain"]
    assert abs((d[0] + d[1]) / 2 - (t0 + t1) / 2) < 10                # about the centre
    page.keyboard.press("d")
    page.wait_for_function("(a) => Math.abs(window.__sniffsync.timeline.domain[0] - a) < 10", arg=d[0] + (d[1] - d[0]) / 4)
    page.keyboard.press("s")
    page.wait_for_function("(w) => { const d = window.__sniffsync.timeline.domain; return Math.abs(d[1] - d[0] - w) < 10; }",
                           arg=(t1 - t0))
    page.keyboard.press("a")
    i, a, b = _pick_ppdu(run, "data")
    _zoom(page, a - 300_000, b + 300_000)
    pos = page.evaluate("(id) => window.__sniffsync.tl.itemScreenPos(id)", int(run.ppdus.iloc[i]["ppdu"]))
    page.mouse.click(pos["x"], pos["y"])
    page.wait_for_function("() => !document.getElementById('drill').hidden")
    page.keyboard.press("Escape")
    page.wait_for_function("() => document.getElementById('drill').hidden")
    assert not page.locator("#timeline .tip").is_visible()


def test_find_next_collision_and_failed_mpdu(page, run):
    """Oracle: run.events (pandas): the first event PPDU of the class starting at/after the view."""
    base = int(run.ppdus["start_ns"].min())
    start = dict(zip(run.ppdus["ppdu"].astype(int), run.ppdus["start_ns"].astype("int64") - base))
    ev = run.events
    for what, kinds, label in [("failed", ["mpdu_failed"], "failed MPDU"),
                               ("collision", ["rts_cts_collision", "overlap"], "collision")]:
        ids = ev.loc[ev["kind"].astype(str).isin(kinds), "ppdu"].astype(int).unique()
        if not len(ids):
            continue
        t = np.array(sorted(start[i] for i in ids))
        after = int(t[len(t) // 2]) - 1
        _zoom(page, after, after + 5_000_000)
        want = [i for i in ids if start[i] >= after]
        want = min(want, key=lambda i: (start[i], i))
        page.locator(f'[data-find="{what}"]').click()
        page.wait_for_function("() => window.__sniffsync.drill && window.__sniffsync.drill.ppdu != null")
        got = page.evaluate("() => window.__sniffsync.drill.ppdu")
        assert start[got] == start[want], what                  # the same PPDU, or one sharing its start
        nxt = min((i for i in ids if start[i] > start[got]), key=lambda i: start[i], default=None)
        page.locator(f'[data-find="{what}"]').click()           # next again: the following one
        page.wait_for_function("(id) => window.__sniffsync.drill.ppdu !== id", arg=got)
        assert nxt is None or start[page.evaluate("() => window.__sniffsync.drill.ppdu")] == start[nxt]
        page.screenshot(path=str(ARTIFACTS / f"ui-find-{what}.png"))
        page.keyboard.press("Escape")


# ---- one selection: brush + filters -------------------------------------------------------------------

def test_filters_recompute_every_view(page, run):
    """Unticking a station and a flow: the views show what AnalysisIndex gives for that selection
    (itself checked against pandas in tests/viz/test_analysis_filters.py)."""
    from viz.analysis_index import AnalysisIndex
    page.locator('#filters fieldset[data-key="sta"] input[value="00:00:00:00:00:01"]').uncheck()
    page.wait_for_function("() => window.__sniffsync.selection && window.__sniffsync.selection.filters.sta")
    keep = sorted(page.eval_on_selector_all('#filters fieldset[data-key="sta"] input:checked', "els => els.map(e => e.value)"))
    want = AnalysisIndex(run)(None, None, stations=tuple(keep))
    page.wait_for_function("(n) => document.querySelectorAll('#airtime svg rect.bar').length === n",
                           arg=len(want["airtime_share"]))
    titles = page.eval_on_selector_all("#airtime svg rect.bar title", "els => els.map(e => e.textContent)")
    assert titles == [f"{s['station']}: {_js_number(round(s['share_pct'], 1))}" for s in want["airtime_share"]]
    assert "00:00:00:00:00:01" not in " ".join(titles)
    note = page.locator("#selection-note").text_content()
    assert "stations " + ", ".join(keep) in note and "The timeline dims the lanes of other stations" in note
    # the per-station tracks follow: the unticked station's series is off in their legends
    # (tracks redraw once the view has rested, not at once: wait for the legend)
    page.wait_for_function("() => document.querySelectorAll('.track[data-id=\"mcs\"] .track-legend span.off').length > 0",
                           timeout=5000)
    off = page.eval_on_selector_all('.track[data-id="mcs"] .track-legend span.off', "els => els.map(e => e.textContent)")
    assert off == ["00:00:00:00:00:01"]
    page.locator('#filters fieldset[data-key="flows"] input[value="0"]').uncheck()
    page.wait_for_function("() => window.__sniffsync.selection.filters.flows")
    n_flows = page.eval_on_selector_all('#filters fieldset[data-key="flows"] input:checked', "els => els.length")
    page.wait_for_function("(n) => document.querySelectorAll('#flows tbody tr').length === n", arg=n_flows)
    page.locator("#filters").scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "ui-filters.png"), full_page=True)


def test_arrow_keys_step_through_events(page, run):
    """Oracle: run.events' PPDU starts (any event kind), in time order."""
    base = int(run.ppdus["start_ns"].min())
    start = dict(zip(run.ppdus["ppdu"].astype(int), run.ppdus["start_ns"].astype("int64") - base))
    t = np.array(sorted({start[int(i)] for i in run.events["ppdu"]}))
    k = len(t) // 2
    _zoom(page, int(t[k]) - 1, int(t[k]) + 3_000_000)
    page.locator("body").click(position={"x": 5, "y": 300})
    page.keyboard.press("ArrowRight")
    page.wait_for_function("() => window.__sniffsync.drill && window.__sniffsync.drill.ppdu != null")
    first = page.evaluate("() => window.__sniffsync.drill.ppdu")
    assert start[first] == t[k]
    page.keyboard.press("ArrowRight")
    page.wait_for_function("(id) => window.__sniffsync.drill.ppdu !== id", arg=first)
    assert start[page.evaluate("() => window.__sniffsync.drill.ppdu")] == t[k + 1]
    page.keyboard.press("ArrowLeft")
    page.wait_for_function("(s) => window.__sniffsync.drill.ppdu != null", arg=0)
    page.wait_for_function("() => window.__sniffsync.find.length >= 3")
    assert page.evaluate("() => window.__sniffsync.find.at(-1).start_ns") == t[k]


def test_search_by_mac_seq_and_port(page, run):
    """Oracles: run.ppdus (first PPDU from/to a MAC), run.mpdus (the PPDU holding a sequence
    number), the flow table's ports."""
    base = int(run.ppdus["start_ns"].min())
    p, m = run.ppdus, run.mpdus
    box = page.locator("#search")
    mac = 0x000000000003
    hit = p[(p["ta"] == mac) | (p["ra"] == mac)]
    want = hit.loc[hit["start_ns"].idxmin()]
    box.fill("00:00:00:00:00:03")
    box.press("Enter")
    page.wait_for_function("() => window.__sniffsync.drill && window.__sniffsync.drill.ppdu != null")
    got = page.evaluate("() => window.__sniffsync.drill.ppdu")
    assert int(p.loc[p["ppdu"] == got, "start_ns"].iloc[0]) == int(want["start_ns"])
    seq = int(m["seq"].iloc[len(m) // 2])
    ids = m.loc[m["seq"] == seq, "ppdu"].to_numpy()
    first = p[p["ppdu"].isin(ids)]["start_ns"].min() - base
    page.keyboard.press("Escape")                               # from the search box: unpins too
    page.wait_for_function("() => window.__sniffsync.drill.ppdu === null")
    page.evaluate("() => window.__sniffsync.tl.zoomTo(0, window.__sniffsync.meta.span_ns)")
    box.fill(f"seq {seq}")
    box.press("Enter")
    page.wait_for_function("() => window.__sniffsync.search.length === 2 && window.__sniffsync.drill.ppdu != null")
    got = page.evaluate("() => window.__sniffsync.drill.ppdu")
    assert got in set(ids) and int(p.loc[p["ppdu"] == got, "start_ns"].iloc[0]) - base == first
    page.screenshot(path=str(ARTIFACTS / "ui-search-seq.png"))
    flows = run.fairness.flows
    want_n = int(((flows["sport"] == 6001) | (flows["dport"] == 6001)).sum())
    box.fill("6001")
    box.press("Enter")
    page.wait_for_function("(n) => document.querySelectorAll('#flows tbody tr').length === n", arg=want_n)
    assert page.evaluate("() => window.__sniffsync.search.at(-1).flows.length") == want_n


def test_png_export_of_the_visible_view(page, tmp_path):
    """The downloaded file is a PNG of the lanes plus every unfolded track at device pixels, and
    its first lane's pixels are the page's own (a data PPDU's colour is in it)."""
    import struct
    page.wait_for_function("() => window.__sniffsync.tracks.fetches > 0")
    with page.expect_download() as dl:
        page.locator("#export").click()
    path = tmp_path / "view.png"
    dl.value.save_as(path)
    dl.value.save_as(ARTIFACTS / "export-view.png")            # for a human to look at
    raw = path.read_bytes()
    assert raw[:8] == b"\x89PNG\r\n\x1a\n"
    w, h = struct.unpack(">II", raw[16:24])
    info = page.evaluate("() => window.__sniffsync.exported")
    lanes = page.evaluate("() => { const c = document.querySelector('#timeline canvas'); return [c.width, c.height]; }")
    tracks = page.evaluate("() => [...document.querySelectorAll('#tracks .track canvas')].map(c => c.height)")
    assert (w, h) == (info["width"], info["height"]) == (lanes[0], lanes[1] + sum(tracks) + 16 * len(tracks))
    assert dl.value.suggested_filename.startswith("sniffsync-") and info["tracks"] == len(tracks)


def test_station_filter_in_the_url_greys_the_track_legends_when_they_arrive(ui):
    """A link with a station filter: the tracks' legends (built by the first tracks answer, after
    the filter is applied) show the other stations off."""
    url, page, errors = ui
    errors.clear()
    page.goto(url + "#lanes=station&sta=00%3A00%3A00%3A00%3A00%3A02%2C00%3A00%3A00%3A00%3A00%3A03")
    page.reload()
    page.wait_for_selector('#app[data-ready="1"]', timeout=15_000)
    page.wait_for_function("() => document.querySelectorAll('.track[data-id=\"mcs\"] .track-legend span').length > 0")
    on = page.eval_on_selector_all('.track[data-id="mcs"] .track-legend span:not(.off)', "els => els.map(e => e.textContent)")
    off = page.eval_on_selector_all('.track[data-id="mcs"] .track-legend span.off', "els => els.map(e => e.textContent)")
    assert sorted(on) == ["00:00:00:00:00:02", "00:00:00:00:00:03"] and "00:00:00:00:00:01" in off
    assert errors == []
