"""Coarse clock offsets (step 3 of :mod:`sniffsync.sync.clock`): offsets of hours from
frames matched by content alone, before any time gate.

Every pair of clocks gives the offsets ``d = t_b - t_a`` of its content matches. A key a
sniffer heard once (one of several retries, a replayed frame, another network's
look-alike) pairs other transmissions at offsets spread over the capture, so a pair's
offset is the median of its densest window, offsets are laid along the strongest links
first (a spanning tree from the reference) and only then solved jointly over the pairs
that agree: one least-squares solve over all pairs let a few wrong pairs pull every
clock by up to seconds (64 sniffers, each hearing 30 % of a run).
"""
from __future__ import annotations

import numpy as np

__all__ = ["coarse_offsets"]


def _pair_modes(p, dd, window_ns):
    """Per run of one clock pair in ``p`` (rows sorted by ``p``): the median of the
    densest ``window_ns`` of ``dd`` and how many rows fall in it. Keys that repeat (a
    retry a sniffer heard once, a replayed frame) pair other transmissions at offsets
    spread over the capture; the true offset is the one dense spot."""
    start = np.flatnonzero(np.r_[True, p[1:] != p[:-1]])
    med, count = [], []
    for a, b in zip(start, np.r_[start[1:], len(p)]):   # per pair of clocks: <= 64 * 63 / 2
        x = np.sort(dd[a:b])
        n_in = np.searchsorted(x, x + window_ns, side="right") - np.arange(len(x))
        k = int(n_in.argmax())
        med.append(x[k + n_in[k] // 2])
        count.append(n_in[k])
    return p[start], np.array(med, np.int64), np.array(count)


def coarse_offsets(ca, cb, d, nclk, ref, window_ns=2e6):
    """Joint per-clock offsets (int64 ns) from the densest ``d = t_b - t_a`` of each clock
    pair: first along the strongest links, then solved jointly over the pairs that agree
    with that within ``window_ns``."""
    pair = ca * nclk + cb
    small = pair.astype(np.int16) if nclk * nclk < 2**15 else pair   # int16: a radix sort
    order = np.argsort(small, kind="stable")
    pk, med, count = _pair_modes(pair[order], d[order], window_ns)
    a, b = pk // nclk, pk % nclk
    o = _tree_offsets(a, b, med, count, nclk, ref)
    for _ in range(3):                   # o_a - o_b = med (same instant), weights sqrt(count)
        e = med - (o[a] - o[b])          # int64: offsets of 1.7e18 ns have 256 ns steps in float
        keep = np.abs(e) <= window_ns
        o = o + np.rint(_solve_offsets(a[keep], b[keep], e[keep].astype(np.float64),
                                       np.sqrt(count[keep]), nclk, ref)).astype(np.int64)
    return o - o[ref]


def _tree_offsets(a, b, med, count, nclk, ref):
    """Offsets along the strongest links: from ``ref``, each step adds the clock whose
    pair with a placed clock has the most rows in its densest window (Prim's tree;
    one solve over all pairs would let a few wrong pairs pull every clock)."""
    o = np.zeros(nclk, np.int64)
    placed = np.zeros(nclk, bool)
    placed[ref] = True
    for _ in range(nclk - 1):            # per clock: <= a few hundred
        cut = placed[a] ^ placed[b]
        if not cut.any():
            break
        k = int(np.argmax(np.where(cut, count, -1)))
        if placed[a[k]]:
            o[b[k]], placed[b[k]] = o[a[k]] - med[k], True
        else:
            o[a[k]], placed[a[k]] = o[b[k]] + med[k], True
    return o


def _solve_offsets(a, b, med, w, nclk, ref):
    """Least squares of ``o_a - o_b = med`` (weights ``w``) with ``o_ref = 0``."""
    m = np.zeros((nclk, nclk))
    r = np.zeros(nclk)
    np.add.at(m, (a, a), w)
    np.add.at(m, (b, b), w)
    np.add.at(m, (a, b), -w)
    np.add.at(m, (b, a), -w)
    np.add.at(r, a, w * med)
    np.add.at(r, b, -w * med)
    m[ref, :] = 0
    m[ref, ref] = 1
    r[ref] = 0
    m[np.diag_indices(nclk)] += (np.diag(m) == 0)
    return np.linalg.lstsq(m, r, rcond=None)[0]   # a group of clocks cut off from ref: 0
