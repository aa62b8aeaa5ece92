"""Clock synchronisation of many sniffers: anchors, then one joint piecewise-linear fit.

Algorithm
---------
1. *Clocks.* Each sniffer's local time is its radiotap TSFT (µs hardware clock, in ns)
   or, without TSFT, its capture timestamp ``ts_ns`` (wider error). A TSF that resets or
   wraps shows as a jump of ``tsft - ts`` between frames adjacent in capture time; each
   jump starts a new *clock* (sniffer, segment), fitted on its own.
2. *Anchors.* Frames heard by >= 2 sniffers, found by content: a 64-bit hash key per
   anchor kind (:data:`ANCHOR_KEYS`), sort by (key, estimated common time), cut into
   clusters where the key changes or the time gap exceeds a gate. A cluster with one
   frame from each of >= 2 clocks is an anchor; one with two copies from one clock is
   ambiguous and dropped (this is the "unique in a short window" rule).
3. *Coarse fit* (offsets of hours): clusters by key only (beacons: BSSID + TSF field are
   unique; other kinds: keys seen once per clock over the whole capture), a robust
   pairwise median offset, then offsets solved jointly.
4. *Joint fit.* Every clock ``c`` maps local ``t`` to common time ``t + o_c + g_c(t)``;
   ``g_c`` is piecewise linear (hat basis, a knot per ``knot_s``). Every anchor pair
   gives ``g_a(t_i) - g_b(t_j) = (t_j + o_b) - (t_i + o_a)``; the reference clock has
   ``g = 0``. One weighted least-squares system over all pairs and all clocks (normal
   equations summed per pair of knot intervals, dense, numpy only), with a small
   second-difference penalty so knots without anchors interpolate; errors do not add
   up along a chain. Residuals are rejected by a MAD rule and the fit repeated.
5. Gates shrink (coarse -> linear -> piecewise) and anchors are re-matched each time.
   Every 5th anchor cluster is held out of the final fit and its residuals reported.

Caveats: a clock needs >= ``min_anchors`` (8) anchor pairs spread over its span after
rejection, else it is unsynced; drift must stay under ~300 ppm for the first gate.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .errors import SyncError

__all__ = ["ANCHOR_KEYS", "hash_key", "cluster", "local_clocks", "anchor_pairs",
           "fit_clocks", "sync", "ClockModel", "SyncResult"]

_M = np.uint64(0x9E3779B97F4A7C15)
_NULL = np.uint64(0xA5A5_5A5A_DEAD_BEEF)

# kind -> (frame filter on type_subtype (None = any frame with a TA), key columns)
ANCHOR_KEYS: dict[str, tuple[tuple[int, ...] | None, tuple[str, ...]]] = {
    "beacon": ((0x08,), ("type_subtype", "bssid", "beacon_tsf_us")),
    "ba": ((0x19,), ("type_subtype", "ta", "ra", "ba_ssn", "ba_bitmap_lo")),
    "unique": (None, ("type_subtype", "ta", "ra", "seq", "frag", "retry", "wirelen",
                      "duration_us", "fcs")),
}

TSFT_SIGMA_NS = 600.0      # 1 µs quantisation + jitter, per frame
HOST_SIGMA_NS = 20_000.0   # capture timestamps without TSFT
JUMP_NS = 5_000_000        # tsft - ts jump that starts a new clock segment (TSF reset/wrap)


def _u64(col: pd.Series) -> np.ndarray:
    """uint64 values of a (nullable) column; nulls become a fixed sentinel."""
    arr = col.array
    if hasattr(arr, "_mask"):
        vals = np.asarray(arr._data).astype(np.uint64)
        return np.where(arr._mask, _NULL, vals)
    return np.asarray(col).astype(np.uint64)


def hash_key(df: pd.DataFrame, columns) -> np.ndarray:
    """A 64-bit mix of ``columns`` per row (splitmix-style); nulls hash to a sentinel."""
    h = np.full(len(df), np.uint64(0x243F6A8885A308D3))
    with np.errstate(over="ignore"):
        for name in columns:
            h = (h ^ _u64(df[name])) * _M
            h ^= h >> np.uint64(31)
    return h


def cluster(key: np.ndarray, t_ns: np.ndarray, clock: np.ndarray, gate_ns) -> np.ndarray:
    """Cluster ids (0..m-1) of rows with equal ``key`` and time gaps <= ``gate_ns``.

    The k-th copy from one ``clock`` inside a cluster goes to its own sub-cluster, so
    a cluster never holds two frames of one clock. ``gate_ns=None`` clusters by key only.
    """
    n = len(key)
    if n == 0:
        return np.zeros(0, np.int64)
    order = np.lexsort((t_ns, key))
    k, t = key[order], t_ns[order]
    new = np.empty(n, bool)
    new[0] = True
    new[1:] = k[1:] != k[:-1]
    if gate_ns is not None:
        new[1:] |= np.diff(t) > gate_ns
    cid = np.cumsum(new) - 1
    # rank of each row among rows of the same clock in its cluster (cid is sorted here,
    # so a stable sort by (cid, clock) is one nearly-sorted pass)
    c = np.asarray(clock, np.int64)[order]
    o2 = np.argsort(cid * (int(c.max()) + 1) + c, kind="stable")  # keeps time order inside
    g = np.r_[True, (cid[o2][1:] != cid[o2][:-1]) | (c[o2][1:] != c[o2][:-1])]
    start = np.maximum.accumulate(np.where(g, np.arange(n), 0))
    rank = np.empty(n, np.int64)
    rank[o2] = np.arange(n) - start
    # sub-cluster ids in (cid, rank) order: a cluster whose busiest clock has R copies
    # owns R consecutive ids (ranks 0..R-1 all occur)
    first = np.flatnonzero(new)
    width = np.maximum.reduceat(rank, first) + 1
    sub = (np.cumsum(width) - width)[cid] + rank
    out = np.empty(n, np.int64)
    out[order] = sub
    return out


def local_clocks(df: pd.DataFrame, jump_ns: int = JUMP_NS):
    """Per frame: local time (ns), clock id, and per-clock table (sniffer, segment, source).

    TSFT frames of a sniffer split into segments where ``tsft*1000 - ts_ns`` jumps by more
    than ``jump_ns`` between frames adjacent in capture time; frames without TSFT form one
    host-clock segment per sniffer.
    """
    n = len(df)
    sn = df["sniffer"].to_numpy(np.int64)
    ts = df["ts_ns"].to_numpy(np.int64)
    tsft = df["tsft_us"].array
    has = ~np.asarray(tsft.isna())
    tsft_ns = np.where(has, np.asarray(tsft.fillna(0).to_numpy(np.int64)) * 1000, 0)
    local = np.where(has, tsft_ns, ts)
    k = sn * 2 + ~has                    # rows usually come sorted: skip the sort then
    done = n < 2 or ((np.diff(k) >= 0).all() and ((np.diff(ts) >= 0) | (np.diff(k) > 0)).all())
    order = np.arange(n) if done else np.lexsort((ts, ~has, sn))
    d = (tsft_ns - ts)[order]
    s_o, h_o = sn[order], has[order]
    boundary = np.r_[True, (s_o[1:] != s_o[:-1]) | (h_o[1:] != h_o[:-1])]
    jump = np.r_[False, np.abs(np.diff(d)) > jump_ns] & h_o & ~boundary
    seg_o = np.cumsum(boundary | jump) - 1
    clock = np.empty(n, np.int64)
    clock[order] = seg_o
    first = np.flatnonzero(boundary | jump)
    run = np.r_[True, s_o[first][1:] != s_o[first][:-1]]
    segment = np.arange(len(first)) - np.maximum.accumulate(np.where(run, np.arange(len(first)), 0))
    clocks = pd.DataFrame({"sniffer": s_o[first], "segment": segment,
                           "tsft": h_o[first],
                           "frames": np.bincount(seg_o, minlength=len(first))})
    lo = np.full(len(first), np.iinfo(np.int64).max)
    hi = np.full(len(first), np.iinfo(np.int64).min)
    np.minimum.at(lo, clock, local)
    np.maximum.at(hi, clock, local)
    clocks["t0_ns"], clocks["t1_ns"] = lo, hi
    return local, clock, clocks


def anchor_candidates(df: pd.DataFrame, kinds) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows usable as anchors, their kind index (into ``kinds``) and 64-bit content key."""
    tsub = df["type_subtype"].to_numpy(np.int64, na_value=-1)
    bad = ~df["bad"].isna().to_numpy() | df["fcs_bad"].fillna(False).to_numpy(bool)
    taken = np.zeros(len(df), bool)
    rows, kind, keys = [], [], []
    for k, name in enumerate(kinds):
        if name not in ANCHOR_KEYS:
            raise SyncError(f"unknown anchor kind {name!r} (known: {', '.join(ANCHOR_KEYS)})")
        types, cols = ANCHOR_KEYS[name]
        ok = ~bad & ~taken
        ok &= np.isin(tsub, types) if types else ~df["ta"].isna().to_numpy()
        if name == "beacon":
            ok &= ~df["beacon_tsf_us"].isna().to_numpy()
        r = np.flatnonzero(ok)
        taken[r] = True                  # a frame is an anchor of its first kind only
        rows.append(r)
        kind.append(np.full(len(r), k, np.int8))
        keys.append(hash_key(df[list(cols)].iloc[r], cols) ^ np.uint64(k))   # take key columns only
    return np.concatenate(rows), np.concatenate(kind), np.concatenate(keys)


def anchor_pairs(cid: np.ndarray, clock: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs (i, j) of rows in one cluster from different clocks: star to the first."""
    order = np.argsort(cid, kind="stable")
    c = cid[order]
    if len(c) == 0:
        return order, order
    first = np.r_[True, c[1:] != c[:-1]]
    head = order[np.maximum.accumulate(np.where(first, np.arange(len(c)), 0))]
    i, j = head[~first], order[~first]
    keep = clock[i] != clock[j]
    return i[keep], j[keep]


@dataclass
class ClockModel:
    """Fitted map local -> common for every clock: ``t + offset_ns + g(t)``."""
    clocks: pd.DataFrame                 # per clock: sniffer, segment, tsft, t0_ns, t1_ns, ...
    offset_ns: np.ndarray                # int64 per clock (coarse offset)
    knots: list                          # per clock: float64 local knot times (relative to t0)
    values: list                         # per clock: float64 g at knots (ns)
    synced: np.ndarray                   # bool per clock
    sigma_ns: np.ndarray                 # per-frame error scale per clock
    reference: int                       # reference clock id

    def apply(self, local_ns: np.ndarray, clock: np.ndarray) -> np.ndarray:
        """Common time (int64 ns) of local times; unsynced clocks keep their local time."""
        out = np.asarray(local_ns, np.int64) + self.offset_ns[clock]
        g = np.zeros(len(out))
        for c in np.unique(clock):
            m = clock == c
            g[m] = _interp(self.knots[c], self.values[c], local_ns[m] - self.clocks.t0_ns[c])
        out = out + np.rint(g).astype(np.int64)
        return np.where(self.synced[clock], out, local_ns)


def _interp(knots, values, x):
    """Piecewise-linear with linear extrapolation beyond the end knots."""
    if len(knots) == 1:
        return np.full(len(x), values[0])
    j = np.clip(np.searchsorted(knots, x, side="right") - 1, 0, len(knots) - 2)
    f = (x - knots[j]) / (knots[j + 1] - knots[j])
    return values[j] * (1 - f) + values[j + 1] * f


def _global_basis(knots, base, cc, tt):
    """Per row: global column of the knot left of ``tt`` on clock ``cc`` and the hat weight
    of the knot right of it (0 on a one-knot clock)."""
    jj, ff = np.zeros(len(cc), np.int64), np.zeros(len(cc))
    for c in np.unique(cc):              # per clock
        m, k = cc == c, knots[c]
        jj[m] = np.clip(np.searchsorted(k, tt[m], side="right") - 1, 0, max(len(k) - 2, 0))
        if len(k) > 1:
            ff[m] = (tt[m] - k[jj[m]]) / (k[jj[m] + 1] - k[jj[m]])
    return base[cc] + jj, ff


def fit_clocks(ca, ta, cb, tb, y, w, knots, ref, reg_sigma_ns):
    """Solve the joint least squares for the knot values of every clock.

    Rows: ``g_ca(ta) - g_cb(tb) = y`` with weights ``w``; ``knots[c]`` are local knot times
    relative to each clock's start; clock ``ref`` is fixed at ``g = 0``.
    Returns per-clock value arrays.
    """
    base = np.cumsum([0] + [len(k) for k in knots])
    (ja, fa), (jb, fb) = (_global_basis(knots, base, cc, tt) for cc, tt in ((ca, ta), (cb, tb)))
    sol = _solve(ja, fa, jb, fb, y, w, knots, base, ref, reg_sigma_ns)
    return [sol[base[c]:base[c + 1]] for c in range(len(knots))]


def _solve(ja, fa, jb, fb, y, w, knots, base, ref, reg_sigma_ns):
    """Flat knot values of all clocks from rows given by their hat-basis columns/weights."""
    u = base[-1]
    # Rows sharing one (knot interval of a, knot interval of b) add to the same 4 x 4 block
    # of the normal matrix: the row's coefficients are c = T v, v = (1, fa, fb), so the
    # block is T (sum w v v') T'. Moments are summed per interval pair (bincount over
    # u * u pairs), then blocks are built per pair, not per row.
    cnt = np.bincount(ja * u + jb, minlength=u * u)
    nz = np.flatnonzero(cnt)
    gi = (np.cumsum(cnt > 0) - 1)[ja * u + jb]
    v = (np.ones_like(fa), fa, fb)
    mom = np.stack([np.bincount(gi, weights=w * v[i] * v[k], minlength=len(nz))
                    for i in range(3) for k in range(3)], 1).reshape(-1, 3, 3)
    T = np.array([[1.0, -1, 0], [0, 1, 0], [-1, 0, 1], [0, 0, -1]])
    blk = np.einsum("ij,gjk,lk->gil", T, mom, T)
    ia, ib = nz // u, nz % u
    idx = np.stack([ia, np.minimum(ia + 1, u - 1), ib, np.minimum(ib + 1, u - 1)], 1)
    p = (idx[:, :, None] * u + idx[:, None, :]).reshape(len(nz), 16)
    normal = np.bincount(p.ravel(), weights=blk.ravel(), minlength=u * u).reshape(u, u)
    cols = np.stack([ja, np.minimum(ja + 1, u - 1), jb, np.minimum(jb + 1, u - 1)], 1)
    coef = np.stack([1 - fa, fa, fb - 1, -fb], 1) * (w * y)[:, None]
    rhs = np.bincount(cols.ravel(), weights=coef.ravel(), minlength=u)
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


@dataclass
class SyncResult:
    """Output of :func:`sync`: the model, per-frame common time and the fit's bookkeeping."""
    model: ClockModel
    local_ns: np.ndarray
    clock: np.ndarray
    common_ns: np.ndarray
    anchors: pd.DataFrame                # per anchor pair: rows, clocks, kind, used, held out, residual


def _key_only_clusters(key, clock):
    """Cluster ids by key alone, keeping only keys seen at most once per clock (else -1)."""
    order = np.lexsort((clock, key))
    k, c = key[order], clock[order]
    dup = np.r_[False, (k[1:] == k[:-1]) & (c[1:] == c[:-1])]
    newk = np.r_[True, k[1:] != k[:-1]]
    kid = np.cumsum(newk) - 1
    bad = np.zeros(kid[-1] + 1 if len(kid) else 0, bool)
    bad[kid[dup]] = True
    out = np.empty(len(key), np.int64)
    out[order] = np.where(bad[kid], -1, kid)
    return out


def _coarse_offsets(ca, cb, d, nclk, ref):
    """Joint per-clock offsets (int64 ns) from the median ``d = t_b - t_a`` of each clock pair."""
    pair = ca * nclk + cb
    order = np.lexsort((d, pair))
    p, dd = pair[order], d[order]
    start = np.flatnonzero(np.r_[True, p[1:] != p[:-1]])
    count = np.diff(np.r_[start, len(p)])
    med = dd[start + count // 2]
    a, b = p[start] // nclk, p[start] % nclk
    # o_a - o_b = med; solve in float relative to the reference, weights sqrt(count)
    w = np.sqrt(count)
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
    return np.rint(np.linalg.solve(m, r)).astype(np.int64)


def _reachable(ca, cb, nclk, ref):
    """Clocks connected to ``ref`` through anchor pairs (label propagation over clocks)."""
    lab = np.arange(nclk)
    for _ in range(nclk):
        new = lab.copy()
        np.minimum.at(new, ca, lab[cb])
        np.minimum.at(new, cb, lab[ca])
        if (new == lab).all():
            break
        lab = new
    return lab == lab[ref]


def _knots(clocks, n_per_clock, knot_ns, max_knots, linear):
    span = (clocks.t1_ns - clocks.t0_ns).to_numpy(np.float64)
    out = []
    cap = max(2, max_knots // max(len(clocks), 1))
    for c in range(len(clocks)):          # per clock
        if span[c] <= 0:
            out.append(np.zeros(1))
            continue
        k = 1 if linear else int(np.clip(np.ceil(span[c] / knot_ns), 1,
                                         max(1, min(cap - 1, n_per_clock[c] // 4))))
        out.append(np.linspace(0.0, span[c], k + 1))
    return out


def _robust_fit(P, clocks, sigma, knots, ref, ok, floor_ns, reg_sigma_ns, iters=8):
    """Fit on rows ``ok``; reject |residual| > max(5 robust sigma, floor) and refit."""
    t0, base = clocks.t0_ns.to_numpy(np.int64), np.cumsum([0] + [len(k) for k in knots])
    u = base[-1]
    # hat-basis columns and weights of every pair, once: fits and residuals reuse them
    (ja, fa), (jb, fb) = (_global_basis(knots, base, c, (t - t0[c]).astype(np.float64))
                          for c, t in ((P.ca, P.ta), (P.cb, P.tb)))
    ja1, jb1 = np.minimum(ja + 1, u - 1), np.minimum(jb + 1, u - 1)
    s_row = np.sqrt(sigma[P.ca] ** 2 + sigma[P.cb] ** 2)
    w, sol = 1.0 / s_row ** 2, np.zeros(u)
    residual = lambda: sol[ja] * (1 - fa) + sol[ja1] * fa - (sol[jb] * (1 - fb) + sol[jb1] * fb) - P.y  # noqa: E731
    for _ in range(iters):
        if not ok.any():
            break
        sol = _solve(ja[ok], fa[ok], jb[ok], fb[ok], P.y[ok], w[ok], knots, base, ref, reg_sigma_ns)
        r = residual()
        z = r / s_row
        scale = max(1.4826 * np.median(np.abs(z[ok])), 1.0)
        new = ok & (np.abs(r) <= np.maximum(5 * scale * s_row, floor_ns))
        if (new == ok).all():
            break
        ok = new
    return [sol[base[c]:base[c + 1]] for c in range(len(knots))], ok, residual()


class _Pairs:
    """Anchor pairs as arrays: clocks, local times, rhs y, kind, cluster id."""

    def __init__(self, i, j, a_clock, a_local, a_kind, cid, offset, rows):
        self.ra, self.rb = rows[i], rows[j]
        self.ca, self.cb = a_clock[i], a_clock[j]
        self.ta, self.tb = a_local[i], a_local[j]
        self.kind, self.cid = a_kind[i], cid[i]
        self.y = ((self.tb + offset[self.cb]) - (self.ta + offset[self.ca])).astype(np.float64)


def sync(df: pd.DataFrame, reference: int = 0, anchors=("beacon", "ba", "unique"),
         knot_s: float = 1.0, min_anchors: int = 8, holdout: int = 5,
         max_knots: int = 1200, allow_unsynced: bool = False, names=None) -> SyncResult:
    """Fit every sniffer's clock to the reference sniffer's clock, jointly.

    Parameters
    ----------
    df : DataFrame
        Frame table of all sniffers (``sniffer`` = input index), any row order.
    reference : int
        Sniffer whose clock (its longest TSF segment) is the common clock.
    anchors : sequence of str
        Anchor kinds, keys of :data:`ANCHOR_KEYS`, in order of preference.
    knot_s : float
        Knot spacing of the piecewise-linear clock model, seconds.
    min_anchors : int
        Anchor pairs (after rejection) below which a clock counts as unsynced.
    holdout : int
        Every ``holdout``-th anchor cluster is left out of the final fit and its
        residuals reported (0: use all).
    allow_unsynced : bool
        Keep unsynced clocks on their own time instead of raising :class:`SyncError`.
    names : list of str, optional
        Sniffer names for error messages.

    Returns
    -------
    SyncResult
        ``common_ns`` per frame of ``df`` on the reference clock (ns; TSFT domain when
        the reference has TSFT), the model, the anchor pairs and a per-clock report.
    """
    local, clock, clocks = local_clocks(df)
    nclk = len(clocks)
    sniffers = clocks.sniffer.to_numpy()
    if not (sniffers == reference).any():
        raise SyncError(f"reference sniffer {reference} has no frames")
    ref = int(clocks.frames.where(clocks.sniffer == reference, -1).to_numpy().argmax())
    sigma = np.where(clocks.tsft.to_numpy(), TSFT_SIGMA_NS, HOST_SIGMA_NS)
    rows, kind, key = anchor_candidates(df, anchors)
    a_clock, a_local = clock[rows], local[rows]
    span = (clocks.t1_ns - clocks.t0_ns).to_numpy(np.float64)

    # 1. coarse offsets from keys that are unique per clock over the whole capture
    cid = _key_only_clusters(key, a_clock)
    sel = cid >= 0
    i, j = anchor_pairs(cid[sel], a_clock[sel])
    i, j = np.flatnonzero(sel)[i], np.flatnonzero(sel)[j]
    offset = np.zeros(nclk, np.int64)
    if len(i):
        offset = _coarse_offsets(a_clock[i], a_clock[j], a_local[j] - a_local[i], nclk, ref)
    # 2. linear fit on the same pairs, loose first gate (300 ppm of the span)
    P = _Pairs(i, j, a_clock, a_local, kind, cid, offset, rows)
    loose = 3e-4 * np.maximum(span[P.ca], span[P.cb]) + 2e6
    ok = np.abs(P.y) <= loose
    knots = _knots(clocks, np.zeros(nclk, int) + 4, knot_s * 1e9, max_knots, linear=True)
    vals, ok, r = _robust_fit(P, clocks, sigma, knots, ref, ok, 20_000.0, 1e9)
    model = ClockModel(clocks, offset, knots, vals, np.ones(nclk, bool), sigma, ref)
    gate = float(np.quantile(np.abs(r[ok]), 0.999)) * 3 + 20_000 if ok.any() else 5e6
    # 3. re-match all kinds on the fitted time, piecewise fit; 4. tight gate + hold-out
    for stage in ("piecewise", "final"):
        t_est = model.apply(a_local, a_clock)
        cid = cluster(key, t_est, a_clock, gate)
        i, j = anchor_pairs(cid, a_clock)
        P = _Pairs(i, j, a_clock, a_local, kind, cid, offset, rows)
        per_clock = np.bincount(P.ca, minlength=nclk) + np.bincount(P.cb, minlength=nclk)
        knots = _knots(clocks, per_clock, knot_s * 1e9, max_knots, linear=False)
        held = (P.cid % holdout == holdout - 1) if (stage == "final" and holdout) else np.zeros(len(i), bool)
        synced = _reachable(P.ca, P.cb, nclk, ref)
        ok = ~held & synced[P.ca] & synced[P.cb]
        for _ in range(nclk):              # drop clocks with too few anchors, refit
            vals, ok, r = _robust_fit(P, clocks, sigma, knots, ref, ok, 2_000.0, 100.0)
            n_ok = np.bincount(P.ca[ok], minlength=nclk) + np.bincount(P.cb[ok], minlength=nclk)
            good = _reachable(P.ca[ok], P.cb[ok], nclk, ref) & ((n_ok >= min_anchors) | (np.arange(nclk) == ref))
            if (good >= synced).all():
                break
            synced &= good
            ok &= synced[P.ca] & synced[P.cb]
        model = ClockModel(clocks, offset, knots, vals, synced, sigma, ref)
        s = np.sqrt(sigma[P.ca] ** 2 + sigma[P.cb] ** 2)
        gate = max(2_000.0, 5 * float(np.quantile(np.abs(r[ok]) / s[ok], 0.99)) * sigma.max()) if ok.any() else gate
    if not model.synced.all() and not allow_unsynced:
        bad = clocks[~model.synced]
        raise SyncError("cannot sync sniffer(s) " + ", ".join(
            f"{names[s] if names else s} (TSF segment {g}, {f} frames)"
            for s, g, f in zip(bad.sniffer, bad.segment, bad.frames))
            + f": fewer than {min_anchors} shared anchors with the other sniffers "
              "(use --allow-unsynced to keep them on their own clock)")
    common = model.apply(local, clock)
    pairs = pd.DataFrame({"row_a": P.ra, "row_b": P.rb, "clock_a": P.ca, "clock_b": P.cb, "kind": pd.Categorical.from_codes(P.kind, list(anchors)),
                          "held_out": held, "used": ok, "residual_ns": r,
                          "ok": held & (np.abs(r) <= gate) | ok})
    return SyncResult(model, local, clock, common, pairs)

