"""Merge/sync scored against the simulator's clocks (``truth/clocks.json``).

Three sniffers on the hidden-node run with skewed clocks (+50 / -50 / +30 ppm, offsets of
about a second, 0.3 µs uniform jitter per PPDU, 2 % of frames missed). The true time of a
frame's stamp is its PPDU's true end (``captured_<sniffer>.csv`` ``true_end_ns``) read on
the reference sniffer's clock, ``round(t * (1 + ppm_A·1e-6)) + offset_A`` (the clock model
of docs/scenarios.md, without jitter): the common clock IS snifA's clock.
Duplicates: copies of one transmission share the true (ppdu, index).
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from sniffsync.sync.merge import merge
from sniffsync.sim import scenario, simulate

NAMES = ["snifA", "snifB", "snifC"]
CLOCKS = {"snifA": (50, 0), "snifB": (-50, 1_234_567_000), "snifC": (30, -987_654_000)}
ANCHORS = {"beacon": ("beacon",), "all": ("beacon", "ba", "unique")}


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    sets = []
    for n, (ppm, off) in CLOCKS.items():
        sets += [f"sniffers.{n}.ppm={ppm}", f"sniffers.{n}.offset_ns={off}",
                 f"sniffers.{n}.jitter_us=0.3", f"sniffers.{n}.miss=0.02"]
    out = tmp_path_factory.mktemp("sync")
    simulate(scenario("hidden-node", sets, seconds=2, seed=7), out)
    clk = json.loads((out / "truth" / "clocks.json").read_text())
    cap = {n: pd.read_csv(out / "truth" / f"captured_{n}.csv") for n in NAMES}
    return [str(out / f"{n}.pcap") for n in NAMES], clk, cap


def per_row(m, cap, col):
    s, f = m["sniffer"].to_numpy(np.int64), m["frame"].to_numpy(np.int64) - 1
    out = np.zeros(len(m), np.int64)
    for k, n in enumerate(NAMES):
        out[s == k] = cap[n][col].to_numpy(np.int64)[f[s == k]]
    return out


def ref_clock_ns(m, clk, cap):
    """The true PPDU-end instant of every row, read on the reference (snifA) clock."""
    a = clk["sniffers"]["snifA"]
    t = per_row(m, cap, "true_end_ns")
    return np.rint(t * (1 + a["ppm"] * 1e-6)).astype(np.int64) + a["offset_ns"], a


@pytest.fixture(scope="module", params=sorted(ANCHORS))
def merged(request, sim):
    paths, clk, cap = sim
    m = merge(paths, anchors=ANCHORS[request.param])
    return request.param, m.frames, m.report


def test_common_clock_error(merged, sim):
    """Common time (merged ``tsft_us``, the reference TSF) vs true time: µs rounding included."""
    _, clk, cap = sim
    label, m, _ = merged
    clock, a = ref_clock_ns(m, clk, cap)
    err = np.abs(m["tsft_us"].to_numpy(np.int64) * 1000 - (a["tsf_base_us"] * 1000 + clock))
    assert np.median(err) <= 1000 and np.percentile(err, 99) <= 2000, (label, np.median(err),
                                                                         np.percentile(err, 99))


def test_merged_ts_ns_error(merged, sim):
    """Merged ``ts_ns`` (epoch, capture clock of the reference) vs true time, ns resolution."""
    _, clk, cap = sim
    label, m, _ = merged
    clock, _ = ref_clock_ns(m, clk, cap)
    err = np.abs(m["ts_ns"].to_numpy(np.int64) - (clk["start_unix_ns"] + clock))
    assert np.median(err) <= 1000 and np.percentile(err, 99) <= 2000, (label, np.median(err),
                                                                         np.percentile(err, 99))


def pairs(counts):
    c = np.asarray(counts, np.int64)
    return int((c * (c - 1) // 2).sum())


def test_duplicates_and_conservation(merged, sim):
    paths, clk, cap = sim
    label, m, rep = merged
    n_in = sum(len(c) for c in cap.values())
    # zero frames lost: every input frame is one output row or one of its duplicates
    assert int(m["n_heard"].sum()) == n_in and rep["totals"]["conserved"]
    assert rep["totals"]["frames_out"] + rep["totals"]["duplicates_removed"] == n_in
    # copies kept: merged_id groups vs true (ppdu, index) groups, as pairs of copies
    k = merge(paths, anchors=ANCHORS[label], keep_duplicates=True).frames
    assert len(k) == n_in
    key = per_row(k, cap, "ppdu") * 1000 + per_row(k, cap, "index")
    df = pd.DataFrame({"g": k["merged_id"].to_numpy(), "t": key})
    tp = pairs(df.groupby(["g", "t"]).size())
    pred, true = pairs(df.groupby("g").size()), pairs(df.groupby("t").size())
    assert true > 10_000
    assert tp / pred >= 0.999 and tp / true >= 0.999, (label, tp, pred, true)
    # the deduplicated table holds one row per true transmission captured
    mk = per_row(m, cap, "ppdu") * 1000 + per_row(m, cap, "index")
    assert len(np.unique(mk)) == len(m) == len(np.unique(key))
