"""`serve`/`report` analyse once and cache Parquet beside a hash of the inputs: a second start is instant
and serves the same data."""
import argparse
import json
from pathlib import Path

import pandas as pd
import pytest

from sniffsync.cli.serve import build_view
from sniffsync.pipeline.cache import cache_dir

CAP = Path(__file__).resolve().parents[1] / "data" / "captures"
PATHS = [str(CAP / f"ns3-11n-ht20-hidden-sniffer{s}.pcap") for s in ("A-nearAP", "B-nearSTA1", "C-nearSTA2")]


def _args(**kw):
    base = dict(captures=PATHS, reference=0, allow_unsynced=False, tsft_at="auto", quiet=True, no_cache=False)
    base.update(kw)
    return argparse.Namespace(**base)


def test_second_start_comes_from_cache_with_identical_answers(tmp_path, monkeypatch):
    monkeypatch.setenv("SNIFFSYNC_CACHE", str(tmp_path))
    run1, view1, cached1 = build_view(_args())
    run2, view2, cached2 = build_view(_args())
    assert (cached1, cached2) == (False, True)
    assert run2.frames is None                                  # nothing re-read
    assert view2.meta() == view1.meta()
    span = view1.meta()["span_ns"]
    for lanes in ("station", "sniffer"):
        assert view2.tile(0, span, 900, lanes) == view1.tile(0, span, 900, lanes)
    assert json.dumps(view2.analysis(), default=str) == json.dumps(view1.analysis(), default=str)
    pid = int(run1.events["ppdu"].iloc[0])
    assert view2.ppdu_detail(pid) == view1.ppdu_detail(pid)


def test_cache_key_changes_with_options_and_inputs(tmp_path, monkeypatch):
    monkeypatch.setenv("SNIFFSYNC_CACHE", str(tmp_path))
    a = cache_dir(PATHS, {"tsft_at": "auto"})
    assert a == cache_dir(PATHS, {"tsft_at": "auto"})
    assert a != cache_dir(PATHS, {"tsft_at": "end"})
    assert a != cache_dir(PATHS[:2], {"tsft_at": "auto"})


def test_no_cache_recomputes(tmp_path, monkeypatch):
    monkeypatch.setenv("SNIFFSYNC_CACHE", str(tmp_path))
    build_view(_args(captures=PATHS[:1]))
    _, _, cached = build_view(_args(captures=PATHS[:1], no_cache=True))
    assert cached is False


def test_report_for_a_capture_without_tcp(tmp_path, monkeypatch):
    # wltrace: real driver radiotap, encrypted data, no TCP visible: timeline and detection still go
    # into the report; the fairness views are simply empty
    from sniffsync.cli.main import main
    monkeypatch.setenv("SNIFFSYNC_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "r.html"
    assert main(["report", "-q", str(CAP / "wltrace_trace.pcap"), "-o", str(out)]) == 0
    html = out.read_text()
    blob = html.split('id="sniffsync-data">', 1)[1].split("</script>", 1)[0]
    data = json.loads(blob)
    assert data["timeline"]["meta"]["n_ppdus"] > 50             # the air is there
    assert len(data["analysis"]["airtime_share"]) >= 2
    assert "goodput" not in data["analysis"] and data["analysis"]["hist"]["mcs"] is not None


def test_bytes_in_flight_are_cached(tmp_path, monkeypatch):
    """run.inflight (the UI's bytes-in-flight track) survives the cache: same samples on a second start."""
    from sniffsync.pipeline.cache import analyse_cached
    monkeypatch.setenv("SNIFFSYNC_CACHE", str(tmp_path))
    cap = [str(Path(__file__).parents[1] / "data" / "captures" / "tcp" / "sack_hand.pcap")]
    first, c1 = analyse_cached(cap)
    second, c2 = analyse_cached(cap)
    assert (c1, c2) == (False, True) and second.frames is None
    assert len(first.inflight) == 14          # one sample per data segment of the hand-built transfer
    pd.testing.assert_frame_equal(second.inflight, first.inflight)
