"""The clock model for imperfect sniffers (issue 18), against the clocks applied.

Every case gives the ns-3 hidden-node frames (one true clock) a sniffer clock of known
shape (``clockcases.sniffer``: offset, drift, ramp, jitter, TSF restart, window, no TSFT)
and scores the fit against it: the fitted drift against the ppm applied, and the model's
error at each frame's noise-free local time against its true time. Figures in
docs/merge.md ("Imperfect sniffers").
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import clockcases as cc
from sniffsync.errors import SyncError
from sniffsync.sync.clock import local_clocks, sync
from sniffsync.sync.report import pair_report

H = 3_600_000_000_000        # 1 h in ns


@pytest.fixture(scope="module")
def abc():
    return cc.read_hidden()


@pytest.fixture(scope="module")
def t5(abc):
    return [cc.tiled(a, 5, 1_100_000) for a in abc]            # 5.5 s of run


def _fit(parts, **kw):
    df, true_ns, clean = cc.build(parts)
    res = sync(df, **kw)
    assert len(res.common_ns) == len(df)                         # no frame dropped
    return df, res, np.abs(cc.model_error_ns(res, clean, true_ns)) / 1000


def _p99(err, res, c):
    return float(np.quantile(err[res.clock == c], 0.99))


@pytest.fixture(scope="module")
def host_case(t5):
    """C stamps frames with its host clock: no TSFT, 20 µs jitter per frame, -18 ppm."""
    return _fit([cc.sniffer(t5[0], 0, jitter_ns=300, seed=1),
                 cc.sniffer(t5[1], 1, offset_ns=H, ppm=40, jitter_ns=300, seed=2),
                 cc.sniffer(t5[2], 2, ppm=-18, host=True, jitter_ns=20_000, seed=3)])


def test_host_clock_drift_offset_and_own_noise(host_case):
    df, res, err = host_case
    assert list(res.kind) == ["tsft", "tsft", "host"]
    assert abs(cc.drift_ppm(res, 2) - (-18)) < 0.3 and abs(cc.drift_ppm(res, 1) - 40) < 0.1
    # the clock itself (offset + drift) is placed far below its 20 µs jitter
    assert _p99(err, res, 2) < 1.0 and _p99(err, res, 1) < 1.0
    # each clock's noise comes from its own residuals: 20 µs for the host clock, the
    # TSF's sub-µs for the others; its gate follows it
    assert 17_000 < res.sigma_ns[2] < 23_000
    assert (res.sigma_ns[:2] < 1_000).all() and (res.sigma_ns[:2] >= 250).all()
    assert res.gate_ns[2] > 20 * res.gate_ns[0]
    sig = res.frame_sigma_ns()
    assert (sig[(df.sniffer == 2).to_numpy()] == res.sigma_ns[2]).all()
    used = res.anchors[res.anchors.used]
    host_pairs = used[(used.clock_b == 2) | (used.clock_a == 2)]
    assert set(host_pairs.kind) == {"beacon", "ba", "unique"} and len(host_pairs) > 5000


def test_host_clock_residuals_are_its_jitter(host_case):
    df, res, err = host_case
    held = res.anchors[res.anchors.held_out & res.anchors.ok]
    h = held[(held.clock_b == 2)].residual_ns.abs()
    # |N(0, 20 µs)| has median 13.5 µs: the held-out residual is the jitter, not a bias
    assert 11_000 < h.median() < 16_000


def test_tsf_restarts_each_segment_synced(t5):
    df, res, err = _fit([cc.sniffer(t5[0], 0, jitter_ns=300, seed=1),
                         cc.sniffer(t5[1], 1, offset_ns=H, ppm=40, jitter_ns=300, reset_at=0.4, seed=2),
                         cc.sniffer(t5[2], 2, offset_ns=-H, ppm=-30, jitter_ns=300, reset_at=0.7, seed=3)])
    cl = res.model.clocks
    assert cl.sniffer.tolist() == [0, 1, 1, 2, 2] and cl.segment.tolist() == [0, 0, 1, 0, 1]
    assert res.model.synced.all()
    assert max(_p99(err, res, c) for c in range(5)) < 1.0
    for c, ppm in ((1, 40), (2, 40), (3, -30), (4, -30)):
        assert abs(cc.drift_ppm(res, c) - ppm) < 0.3


def test_64bit_tsf_wrap_is_one_clock(abc):
    # a TSF counter 0.5 s before 2**64 µs: read as int64 it passes -1 -> 0, no jump
    b, true_ns, clean = cc.sniffer(abc[1], 1, ppm=20, jitter_ns=300, seed=2)
    shift = -int(b.tsft_us.min()) - 500_000
    b["tsft_us"] = b.tsft_us + shift
    assert (b.tsft_us < 0).any() and (b.tsft_us >= 0).any()
    a = cc.sniffer(abc[0], 0, jitter_ns=300, seed=1)
    df, tn, cl_ = cc.build([a, (b, true_ns, clean + shift * 1000)])
    res = sync(df)
    assert len(res.model.clocks) == 2 and res.model.synced.all()
    err = np.abs(cc.model_error_ns(res, cl_, tn)) / 1000
    assert _p99(err, res, 1) < 1.0


def test_segment_with_too_few_anchors_says_so(abc):
    parts = [cc.sniffer(abc[0], 0, jitter_ns=300, seed=1),
             cc.sniffer(abc[1], 1, offset_ns=H, ppm=40, jitter_ns=300, reset_at=0.9995, seed=2)]
    df, true_ns, clean = cc.build(parts)
    with pytest.raises(SyncError, match=r"1 \(TSF segment 1, \d+ frames\)"):
        sync(df, via_host=False)
    res = sync(df, allow_unsynced=True, via_host=False)
    assert res.model.synced.tolist() == [True, True, False]
    short = res.clock == 2
    assert (res.common_ns[short] == res.local_ns[short]).all() and np.isinf(res.frame_sigma_ns()[short]).all()
    err = np.abs(cc.model_error_ns(res, clean, true_ns)) / 1000
    assert _p99(err, res, 1) < 1.0
    # by default the one-frame segment is placed through B's host clock (here exact)
    res = sync(df)
    assert res.model.synced.all() and res.model.via_host.tolist() == [-1, -1, 1]
    err = np.abs(cc.model_error_ns(res, clean, true_ns)) / 1000
    assert _p99(err, res, 2) < 1.0


def _reset_case(t5, resets, **kw):
    """B's TSF restarts at ``resets``; its host clock (+25 ppm, 20 µs mean latency) runs
    on. Beacons only (~10 per s): a segment of < 0.8 s has too few anchors of its own."""
    parts = [cc.sniffer(t5[0], 0, jitter_ns=300, seed=1),
             cc.sniffer(t5[1], 1, offset_ns=H, ppm=40, jitter_ns=300, reset_at=resets, seed=2,
                        host_ppm=25, host_latency_ns=20_000),
             cc.sniffer(t5[2], 2, offset_ns=-H, ppm=-30, jitter_ns=300, seed=3)]
    return _fit(parts, anchors=("beacon",), **kw)


def test_short_segment_after_reset_placed_via_host_clock(t5):
    # reload at 95 %: the last 275 ms (1522 frames, 2 beacons) on a new TSF
    df, res, err = _reset_case(t5, [0.95], allow_unsynced=True, via_host=False)
    assert res.model.synced.tolist() == [True, True, False, True]
    assert np.median(err[res.clock == 2]) > 1e6                 # before: its raw TSF, seconds off
    df, res, err = _reset_case(t5, [0.95])                       # no SyncError now
    m = res.model
    assert m.synced.all() and m.via_host.tolist() == [-1, -1, 1, -1]
    assert list(res.kind) == ["tsft", "tsft", "host", "tsft"]
    # sigma = the host line's per-frame residual scale, the placement (a median over
    # 1522 frames) is far better: stated wider than measured, never narrower
    assert 20_000 < res.sigma_ns[2] < 45_000
    assert _p99(err, res, 2) < 10 and _p99(err, res, 2) * 1000 < res.sigma_ns[2]
    assert max(_p99(err, res, c) for c in (1, 3)) < 1.0           # the fitted clocks unchanged
    assert abs(cc.drift_ppm(res, 2) - 40) < 1                     # the TSF's own slope
    assert (res.frame_sigma_ns()[res.clock == 2] == res.sigma_ns[2]).all()


def test_tsf_resets_several_times_short_segments_via_host(t5):
    df, res, err = _reset_case(t5, [0.3, 0.32, 0.6, 0.97])
    m = res.model
    assert m.clocks.sniffer.tolist() == [0, 1, 1, 1, 1, 1, 2]
    assert m.synced.all()
    placed = np.flatnonzero(m.via_host >= 0)
    assert placed.tolist() == [2, 5]                             # 110 ms and 165 ms segments
    assert set(m.clocks.sniffer[m.via_host[placed]]) == {1} and (m.fitted[m.via_host[placed]]).all()
    assert max(_p99(err, res, c) for c in placed) < 10
    assert max(_p99(err, res, c) for c in (1, 3, 4, 6)) < 1.0


def test_late_join_early_leave(t5):
    df, res, err = _fit([cc.sniffer(t5[0], 0, jitter_ns=300, seed=1),
                         cc.sniffer(t5[1], 1, offset_ns=H, ppm=40, jitter_ns=300, window=(0.3, 1.01), seed=2),
                         cc.sniffer(t5[2], 2, offset_ns=-H, ppm=-30, jitter_ns=300, window=(0, 0.6), seed=3)])
    assert res.model.synced.all() and max(_p99(err, res, c) for c in (1, 2)) < 1.0


def test_other_channel_kept_on_its_host_clock_never_synced(abc):
    from sniffsync import read_capture
    other = read_capture(cc.CAPS / "ns3-11ac-vht80-snifferA-s256.pcap", sniffer=2, columns=cc.COLUMNS)
    parts = [cc.sniffer(abc[0], 0, jitter_ns=300, seed=1),
             cc.sniffer(abc[1], 1, offset_ns=H, ppm=40, jitter_ns=300, seed=2),
             cc.sniffer(other, 2, ppm=20, host=True, jitter_ns=20_000, seed=9)]
    df, true_ns, clean = cc.build(parts)
    with pytest.raises(SyncError, match="cannot sync sniffer"):
        sync(df)
    res = sync(df, allow_unsynced=True)
    assert res.model.synced.tolist() == [True, True, False]
    d = (df.sniffer == 2).to_numpy()
    assert (res.common_ns[d] == df.ts_ns.to_numpy()[d]).all()      # its own (host) time
    # the same ns-3 addresses and sequence numbers match ~500 frames by content; ~30 of
    # them fall at one offset by chance, too few of the 500 for a copy of the run
    a = res.anchors
    assert not (((a.clock_a == 2) | (a.clock_b == 2)) & a.used).any()


@pytest.fixture(scope="module")
def chain(abc):
    """8 sniffers, each hearing 2/9 of a 9.9 s run: k shares frames with k-1 and k+1 only."""
    n = 8
    run = cc.tiled(abc[0], n + 1, 1_100_000)
    t0 = int(run.tsft_us.min())
    rng = np.random.default_rng(3)
    clocks = [(0, 0.0)] + [(int(rng.integers(-H, H)), float(rng.uniform(-50, 50))) for _ in range(n - 1)]
    parts = [cc.sniffer(run, k, offset_ns=o, ppm=p, jitter_ns=300, window=(k / (n + 1), (k + 2) / (n + 1)),
                        t0_us=t0, seed=300 + k) for k, (o, p) in enumerate(clocks)]
    df, res, err = _fit(parts)
    return df, res, err, clocks


def test_chain_of_8_synced_through_the_graph(chain):
    df, res, err, clocks = chain
    used = res.anchors[res.anchors.used]
    assert set(zip(used.clock_a, used.clock_b)) == {(k, k + 1) for k in range(7)}   # no A-C pair
    assert res.model.synced.all()
    p99 = [_p99(err, res, c) for c in range(8)]
    # the error does grow along the chain: each link adds its own estimation error (~1 s
    # of shared frames, ~360 PPDUs each), a random walk the joint fit cannot undo. Here
    # 0.85 µs (p99) one link away, 4.9 µs seven links away; weighting an A-MPDU's
    # anchors as one measurement (one jitter draw) cuts it: 7.2 µs before
    assert p99[1] < 1.0 and max(p99) < 6.0, p99
    for c, (o, p) in enumerate(clocks):
        assert abs(cc.drift_ppm(res, c) - p) < 1.0           # end knots of a piecewise fit


def test_pair_report_lists_only_pairs_that_share_anchors(chain):
    df, res, err, clocks = chain
    names = [f"s{k}" for k in range(8)]
    rep = pair_report(res, names)
    assert [r["clocks"] for r in rep] == [[f"s{k}", f"s{k + 1}"] for k in range(7)]
    for r in rep:
        assert r["anchors"] > 1000 and r["heldout"] > 200
        assert r["heldout_abs_residual_us_p50_p95"][0] < 1.0


@pytest.mark.parametrize("knot_s, worst_p99_us", [(1.0, 1.5), (1e6, None)])
def test_drift_ramp_followed_by_piecewise_not_linear(abc, knot_s, worst_p99_us):
    # B's drift ramps from +10 to -10 ppm over 10 s (a temperature change)
    run = [cc.tiled(a, 10, 1_100_000) for a in abc[:2]]
    df, res, err = _fit([cc.sniffer(run[0], 0, jitter_ns=300, seed=1),
                         cc.sniffer(run[1], 1, offset_ns=H, ppm=10, ppm_end=-10, jitter_ns=300, seed=2)],
                        knot_s=knot_s)
    if worst_p99_us:
        assert _p99(err, res, 1) < worst_p99_us
    else:                        # one line cannot follow it: its residual is the curvature
        assert _p99(err, res, 1) > 10
        assert res.sigma_ns[1] > 2_000


def test_local_clocks_host_kind_per_sniffer():
    df = pd.DataFrame({"sniffer": np.r_[np.zeros(3), np.ones(3)].astype(np.int16),
                       "ts_ns": np.arange(6, dtype=np.int64) * 1000,
                       "tsft_us": pd.array([1, 2, 3, None, None, None], dtype="Int64")})
    local, clock, clocks = local_clocks(df)
    assert clocks.tsft.tolist() == [True, False]
    assert (local[3:] == df.ts_ns.to_numpy()[3:]).all()


def _tsf_restart_pcap(src, dst, shift_us, restart_at):
    """``src`` with its radiotap TSFT shifted by ``shift_us`` and restarted at 1000 µs from
    record ``restart_at`` on (a driver reload). The ns-3 headers carry TSFT right after one
    present word (checked), so the field is bytes 8..16 of each record's data."""
    from sniffsync.io.capture import read_records
    from sniffsync.io.writers import write_pcap
    rec = read_records(src)
    start, cap = rec.data_off.astype(np.int64), rec.caplen.astype(np.int64)
    data = np.concatenate([rec.buf[o:o + c] for o, c in zip(start, cap)])
    off = np.r_[0, np.cumsum(cap)]
    present = data[off[:-1, None] + np.arange(4, 8)].copy().view("<u4")[:, 0]
    assert ((present & 1) == 1).all() and ((present >> 31) == 0).all()
    at = off[:-1, None] + np.arange(8, 16)
    tsft = data[at].copy().view("<i8")[:, 0]
    new = tsft + shift_us
    new[restart_at:] = tsft[restart_at:] - tsft[restart_at] + 1000
    data[at] = new.astype("<i8").view(np.uint8).reshape(-1, 8)
    write_pcap(dst, int(np.atleast_1d(rec.linktype)[0]), rec.ts_ns, data, off)
    return dst


def test_cli_merge_with_a_tsf_restart_every_segment_synced_no_copy_lost(tmp_path):
    import json
    from sniffsync.cli.main import main
    from sniffsync.sync.merge import merge
    b = _tsf_restart_pcap(cc.HIDDEN[1], tmp_path / "B.pcap", 3_600_000_000, 1500)
    rep = tmp_path / "sync.json"
    assert main(["merge", str(cc.HIDDEN[0]), str(b), str(cc.HIDDEN[2]), "-o", str(tmp_path / "m.pcapng"),
                 "--report", str(rep), "-q"]) == 0
    r = json.loads(rep.read_text())
    segs = r["sniffers"][1]["model"]
    assert [s["segment"] for s in segs] == [0, 1] and all(s["synced"] and s["sigma_us"] < 1 for s in segs)
    names = [s["name"] for s in r["sniffers"]]
    pairs = {tuple(p["clocks"]): p for p in r["pairs"]}
    for pair in ((names[0], "B"), (names[0], "B#1"), (names[0], names[2])):
        assert pairs[pair]["anchors"] > 300 and pairs[pair]["heldout_abs_residual_us_p50_p95"][1] < 2
    # the copies are found as on the undegraded inputs: same transmissions out
    plain = merge(cc.HIDDEN, columns=[]).report["totals"]
    assert r["totals"]["frames_out"] == plain["frames_out"] and r["totals"]["conserved"]


def test_64_sniffers_nobody_hears_everything(abc):
    # each hears a random 30 % of the frames in a random half of a 2.2 s run
    run = cc.tiled(abc[0], 2, 1_100_000)
    t0 = int(run.tsft_us.min())
    rng = np.random.default_rng(1)
    parts, heard = [], []
    for k in range(64):
        lo = rng.uniform(0, 0.5)
        sub = run.sample(frac=0.3, random_state=k).sort_index()
        parts.append(cc.sniffer(sub, k, offset_ns=int(rng.integers(-H, H)) if k else 0,
                                ppm=float(rng.uniform(-50, 50)) if k else 0.0, jitter_ns=300,
                                window=(lo, lo + 0.5), t0_us=t0, seed=k))
        heard.append(set(parts[-1][0].index.tolist()))            # the run's frames it heard
    df, res, err = _fit(parts)
    assert res.model.synced.all()
    assert max(_p99(err, res, c) for c in range(64)) < 1.0
    rep = pair_report(res, [str(k) for k in range(64)])
    listed = {tuple(map(int, r["clocks"])): r["anchors"] for r in rep}
    shared = {(a, b): len(heard[a] & heard[b]) for a in range(64) for b in range(a + 1, 64)}
    assert all(shared[p] > 0 for p in listed)                     # listed pairs do share frames
    assert all(p in listed for p, n in shared.items() if n >= 100)
    assert all(n <= shared[p] for p, n in listed.items())         # one anchor per shared frame at most


def test_tsft_on_some_frames_only(abc):
    # C's driver gives TSFT on a random half of its frames; every frame has a host stamp
    # (its own clock: +25 ppm, 20 µs jitter), the TSF runs -18 ppm
    c_tsf, true_ns, clean_tsf = cc.sniffer(abc[2], 2, ppm=-18, offset_ns=H, jitter_ns=300, seed=3)
    c_host, _, clean_host = cc.sniffer(abc[2], 2, ppm=25, host=True, jitter_ns=20_000, seed=4)
    no = np.random.default_rng(5).random(len(c_tsf)) < 0.5
    c = c_tsf.copy()
    c["ts_ns"] = c_host.ts_ns.to_numpy()
    c["tsft_us"] = c.tsft_us.mask(no)
    clean = np.where(no, clean_host, clean_tsf)
    df, tn, cl_ = cc.build([cc.sniffer(abc[0], 0, jitter_ns=300, seed=1),
                            cc.sniffer(abc[1], 1, offset_ns=H, ppm=40, jitter_ns=300, seed=2),
                            (c, true_ns, clean)])
    res = sync(df)
    cl = res.model.clocks
    assert cl.sniffer.tolist() == [0, 1, 2, 2] and list(res.kind) == ["tsft", "tsft", "tsft", "host"]
    assert res.model.synced.all() and len(res.common_ns) == len(df)
    err = np.abs(cc.model_error_ns(res, cl_, tn)) / 1000
    assert _p99(err, res, 2) < 1.0 and _p99(err, res, 3) < 3.0
    assert res.sigma_ns[2] < 1_000 and 15_000 < res.sigma_ns[3] < 25_000
    assert abs(cc.drift_ppm(res, 2) + 18) < 0.5 and abs(cc.drift_ppm(res, 3) - 25) < 5


def test_pcap_short_tsf_segment_merged_through_the_host_clock(tmp_path):
    # B's driver reloads 40 ms before its capture ends (its last 297 records, no beacon):
    # with beacon anchors that segment has none of its own. ns-3 stamps each record with
    # the true time (= its TSFT before the edit), which the merged times are scored on
    from sniffsync.sync.merge import merge
    b = _tsf_restart_pcap(cc.HIDDEN[1], tmp_path / "B.pcap", 3_600_000_000, 2650)
    m = merge([cc.HIDDEN[0], b, cc.HIDDEN[2]], anchors=("beacon",), columns=[], keep_duplicates=True)
    segs = m.report["sniffers"][1]["model"]
    assert [s["time"] for s in segs] == ["common", "host clock via segment 0"]
    assert segs[1]["frames"] == 297 and all(s["synced"] for s in segs)
    assert m.report["totals"]["host_placed_frames"] == 297 and m.report["totals"]["unsynced_frames"] == 0
    # its copies are recognised (before: 3957 out, its 297 frames twice)...
    plain = merge(cc.HIDDEN, anchors=("beacon",), columns=[])
    assert m.report["totals"]["transmissions"] == len(plain.frames)
    # ... and every B frame is at its true time (the record stamps of the original file)
    from sniffsync import read_capture
    true_ns = read_capture(cc.HIDDEN[1], columns=["ts_ns"]).ts_ns.to_numpy()
    f = m.frames[m.frames.sniffer == 1].sort_values("frame")
    late = f.frame.to_numpy() > 2650
    assert late.sum() == 297 and not f.unsynced.any()
    assert np.abs(f.ts_ns.to_numpy() - true_ns)[late].max() <= 1_000
    # the streamed merge places it the same way (over every frame, not only anchor rows)
    from sniffsync.sync.stream import merge_to_file
    rep = merge_to_file([cc.HIDDEN[0], b, cc.HIDDEN[2]], tmp_path / "s.pcapng", window_s=0.25, anchors=("beacon",))
    assert rep["sniffers"][1]["model"] == segs and rep["totals"]["frames_out"] == len(plain.frames)
    assert rep["totals"]["host_placed_frames"] == 297
