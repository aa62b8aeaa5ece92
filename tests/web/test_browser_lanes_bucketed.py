"""Zoomed-out sniffer lanes dimmed by station (viz/tilestations.py + lanefilter.js), in chromium.

A synthetic 8,000-PPDU run over 2 s (bench_tiles.synth_run: 12 stations, 3 sniffers) drawn whole
in sniffer lanes is bucketed, served and in the offline report (whose window is the whole run). With one station selected, a bucket is dimmed exactly when none of the
PPDUs its sniffer heard overlapping it is that station's (TA, else RA): counted here with pandas
over the PPDU table, and read back from the canvas pixels (faded vs full colour). Without a filter
the page asks for no station masks and its tiles carry none.
"""
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from browser_util import ARTIFACTS, browser_page, serve

pytestmark = pytest.mark.browser

spec = importlib.util.spec_from_file_location("bench_tiles",
                                              Path(__file__).resolve().parents[2] / "bench" / "bench_tiles.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)
KEEP = "02:00:00:00:00:03"
DOCS_IMG = Path(__file__).resolve().parents[2] / "docs" / "img"


def _runs(flags: np.ndarray, n: int = 3) -> list:
    """Start indices of runs of ``n`` consecutive True."""
    w = np.convolve(flags.astype(int), np.ones(n, int), "valid")
    return np.flatnonzero(w == n).tolist()


def test_bucketed_sniffer_lanes_dim_buckets_without_the_selected_station(tmp_path):
    from sniffsync.decode.macs import mac_text
    from web import create_app
    run = bench.synth_run(8_000, span_s=2)
    view = bench.synth_view(run)
    p, meta = view.ppdus, view.meta()
    who = p["ta"].astype("UInt64").fillna(p["ra"].astype("UInt64")).map(lambda m: mac_text(int(m))).to_numpy()
    s, e = p["start_ns"].to_numpy() - meta["t0_abs_ns"], p["end_ns"].to_numpy() - meta["t0_abs_ns"]
    heard = p["heard_mask"].to_numpy()
    ARTIFACTS.mkdir(exist_ok=True)
    with serve(create_app(view)) as url, browser_page() as (page, errors):
        page.goto(f"{url}/#t0=0&t1={meta['span_ns']}&lanes=sniffer&sta={KEEP}")
        page.wait_for_selector('#app[data-ready="1"]', timeout=30_000)
        page.wait_for_function("() => window.__sniffsync.timeline.mode === 'buckets' && window.__sniffsync.timeline.dimmed > 0",
                               timeout=30_000)
        _quiet(page)
        # the tile the page drew (same URL: the server's cached answer) gives the bucket edges
        t = page.evaluate("""async () => { const r = performance.getEntriesByType('resource').map((x) => x.name)
          .filter((n) => n.includes('/api/tile?') && n.includes('lanes=sniffer')).pop(); return (await fetch(r)).json(); }""")
        edges, busy = np.array(t["edges_ns"]), t["busy_ns"]
        want, dim_lanes = 0, []
        for lane in range(len(busy)):
            on = (heard >> lane & 1).astype(bool)
            # per bucket: does a PPDU of KEEP heard by this sniffer overlap it?
            k = on & (who == KEEP)
            a = np.searchsorted(np.sort(s[k]), edges[1:], side="left")        # started before the bucket's end
            b = np.searchsorted(np.sort(e[k]), edges[:-1], side="right")      # ended at or before its start
            drawn = np.array(busy[lane]) > 0
            dimmed = drawn & (a - b == 0)
            want += int(dimmed.sum())
            dim_lanes.append((dimmed, drawn & ~dimmed))
        assert page.evaluate("() => window.__sniffsync.timeline.dimmed") == want > 0
        assert want == _expected(edges, s, e, heard, who)
        # pixels: the middle of three dimmed buckets is faded, of three kept ones full colour
        box = page.evaluate("""() => { const c = document.querySelector('#timeline canvas'), r = c.getBoundingClientRect();
          return {w: r.width, d: window.devicePixelRatio || 1}; }""")
        d0, d1 = page.evaluate("() => window.__sniffsync.timeline.domain")
        left, right = 150, box["w"] - 14
        px = lambda tt: left + (tt - d0) / (d1 - d0) * (right - left)   # noqa: E731

        def pixel(lane, k):
            x = (px(edges[k]) + px(edges[k + 1])) / 2
            y = 10 + lane * 26 + 26 - 5
            return page.evaluate("""([x, y]) => Array.from(document.querySelector('#timeline canvas').getContext('2d')
              .getImageData(Math.floor(x), Math.floor(y), 1, 1).data)""", [x * box["d"], y * box["d"]])
        checked = 0
        for lane, (dimmed, kept) in enumerate(dim_lanes):
            rd, rk = _runs(dimmed), _runs(kept)
            if rd and rk:
                assert min(pixel(lane, rd[0] + 1)[:3]) > 200       # faded
                assert min(pixel(lane, rk[0] + 1)[:3]) < 200       # full colour
                checked += 1
        assert checked >= 1
        page.locator("#timeline").screenshot(path=str(DOCS_IMG / "lanes-bucketed-sniffer-dim.png"))
        assert errors == []
        # no filter: the page asks for no masks and the tiles it gets carry none (they cost the server)
        page.goto("about:blank")
        page.goto(f"{url}/#t0=0&t1={meta['span_ns']}&lanes=sniffer")
        page.wait_for_selector('#app[data-ready="1"]', timeout=30_000)
        page.wait_for_function("() => window.__sniffsync.timeline.mode === 'buckets'", timeout=30_000)
        _quiet(page)
        got = page.evaluate("""async () => { const rs = performance.getEntriesByType('resource').map((x) => x.name)
          .filter((n) => n.includes('/api/tile?') && n.includes('lanes=sniffer'));
          return {urls: rs, tile: await (await fetch(rs.pop())).json()}; }""")
        assert got["urls"] and not any("stations=" in u for u in got["urls"])
        assert got["tile"]["mode"] == "buckets" and "sta_mask" not in got["tile"]
        assert page.evaluate("() => window.__sniffsync.timeline.dimmed") == 0
        # the offline report: its own buckets (api.js localSource) carry the masks too
        from viz.report import build_report
        path = tmp_path / "report.html"
        path.write_text(build_report(view, run))
        page.goto(f"{path.as_uri()}#lanes=sniffer&sta={KEEP}")
        page.wait_for_selector('#app[data-ready="1"]', timeout=30_000)
        page.wait_for_function("() => window.__sniffsync.timeline.mode === 'buckets' && window.__sniffsync.timeline.dimmed > 0",
                               timeout=30_000)
        _quiet(page)
        m = page.evaluate("() => window.__sniffsync.meta")
        w0 = m["t0_abs_ns"]
        d0, d1 = page.evaluate("() => window.__sniffsync.timeline.domain")
        npx = round(max(page.evaluate("() => document.getElementById('timeline').clientWidth"), 600) - 14 - 150)
        lo, hi = max(0, d0), min(max(m["span_ns"], 1000), d1)
        redges = lo + np.arange(npx + 1) * ((hi - lo) / npx)
        rs, re_ = p["start_ns"].to_numpy() - w0, p["end_ns"].to_numpy() - w0
        assert page.evaluate("() => window.__sniffsync.timeline.dimmed") == _expected(redges, rs, re_, heard, who) > 0
        assert errors == []


def _quiet(page):
    """Wait until no new tile was drawn for 0.4 s (a late resize, e.g. a scrollbar, asks for one)."""
    last = -1
    for _ in range(20):
        n = page.evaluate("() => window.__sniffsync.timeline.tiles")
        if n == last:
            return
        last = n
        page.wait_for_timeout(400)


def _expected(edges, s, e, heard, who) -> int:
    """Buckets drawn (a PPDU the sniffer heard overlaps them) holding no PPDU of KEEP, all lanes."""
    n = 0
    for lane in range(3):
        on = (heard >> lane & 1).astype(bool)
        drawn = np.array([bool((on & (s < b) & (e > a)).any()) for a, b in zip(edges[:-1], edges[1:])])
        k = on & (who == KEEP)
        keep = np.array([bool((k & (s < b) & (e > a)).any()) for a, b in zip(edges[:-1], edges[1:])])
        n += int((drawn & ~keep).sum())
    return n
