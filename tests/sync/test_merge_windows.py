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
        assert got["anchors"]["ba"] < want["anchors"]["ba"]
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


# ---- pass 1 keeps O(clock segments + a bounded sample), not O(frames) (issue 18) ----

def _tables(seed=3, n=5000):
    """Two sniffers' frames as pass 1 sees them: stamps in capture order (a few swapped
    neighbours), TSFT on most frames, two TSF resets on sniffer 0, one on sniffer 1."""
    rng = np.random.default_rng(seed)
    out = []
    for s, resets in enumerate([(1200, 3900), (2500,)]):
        ts = 1_700_000_000_000_000_000 + np.cumsum(rng.integers(10_000, 900_000, n)).astype(np.int64)
        sw = rng.choice(n - 1, 20, replace=False)
        ts[sw], ts[sw + 1] = ts[sw + 1].copy(), ts[sw].copy()     # not quite in time order
        tsft = (ts - ts[0]) // 1000 + 5_000 + rng.integers(-2, 3, n)
        for k, r in enumerate(resets):
            tsft[r:] -= tsft[r] - 100 * (k + 1)                    # the TSF restarts near 0
        tsft[rng.random(n) < 0.1] = -1                             # some frames without TSFT
        out.append((ts, tsft))
    return out


def test_clocks_per_batch_are_local_clocks_of_the_whole_table():
    """Oracle: ``local_clocks`` (the one-pass merge's) on the concatenated table; pass 1
    feeds each input in batches and keeps runs, per-segment ranges and a sample."""
    from sniffsync.sync.clock import local_clocks
    from sniffsync.sync.streamclock import InputClocks, joint_clocks
    tabs = _tables()
    ins = [InputClocks(sample_cap=1 << 20) for _ in tabs]
    for inp, (ts, tsft) in zip(ins, tabs):
        for lo in range(0, len(ts), 700):                          # batches of 700 rows
            inp.add(ts[lo:lo + 700], tsft[lo:lo + 700])
        inp.finish()
    clocks, base, ts_lo, ts_hi = joint_clocks(ins)
    ts = np.concatenate([t for t, _ in tabs])
    tsft = np.concatenate([f for _, f in tabs])
    sn = np.repeat([0, 1], [len(t) for t, _ in tabs])
    local, clock, want = local_clocks(pd.DataFrame({"sniffer": sn, "ts_ns": ts,
                                                    "tsft_us": pd.arrays.IntegerArray(tsft, tsft < 0)}))
    assert len(want) == 3 + 2 + 2                                  # 3 + 2 TSF segments, 2 host clocks
    pd.testing.assert_frame_equal(clocks, want)
    got = np.concatenate([i.clock_of(0, f >= 0, b) for i, (_, f), b in zip(ins, tabs, base)])
    assert (got == clock).all()                                    # pass 2's clock per row
    assert (ts_lo == [ts[clock == c].min() for c in range(len(want))]).all()
    assert (ts_hi == [ts[clock == c].max() for c in range(len(want))]).all()
    assert [i.sizes()["runs"] for i in ins] == [3, 2]              # O(segments), not O(frames)
    assert (np.concatenate([i.sample[1] for i in ins]) == local).all()   # below the cap: every frame


def test_sample_is_bounded_and_thinned_by_row():
    from sniffsync.sync.streamclock import InputClocks
    ts, tsft = _tables()[0]
    inp = InputClocks(sample_cap=600)
    for lo in range(0, len(ts), 512):
        inp.add(ts[lo:lo + 512], tsft[lo:lo + 512])
    inp.finish()
    row = np.arange(0, len(ts), 16)
    assert inp.stride == 16 and len(inp.sample[0]) == len(row) and 300 < len(row) <= 600
    assert (inp.sample[0] == ts[row]).all()


def _doubled(src: str, dst: Path) -> None:
    """``src`` then ``src`` again, later by whole seconds (stamps and TSFT shifted alike)."""
    rec = read_records(src)
    buf = np.fromfile(src, np.uint8)
    off = np.asarray(rec.data_off, np.int64)
    second = buf[24:].copy()
    sec = buf[off[:, None] - 16 + np.arange(4)].copy().view("<u4")[:, 0]
    shift_s = int(sec.max() - sec.min()) + 2
    o = off - 24
    second[o[:, None] - 16 + np.arange(4)] = (sec + shift_s).astype("<u4").view(np.uint8).reshape(-1, 4)
    tsft = second[o[:, None] + 8 + np.arange(8)].copy().view("<u8")[:, 0]
    second[o[:, None] + 8 + np.arange(8)] = (tsft + np.uint64(shift_s * 1_000_000)).astype("<u8").view(
        np.uint8).reshape(-1, 8)
    np.concatenate([buf, second]).tofile(dst)


class _Stop(Exception):
    pass


def _pass1_sizes(paths, tmp_path, **kw):
    got = []

    def hook(sizes):
        got.append(sizes)
        raise _Stop                      # pass 1 is what is measured: no fit

    with pytest.raises(_Stop):
        merge_to_file(paths, tmp_path / "x.pcapng", window_s=1, hook=None, pass1_hook=hook, **kw)
    return got[0]


def test_pass1_keeps_the_same_per_input_sizes_for_twice_the_frames(case, tmp_path):
    """What pass 1 holds past the anchors (TSFT runs, clock segments, the stamp sample)
    does not grow with the capture: the inputs doubled in time give the same sizes."""
    two = []
    for s, p in enumerate(case["paths"]):
        _doubled(p, tmp_path / f"{s}.pcap")
        two.append(str(tmp_path / f"{s}.pcap"))
    cap = 3 * 1500
    one = _pass1_sizes(case["paths"], tmp_path, sample_cap=cap)
    dbl = _pass1_sizes(two, tmp_path, sample_cap=cap)
    n1 = [len(read_records(p).data_off) for p in case["paths"]]
    assert all(n > 1500 for n in n1)                                   # the sample is thinned
    for a, b in zip(one, dbl):
        assert a["runs"] == b["runs"] == 1 and a["segments"] == b["segments"] == 1
        assert 750 < a["sample"] <= 1500 and 750 < b["sample"] <= 1500
        assert b["anchors"] == 2 * a["anchors"]                        # anchors: O(anchors), capped apart


def _tsf_reset(src: str, dst: Path, at: float, jump_us: int) -> None:
    """``src`` with its TSFT moved by ``jump_us`` from the ``at`` share of its frames on
    (a driver reload: a new TSF clock; the host stamps go on)."""
    rec = read_records(src)
    buf = np.fromfile(src, np.uint8)
    off = np.asarray(rec.data_off, np.int64)[int(at * len(rec.data_off)):]
    tsft = buf[off[:, None] + 8 + np.arange(8)].copy().view("<u8")[:, 0]
    buf[off[:, None] + 8 + np.arange(8)] = (tsft + np.uint64(jump_us)).astype("<u8").view(np.uint8).reshape(-1, 8)
    buf.tofile(dst)


def test_streamed_merge_across_a_tsf_reset_is_the_one_pass_file(case, tmp_path):
    """A TSF reset in sniffer C, found per batch by pass 1 (the jump falls inside a run of
    small batches) and recomputed per row by pass 2: the one-pass file, byte for byte."""
    paths = list(case["paths"])
    _tsf_reset(paths[2], tmp_path / "C-reset.pcap", at=0.55, jump_us=3_000_000_000)
    paths[2] = str(tmp_path / "C-reset.pcap")
    whole = merge(paths, columns=[])
    segs = whole.report["sniffers"][2]["model"]
    assert [(m["clock"], m["synced"]) for m in segs] == [("tsft", True)] * 2     # two TSF clocks, both synced
    write_merged(tmp_path / "whole.pcapng", whole)
    sizes = []
    rep = merge_to_file(paths, tmp_path / "streamed.pcapng", window_s=0.5, batch_rows=700,
                        pass1_hook=sizes.append)
    assert [s["segments"] for s in sizes[0]] == [1, 1, 2] and sizes[0][2]["runs"] == 2
    assert rep["totals"]["frames_out"] == whole.report["totals"]["frames_out"]
    assert (tmp_path / "streamed.pcapng").read_bytes() == (tmp_path / "whole.pcapng").read_bytes()


def test_sampled_stamps_keep_the_merge(case, tmp_path):
    """Beyond ``sample_cap`` frames the epoch map is fitted on 1 in 2^k frames by row:
    same copies merged, times within 1 µs of the full fit's."""
    out = tmp_path / "sampled.pcapng"
    rep = merge_to_file(case["paths"], out, window_s=0.25, sample_cap=3000, batch_rows=1024)
    assert rep["frame_sample"].startswith("1/")
    from sniffsync.sync.mergedfile import read_merged
    a = read_merged(out, [], records=False).frames
    b = case["whole"].frames
    assert len(a) == len(b) and (a["merged_id"].to_numpy() == b["merged_id"].to_numpy()).all()
    assert np.abs(a["ts_ns"].to_numpy() - b["ts_ns"].to_numpy()).max() <= 1000


@pytest.mark.parametrize("linktype, n", [(127, 0), (1, 1)])     # no frames; Ethernet
def test_a_bad_input_is_one_error_as_in_the_one_pass_merge(case, tmp_path, linktype, n):
    import struct
    from sniffsync.errors import CaptureError
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, linktype)
                    + n * (struct.pack("<IIII", 1, 0, 60, 60) + bytes(60)))
    with pytest.raises(CaptureError) as one:
        merge([str(bad), case["paths"][1]], columns=[])
    with pytest.raises(CaptureError) as streamed:
        merge_to_file([str(bad), case["paths"][1]], tmp_path / "x.pcapng", window_s=1)
    assert str(streamed.value) == str(one.value) and str(bad) in str(one.value)
    assert not (tmp_path / "x.pcapng").exists() and len(list(tmp_path.iterdir())) == 1   # no scratch left
