"""Windows, Jain's index, CDF, bufferbloat and cross-layer view (sniffsync.fairness).

Oracles: hand-computed windows and indices (worked in the comments), a slow obviously
correct Python loop against the vectorised window sums, and the CLI on the ns-3 captures.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from sniffsync.fairness.core import queue_delay
from sniffsync.fairness.frames import fairness
from sniffsync.fairness.windows import cdf_arrays, jain, summarize, window_quantiles, window_starts, window_sums
from frame_rows import CAPS, MS, make_frames

W, S = 400 * MS, 200 * MS


def udp(t_ms, nbytes, sport, ta=None, **kw):
    return dict({"t_ms": t_ms, "proto": 17, "len": nbytes, "sport": sport, "dport": 9, "ta": ta}, **kw)


def two_flows():
    # X: 1000 B every 100 ms from 0 to 700 ms.  Y: 2000 B at 0 and 400 ms, 1000 B at 600 ms.
    rows = [udp(100 * i, 1000, 1) for i in range(8)]
    rows += [udp(0, 2000, 2), udp(400, 2000, 2), udp(600, 1000, 2)]
    return make_frames(rows)


def test_two_flows_hand_computed_windows_and_jain():
    res = fairness(two_flows(), W, S)
    # t0 = 0, last data 700 ms -> windows start 0, 200, 400 ms ([400, 800) covers 700)
    assert list(res.jain["start_ns"]) == [0, 200 * MS, 400 * MS]
    g = res.windows.pivot(index="window", columns="flow", values="goodput_bytes")
    # X: 4 datagrams per window.  Y: [0,400) 2000 (400 excluded), [200,600) 2000 (600
    # excluded), [400,800) 2000 + 1000
    assert g[0].tolist() == [4000, 4000, 4000] and g[1].tolist() == [2000, 2000, 3000]
    # J = (4000+2000)^2 / (2 (4000^2+2000^2)) = 0.9; last: 7000^2 / (2 * 25e6) = 0.98
    assert np.allclose(res.jain["jain"], [0.9, 0.9, 0.98])
    assert res.windows.loc[res.windows["flow"] == 0, "goodput_bps"].tolist() == [80_000] * 3
    s = res.summary["runs"][0]
    assert s["windows"] == 3 and s["median"] == pytest.approx(0.9) and s["share_below_0.8"] == 0.0


def test_jain_equal_hog_three_flows():
    on = np.ones((4, 1), bool)
    assert jain(np.full((4, 1), 7.0), on)[0] == pytest.approx(1.0)
    assert jain(np.array([[5.0], [0], [0], [0]]), on)[0] == pytest.approx(0.25)     # 1/n
    assert jain(np.array([[1.0], [2], [3]]), np.ones((3, 1), bool))[0] == pytest.approx(36 / 42)
    # inactive units do not count: the hog alone is perfectly "fair"
    assert jain(np.array([[5.0], [0]]), np.array([[True], [False]]))[0] == pytest.approx(1.0)
    assert np.isnan(jain(np.zeros((2, 1)), on[:2])[0])


def test_inactive_flow_not_counted_and_idle_flow_counted():
    # Z sends only at 0 and 50 ms: active in [0,400) only.  X idles 250-550 ms inside its
    # span: it stays active and its zero goodput in [300..] windows lowers J.
    rows = [udp(0, 1000, 3), udp(50, 1000, 3)]
    rows += [udp(t, 1000, 1) for t in (0, 100, 200, 600, 700)]
    rows += [udp(t, 1000, 2) for t in range(0, 800, 100)]
    res = fairness(make_frames(rows), W, S)
    assert res.jain["n_active"].tolist() == [3, 2, 2]
    # window [200,600): X 1000, Y 4000 -> 25e6 / (2 * 17e6)
    assert res.jain["jain"][1] == pytest.approx(25 / 34)


def test_window_sums_match_slow_oracle():
    rng = np.random.default_rng(7)
    n, units = 5000, 6
    unit = rng.integers(0, units, n)
    ts = np.sort(rng.integers(0, 3_000_000_000, n))
    w = rng.integers(1, 1500, n).astype(float)
    for win, step in ((W, S), (300 * MS, 70 * MS), (100 * MS, 250 * MS)):
        starts = window_starts(int(ts.min()), int(ts.max()), win, step)
        fast = window_sums(unit, ts, w, units, starts, win)
        slow = np.zeros_like(fast)
        for i in range(n):                       # the obviously-correct loop
            for k, a in enumerate(starts):
                if a <= ts[i] < a + win:
                    slow[unit[i], k] += w[i]
        assert np.allclose(fast, slow)
        assert starts[-1] + win > ts.max()
        active = slow > 0
        for k in range(len(starts)):
            x = slow[active[:, k], k]
            ref = x.sum() ** 2 / (len(x) * (x * x).sum()) if len(x) else np.nan
            assert np.allclose(jain(slow[:, k:k + 1], active[:, k:k + 1])[0], ref, equal_nan=True)


def test_cdf_and_summary():
    c = cdf_arrays(np.array([0.9, 0.5, np.nan, 0.7, 1.0]))
    assert c["jain"].tolist() == [0.5, 0.7, 0.9, 1.0] and c["frac"].tolist() == [0.25, 0.5, 0.75, 1.0]
    s = summarize(np.array([0.5, 0.7, 0.9, 1.0]))
    assert s["median"] == pytest.approx(0.8) and s["share_below_0.8"] == 0.5
    assert s["p10"] == pytest.approx(0.56)           # numpy linear: 0.5 + 0.3 * 0.2


def test_queueing_delay_and_window_quantiles():
    # RTT 10 ms, then a standing queue: 70 ms at 300-390 ms -> queueing delay 60 ms
    ts = np.array([0, 100, 200, 300, 350, 390]) * MS
    rtt = {"fd": np.zeros(6, np.int64), "ts_ns": ts, "rtt_ns": np.array([10, 12, 10, 70, 70, 70]) * MS}
    q = queue_delay(rtt, 10_000 * MS)
    assert q["qdelay_ns"].tolist() == [0, 2 * MS, 0, 60 * MS, 60 * MS, 60 * MS]
    assert q["min_rtt_ns"].tolist() == [10 * MS, 10 * MS, 10 * MS, 10 * MS, 10 * MS, 10 * MS]
    starts = np.array([0, 200]) * MS
    qs = window_quantiles(ts, q["qdelay_ns"], starts, W)
    # window [0,400): 0,2,0,60,60,60 ms -> median 31 ms; window [200,600): 0,60,60,60 -> 60
    assert qs[0, 0] == pytest.approx(31 * MS) and qs[1, 0] == pytest.approx(60 * MS)


def test_cross_layer_airtime_share_and_why():
    # station 1: X, 1000 B every 100 ms, MCS 7, 1 ms PPDUs.  station 2: Y, 250 B every
    # 100 ms, every other one a MAC retry of a new MPDU, MCS 1, 6 ms PPDUs.
    rows, pp = [], []
    for i in range(8):
        rows.append(udp(100 * i, 1000, 1, ta=1, wseq=i, mcs=7))
        rows.append(udp(100 * i + 10, 250, 2, ta=2, wseq=i, mcs=1, retry=bool(i % 2)))
        pp += [(1, 100 * i * MS, 1 * MS), (2, (100 * i + 10) * MS - 6 * MS, 6 * MS)]
    ppdus = pd.DataFrame(pp, columns=["ta", "start_ns", "airtime_ns"])
    res = fairness(make_frames(rows, linktype=127), W, S, ppdus=ppdus)
    st = res.stations.set_index(["window", "ta"])
    # window 0 [0,400): station 1 4 x 1 ms, station 2 PPDUs starting at 4,104,204,304 ms
    assert st.loc[(0, 2), "airtime_share"] == pytest.approx(24 / 28)
    assert st.loc[(0, 2), "goodput_share"] == pytest.approx(1000 / 5000)
    assert st.loc[(0, 2), "mac_retry_rate"] == pytest.approx(0.5)
    # J goodput = (4000+1000)^2 / (2 (16e6 + 1e6)) = 0.735; J airtime = 28^2 / (2 (16+576))
    assert res.jain["jain"][0] == pytest.approx(25 / 34)
    assert res.jain["jain_airtime"][0] == pytest.approx(784 / 1184)
    why = res.jain["why"][0]
    assert why.startswith("station 00:00:00:00:00:02: 86% airtime, 20% goodput")
    assert "many MAC retries (50%)" in why and "low MCS (1 vs 7)" in why


def test_stamps_end_means_no_second_alignment(monkeypatch):
    # a merged table's stamps already mark PPDU ends (stamps="end"): its segments are not
    # moved again; a capture as read (the default) is aligned once, before the analysis
    import airtime.ppdu

    from sniffsync.errors import UsageError
    calls = []
    real = airtime.ppdu.align_to_ppdu_end
    monkeypatch.setattr(airtime.ppdu, "align_to_ppdu_end", lambda *a, **k: calls.append(1) or real(*a, **k))
    frames = make_frames([udp(100 * i, 1000, 1, ta=1, wseq=i, mcs=7) for i in range(4)], linktype=127)
    assert fairness(frames, W, S, stamps="end").summary["runs"][0]["cross_layer"]
    assert calls == []
    fairness(frames, W, S)
    assert calls == [1]
    with pytest.raises(UsageError):
        fairness(frames, W, S, stamps="start")


def test_bufferbloat_flag_on_busy_window():
    # one TCP flow, RTT grows from 5 ms to 105 ms in the second half; both windows busy
    rows = []
    for i in range(40):
        t = 10 * i
        rtt = 5 if t < 200 else 105
        rows.append({"t_ms": t, "seq": 1 + 1000 * i, "len": 1000})
        rows.append({"t_ms": t + rtt, "src": "10.0.0.2", "dst": "10.0.0.1", "sport": 5001,
                     "dport": 40000, "seq": 1, "ack": 1 + 1000 * (i + 1)})
    res = fairness(make_frames(rows), 200 * MS, 200 * MS, qdelay_threshold_ns=50 * MS)
    j = res.jain
    assert j["qdelay_p50_ns"][0] == 0 and j["qdelay_p95_ns"][1] == pytest.approx(100 * MS)
    assert j["bloat"].tolist() == [False, True]
    assert res.flows.loc[0, "rtt_min_ns"] == 5 * MS


def test_several_runs_one_cdf_each_and_cli(tmp_path):
    pytest.importorskip("sniffsync.decode.frames", reason="capture reader not built yet")
    caps = [os.path.join(CAPS, f"ns3-11n-ht20-hidden-sniffer{s}.pcap") for s in ("A-nearAP", "B-nearSTA1")]
    out = tmp_path / "r.json"
    p = subprocess.run([sys.executable, "-m", "sniffsync", "fairness", *caps, "--window", "0.2",
                        "--step", "0.1", "-o", str(out), "--csv", str(tmp_path / "csv")],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "Jain over" in p.stdout and "10.1.1.2:49153" in p.stdout
    rep = json.loads(out.read_text())
    assert {"summary", "flows", "windows", "jain", "cdf"} <= set(rep)
    assert sorted({c["run"] for c in rep["cdf"]}) == [0, 1]
    assert rep["summary"]["window_ns"] == 200 * MS and "jain" in rep["summary"]["definitions"]
    for name in ("flows.csv", "windows.csv", "rtt.csv"):
        assert (tmp_path / "csv" / name).stat().st_size > 100
    # both TCP flows + the UDP flow: 13.04 Mb/s uplink TCP at sniffer A (867840 B)
    flows = pd.DataFrame(rep["flows"])
    assert 867840 in set(flows.loc[flows["run"] == 0, "goodput_bytes"])


# The simulator-truth check lives in tests/fairness/test_truth_fairness.py.
