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
