"""The indexed range analysis equals the plain pandas reference (viz.analysis.analysis_data)
on random ranges of real runs: the ns-3 hidden-node sniffers merged (RTS/CTS collisions,
failed MPDUs, TCP flows) and the HE80 capture alone."""
import numpy as np
import pytest

from conftest import CAPTURES
from viz.analysis import analysis_data
from viz.analysis_index import AnalysisIndex

RUNS = {"hidden-merged": [f"ns3-11n-ht20-hidden-sniffer{s}.pcap" for s in ("A-nearAP", "B-nearSTA1", "C-nearSTA2")],
        "he80": ["ns3-11ax-he80-snifferA-s256.pcap"]}


@pytest.fixture(scope="module", params=list(RUNS))
def run(request):
    from sniffsync.pipeline.run import analyse
    return analyse([str(CAPTURES / f) for f in RUNS[request.param]])


def _ranges(run, n=40, seed=7):
    p = run.ppdus
    span = int(p["end_ns"].max() - p["start_ns"].min())
    rng = np.random.default_rng(seed)
    out = [(0, span + 1), (0, 1), (span, span + 1), (span // 2, span // 2 + 1)]
    for _ in range(n):
        a, b = np.sort(rng.integers(0, span + 1, 2))
        out.append((int(a), int(max(b, a + 1))))
    # edges on PPDU starts exactly (half-open ranges: a start at t1 is out)
    s = np.sort(p["start_ns"].to_numpy(np.int64) - int(p["start_ns"].min()))
    out += [(int(s[3]), int(s[40])), (int(s[10]), int(s[10]) + 1)]
    return out


def _canon(d):
    """Airtime share ties (equal busy time) may come in either order in the reference."""
    d = dict(d)
    if "airtime_share" in d:
        d["airtime_share"] = sorted(d["airtime_share"], key=lambda r: (-r["share_pct"], r["station"]))
    return d


def test_whole_run_is_the_reference(run):
    assert AnalysisIndex(run)() == analysis_data(run)


def test_ranges_equal_the_reference(run):
    idx = AnalysisIndex(run)
    checked = 0
    for t0, t1 in _ranges(run):
        ref = analysis_data(run, t0, t1)
        assert _canon(idx(t0, t1)) == _canon(ref), (t0, t1)
        checked += bool(ref.get("rts")) + bool(ref.get("events")) + bool(ref.get("airtime_share"))
    assert checked > 20                      # the ranges did hold stations, RTS and events


S = 1_000_000_000


@pytest.mark.parametrize("span_ns,bin_s", [(0, 1), (30 * S, 1), (30 * S + 1, 10), (1200 * S, 10),
                                           (1200 * S + 1, 60), (7200 * S, 60), (37 * 86_400 * S, 86_400),
                                           (3650 * 86_400 * S, 2_628_000)])
def test_failed_histogram_bins_bounded(span_ns, bin_s):
    from viz.analysis import MAX_BINS, failed_bin_ns
    assert failed_bin_ns(span_ns) == bin_s * S
    assert -(-span_ns // (bin_s * S)) <= MAX_BINS


def test_one_ppdu_days_late_costs_no_bars():
    """A PPDU stamped 37 days after the others (seen on a real pooled capture) used to give
    320,000 ten-second bars (5.7 MB of JSON); now at most MAX_BINS, and the index agrees."""
    from types import SimpleNamespace

    import pandas as pd
    from viz.analysis import MAX_BINS
    start = np.array([0, 1 * S, 2 * S, 37 * 86_400 * S], np.int64) + 10**18
    ppdus = pd.DataFrame({"start_ns": start, "end_ns": start + 100_000,
                          "ta": pd.array([1, 2, 1, 2], dtype="UInt64"), "kind": ["data", "rts", "data", "data"],
                          "n_mpdus": [2, 1, 3, 1], "mcs": pd.array([5, None, 7, 7], dtype="UInt8"),
                          "psdu_bytes": 100})
    events = pd.DataFrame({"kind": pd.Categorical(["mpdu_failed", "rts_unanswered"]),
                           "start_ns": start[[0, 1]], "ta": pd.array([1, 2], dtype="UInt64")})
    run = SimpleNamespace(ppdus=ppdus, events=events, fairness=None, sync_report=None, names=["A"])
    ref = analysis_data(run)
    h = ref["hist"]["failed_per_10s"]
    assert len(h["x"]) <= MAX_BINS and h["bin_s"] == 86_400 and sum(h["y"]) == 1
    idx = AnalysisIndex(run)
    for t0, t1 in [(0, 3 * S), (S, 37 * 86_400 * S + 1), (0, 1), (5 * S, 6 * S)]:
        assert idx(t0, t1) == analysis_data(run, t0, t1), (t0, t1)


def test_prefix_counts_equal_the_reference_on_many_stations_and_flows():
    """The prefix-count path of a plain range (airtime and RTS per station, histogram bars,
    events per kind and station, failed-MPDU bins, RTT per flow) against the pandas reference
    on a run with 12 stations, 8 flows and RTT samples unsorted within a flow's rows."""
    import importlib.util
    from pathlib import Path
    spec = importlib.util.spec_from_file_location(
        "bench_tiles", Path(__file__).resolve().parents[2] / "bench" / "bench_tiles.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    run = bench.synth_run(15_000, span_s=40, seed=3)
    run.fairness.rtt = run.fairness.rtt.sample(frac=1, random_state=1)       # rows out of time order
    idx = AnalysisIndex(run)
    assert not idx.rtt.sorted
    span = int(run.ppdus["end_ns"].max() - run.ppdus["start_ns"].min())
    rng = np.random.default_rng(11)
    for _ in range(8):
        a, b = np.sort(rng.integers(0, span + 1, 2))
        t0, t1 = int(a), int(max(b, a + 1))
        got, ref = _canon(idx(t0, t1)), _canon(analysis_data(run, t0, t1))
        assert got == ref, (t0, t1)
        assert sum(ref["hist"]["failed_per_10s"]["y"]) == ref["events"].get("mpdu_failed", 0)
    run.fairness.rtt = run.fairness.rtt.sort_values("ts_ns")                 # and the sorted path
    idx = AnalysisIndex(run)
    assert idx.rtt.sorted
    assert _canon(idx(span // 3, span // 2)) == _canon(analysis_data(run, span // 3, span // 2))
