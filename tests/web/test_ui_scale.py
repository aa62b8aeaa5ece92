"""Structural checks of the UI at scale (timings are bench/bench_ui.py's job): on two synthetic
runs of 3,000 and 40,000 PPDUs, the timeline and counter tracks hold the same number of DOM
nodes (lanes are drawn on canvas, never an element per PPDU), and every tile and track answer
the page fetched is bounded by its pixels / buckets, not by the PPDUs in range."""
import importlib.util
import re
from pathlib import Path

import pytest

from browser_util import browser_page, serve

pytestmark = pytest.mark.browser

spec = importlib.util.spec_from_file_location("bench_tiles",
                                              Path(__file__).resolve().parents[2] / "bench" / "bench_tiles.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)

# elements of the lanes and tracks, less the axis ticks (their number follows the range's round numbers)
NODES = ("() => document.querySelectorAll('#timeline *, #tracks *').length"
         " - document.querySelectorAll('#timeline .axis *').length")
SIZES = """() => performance.getEntriesByType('resource').filter((e) => /\\/api\\/(tile|tracks)\\?/.test(e.name))
  .map((e) => [e.name, e.encodedBodySize])"""


def _session(page, url):
    page.goto(url)
    page.wait_for_selector('#app[data-ready="1"]', timeout=30_000)
    page.wait_for_function("() => window.__sniffsync.tracks.fetches > 0")
    before = page.evaluate(NODES)
    for k in "wwds":
        n = page.evaluate("() => window.__sniffsync.timeline.tiles")
        page.keyboard.press(k)
        page.wait_for_function(f"() => window.__sniffsync.timeline.tiles > {n}")
    page.wait_for_timeout(300)
    return before, page.evaluate(NODES), page.evaluate(SIZES), page.evaluate("() => window.__sniffsync.meta")


def test_dom_does_not_grow_with_ppdus_and_answers_follow_pixels():
    from web import create_app
    seen = {}
    with browser_page() as (page, errors):
        for n in (3_000, 40_000):
            view = bench.synth_view(bench.synth_run(n, span_s=60))
            with serve(create_app(view)) as url:
                seen[n] = _session(page, url)
        assert errors == []
    (b_small, a_small, _, _), (b_big, a_big, sizes, meta) = seen[3_000], seen[40_000]
    assert b_small == b_big and a_small == a_big          # same lanes and tracks, 13x the PPDUs
    assert a_big < 400
    lanes = len(meta["lanes"]["station"])
    tiles = [(re.search(r"px=(\d+)", u), b) for u, b in sizes if "/api/tile?" in u]
    tracks = [(re.search(r"n=(\d+)", u), b) for u, b in sizes if "/api/tracks?" in u]
    assert tiles and tracks
    for m, size in tiles:      # items: <= 4 px PPDUs of ~45 bytes; buckets: ~4 numbers per lane and pixel
        assert 0 < size <= int(m.group(1)) * (200 + 45 * lanes), (m.group(0), size)
    for m, size in tracks:     # <= 25 series of one rounded number per bucket
        assert 0 < size <= int(m.group(1)) * 25 * 10 + 4000, (m.group(0), size)
