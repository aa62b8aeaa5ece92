"""Merging in time windows (sync/windows.py, sync/stream.py) gives the one-pass merge's file.

Inputs: the ns-3 hidden-node sniffers, B and C rewritten with their own clocks (offset,
drift, 0.3 µs jitter per PPDU), so copies of one transmission have different times. A
window edge is put inside the copies of an A-MPDU subframe heard by several sniffers,
so a transmission and an A-MPDU straddle it; small batches and a small margin make the
streamed merge drop rows as it goes.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sniffsync.errors import UsageError
from sniffsync.io.capture import read_records
from sniffsync.sync.merge import merge, write_merged
from sniffsync.sync.stream import merge_to_file

CAPS = Path(__file__).parents[1] / "data" / "captures"
NAMES = ["A-nearAP", "B-nearSTA1", "C-nearSTA2"]
CLOCKS = [None, dict(offset_us=1_000_123, ppm=40.0), dict(offset_us=2_000_777, ppm=-35.0)]
MARGIN_NS = 5_000_000
BATCH = 512


def _skewed_copy(src: Path, dst: Path, offset_us: int, ppm: float, seed: int) -> None:
    """``src`` with TSFT and record stamps on another clock (jitter 0.3 µs per PPDU).

    These ns-3 files have one radiotap present word with TSFT first: TSFT at +8."""
    rec = read_records(src)
    buf = np.fromfile(src, np.uint8)
    off = np.asarray(rec.data_off, np.int64)
    present = buf[off[:, None] + 4 + np.arange(4)].copy().view("<u4")[:, 0]
    assert ((present & 1) == 1).all() and ((present >> 31) == 0).all()
    true = buf[off[:, None] + 8 + np.arange(8)].copy().view("<u8")[:, 0].astype(np.int64)
    uniq, inv = np.unique(true, return_inverse=True)
    jit = np.random.default_rng(seed).normal(0, 0.3, len(uniq))[inv]
    local = np.maximum.accumulate(np.rint(true + offset_us + ppm * 1e-6 * true + jit).astype(np.int64))
    buf[off[:, None] + 8 + np.arange(8)] = local.astype("<u8").view(np.uint8).reshape(-1, 8)
    stamp = np.stack([local // 1_000_000, local % 1_000_000], 1).astype("<u4").view(np.uint8)
    buf[off[:, None] - 16 + np.arange(8)] = stamp.reshape(-1, 8)
    buf.tofile(dst)


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    d = tmp_path_factory.mktemp("win")
    paths = []
    for s, name in enumerate(NAMES):
        src = CAPS / f"ns3-11n-ht20-hidden-sniffer{name}.pcap"
        if CLOCKS[s] is None:
            paths.append(str(src))
            continue
        dst = d / f"{name}.pcap"
        _skewed_copy(src, dst, seed=s, **CLOCKS[s])
        paths.append(str(dst))
    whole = merge(paths, columns=[])
    write_merged(d / "whole.pcapng", whole)
    every = merge(paths, columns=[], keep_duplicates=True)
    copies = every.frames                                                 # every copy's time
    t = copies["ts_ns"].to_numpy(np.int64)
    t_lo = int(t.min())
    g = copies.groupby("merged_id")["ts_ns"]
    span = pd.DataFrame({"lo": g.min(), "hi": g.max(), "n": g.size(),
                         "ampdu": copies.groupby("merged_id")["ampdu_ref"].apply(lambda x: x.notna().all())})
    # an A-MPDU subframe heard by >= 2 sniffers at different times, > 6 margins in
    pick = span[(span.n >= 2) & (span.hi > span.lo + 20) & span.ampdu & (span.lo > t_lo + 6 * MARGIN_NS)].iloc[0]
    window_ns = (int(pick.hi) - t_lo) // 10      # the 10th window edge falls inside its copies
    return dict(dir=d, paths=paths, whole=whole, every=every, copies=copies, window_ns=window_ns, t_lo=t_lo,
                span=span)


def test_an_edge_cuts_copies_and_an_ampdu(case):
    """The precondition of the tests below: edges inside transmissions' copies."""
    w, t_lo, span = case["window_ns"], case["t_lo"], case["span"]
    k_lo, k_hi = (span.lo - t_lo) // w, (span.hi - t_lo) // w
    cut = span[k_lo != k_hi]
    assert len(cut) >= 1 and cut.ampdu.any()
    assert (case["copies"]["ts_ns"].max() - t_lo) // w >= 8          # many windows


def test_windowed_matching_is_the_one_pass_merge(case):
    got = merge(case["paths"], columns=[], window_s=case["window_ns"] / 1e9).frames
    pd.testing.assert_frame_equal(got, case["whole"].frames)


def test_streamed_merge_writes_the_same_file_in_bounded_memory(case):
    out = case["dir"] / "streamed.pcapng"
    held = []
    report = merge_to_file(case["paths"], out, window_s=case["window_ns"] / 1e9, margin_ns=MARGIN_NS,
                           batch_rows=BATCH, hook=held.append)
    assert out.read_bytes() == (case["dir"] / "whole.pcapng").read_bytes()
    assert report == case["whole"].report | {"tsft_at": report["tsft_at"]}
    # rows held at once: at most a window and its margins (plus the slack pulled ahead)
    # and the batches that reach into it -- not the capture
    t = np.sort(case["copies"]["ts_ns"].to_numpy(np.int64))
    reach = case["window_ns"] + 4 * MARGIN_NS
    busiest = int((np.searchsorted(t, t + reach) - np.arange(len(t))).max())
    n_in = report["totals"]["frames_in"]
    assert len(held) >= 8
    assert max(held) <= busiest + 2 * len(NAMES) * BATCH
    assert max(held) < n_in // 2


def test_streamed_keep_duplicates(case, tmp_path):
    out = tmp_path / "dup.pcapng"
    merge_to_file(case["paths"], out, window_s=0.25, keep_duplicates=True, batch_rows=1024)
    write_merged(tmp_path / "whole.pcapng", case["every"])
    assert out.read_bytes() == (tmp_path / "whole.pcapng").read_bytes()


def test_bad_window(case, tmp_path):
    with pytest.raises(UsageError):
        merge(case["paths"][:2], columns=[], window_s=0)
    with pytest.raises(UsageError):
        merge_to_file(case["paths"][:2], tmp_path / "x.pcapng", window_s=-1)


def test_sampled_anchors_keep_the_merge(case, tmp_path):
    """Beyond ``anchor_cap`` frames the fit sees 1 in k "unique" anchors, picked by
    content key so that every sniffer keeps the same transmissions: same copies
    merged, times within the copy gate of the full fit's."""
    out = tmp_path / "sampled.pcapng"
    rep = merge_to_file(case["paths"], out, window_s=0.25, anchor_cap=2000, batch_rows=1024)
    assert rep["anchor_sample"].startswith("1/")
    whole = case["whole"].report
    assert rep["totals"]["frames_out"] == whole["totals"]["frames_out"]
    for got, want in zip(rep["sniffers"][1:], whole["sniffers"][1:]):
        assert 0 < got["anchors"]["unique"] < want["anchors"]["unique"]
    from sniffsync.sync.mergedfile import read_merged
    a = read_merged(out, [], records=False).frames
    b = case["whole"].frames
    assert (a["merged_id"].to_numpy() == b["merged_id"].to_numpy()).all()
    assert np.abs(a["ts_ns"].to_numpy() - b["ts_ns"].to_numpy()).max() <= 1000


def test_command_line(case, tmp_path):
    from sniffsync.cli.main import main
    two = case["paths"][:2]
    assert main(["merge", *two, "-q", "-o", str(tmp_path / "a.pcapng")]) == 0
    assert main(["merge", *two, "-q", "-o", str(tmp_path / "b.pcapng"), "--window-s", "0.3"]) == 0
    assert (tmp_path / "a.pcapng").read_bytes() == (tmp_path / "b.pcapng").read_bytes()
    assert main(["merge", *two, "-q", "--window-s", "0.3"]) == 2                       # needs -o
    assert main(["merge", str(tmp_path / "a.pcapng"), case["paths"][2], "-q", "--window-s", "1",
                 "-o", str(tmp_path / "c.pcapng")]) == 2                                  # a merged input
