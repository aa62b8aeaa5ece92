"""The "SVG" button: the visible view as an SVG file whose lanes are vector shapes.

Oracle: the PPDUs overlapping the visible window, counted in Python from the run's PPDU
table (as tests/web/test_browser.py does for the canvas); each is one rectangle of the lane
item height in the downloaded SVG, in the colour of its kind.
"""
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from conftest import CAPTURES

pytestmark = pytest.mark.browser
A = CAPTURES / "ns3-11n-ht20-hidden-snifferA-nearAP.pcap"
ITEM_H = 26 - 10            # LANE_H - 10 in web/static/js/timeline.js
SVG = "{http://www.w3.org/2000/svg}"


def test_svg_export_has_one_vector_rect_per_ppdu_in_view(tmp_path):
    from browser_util import ARTIFACTS, browser_page, serve
    from sniffsync.cli.serve import make_view
    from sniffsync.pipeline.run import analyse
    from web import create_app
    view = make_view(analyse([str(A)]), "A")
    p = view.ppdus
    base = view.meta()["t0_abs_ns"]
    start, end = p["start_ns"].to_numpy(np.int64) - base, p["end_ns"].to_numpy(np.int64) - base
    order = np.sort(start)
    busiest = int(np.argmax(np.searchsorted(order, order + 3_000_000) - np.arange(len(order))))
    t0 = int(order[busiest]) // 1000 * 1000 - 500
    t1 = t0 + 3_000_000
    want = int(((start < t1) & (end > t0)).sum())
    assert 5 < want < 200
    ARTIFACTS.mkdir(exist_ok=True)
    with serve(create_app(view)) as url, browser_page() as (page, errors):
        page.goto(url)
        page.wait_for_selector('#app[data-ready="1"]', timeout=15_000)
        fetched = page.evaluate("() => window.__sniffsync.tracks.fetches")
        page.evaluate(f"() => window.__sniffsync.tl.zoomTo({t0}, {t1})")
        page.wait_for_function("() => window.__sniffsync.timeline.mode === 'items'")
        # the tracks are refetched once the view rests: export what the user would see then
        page.wait_for_function("(n) => window.__sniffsync.tracks.fetches > n", arg=fetched)
        with page.expect_download(timeout=30_000) as dl:
            page.click("#export-svg")
        out = ARTIFACTS / "export-view.svg"
        dl.value.save_as(out)
        name = dl.value.suggested_filename
        info = page.evaluate("() => window.__sniffsync.exportedSvg")
        drawn = page.evaluate("() => window.__sniffsync.timeline.drawn")
        # the file as an image in the browser, for a human to look at
        page.goto(out.as_uri())
        page.screenshot(path=str(ARTIFACTS / "export-view-svg.png"))
        assert errors == []
    assert name.endswith("us.svg") and name.startswith("sniffsync-")
    root = ET.parse(out).getroot()
    lanes = root.find(f"{SVG}g[@class='lanes']")
    items = [r for r in lanes.iter(f"{SVG}rect") if float(r.get("height")) == ITEM_H]
    assert len(items) == want == drawn
    assert info["tracks"] == len(root.findall(f"{SVG}image")) > 0
    assert any(t.text and "ms" in t.text for t in root.iter(f"{SVG}text"))   # the axis' tick labels
