"""`sniffsync demo --no-serve` on the shipped samples: every output, the conservation line, and the
report drawn in a real browser at coarse zoom (bucket mode) without errors."""
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sniffsync.cli.main import main

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "hidden-node"


@pytest.fixture(scope="module")
def demo_out(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    assert main(["demo", "--no-serve", "-q", "--out", str(out)]) == 0
    return out


def test_outputs_and_conservation(demo_out):
    for name in ("merged.pcapng", "sync.json", "ppdus.csv", "events.csv", "summary.json", "flows.csv",
                 "report.html"):
        assert (demo_out / name).stat().st_size > 0, name
    tot = json.loads((demo_out / "sync.json").read_text())["totals"]
    assert tot["frames_in"] == tot["frames_out"] + tot["duplicates_removed"]
    ev = pd.read_csv(demo_out / "events.csv")
    assert (ev["kind"] == "rts_cts_collision").sum() > 10          # the hidden-node finding


def test_ppdus_and_tcp_share_one_clock():
    # sample sniffers' TSF and capture clocks differ by hours: PPDUs must be moved to the capture clock
    from sniffsync.pipeline.run import analyse
    paths = sorted(str(p) for p in SAMPLES.glob("*.pcap.gz"))
    run = analyse(paths)
    frames_t0 = int(run.frames["ts_ns"].min())
    assert abs(int(run.ppdus["start_ns"].min()) - frames_t0) < 10_000_000
    j = run.fairness.jain
    assert np.isfinite(j["jain_airtime"].to_numpy(float)).sum() >= len(j) // 2


@pytest.mark.browser
def test_report_draws_buckets_without_errors(demo_out):
    from browser_util import browser_page
    with browser_page(width=640) as (page, errors):     # narrow: few pixels per PPDU -> buckets
        page.route("**/*", lambda r: r.continue_() if r.request.url.startswith("file:") else r.abort())
        page.goto((demo_out / "report.html").as_uri())
        page.wait_for_function("() => window.__sniffsync && window.__sniffsync.timeline && "
                               "window.__sniffsync.timeline.tiles > 0", timeout=15000)
        tl = page.evaluate("() => window.__sniffsync.timeline")
        assert errors == []
        assert tl["mode"] == "buckets" and tl["drawn"] > 100 and tl["markers"] > 0
