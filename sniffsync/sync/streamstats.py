"""What the merge report and the copy gates read of the anchor pairs, summed tile by tile (issue 18).

The report gives per sniffer the anchor pairs used by kind, the held-out ones (and
outliers) and their |residual| p50/p95/p99; per pair of clocks the anchors they share and
|common time of one copy - of the other| p50/p95 (all, and held out); the copy gate is
2 x p99 of the held-out residuals between TSFT clocks, a TSFT clock's error bound the p99
of its own (``copies.default_gate``, ``retime.clock_errors``: they read the summary,
:func:`held_stats`). :class:`PairStats` keeps
just that: counts per pair of clocks (exact) and the values per pair of clocks, either
all of them (:class:`Exact`: one fit, the numbers as computed from the whole pairs table)
or in a log-spaced histogram of |value| in ns (:class:`LogHist`: the tiled fit, whose pairs
grow with the run). The histogram has :data:`BINS_PER_OCTAVE` bins per factor 2 from 1 ns
to 2^40 ns (one bin below 1 ns, read as 0.5 ns; values beyond 2^40 ns in the top bin); a
quantile is :func:`numpy.percentile`'s linear interpolation between the two order
statistics around it, each read at its bin's geometric centre: within 2^(1/128) - 1 =
0.54 % of the exact quantile (0.5 ns below 1 ns). Its size is that of the bins that hold
values (a few hundred per pair of clocks), whatever the length of the capture.
"""
from __future__ import annotations

import numpy as np

__all__ = ["PairStats", "Exact", "LogHist", "BINS_PER_OCTAVE", "pair_stats", "held_stats"]

BINS_PER_OCTAVE = 64
OCTAVES = 40                 # 1 ns .. 2^40 ns (18 min): far beyond any gate
NBINS = OCTAVES * BINS_PER_OCTAVE + 2
PAIR_SAMPLE = 2_000_000      # within-cluster pairs scored at once at most (64 sniffers: 2016 per frame)


def _bins(v) -> np.ndarray:
    v = np.asarray(v, np.float64)
    b = np.floor(np.log2(np.maximum(v, 1.0)) * BINS_PER_OCTAVE).astype(np.int64) + 1
    return np.where(v < 1.0, 0, np.minimum(b, NBINS - 1))


def _finite(key, v) -> tuple:
    """``(key, |v|)`` of the finite values only (a NaN has no bin and no rank)."""
    key, v = np.asarray(key, np.int64), np.abs(np.asarray(v, np.float64))
    ok = np.isfinite(v)
    return (key, v) if ok.all() else (key[ok], v[ok])


def _centre(b) -> np.ndarray:
    b = np.asarray(b, np.float64)
    return np.where(b == 0, 0.5, 2.0 ** ((b - 0.5) / BINS_PER_OCTAVE))


class Exact:
    """|values| per key, all kept: quantiles as :func:`numpy.percentile` of them."""

    def __init__(self):
        self.parts = []

    def add(self, key, v) -> None:
        self.parts.append(_finite(key, v))

    def quantiles(self, keys, pct, scale=1.0):
        v = np.concatenate([x[np.isin(k, keys)] for k, x in self.parts] or [np.zeros(0)])
        return np.percentile(v / scale if scale != 1.0 else v, pct) if len(v) else None


class LogHist:
    """Counts of |values| per (key, log-spaced bin), sparse: the bins that hold values."""

    def __init__(self):
        self.code, self.n = np.zeros(0, np.int64), np.zeros(0, np.int64)

    def add(self, key, v) -> None:
        key, v = _finite(key, v)
        code = np.r_[self.code, key * NBINS + _bins(v)]
        w = np.r_[self.n, np.ones(len(code) - len(self.code), np.int64)]
        self.code, inv = np.unique(code, return_inverse=True)
        self.n = np.bincount(inv.ravel(), w, minlength=len(self.code)).astype(np.int64)

    def quantiles(self, keys, pct, scale=1.0):
        m = np.isin(self.code // NBINS, keys)
        h = np.bincount(self.code[m] % NBINS, self.n[m], minlength=NBINS).astype(np.int64)
        n = int(h.sum())
        if not n:
            return None
        pos = np.asarray(pct, np.float64) / 100 * (n - 1)     # numpy's linear method
        lo = np.floor(pos)
        cum = np.cumsum(h)
        v_lo = _centre(np.searchsorted(cum, lo, side="right"))
        v_hi = _centre(np.searchsorted(cum, np.minimum(lo + 1, n - 1), side="right"))
        return (v_lo + (v_hi - v_lo) * (pos - lo)) / scale


class PairStats:
    """The anchor pairs' summary (module docstring). Keys: ``a * nclk + b`` of clock ids,
    ordered (a: the cluster's first copy) for the residuals, ``min, max`` for the pairs
    of clocks. ``exact``: all values kept, else :class:`LogHist`."""

    def __init__(self, nclk: int, kinds, exact: bool):
        self.nclk, self.kinds, self.exact = nclk, list(kinds), exact
        n2, mk = nclk * nclk, (Exact if exact else LogHist)
        self.used = np.zeros((n2, len(self.kinds)), np.int64)
        self.held_ok, self.held_bad = np.zeros(n2, np.int64), np.zeros(n2, np.int64)
        self.pair_n, self.pair_held = np.zeros(n2, np.int64), np.zeros(n2, np.int64)
        self.res, self.pair_all, self.pair_h = mk(), mk(), mk()   # |residual_ns|; |Δ common| ns

    def add(self, p, common_a, common_b) -> None:
        """Pairs ``p`` (``sync``'s anchors table: clocks, kind, used, held_out, ok,
        residual_ns, cluster; every pair of a cluster in one call) and the common time of
        each pair's two rows."""
        ca, cb, held, ok = self.add_held(p)
        used = p["used"].to_numpy(bool)
        kind = p["kind"].cat.codes.to_numpy(np.int64) if hasattr(p["kind"], "cat") else p["kind"].to_numpy(np.int64)
        np.add.at(self.used, (ca[used] * self.nclk + cb[used], kind[used]), 1)
        self._within_clusters(p["cluster"].to_numpy(np.int64), ca, cb, np.asarray(common_a), np.asarray(common_b),
                              used | (held & ok), held)

    def add_held(self, p) -> tuple:
        """The held-out pairs of ``p`` alone (counts, |residual|): what the copy gate and
        the clocks' error bounds read. Returns ``(clock_a, clock_b, held_out, ok)``."""
        n = self.nclk
        ca, cb = p["clock_a"].to_numpy(np.int64), p["clock_b"].to_numpy(np.int64)
        held, ok = p["held_out"].to_numpy(bool), p["ok"].to_numpy(bool)
        i = np.flatnonzero(held)                # a share of the pairs: the rest is not read
        key, good = ca[i] * n + cb[i], ok[i]
        self.held_ok += np.bincount(key[good], minlength=n * n)
        self.held_bad += np.bincount(key[~good], minlength=n * n)
        self.res.add(key[good], np.abs(p["residual_ns"].to_numpy(np.float64)[i[good]]))
        return ca, cb, held, ok

    def _within_clusters(self, cid, ca, cb, com_a, com_b, keep, held) -> None:
        """Every pair of copies inside one anchor cluster (kept pairs: used, or held out
        and inside the gate): the head (the first kept pair's ``a``) and the ``b`` rows."""
        cid, held = cid[keep], held[keep]
        ca, cb, com_a, com_b = ca[keep], cb[keep], com_a[keep], com_b[keep]
        first = np.unique(cid, return_index=True)[1]       # the head once per cluster
        cid = np.r_[cid[first], cid]
        clk, com, held = np.r_[ca[first], cb], np.r_[com_a[first], com_b], np.r_[held[first], held]
        o = np.argsort(cid, kind="stable")
        cid, clk, com, held = cid[o], clk[o], com[o], held[o]
        i, j, step = _cluster_pairs(cid, PAIR_SAMPLE)
        n = self.nclk
        ci, cj = clk[i], clk[j]
        key = np.minimum(ci, cj) * n + np.maximum(ci, cj)
        d = np.abs(com[i] - com[j])
        h = held[i]
        self.pair_n += np.bincount(key, minlength=n * n) * step
        self.pair_held += np.bincount(key[h], minlength=n * n) * step
        self.pair_all.add(key, d)
        self.pair_h.add(key[h], d[h])

    def keys_touching(self, clocks) -> np.ndarray:
        """Ordered keys with either clock in ``clocks`` (bool per clock)."""
        c = np.asarray(clocks, bool)
        return np.flatnonzero(c[:, None] | c[None, :])

    def pairs(self) -> np.ndarray:
        """Unordered keys of the pairs of clocks that share kept anchors, in order."""
        return np.flatnonzero(self.pair_n)


def _cluster_pairs(cid, n_max):
    """Index pairs (i, j), i < j, of rows in one cluster (rows sorted by ``cid``); when
    there are more than ``n_max``, those of every k-th cluster only."""
    start = np.flatnonzero(np.r_[True, cid[1:] != cid[:-1]]) if len(cid) else np.zeros(0, np.int64)
    size = np.diff(np.r_[start, len(cid)])
    total = int((size * (size - 1) // 2).sum())
    step = max(1, -(-total // n_max))
    pick = np.zeros(len(start), bool)
    pick[::step] = True
    rows = np.repeat(pick, size)
    pos = np.arange(len(cid)) - np.repeat(start, size)
    later = np.where(rows, np.repeat(size, size) - 1 - pos, 0)
    i = np.repeat(np.arange(len(cid)), later)
    j = i + 1 + (np.arange(len(i)) - np.repeat(np.cumsum(later) - later, later))
    return i, j, step


def pair_stats(res) -> PairStats:
    """``res.pair_stats`` (the tiled fit's, summed tile by tile), else the exact summary of
    ``res.anchors`` (one fit: the rows' common times ``res.common_ns``)."""
    st = getattr(res, "pair_stats", None)
    if st is not None:
        return st
    p = res.anchors
    st = PairStats(len(res.model.clocks), p.kind.cat.categories, exact=True)
    c = np.asarray(res.common_ns)
    st.add(p, c[p.row_a.to_numpy(np.int64)], c[p.row_b.to_numpy(np.int64)])
    return st


def held_stats(res) -> PairStats:
    """What the copy gate and the clocks' error bounds read: ``res.pair_stats`` (the tiled
    fit's), else the held-out pairs of ``res.anchors`` (one fit: exact; nothing else summed)."""
    st = getattr(res, "pair_stats", None)
    if st is not None:
        return st
    st = PairStats(len(res.model.clocks), (), exact=True)
    st.add_held(res.anchors)
    return st
