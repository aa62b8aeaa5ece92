"""The joint piecewise-linear clock fit of :mod:`sniffsync.sync.clock` (step 4 of its algorithm).

Every clock ``c`` maps local ``t`` to ``t + o_c + g_c(t)``, ``g_c`` piecewise linear in a
hat basis over knots relative to the clock's start; the reference clock has ``g = 0``.
One weighted least-squares system over all anchor pairs and clocks (normal equations
summed per pair of knot intervals) with a second-difference penalty, refitted after a
MAD rejection of residuals.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from sniffsync import runtime
from sniffsync.sync.order import order_by

__all__ = ["ClockModel", "clock_sigma", "epoch_map"]

SIGMA_FLOOR_NS = 250.0        # a 1 µs stamp alone is ±0.29 µs (uniform rounding)


def _clock_parts(cc: np.ndarray):
    """``(clock, rows)`` per clock present in ``cc``: slices of runs when the rows come
    grouped by clock (a few runs: no masks or gathers), else index arrays."""
    cut = np.flatnonzero(cc[1:] != cc[:-1]) + 1
    if len(cut) < 64:
        return [(int(cc[a]), slice(a, b)) for a, b in zip(np.r_[0, cut], np.r_[cut, len(cc)])]
    return [(c, np.flatnonzero(cc == c)) for c in np.flatnonzero(np.bincount(cc))]


def _left(k, x):
    """Index of the knot left of ``x`` (``searchsorted`` right - 1), clipped to ``0..len-2``."""
    return np.clip(np.searchsorted(k, x, side="right") - 1, 0, max(len(k) - 2, 0))


@dataclass
class ClockModel:
    """Fitted map local -> common for every clock: ``t + offset_ns + g(t)``."""
    clocks: pd.DataFrame                 # per clock: sniffer, segment, tsft, t0_ns, t1_ns, ...
    offset_ns: np.ndarray                # int64 per clock (coarse offset)
    knots: list                          # per clock: float64 local knot times (relative to t0)
    values: list                         # per clock: float64 g at knots (ns)
    synced: np.ndarray                   # bool per clock
    sigma_ns: np.ndarray                 # per clock: sd (ns) of one frame's stamp about the model,
                                         # estimated from its anchors' residuals (prior if none)
    reference: int                       # reference clock id
    via_host: np.ndarray | None = None   # per clock: -1, or placed through its sniffer's host
                                         # clock, tied by this fitted clock (sync/viahost.py)

    def __post_init__(self):
        if self.via_host is None:
            self.via_host = np.full(len(self.clocks), -1, np.int64)

    @property
    def kind(self) -> np.ndarray:
        """Per clock: ``"tsft"`` (radiotap TSF, fitted on anchors) or ``"host"`` (capture
        timestamps, or a TSF segment placed through its sniffer's host clock)."""
        return np.where(self.clocks.tsft.to_numpy(bool) & (self.via_host < 0), "tsft", "host")

    @property
    def fitted(self) -> np.ndarray:
        """Per clock: synced on its own anchors (not placed through the host clock)."""
        return self.synced & (self.via_host < 0)

    def apply(self, local_ns: np.ndarray, clock: np.ndarray) -> np.ndarray:
        """Common time (int64 ns) of local times; unsynced clocks keep their local time."""
        clock = np.asarray(clock, np.int64)
        local_ns = np.asarray(local_ns, np.int64)
        out = local_ns + self.offset_ns[clock]
        g = np.empty(len(out))
        t0 = self.clocks.t0_ns.to_numpy(np.int64)
        for c, r in _clock_parts(clock) if len(clock) else ():
            g[r] = _interp(self.knots[c], self.values[c], local_ns[r] - t0[c])
        out += np.rint(g).astype(np.int64)
        return np.where(self.synced[clock], out, local_ns)


def _interp(knots, values, x):
    """Piecewise-linear with linear extrapolation beyond the end knots."""
    if len(knots) == 1:
        return np.full(len(x), values[0])
    j = _left(knots, x)
    f = (x - knots[j]) / (knots[j + 1] - knots[j])
    return values[j] * (1 - f) + values[j + 1] * f


def _global_basis(knots, base, cc, tt):
    """Per row: global column of the knot left of ``tt`` on clock ``cc`` and the hat weight
    of the knot right of it (0 on a one-knot clock)."""
    cc = np.asarray(cc, np.int64)
    jj, ff = np.zeros(len(cc), np.int64), np.zeros(len(cc))
    for c, r in _clock_parts(cc) if len(cc) else ():
        k, t = knots[c], tt[r]
        j = _left(k, t)
        jj[r] = j
        if len(k) > 1:
            ff[r] = (t - k[j]) / (k[j + 1] - k[j])
    return np.asarray(base)[cc] + jj, ff


def _solve(ja, fa, jb, fb, y, w, knots, base, ref, reg_sigma_ns):
    """Flat knot values of all clocks from rows given by their hat-basis columns/weights."""
    u = base[-1]
    # Rows sharing one (knot interval of a, knot interval of b) add to the same 4 x 4 block
    # of the normal matrix: the row's coefficients are c = T v, v = (1, fa, fb), so the
    # block is T (sum w v v') T'. Moments are summed per interval pair (bincount over
    # u * u pairs), then blocks are built per pair, not per row.
    pair = ja * u + jb
    cnt = np.bincount(pair, minlength=u * u)
    nz = np.flatnonzero(cnt)
    gi = (np.cumsum(cnt > 0) - 1)[pair]
    del cnt, pair
    v = (np.ones_like(fa), fa, fb)
    mom = np.stack([np.bincount(gi, weights=w * v[i] * v[k], minlength=len(nz))
                    for i in range(3) for k in range(3)], 1).reshape(-1, 3, 3)
    del gi, v
    T = np.array([[1.0, -1, 0], [0, 1, 0], [-1, 0, 1], [0, 0, -1]])
    blk = np.einsum("ij,gjk,lk->gil", T, mom, T)
    ia, ib = nz // u, nz % u
    idx = np.stack([ia, np.minimum(ia + 1, u - 1), ib, np.minimum(ib + 1, u - 1)], 1)
    p = (idx[:, :, None] * u + idx[:, None, :]).reshape(len(nz), 16)
    normal = np.bincount(p.ravel(), weights=blk.ravel(), minlength=u * u).reshape(u, u)
    # right-hand side: per row, coefficients (1-fa, fa, fb-1, -fb) * w y on 4 columns,
    # added in row order a block at a time (np.add.at: the same sums as one bincount)
    rhs = np.zeros(u)
    block = 1 << 17
    for a in range(0, len(ja), block):   # per block of rows: bounded temporaries
        b = slice(a, a + block)
        cols = np.stack([ja[b], np.minimum(ja[b] + 1, u - 1), jb[b], np.minimum(jb[b] + 1, u - 1)], 1)
        coef = np.stack([1 - fa[b], fa[b], fb[b] - 1, -fb[b]], 1) * (w[b] * y[b])[:, None]
        np.add.at(rhs, cols.ravel(), coef.ravel())
    fixed = np.zeros(u, bool)
    fixed[base[ref]:base[ref + 1]] = True
    normal[fixed], normal[:, fixed], rhs[fixed] = 0.0, 0.0, 0.0   # the reference's g is 0
    normal += _smoothness(knots, base, ref, reg_sigma_ns)
    diag = np.diag(normal).copy()
    normal[np.diag_indices(u)] += 1e-9 * diag.max() + fixed * 1.0 + (diag == 0)
    sol = np.linalg.solve(normal, rhs)
    sol[fixed] = 0.0
    return sol


def _smoothness(knots, base, ref, reg_sigma_ns):
    """Normal-matrix part of a second-difference penalty (slope change per knot)."""
    u = base[-1]
    rows_i, rows_w = [], []
    for c, k in enumerate(knots):        # loop over clocks, not frames
        if len(k) < 3 or c == ref:
            continue
        h = float(np.diff(k).mean())
        d = base[c] + np.arange(len(k) - 2)
        rows_i.append(np.stack([d, d + 1, d + 2], 1))
        rows_w.append(np.full(len(d), 1.0 / (reg_sigma_ns * h / 1e9) ** 2))
    if not rows_i:
        return np.zeros((u, u))
    idx, w = np.concatenate(rows_i), np.concatenate(rows_w)
    v = np.array([1.0, -2.0, 1.0])
    p = (idx[:, :, None] * u + idx[:, None, :]).ravel()
    wv = (w[:, None, None] * (v[:, None] * v[None, :])[None]).ravel()
    return np.bincount(p, weights=wv, minlength=u * u).reshape(u, u)


class _Pairs:
    """Anchor pairs as arrays: clocks, local times, rhs y, kind, cluster id, and ``share``:
    1 / the number of pairs with the same two stamps (the subframes of one A-MPDU share
    one stamp, so one draw of its jitter: together they weigh as one measurement), and
    ``weight`` (per pair or None): how many pairs it stands for (:mod:`.anchorsample`)."""

    def __init__(self, i, j, a_clock, a_local, a_kind, cid, offset, rows, share=True, ex=None, weight=None):
        self.ra, self.rb = rows[i], rows[j]
        self.weight = None if weight is None else weight[i]     # both rows share the key
        self.ca, self.cb = a_clock[i], a_clock[j]
        self.ta, self.tb = a_local[i], a_local[j]
        self.kind, self.cid = a_kind[i], cid[i]
        self.y = ((self.tb + offset[self.cb]) - (self.ta + offset[self.ca])).astype(np.float64)
        # on ``ex`` (a pool) when given: the fit's set-up runs meanwhile, the weights wait
        self._share = 1.0 if not share else (ex or runtime.Inline).submit(_share, self.ca, self.ta,
                                                                         self.cb, self.tb)

    @property
    def share(self):
        """Per pair (or 1.0): its weight's share."""
        if hasattr(self._share, "result"):
            self._share = self._share.result()
        return self._share


def _share(ca, ta, cb, tb) -> np.ndarray:
    """1 / size of each pair's group of equal (clocks, stamps), found by a 64-bit hash."""
    if len(ca) == 0:
        return np.ones(0)
    with np.errstate(over="ignore"):
        h = ta.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        h ^= (tb.astype(np.uint64) + (ca.astype(np.uint64) << np.uint64(48))) * np.uint64(0xC2B2AE3D27D4EB4F)
        h ^= cb.astype(np.uint64) << np.uint64(56)
    order = order_by(h)
    hs = h[order]
    start = np.flatnonzero(np.r_[True, hs[1:] != hs[:-1]])
    count = np.diff(np.r_[start, len(hs)])
    out = np.empty(len(h))
    out[order] = 1.0 / np.repeat(count, count)
    return out


def _robust_fit(P, clocks, sigma, knots, ref, ok, floor_ns, reg_sigma_ns, iters=8):
    """Fit on rows ``ok``; reject |residual| > max(5 robust sigma, floor) and refit."""
    t0, base = clocks.t0_ns.to_numpy(np.int64), np.cumsum([0] + [len(k) for k in knots])
    u = base[-1]
    # hat-basis columns and weights of every pair, once: fits and residuals reuse them
    (ja, fa), (jb, fb) = (_global_basis(knots, base, c, (t - t0[c]).astype(np.float64))
                          for c, t in ((P.ca, P.ta), (P.cb, P.tb)))
    s_row = np.sqrt(sigma[P.ca] ** 2 + sigma[P.cb] ** 2)
    w, sol = getattr(P, "share", 1.0) / s_row ** 2, np.zeros(u)
    if getattr(P, "weight", None) is not None:
        w = w * P.weight

    def residual():
        up_a, up_b = sol[np.minimum(ja + 1, u - 1)], sol[np.minimum(jb + 1, u - 1)]
        return sol[ja] * (1 - fa) + up_a * fa - (sol[jb] * (1 - fb) + up_b * fb) - P.y

    r = None                             # the residuals of the current sol
    for _ in range(iters):
        if not ok.any():
            break
        rows = (ja, fa, jb, fb, P.y, w)
        rows = rows if ok.all() else [x[ok] for x in rows]
        sol = _solve(*rows, knots, base, ref, reg_sigma_ns)
        del rows
        r = residual()
        z = r / s_row
        scale = max(1.4826 * np.median(np.abs(z[ok])), 1.0)
        new = ok & (np.abs(r) <= np.maximum(5 * scale * s_row, floor_ns))
        if (new == ok).all():
            break
        ok = new
    return [sol[base[c]:base[c + 1]] for c in range(len(knots))], ok, residual() if r is None else r


def clock_sigma(ca, cb, r, prior_ns, floor_ns=SIGMA_FLOOR_NS):
    """Per-clock noise sd (ns) from anchor-pair residuals ``r`` between clocks ``ca``, ``cb``.

    A pair's residual has variance ``s_a**2 + s_b**2``: the robust variance of each
    clock pair (MAD) gives one equation, the prior ``prior_ns`` one more per clock;
    both are scaled relative to their size (least squares), so a direction the pairs do
    not determine (a star around one clock) stays at the priors, a tight TSF keeps its
    small prior and a host clock takes what the pairs give it. Clipped at ``floor_ns``.
    """
    prior2 = np.asarray(prior_ns, np.float64) ** 2
    nclk = len(prior2)
    lo, hi = np.minimum(ca, cb).astype(np.int64), np.maximum(ca, cb).astype(np.int64)
    pair = lo * nclk + hi
    small = pair.astype(np.int16) if nclk * nclk < 2**15 else pair   # int16: a radix sort
    order = np.argsort(small, kind="stable")
    p, ar = pair[order], np.abs(r)[order]
    start = np.flatnonzero(np.r_[True, p[1:] != p[:-1]]) if len(p) else np.zeros(0, np.int64)
    count = np.diff(np.r_[start, len(p)])
    keep = count >= 3
    start, count = start[keep], count[keep]
    mad = np.array([np.median(ar[s:s + n]) for s, n in zip(start, count)])   # per pair of clocks
    v = np.maximum((1.4826 * mad) ** 2, 2 * floor_ns ** 2)
    a, b = p[start] // nclk, p[start] % nclk
    m = np.zeros((len(v) + nclk, nclk))
    w = np.sqrt(count) / v
    m[np.arange(len(v)), a] = w
    m[np.arange(len(v)), b] = w
    m[len(v) + np.arange(nclk), np.arange(nclk)] = 1.0 / prior2
    rhs = np.r_[np.sqrt(count), np.ones(nclk)]
    x = np.linalg.lstsq(m, rhs, rcond=None)[0]
    return np.sqrt(np.maximum(x, floor_ns ** 2))


def epoch_map(ts_ns, local_ns, on_ref):
    """Robust line ``ts - local ~ a + b (local - x0)`` on the reference clock's frames."""
    x = local_ns[on_ref].astype(np.float64)
    d_int = ts_ns[on_ref] - local_ns[on_ref]
    # centre in int64 first: ts - local is ~1.7e18 ns, where float64 steps are 256 ns
    d0 = np.int64(d_int[len(d_int) // 2]) if len(d_int) else np.int64(0)
    d = (d_int - d0).astype(np.float64)
    if len(x) < 2 or np.ptp(x) == 0:
        a = float(np.median(d)) if len(d) else 0.0
        return lambda t: np.asarray(t, np.int64) + d0 + np.int64(round(a))
    x0 = x.min()
    ok = np.ones(len(x), bool)
    for _ in range(3):
        b, a = np.polyfit(x[ok] - x0, d[ok], 1)
        r = d - (a + b * (x - x0))
        mad = 1.4826 * np.median(np.abs(r[ok])) + 1.0
        ok = np.abs(r) <= 5 * mad
    return lambda t: np.asarray(t, np.int64) + d0 + np.rint(a + b * (np.asarray(t) - x0)).astype(np.int64)
