"""Sniffers that stamp PPDU starts and ones that stamp ends are merged on one instant.

ns-3 stamps the end of the PPDU. Turning sniffer B into a start-stamping sniffer (its
stamps moved back by each PPDU's airtime) must not change which copies merge, nor the
sync accuracy: the merge aligns every sniffer to PPDU ends first.
"""
from pathlib import Path

import numpy as np
import pytest

from airtime.ppdu import group_ppdus
from sniffsync.decode.frames import read_capture
from sniffsync.sync.merge import merge
from skew import skew

CAP = Path(__file__).parents[1] / "data" / "captures"
A = CAP / "ns3-11n-ht20-hidden-snifferA-nearAP.pcap"
B = CAP / "ns3-11n-ht20-hidden-snifferB-nearSTA1.pcap"


def _as_start_stamping(df):
    p, fp, _ = group_ppdus(df, tsft_at="end")
    air = np.maximum(p["airtime_ns"].to_numpy(np.int64)[fp], 0)
    out = df.copy()
    out["ts_ns"] = df["ts_ns"].to_numpy(np.int64) - air
    out["tsft_us"] = df["tsft_us"] - (air // 1000)
    return out


@pytest.fixture(scope="module")
def tables():
    a, b = read_capture(A), read_capture(B, sniffer=1)
    b_skewed, _ = skew(b, offset_us=3_600_000_000, ppm=40.0, seed=1)
    return a, b_skewed


def test_start_stamping_sniffer_merges_like_end_stamping(tables):
    a, b = tables
    ref = merge([a, b])
    got = merge([a, _as_start_stamping(b)])
    rep, rep_ref = got.report, ref.report
    assert rep["tsft_at"] == {"s0": "end", "s1": "start"}
    assert len(got.frames) == len(ref.frames)                     # same copies merged
    assert rep["totals"]["duplicates_removed"] == rep_ref["totals"]["duplicates_removed"] > 1000
    assert _p99(rep, 1) <= 2.0


def _p99(rep, s):
    return rep["sniffers"][s]["heldout"]["abs_residual_us_p50_p95_p99"][2]


def test_without_alignment_mixed_stamps_lose_microsecond_accuracy(tables):
    # the control: without aligning, each copy is off by its PPDU's airtime (28 us .. 5 ms),
    # so the fitted clock cannot be microsecond-true any more
    a, b = tables
    m = merge([a, _as_start_stamping(b)], tsft_at=None, allow_unsynced=True)
    assert m.stamps == "capture" and "tsft_at" not in m.report      # stamps left as captured
    assert _p99(m.report, 1) > 10.0


def test_group_ppdus_honours_merged_stamps():
    # the README's API path (group_ppdus(m.frames, stamps=m.stamps) with the default tsft_at) must
    # place PPDUs as the pipeline does: merged stamps are PPDU ends whatever the best copy's sniffer
    from airtime.detect import detect
    from sniffsync.pipeline.run import analyse
    C = CAP / "ns3-11n-ht20-hidden-snifferC-nearSTA2.pcap"
    m = merge([str(A), str(B), str(C)])
    assert m.stamps == "end"
    merged = m.frames
    p, fp, tsft_at = group_ppdus(merged, stamps=m.stamps)
    assert set(tsft_at.values()) == {"end"}
    ev = detect(merged, p, fp).events
    run = analyse([str(A), str(B), str(C)])
    assert ev["kind"].value_counts().to_dict() == run.events["kind"].value_counts().to_dict()
    assert (ev["kind"] == "mpdu_failed").sum() > 50
