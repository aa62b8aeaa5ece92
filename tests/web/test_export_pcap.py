"""``/api/export.pcapng`` and the "pcapng" button: the selected frames, readable by tshark.

Oracle: tshark's ``frame.time_epoch`` of the INPUT capture (fixture in tests/data/tshark_export,
re-run when tshark is on PATH), cut to the range in Python; the export read back by tshark
must hold exactly those frames (count, first and last time) and tshark must say nothing on
stderr. For a merged run the oracle is tshark reading the whole merged file.
"""
import shutil
import subprocess
from decimal import Decimal

import numpy as np
import pytest

from conftest import CAPTURES, DATA
from viz.pcap_export import PcapExport

A = CAPTURES / "ns3-11n-ht20-hidden-snifferA-nearAP.pcap"
SNIFFERS = [CAPTURES / f"ns3-11n-ht20-hidden-sniffer{s}.pcap" for s in ("A-nearAP", "B-nearSTA1", "C-nearSTA2")]
EPOCHS = DATA / "tshark_export" / "snifferA-epochs.txt"
TSHARK = shutil.which("tshark")
needs_tshark = pytest.mark.skipif(TSHARK is None, reason="tshark not on PATH")


def _ns(lines) -> np.ndarray:
    return np.array([int(Decimal(x) * 10**9) for x in lines if x.strip()], np.int64)


def _tshark(path, *fields) -> tuple[list, list]:
    """(rows of tab-separated fields, stderr lines other than tshark's root warning)."""
    args = [TSHARK, "-r", str(path), "-T", "fields"] + [a for f in fields for a in ("-e", f)]
    p = subprocess.run(args, capture_output=True, text=True, timeout=60)
    err = [x for x in p.stderr.splitlines() if "Running as user" not in x and x.strip()]
    return [r.split("\t") for r in p.stdout.splitlines()], err


def _read_back_ns(body: bytes, tmp_path) -> np.ndarray:
    from sniffsync.io.capture import read_records
    f = tmp_path / "back.pcapng"
    f.write_bytes(body)
    return np.asarray(read_records(f).ts_ns, np.int64)


@pytest.fixture(scope="module")
def single():
    ts = _ns(EPOCHS.read_text().splitlines())
    return PcapExport([A], int(ts[0])), ts


RANGES = [(0, 10**12), (300_000_000, 700_000_000), (560_123_456, 580_000_001), (5, 6)]


@pytest.mark.parametrize("t0,t1", RANGES)
def test_single_capture_range_equals_fixture(single, tmp_path, t0, t1):
    ex, ts = single
    want = ts[(ts >= ts[0] + t0) & (ts < ts[0] + t1)]
    body, n = ex.export(t0, t1)
    got = _read_back_ns(body, tmp_path)
    assert n == len(want) == len(got)
    assert np.array_equal(got, want)


@needs_tshark
@pytest.mark.parametrize("t0,t1", RANGES[1:3])
def test_single_capture_range_read_by_tshark(single, tmp_path, t0, t1):
    ex, _ = single
    rows, err = _tshark(A, "frame.time_epoch")
    ts = _ns(r[0] for r in rows)
    assert np.array_equal(ts, single[1])                   # the fixture is still tshark's answer
    want = ts[(ts >= ts[0] + t0) & (ts < ts[0] + t1)]
    out = tmp_path / "out.pcapng"
    out.write_bytes(ex.export(t0, t1)[0])
    rows, err = _tshark(out, "frame.time_epoch", "frame.len")
    assert err == []
    got = _ns(r[0] for r in rows)
    assert len(got) == len(want) > 0
    assert (got[0], got[-1]) == (want[0], want[-1])
    # the bytes too: tshark's lengths of the same frames in the input
    full, _ = _tshark(A, "frame.time_epoch", "frame.len")
    sel = (ts >= ts[0] + t0) & (ts < ts[0] + t1)
    assert [r[1] for r in rows] == [r[1] for r, k in zip(full, sel) if k]


def test_filters_station_and_kind(single, tmp_path):
    """A station keeps only frames it sends (or, without a TA, receives); a kind only its PPDUs'."""
    from sniffsync.decode.frames import read_capture
    ex, ts = single
    fr = read_capture(str(A))
    ta = fr["ta"].to_numpy(np.int64, na_value=-1)
    ra = fr["ra"].to_numpy(np.int64, na_value=-1)
    sta = int(fr["ta"].dropna().mode()[0])
    mac = ":".join(f"{sta:012x}"[i:i + 2] for i in range(0, 12, 2))
    want = ((ta == sta) | ((ta < 0) & (ra == sta))).sum()
    body, n = ex.export(stations=(mac,))
    assert n == want == len(_read_back_ns(body, tmp_path)) > 0
    assert ex.export(stations=())[1] == 0
    n_data = ex.export(kinds=("data",))[1]
    n_rest = ex.export(kinds=tuple(k for k in ("rts", "cts", "ack", "ba", "bar", "mgmt", "other", "beacon")))[1]
    assert 0 < n_data < len(ts)
    assert n_data + n_rest <= len(ts)


@needs_tshark
def test_merged_run_keeps_provenance(tmp_path):
    """Merged: the rows of the merged table in the range, with the merge's "heard by" comments;
    oracle = tshark reading the whole merged file."""
    from sniffsync.pipeline.run import load_merged
    from sniffsync.sync.pcapng import write_merged
    m = load_merged([str(p) for p in SNIFFERS])
    whole = tmp_path / "whole.pcapng"
    write_merged(whole, m)
    rows, err = _tshark(whole, "frame.time_epoch")
    ts = _ns(r[0] for r in rows)
    ex = PcapExport(SNIFFERS, int(ts[0]), m)
    t0, t1 = 400_000_000, 600_000_000
    want = ts[(ts >= ts[0] + t0) & (ts < ts[0] + t1)]
    out = tmp_path / "out.pcapng"
    out.write_bytes(ex.export(t0, t1)[0])
    rows, err = _tshark(out, "frame.time_epoch", "frame.comment", "frame.interface_name")
    assert err == []
    got = _ns(r[0] for r in rows)
    assert len(got) == len(want) > 0 and (got[0], got[-1]) == (want[0], want[-1])
    assert all(r[1].startswith("heard by: ") for r in rows)
    assert {r[2] for r in rows} <= set(m.sniffers)
    # after a start from the cache there is no Merged in memory: the export merges again
    assert PcapExport(SNIFFERS, int(ts[0])).export(t0, t1)[1] == len(want)


# ---- the endpoint ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def client(single):
    import pandas as pd

    from viz.runview import RunView
    from web import create_app
    ex, ts = single
    ppdus = pd.DataFrame({"ppdu": [0, 1], "start_ns": [ts[0], ts[-1]], "end_ns": [ts[0] + 10, ts[-1] + 10],
                          "ta": pd.array([1, 2], dtype="UInt64"), "ra": pd.array([2, 1], dtype="UInt64"),
                          "kind": ["data", "ack"], "sniffer": 0, "heard_mask": 1})
    view = RunView(ppdus, None, lambda a=None, b=None: {}, ["A"], "t")
    view.pcap = ex
    return create_app(view).test_client()


def test_endpoint_answers_a_download(client, single, tmp_path):
    ex, ts = single
    r = client.get("/api/export.pcapng?t0=300000000&t1=700000000")
    assert r.status_code == 200
    assert r.headers["Content-Disposition"] == 'attachment; filename="sniffsync-300000-700000us.pcapng"'
    assert r.data[:4] == b"\x0a\x0d\x0d\x0a"
    want = ((ts >= ts[0] + 300_000_000) & (ts < ts[0] + 700_000_000)).sum()
    assert int(r.headers["X-Sniffsync-Packets"]) == want == len(_read_back_ns(r.data, tmp_path))


@pytest.mark.parametrize("q", ["t0=5_000&t1=9000", "t0=+5&t1=9000", "t0=%D9%A5&t1=9000", "t0=-1&t1=9000",
                               "t0=9000&t1=9000", "t0=5", "sta=zz", "kinds=nope",
                               "t0=1&t1=" + "9" * 40])
def test_endpoint_refuses_bad_parameters(client, q):
    r = client.get("/api/export.pcapng?" + q)
    assert r.status_code == 400
    assert "error" in r.get_json()


def test_no_exporter_is_404(client):
    from flask import current_app
    with client.application.app_context():
        view = current_app.extensions["sniffsync.run"]
        ex, view.pcap = view.pcap, None
        try:
            assert client.get("/api/export.pcapng").status_code == 404
        finally:
            view.pcap = ex


# ---- the button, in chromium ---------------------------------------------------------------------

@pytest.mark.browser
def test_button_downloads_the_visible_range_as_pcapng(tmp_path):
    """The served UI (as `serve` builds it) zoomed to a range: the "pcapng" button downloads the
    frames of that range; tshark reads them with no complaint, as many as the input has there."""
    from urllib.parse import parse_qs, urlparse

    from browser_util import ARTIFACTS, browser_page, serve
    from sniffsync.cli.serve import make_view
    from sniffsync.pipeline.run import analyse
    from web import create_app
    view = make_view(analyse([str(A)]), "A")
    ts = _ns(EPOCHS.read_text().splitlines())
    t0_abs = view.meta()["t0_abs_ns"]
    a, b = 300_000_000, 400_000_000
    ARTIFACTS.mkdir(exist_ok=True)
    with serve(create_app(view)) as url, browser_page() as (page, errors):
        page.goto(url)
        page.wait_for_selector('#app[data-ready="1"]', timeout=15_000)
        page.evaluate(f"() => window.__sniffsync.tl.zoomTo({a}, {b})")
        with page.expect_download(timeout=30_000) as dl:
            page.click("#export-pcap")
        out = tmp_path / "ui.pcapng"
        dl.value.save_as(out)
        suggested = dl.value.suggested_filename
        asked = parse_qs(urlparse(page.evaluate("() => window.__sniffsync.pcap")).query)
        page.screenshot(path=str(ARTIFACTS / "export-pcap.png"))
        # the selection's filters go with it: untick the "data" kind
        page.click('fieldset[data-key="kinds"] input[value="data"]')
        with page.expect_download(timeout=30_000) as dl2:
            page.click("#export-pcap")
        out2 = tmp_path / "ui2.pcapng"
        dl2.value.save_as(out2)
        asked2 = parse_qs(urlparse(page.evaluate("() => window.__sniffsync.pcap")).query)
        assert errors == []
    kinds = tuple(asked2["kinds"][0].split(","))
    assert "data" not in kinds and "ack" in kinds
    rows = view.pcap.select(int(asked2["t0"][0]), int(asked2["t1"][0]), kinds=kinds)
    assert len(_read_back_ns(out2.read_bytes(), tmp_path)) == len(rows)
    q0, q1 = int(asked["t0"][0]), int(asked["t1"][0])
    assert abs(q0 - a) <= 1 and abs(q1 - b) <= 1
    assert suggested == f"sniffsync-{q0 // 1000}-{q1 // 1000}us.pcapng"
    want = ts[(ts >= t0_abs + q0) & (ts < t0_abs + q1)]
    got = _read_back_ns(out.read_bytes(), tmp_path)
    if TSHARK:
        rows, err = _tshark(out, "frame.time_epoch")
        assert err == []
        got = _ns(r[0] for r in rows)
    assert len(got) == len(want) > 0 and (got[0], got[-1]) == (want[0], want[-1])
