"""The per-flow and whole-run summaries of issue 14 on hand-worked runs: completion time,
goodput over the span with data outstanding, whole-run Jain with a starved flow, queueing
delay mean/max, efficiency. Oracles: the numbers worked in the comments."""
from __future__ import annotations

import numpy as np
import pytest

from sniffsync.campaign.summary import flow_summary, jain
from sniffsync.fairness.frames import fairness
from frame_rows import make_frames
from fairness.test_outstanding import A, B, S, W, _flow


def test_starved_flow_in_the_run_summary():
    # flow 1: 40 x 1000 B (10 ms .. 1960 ms), completed at 1970 ms. flow 2: 13 x 1000 B from
    # 10 ms, the last (600 ms) never ACKed: data outstanding to the capture's end, 1970 ms.
    rows = sorted(_flow(A, 1, 1960, 3000) + _flow(B, 2, 560, 3000, t_stall_ms=600), key=lambda r: r["t_ms"])
    fs = flow_summary(fairness(make_frames(rows), W, S)).set_index("sport")
    assert fs.loc[1, "fct_ms"] == 1970 and np.isnan(fs.loc[2, "fct_ms"])
    assert fs.loc[1, "active_mbps"] == pytest.approx(40000 * 8 / 1.96 / 1e6)
    assert fs.loc[2, "active_mbps"] == pytest.approx(13000 * 8 / 1.96 / 1e6)
    # over the activity span alone the two rates are nearly equal: 40000/1.95 s vs 13000/0.59 s ...
    assert jain(fs["goodput_mbps"]) > 0.97
    # ... over the outstanding span flow 2 is starved: (40 + 13)^2 / (2 (40^2 + 13^2)) = 0.7939
    assert jain(fs["active_mbps"]) == pytest.approx(53**2 / (2 * (40**2 + 13**2)))


def test_queueing_delay_mean_and_max_per_flow():
    # SYN -> SYN/ACK 10 ms, then segments every 50 ms from 20 ms, each ACKed 10 ms later except
    # the 4th (40 ms): RTT samples 10 (the SYN), 10, 10, 10, 40, 10 ms -> queueing delay over the
    # trailing minimum 0, 0, 0, 0, 30, 0: mean 5, max 30
    R = "10.0.0.9"
    back = {"src": R, "dst": A, "sport": 5001, "dport": 1}
    rows = [{"t_ms": 0, "src": A, "sport": 1, "dst": R, "seq": 0, "flags": 0x02},
            {"t_ms": 10, **back, "seq": 0, "ack": 1, "flags": 0x12}]
    for i in range(5):
        t = 20 + 50 * i
        rows.append({"t_ms": t, "src": A, "sport": 1, "dst": R, "seq": 1 + 1000 * i, "ack": 1, "len": 1000})
        rows.append({"t_ms": t + (40 if i == 3 else 10), **back, "seq": 1, "ack": 1001 + 1000 * i})
    rows.sort(key=lambda r: r["t_ms"])
    fs = flow_summary(fairness(make_frames(rows), W, S)).iloc[0]
    assert fs["rtt_samples"] == 6
    assert fs["qdelay_mean_ms"] == pytest.approx(5) and fs["qdelay_max_ms"] == pytest.approx(30)
