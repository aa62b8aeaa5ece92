"""Windows cost what the frames cost (issue 16): one frame stamped days or years late,
or mutated stamps, must not make ``fairness`` build a grid over the whole span.

Reproducers from the project's shared crashes (tests/data/crashes/README.md). The tests
count the windows computed (no timing). Oracles: a brute-force loop over the full grid
for :func:`data_windows`, and the hand-made reproducers' own content (20 frames of
1000 B, 2 ms apart, from 1700000000 s; frame 21 late).
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from sniffsync.cli.main import main
from sniffsync.decode.frames import read_capture, read_columns
from sniffsync.fairness import fairness
from sniffsync.fairness.core import Capture, fairness_tables
from sniffsync.fairness.windows import data_windows, window_starts
from frame_rows import DATA, MS

CRASHES = DATA / "crashes"
LATE = ["fair-hang-one-timestamp-7-days-later.pcap", "fair-hang-one-timestamp-60-days-later.pcap",
        "fair-MemoryError-one-timestamp-30-years-later.pcap"]
T0 = 1_700_000_000 * 10**9
RNG = np.random.default_rng(16)


@pytest.mark.parametrize("window_ms,step_ms", [(400, 200), (100, 250), (200, 200), (1000, 300)])
def test_data_windows_are_the_grid_windows_holding_an_event(window_ms, step_ms):
    w, s = window_ms * MS, step_ms * MS
    ts = np.concatenate([RNG.integers(0, 900 * MS, 30), RNG.integers(5000 * MS, 5300 * MS, 5), [-3 * MS]])
    t_last = int(ts.max())
    starts = window_starts(0, t_last, w, s)
    expect = [k for k, a in enumerate(starts) if ((ts >= a) & (ts < a + w)).any()]
    assert data_windows(ts, 0, t_last, w, s).tolist() == expect
    assert data_windows([ts[::2], ts[1::2]], 0, t_last, w, s).tolist() == expect     # a union of parts
    assert data_windows([ts[:3], ts[3:3]], 0, t_last, w, s).tolist() == \
        [k for k, a in enumerate(starts) if ((ts[:3] >= a) & (ts[:3] < a + w)).any()]
    assert data_windows(ts[:0], 0, 0, w, s).tolist() == [0]


def test_thirty_years_cost_two_windows():
    late = T0 + 30 * 365 * 86400 * 10**9
    ts = np.append(T0 + 2 * MS * np.arange(20), late)
    assert data_windows(ts, T0, late, 400 * MS, 200 * MS).tolist() == [0, (late - T0) // (200 * MS) - 1]


@pytest.mark.parametrize("name", LATE + ["fuzz-15943-fair-hang-window-explosion.pcap"])
def test_reproducer_gives_a_result_over_few_windows(name, tmp_path):
    out = tmp_path / "r.json"
    assert main(["fairness", str(CRASHES / name), "-o", str(out)]) == 0
    rep = json.loads(out.read_text())
    assert rep["summary"]["runs"][0]["windows_total"] <= 3 and len(rep["jain"]) <= 3
    if name in LATE:
        # 21 frames of 1000 B; the reader marks the late one ts_outlier (io/stamps.py), so it is
        # not trusted: 20 frames in one window (unflagged, it costs one more: the test above)
        assert rep["flows"][0]["goodput_bytes"] == 20000
        assert [j["goodput_bytes"] for j in rep["jain"]] == [20000]


@pytest.mark.parametrize("name,release", [(LATE[0], False), (LATE[1], True), (LATE[2], False)])
def test_flagged_outlier_is_ignored_pandas_and_numpy(name, release):
    # the reader may flag the late frame (bad == "ts_outlier"): then it is not analysed
    fr = read_capture(str(CRASHES / name))
    bad = ["ts_outlier" if i == len(fr) - 1 else None for i in range(len(fr))]
    fr["bad"] = pd.Categorical(bad)
    r = fairness(fr)
    assert r.flows["goodput_bytes"].tolist() == [20000] and r.summary["runs"][0]["windows_total"] == 1
    _, n, cols, marks = read_columns(str(CRASHES / name), 0, None, records=False)
    cap = Capture.from_columns(n, cols, marks + [(np.array([n - 1]), "ts_outlier")], release=release)
    runs, summary = fairness_tables([cap])
    assert runs[0]["flows"]["goodput_bytes"].tolist() == [20000]
    assert summary["runs"][0]["windows_total"] == 1


def test_origin_is_exact_to_the_nanosecond(tmp_path):
    # a float would give 1700000000.0 s: the grid would start 1 ns early
    out = tmp_path / "r.json"
    assert main(["fairness", str(CRASHES / LATE[0]), "--origin", "1700000000.000000001", "-o", str(out)]) == 0
    assert json.loads(out.read_text())["jain"][0]["start_ns"] == T0 + 1


@pytest.mark.parametrize("args,msg", [(["--step", "1e-9"], "steps long"), (["--window", "1e12"], "at most"),
                                      (["--window", "0.01", "--step", "0.0001"], "more than")])
def test_window_arguments_that_would_explode_give_one_line(args, msg, capsys, monkeypatch):
    # 1e-9 s steps (each frame in 4e8 windows) and 1e12 s windows (past int64 ns) are
    # refused; too many (flow, window) cells too (limit lowered to 1000 cells here:
    # ~5000 windows of 10 ms every 0.1 ms hold data on sniffer B, two flow directions)
    import sniffsync.fairness.core as core
    monkeypatch.setattr(core, "MAX_CELLS", 1000)
    cap = CRASHES / LATE[0] if msg != "more than" else DATA / "captures" / "ns3-11n-ht20-hidden-snifferB-nearSTA1.pcap"
    code = main(["fairness", str(cap), *args])
    err = capsys.readouterr().err
    assert code != 0 and msg in err and "Traceback" not in err
