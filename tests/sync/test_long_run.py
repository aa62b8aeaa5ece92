"""The long-run generator (bench/make_long_run.py) and the streamed merge scored against it.

The generator's truth is checked against an independent numeric integral of its drift
knots; a shorter run is the start of a longer one (written chunk by chunk); 30 s of
three sniffers with different snap lengths (96/160/200: some frames cut at one sniffer,
whole at another) is merged, streamed and in one pass, and scored against the clocks the
generator applied: every transmission out once, the clock model within 0.5 µs.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
from bench_long_merge import score  # noqa: E402
from make_long_run import local_ns, make_truth, true_ns_of, write_run  # noqa: E402

from sniffsync.sync.merge import merge  # noqa: E402
from sniffsync.sync.snaplen import drop_cut_fcs, min_snaplen  # noqa: E402
from sniffsync.sync.stream import merge_to_file  # noqa: E402


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    d = tmp_path_factory.mktemp("long")
    truth = write_run(d, 30 / 3600, 3, 400, [160, 96, 200], seed=3, progress=False)
    return d, truth, [d / f for f in truth["files"]]


def test_truth_clock_is_the_integral_of_its_drift():
    c = make_truth(0.5, 1, 7, [160])["clocks"][0]
    t_s = np.arange(0, 1800.0, 0.5)                   # trapezoids of 0.5 s over the knots
    ppm = np.interp(t_s, np.arange(len(c["ppm"])) * c["knot_s"], c["ppm"])
    phase = np.r_[0, np.cumsum((ppm[1:] + ppm[:-1]) / 2 * 0.5e9 * 1e-6)]
    got = local_ns(c, t_s * 1e9) - c["offset_ns"] - t_s * 1e9
    assert np.abs(got - phase).max() < 5.0            # ns (the step's own error)
    assert np.ptp(ppm) > 10                           # a temperature swing, not a constant drift
    back = true_ns_of(c, local_ns(c, t_s * 1e9))
    assert np.abs(back - t_s * 1e9).max() < 1e-3


def test_a_shorter_run_is_the_start_of_a_longer_one(tmp_path):
    a = write_run(tmp_path / "a", 10 / 3600, 3, 400, [160], seed=5, progress=False)
    b = write_run(tmp_path / "b", 20 / 3600, 3, 400, [160], seed=5, progress=False)
    for f in a["files"]:
        short, long = (tmp_path / "a" / f).read_bytes(), (tmp_path / "b" / f).read_bytes()
        assert len(long) > 1.5 * len(short) and long.startswith(short)
    assert a["clocks"][1]["ppm"] == b["clocks"][1]["ppm"][:len(a["clocks"][1]["ppm"])]


def test_snap_lengths_read_and_fcs_dropped(run):
    d, truth, paths = run
    assert min_snaplen(paths) == 96
    import pandas as pd
    t = pd.DataFrame({"mpdu_len": [14, 1538], "fcs": pd.array([5, 6], "UInt32")})
    out = drop_cut_fcs(t.copy(), 96)
    assert out.fcs.isna().tolist() == [True, True]            # 14 + 128 > 96: may be cut
    assert drop_cut_fcs(t.copy(), 1 << 18).fcs.isna().tolist() == [False, False]


def test_streamed_merge_against_the_applied_clocks(run, tmp_path):
    d, truth, paths = run
    rep = merge_to_file(paths, tmp_path / "m.pcapng", window_s=10)
    assert rep["totals"]["frames_out"] == truth["transmissions"]       # every copy found
    s = score(tmp_path / "m.pcapng", truth)
    for name in truth["names"][1:]:
        assert s[f"model_err_frames_{name}"] > 50
        assert s[f"model_err_us_p50_p99_{name}"][1] < 0.5
    assert s["frame_err_us_p50_p99"][1] < 1.5           # + jitter 0.2 µs and µs rounding of copies
    assert json.loads(json.dumps(rep))["totals"]["conserved"]
    # each merged record keeps the caplen and orig_len of the copy written
    from sniffsync.io.bytecols import gather
    from sniffsync.io.capture import read_records
    from sniffsync.sync.mergedfile import epb_dtype
    m, dt = read_records(tmp_path / "m.pcapng"), epb_dtype(3)
    cap, wire = np.asarray(m.caplen, np.int64), np.asarray(m.wirelen, np.int64)
    at = np.asarray(m.data_off, np.int64) + cap + (-cap % 4)
    frame = gather(m.buf, at, dt.itemsize).reshape(-1, dt.itemsize).copy().view(dt).ravel()["frame"] - 1
    assert (cap < wire).sum() > 1000
    for s, p in enumerate(paths):
        r, mine = read_records(p), np.asarray(m.iface) == s
        assert (np.asarray(r.caplen)[frame[mine]] == cap[mine]).all()
        assert (np.asarray(r.wirelen)[frame[mine]] == wire[mine]).all()


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")
def test_generated_bytes_as_tshark_reads_them(run):
    """tshark (an independent dissector) reads the generated sniffer B (snaplen 96) as we do."""
    from sniffsync import read_capture
    d, truth, paths = run
    out = subprocess.run(["tshark", "-r", str(paths[1]), "-T", "fields", "-e", "frame.cap_len", "-e", "frame.len",
                          "-e", "radiotap.mactime", "-e", "wlan.fc.type_subtype", "-e", "wlan.seq"],
                         capture_output=True, text=True, check=True).stdout.split("\n")
    got = np.array([[int(v or "-1", 0) for v in line.split("\t")] for line in out if line])
    t = read_capture(paths[1], columns=["caplen", "wirelen", "tsft_us", "type_subtype", "seq"])
    assert len(got) == len(t) == truth["frames_in"][1]
    assert (got[:, 0] == t.caplen).all() and (got[:, 1] == t.wirelen).all()
    assert (got[:, 2] == t.tsft_us.to_numpy(np.int64)).all()
    assert (got[:, 3] == t.type_subtype).all()
    assert (got[:, 4] == t.seq.to_numpy(np.int64, na_value=-1)).all()


def test_one_pass_merge_finds_every_copy_too(run):
    d, truth, paths = run
    assert len(merge(paths, columns=[]).frames) == truth["transmissions"]


def test_tiled_fit_against_the_applied_clocks(run, tmp_path, monkeypatch):
    """Tiles of 8 s and a whole fit of 3000 anchor rows (sync/streamfit.py): the stitched
    clocks stay as close to the applied ones."""
    from sniffsync.sync import streamfit
    d, truth, paths = run
    monkeypatch.setattr(streamfit, "GLOBAL_ROWS", 3000)
    rep = merge_to_file(paths, tmp_path / "t.pcapng", window_s=10, tile_s=8)
    assert rep["fit_tiles"].startswith("4 tiles")
    assert rep["totals"]["frames_out"] == truth["transmissions"]
    s = score(tmp_path / "t.pcapng", truth)
    for name in truth["names"][1:]:
        assert s[f"model_err_us_p50_p99_{name}"][1] < 0.5
    # anchor rows spilled to disk past 500 per input and per tile (sync/streamspill.py):
    # pass 1 holds < 500 + a batch's (2048 frames: <= 2 anchor rows each), and the merged file is the same, byte for byte
    from sniffsync.sync import streamspill
    monkeypatch.setattr(streamspill, "SPILL_ROWS", 500)
    sizes = []
    merge_to_file(paths, tmp_path / "s.pcapng", window_s=10, tile_s=8, pass1_hook=sizes.append, batch_rows=2048)
    assert all(z["anchors_held"] < 500 + 2 * 2048 < z["anchors"] / 2 for z in sizes[0])
    assert (tmp_path / "s.pcapng").read_bytes() == (tmp_path / "t.pcapng").read_bytes()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".merge")]      # scratch removed


def test_sampled_anchors_against_the_applied_clocks(run, tmp_path):
    """One "unique" anchor in 4 fitted (sync/anchorsample.py, forced: this run is below the
    size where it starts): every transmission still out once, the clock model within 0.2 µs
    of the applied clocks (p99) as the fit on all anchors is, each frame within 0.2 µs of it."""
    from sniffsync.sync.merge import write_merged
    d, truth, paths = run
    got = {}
    for k in (1, 4):
        m = merge(paths, columns=[], anchor_sample=k)
        assert m.report["totals"]["anchor_sample"] == k
        assert len(m.frames) == truth["transmissions"]
        write_merged(tmp_path / f"k{k}.pcapng", m)
        got[k] = m.frames["ts_ns"].to_numpy(np.int64)
        s = score(tmp_path / f"k{k}.pcapng", truth)
        for name in truth["names"][1:]:
            assert s[f"model_err_us_p50_p99_{name}"][1] < 0.2, (k, name, s)    # 0.05-0.06 / 0.11 µs here
    assert np.percentile(np.abs(got[4] - got[1]), 99) < 200
