"""The fairness command on 802.11 estimates the PPDU extents beside the TCP analysis when no
sniffer stamps PPDU starts (sniffsync.fairness.capture.OVERLAP_MAX_ROWS): the report bytes
are those written before (one after the other), the overlap is taken, an error of the
extent thread reaches the caller."""
from __future__ import annotations

import os

import pytest

import sniffsync.fairness.capture as C
from sniffsync.cli.main import main

DATA = os.path.join(os.path.dirname(__file__), "..", "data")
NAME = "ns3-11n-ht20-hidden-snifferA-nearAP"


def _fairness(out) -> int:
    return main(["fairness", os.path.join(DATA, "captures", NAME + ".pcap"), "-o", str(out)])


def _want() -> bytes:
    with open(os.path.join(DATA, "fairness_reports", NAME + ".json"), "rb") as fh:
        return fh.read()


@pytest.fixture
def calls(monkeypatch):
    seen = []

    def counted(fn):
        seen.append(fn)
        return background(fn)
    background = C._background
    monkeypatch.setattr(C, "_background", counted)
    monkeypatch.setenv("SNIFFSYNC_THREADS", "2")
    return seen


@pytest.mark.parametrize("overlap", [True, False])
def test_same_report_with_and_without_overlap(calls, monkeypatch, tmp_path, overlap):
    if not overlap:
        monkeypatch.setattr(C, "OVERLAP_MAX_ROWS", 0)
    out = tmp_path / "r.json"
    assert _fairness(out) == 0
    assert len(calls) == overlap
    assert out.read_bytes() == _want()


def _fails(monkeypatch, tmp_path, module, name, message) -> None:
    """fairness with ``module.name`` raising ``message``: the caller gets that error."""
    def broken(*a, **k):
        raise RuntimeError(message)
    monkeypatch.setattr(module, name, broken)
    with pytest.raises(RuntimeError, match=message):
        _fairness(tmp_path / "r.json")


def test_extent_error_reaches_the_caller(calls, monkeypatch, tmp_path):
    import airtime.ppdu as P
    _fails(monkeypatch, tmp_path, P, "estimate_extent", "extent failed")
    assert len(calls) == 1 and not (tmp_path / "r.json").exists()


def test_extent_thread_started_late_still_finds_its_grouping(monkeypatch, tmp_path):
    """The thread may first run after the caller has moved on (and dropped its names)."""
    import time
    background = C._background

    def late(fn):
        def slow():
            time.sleep(0.05)
            return fn()
        return background(slow)
    monkeypatch.setattr(C, "_background", late)
    monkeypatch.setenv("SNIFFSYNC_THREADS", "2")
    out = tmp_path / "r.json"
    assert _fairness(out) == 0
    assert out.read_bytes() == _want()


def test_an_analysis_error_waits_for_the_extent_thread(calls, monkeypatch, tmp_path):
    import threading
    import sniffsync.fairness.core as core
    _fails(monkeypatch, tmp_path, core, "analyze_arrays", "analysis failed")
    assert len(calls) == 1 and not [t for t in threading.enumerate() if t.name == "ppdu-extent"]
