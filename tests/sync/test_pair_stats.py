"""The anchor pairs' summary of the merge report (sync/streamstats.py), tile by tile.

Synthetic anchor pairs (4 clocks of 3 sniffers, clusters of 2-3 copies, residuals spread
from 0.3 ns to 50 µs): counts and quantiles are checked against a brute force over the
pairs (every within-cluster pair enumerated by a Python loop), exactly for the one-fit
summary and within the histogram's resolution (0.54 %, 0.5 ns) for the tiled one, which
is summed over tiny tiles read back as the tiled fit leaves them.
"""
from __future__ import annotations

from itertools import combinations
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from sniffsync.sync.copies import default_gate
from sniffsync.sync.report import merge_report
from sniffsync.sync.retime import clock_errors
from sniffsync.sync.streamfit import tile_edges, tile_pair_stats
from sniffsync.sync.streamspill import AnchorSpill
from sniffsync.sync.streamstats import PairStats, pair_stats

KINDS = ["beacon", "ba", "unique"]
NAMES = ["A", "B", "C"]
SNIFFER = np.array([0, 1, 2, 2])         # clock -> sniffer (C has a second TSF segment)
TSFT = np.array([True, True, False, True])
REL, ABS_NS = 2 ** (1 / 128) - 1, 0.5    # the histogram's resolution


class _Model:
    """Clock model stand-in: common = local + offset; what the report reads of one."""

    def __init__(self):
        n = len(SNIFFER)
        self.offset = np.array([0, 5_000, -7_000, 123], np.int64)
        self.clocks = pd.DataFrame({"sniffer": SNIFFER, "segment": [0, 0, 0, 1], "tsft": TSFT,
                                    "frames": np.full(n, 100), "t0_ns": np.zeros(n, np.int64)})
        self.kind = np.where(TSFT, "tsft", "host")
        self.sigma_ns = np.array([300.0, 300.0, 20_000.0, 300.0])
        self.synced, self.reference = np.ones(n, bool), 0
        self.knots = [np.array([0.0, 1e9])] * n
        self.values = [np.zeros(2)] * n
        self.offset_ns = self.offset.astype(np.float64)
        self.via_host = np.full(n, -1)

    def apply(self, local, clock):
        return np.asarray(local, np.int64) + self.offset[np.asarray(clock, np.int64)]


@pytest.fixture(scope="module")
def pairs():
    """Rows (local time, clock) and star pairs per cluster, as sync's anchors table."""
    rng = np.random.default_rng(7)
    model = _Model()
    ra, rb, cid, local, clock = [], [], [], [], []
    for c in range(400):
        members = rng.choice(len(SNIFFER), rng.integers(2, 4), replace=False)
        t = 1_000_000 * c
        for k, m in enumerate(members):
            err = rng.choice([-1, 1]) * np.exp(rng.uniform(np.log(0.3), np.log(50_000)))
            local.append(t - model.offset[m] + (0 if k == 0 else int(round(err))))
            clock.append(m)
        base = len(local) - len(members)
        for k in range(1, len(members)):
            ra.append(base)
            rb.append(base + k)
            cid.append(c)
    local, clock, ra, rb = (np.array(x, np.int64) for x in (local, clock, ra, rb))
    n = len(ra)
    held = np.isin(np.array(cid) % 5, [0])
    used = ~held & (rng.random(n) < 0.9)
    ok = used | (held & (rng.random(n) < 0.8))
    common = model.apply(local, clock)
    p = pd.DataFrame({"row_a": ra, "row_b": rb, "clock_a": clock[ra], "clock_b": clock[rb],
                      "kind": pd.Categorical.from_codes(rng.integers(0, 3, n), KINDS),
                      "held_out": held, "used": used, "residual_ns": (common[rb] - common[ra]).astype(float),
                      "ok": ok, "cluster": np.array(cid, np.int64)})
    res = SimpleNamespace(model=model, anchors=p, common_ns=common, clock=clock, local_ns=local,
                          sigma_ns=model.sigma_ns)
    return res


def _tiled(res, n_tiles=7):
    """The same pairs as the tiled fit leaves them: per tiny tile (by cluster), local
    times of both rows, on disk-like pieces; then summed on the model."""
    p, local = res.anchors, res.local_ns
    parts = []
    cut = np.array_split(np.unique(p.cluster), n_tiles)
    for k, cl in enumerate(cut):
        q = p[p.cluster.isin(cl)]
        st = AnchorSpill(None, f"pairs{k}")
        st.add(q.drop(columns=["row_a", "row_b"]).assign(local_a=local[q.row_a], local_b=local[q.row_b]))
        parts.append(st)
    t = SimpleNamespace(model=res.model, anchors=None, pair_parts=parts, common_ns=np.zeros(0, np.int64),
                        clock=np.zeros(0, np.int64), local_ns=np.zeros(0, np.int64), sigma_ns=res.sigma_ns)
    tile_pair_stats(t, KINDS)
    return t


def _brute(res):
    """Per unordered pair of clocks: |Δ common| of every pair of kept copies in a cluster."""
    p, c = res.anchors, res.common_ns
    keep = p.used | (p.held_out & p.ok)
    out = {}
    for cid, g in p[keep].groupby("cluster", sort=True):      # a loop: the oracle, not the code
        rows = [int(g.row_a.iloc[0])] + [int(r) for r in g.row_b]
        held = [bool(g.held_out.iloc[0])] + list(g.held_out)
        for (i, ri), (j, rj) in combinations(enumerate(rows), 2):
            a, b = sorted((int(res.clock[ri]), int(res.clock[rj])))
            out.setdefault((a, b), []).append((abs(int(c[ri]) - int(c[rj])), held[i]))
    return out


def _close(got, want):
    for g, w in zip(got, want):
        assert abs(g - w) <= w * REL + ABS_NS / 1000 + 0.0015, (got, want)     # µs, printed to 3 decimals


def test_counts_exact_and_quantiles_within_resolution(pairs):
    res = pairs
    tiled = _tiled(res)
    ex, hi = pair_stats(res), tiled.pair_stats
    assert ex.exact and not hi.exact
    p = res.anchors
    for name in ("used", "held_ok", "held_bad", "pair_n", "pair_held"):
        assert (getattr(ex, name) == getattr(hi, name)).all(), name
    # per sniffer, against the pairs table directly
    rep_ex = merge_report(res, pd.DataFrame({"sniffer": np.zeros(0, np.int64), "signal_dbm": np.zeros(0)}),
                          np.zeros(0, np.int64), NAMES, KINDS, 3000.0, 0, False, np.zeros(0, np.int64),
                          host_us=np.zeros(3))
    rep_hi = merge_report(tiled, pd.DataFrame({"sniffer": np.zeros(0, np.int64), "signal_dbm": np.zeros(0)}),
                          np.zeros(0, np.int64), NAMES, KINDS, 3000.0, 0, False, np.zeros(0, np.int64),
                          host_us=np.zeros(3))
    sa, sb = SNIFFER[p.clock_a], SNIFFER[p.clock_b]
    for s, (a, b) in enumerate(zip(rep_ex["sniffers"], rep_hi["sniffers"])):
        touch = (sa == s) | (sb == s)
        sel = touch & p.held_out & p.ok
        want = np.percentile(np.abs(p.residual_ns[sel]) / 1000, [50, 95, 99]).round(3).tolist()
        assert a["heldout"]["abs_residual_us_p50_p95_p99"] == want
        _close(b["heldout"]["abs_residual_us_p50_p95_p99"], want)
        assert a["heldout"]["n"] == b["heldout"]["n"] == int(sel.sum())
        assert a["heldout"]["outliers"] == b["heldout"]["outliers"] == int((touch & p.held_out & ~p.ok).sum())
        for k, kind in enumerate(KINDS):
            n = int((touch & p.used & (p.kind == kind)).sum())
            assert a["anchors"][kind] == b["anchors"][kind] == n
    # per pair of clocks, against every within-cluster pair enumerated
    brute = _brute(res)
    assert len(rep_ex["pairs"]) == len(rep_hi["pairs"]) == len(brute)
    for a, b in zip(rep_ex["pairs"], rep_hi["pairs"]):
        key = tuple(sorted(int(np.flatnonzero(np.array(["A", "B", "C", "C#1"]) == n)[0]) for n in a["clocks"]))
        d = np.array([x for x, _ in brute[key]], float) / 1000
        h = np.array([y for _, y in brute[key]])
        assert a["anchors"] == b["anchors"] == len(d)
        assert a["heldout"] == b["heldout"] == int(h.sum())
        want = np.percentile(d, [50, 95]).round(3).tolist()
        assert a["abs_residual_us_p50_p95"] == want
        _close(b["abs_residual_us_p50_p95"], want)
        _close(b["heldout_abs_residual_us_p50_p95"], np.percentile(d[h], [50, 95]).round(3).tolist())


def test_gates_and_error_bounds_as_from_the_pairs(pairs):
    # brute force over the pairs: |residual| of the held-out, kept pairs between TSFT clocks
    res = pairs
    p = res.anchors
    ca, cb = p.clock_a.to_numpy(), p.clock_b.to_numpy()
    sel = p.held_out.to_numpy() & p.ok.to_numpy() & TSFT[ca] & TSFT[cb]
    r = np.abs(p.residual_ns.to_numpy())
    g = 2 * np.quantile(r[sel], 0.99)
    want = np.ceil(np.where(TSFT, 0.0, 3 * res.sigma_ns)).astype(np.int64)
    for c in np.flatnonzero(TSFT):
        want[c] = np.ceil(max(1000.0, np.quantile(r[sel & ((ca == c) | (cb == c))], 0.99)))
    hi = _tiled(res)
    assert default_gate(res, 3000.0) == max(3000.0, g) and default_gate(res, 0.0) == g
    assert abs(default_gate(hi, 0.0) - g) <= g * REL + 2 * ABS_NS     # read of res.pair_stats
    assert (clock_errors(res) == want).all()
    assert np.allclose(clock_errors(hi), want, rtol=REL, atol=1)


def test_histogram_edges():
    h = PairStats(2, KINDS, exact=False).res
    h.add(np.zeros(4, np.int64), np.array([0.2, 1.0, 1000.0, 2.0 ** 45]))
    q = h.quantiles([0], [0, 100 / 3, 200 / 3, 100])
    assert q[0] == 0.5 and abs(q[1] - 1) <= REL and abs(q[2] / 1000 - 1) <= REL and q[3] >= 2.0 ** 40
    assert h.quantiles([1], [50]) is None


def test_tiles_of_one_length():
    assert tile_edges(0, 32, 8).tolist() == [0, 8, 16, 24, 32]
    assert tile_edges(0, 30, 8).tolist() == [0, 8, 16, 23, 30]       # the rest shared by the last two
    assert tile_edges(0, 10, 8).tolist() == [0, 5, 10]
    assert tile_edges(0, 5, 8).tolist() == [0, 5]


def test_nan_values_are_left_out_not_binned():
    # a NaN has no bin: cast to an integer it would land in a wrong key's bins
    from sniffsync.sync.streamstats import Exact, LogHist
    key, v = np.array([0, 0, 1, 1, 1]), np.array([10.0, np.nan, 100.0, np.nan, -100.0])
    for stats in (LogHist(), Exact()):
        stats.add(key, v)
        assert stats.quantiles([5, 6], [50]) is None                  # no stray key
        assert stats.quantiles([1], [50]) == pytest.approx(100.0, rel=REL)
        assert stats.quantiles([0], [50]) == pytest.approx(10.0, rel=REL)
