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

from sniffsync.errors import SyncError
from sniffsync.sync.fit import ClockModel, _robust_fit, _smoothness, fit_clocks  # noqa: F401
from sniffsync.sync.order import order_by, rank_bits

__all__ = ["ANCHOR_KEYS", "hash_key", "cluster", "local_clocks", "anchor_pairs",
           "fit_clocks", "sync", "ClockModel", "SyncResult"]

from sniffsync.decode.table import GOLDEN64 as _M  # noqa: E402  (the one hash multiplier)
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


def _u64(col: pd.Series, rows=None) -> np.ndarray:
    """uint64 values of a (nullable) column (at ``rows``); nulls become a fixed sentinel."""
    arr = col.array
    if hasattr(arr, "_mask"):
        vals, mask = np.asarray(arr._data), arr._mask
        if rows is not None:
            vals, mask = vals[rows], mask[rows]
        out = vals.astype(np.uint64)
        out[mask] = _NULL
        return out
    vals = np.asarray(col)
    return (vals if rows is None else vals[rows]).astype(np.uint64)


def hash_key(df: pd.DataFrame, columns, rows=None) -> np.ndarray:
    """A 64-bit mix of ``columns`` per row (of ``rows``: all by default; splitmix-style);
    nulls hash to a sentinel."""
    h = np.full(len(df) if rows is None else len(rows), np.uint64(0x243F6A8885A308D3))
    with np.errstate(over="ignore"):
        for name in columns:             # in place: a handful of passes per column
            h ^= _u64(df[name], rows)
            h *= _M
            h ^= h >> np.uint64(31)
    return h


def _small(ids: np.ndarray) -> np.ndarray:
    """Ids as int16 when they fit: a stable argsort of int16 is a radix sort."""
    return ids.astype(np.int16) if len(ids) and 0 <= ids.min() and ids.max() < 2**15 else ids


def key_order(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows sorted by ``key`` (ties by row) and the dense key rank along that order.

    Sorting many keys is the costly step; :func:`cluster` and :func:`_key_only_clusters`
    reuse this order and only re-sort inside runs of one key (an almost sorted pass).
    """
    order = order_by(key)
    k = key[order]
    return order, np.cumsum(np.r_[False, k[1:] != k[:-1]])


def _then_by(by_key, minor: np.ndarray, minor_bits: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows sorted by (key, ``minor``), ties by row, from ``key_order``; and the key rank
    along it. ``minor`` is a non-negative int below ``2**minor_bits``."""
    order, run = by_key
    packed = run << minor_bits
    packed |= minor[order]
    p = np.argsort(packed, kind="stable")     # sorted but inside key runs: timsort's best case
    del packed
    return order[p], run[p]


def cluster(key: np.ndarray, t_ns: np.ndarray, clock: np.ndarray, gate_ns, by_key=None) -> np.ndarray:
    """Cluster ids (0..m-1) of rows with equal ``key`` and time gaps <= ``gate_ns``.

    The k-th copy from one ``clock`` inside a cluster goes to its own sub-cluster, so
    a cluster never holds two frames of one clock. ``gate_ns=None`` clusters by key only.
    ``by_key``: :func:`key_order` of ``key``, when already known.
    """
    return _cluster(key, t_ns, clock, gate_ns, by_key)[0]


def _cluster(key, t_ns, clock, gate_ns, by_key=None, pairs=False):
    """:func:`cluster`, and with ``pairs`` also the rows sorted by (cluster id, row).

    Temporaries are dropped as soon as possible: a fresh page costs more than the
    work done on it, so the peak of this function sets much of its time.
    """
    n = len(key)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    b = rank_bits(n)
    new = np.empty(n, bool)
    new[0] = True
    if by_key is not None and 2 * b <= 62:
        # time rank of each row (ties by row): times come in a few sorted runs
        rank = np.empty(n, np.int64)
        rank[np.argsort(t_ns, kind="stable")] = np.arange(n)
        order, run = _then_by(by_key, rank, b)          # = lexsort((t_ns, key))
        del rank
        np.not_equal(run[1:], run[:-1], out=new[1:])
        del run
    else:
        order = np.lexsort((t_ns, key))
        k = key[order]
        np.not_equal(k[1:], k[:-1], out=new[1:])
        del k
    if gate_ns is not None:
        t = t_ns[order]
        new[1:] |= np.diff(t) > gate_ns
        del t
    cid = np.cumsum(new) - 1
    # rank of each row among rows of the same clock in its cluster: rows grouped by
    # clock (a radix sort of small ints) keep their sorted order, so cid ascends in each
    c = np.asarray(clock, np.int64)[order]
    oc = np.argsort(_small(c), kind="stable")
    cc, ci = c[oc], cid[oc]
    del c
    g = np.empty(n, bool)
    g[0] = True
    g[1:] = (cc[1:] != cc[:-1]) | (ci[1:] != ci[:-1])
    del cc, ci
    start = np.maximum.accumulate(np.where(g, np.arange(n), 0))
    del g
    rank = np.empty(n, np.int64)
    rank[oc] = np.arange(n) - start
    del oc, start
    # sub-cluster ids in (cid, rank) order: a cluster whose busiest clock has R copies
    # owns R consecutive ids (ranks 0..R-1 all occur)
    first = np.flatnonzero(new)
    del new
    width = np.maximum.reduceat(rank, first) + 1
    sub = (np.cumsum(width) - width)[cid]
    del cid
    sub += rank
    del rank
    out = np.empty(n, np.int64)
    out[order] = sub
    if not pairs:
        return out, None
    # sub ascends along `order` except inside a cluster: an almost sorted pass again
    sub <<= b
    sub |= order
    return out, order[np.argsort(sub, kind="stable")]


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
        keys.append(hash_key(df, cols, r) ^ np.uint64(k))   # key columns at r only
    return np.concatenate(rows), np.concatenate(kind), np.concatenate(keys)


def anchor_pairs(cid: np.ndarray, clock: np.ndarray, by_cid=None) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs (i, j) of rows in one cluster from different clocks: star to the first.

    ``by_cid``: the rows sorted by (cid, row) when already known.
    """
    order = order_by(cid) if by_cid is None else by_cid    # = argsort(cid, kind="stable")
    c = cid[order]
    if len(c) == 0:
        return order, order
    first = np.r_[True, c[1:] != c[:-1]]
    head = order[np.maximum.accumulate(np.where(first, np.arange(len(c)), 0))]
    i, j = head[~first], order[~first]
    keep = clock[i] != clock[j]
    return i[keep], j[keep]


@dataclass
class SyncResult:
    """Output of :func:`sync`: the model, per-frame common time and the fit's bookkeeping."""
    model: ClockModel
    local_ns: np.ndarray
    clock: np.ndarray
    common_ns: np.ndarray
    anchors: pd.DataFrame                # per anchor pair: rows, clocks, kind, used, held out, residual


def _key_only_clusters(key, clock, by_key=None):
    """Cluster ids by key alone, keeping only keys seen at most once per clock (else -1)."""
    clock = np.asarray(clock, np.int64)
    if len(key) == 0:
        return np.zeros(0, np.int64)
    by_key = key_order(key) if by_key is None else by_key
    order, kid = _then_by(by_key, clock, rank_bits(int(clock.max()) + 1))  # by (key, clock)
    c = clock[order]
    dup = np.r_[False, (kid[1:] == kid[:-1]) & (c[1:] == c[:-1])]
    bad = np.zeros(kid[-1] + 1, bool)
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


def reference_clock(clocks: pd.DataFrame, reference: int) -> int:
    """The common clock: the longest segment (most frames) of sniffer ``reference``."""
    if not (clocks.sniffer.to_numpy() == reference).any():
        raise SyncError(f"reference sniffer {reference} has no frames")
    return int(clocks.frames.where(clocks.sniffer == reference, -1).to_numpy().argmax())


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
         max_knots: int = 1200, allow_unsynced: bool = False, names=None,
         clocks=None) -> SyncResult:
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
    clocks : tuple, optional
        :func:`local_clocks` of ``df`` when already computed.

    Returns
    -------
    SyncResult
        ``common_ns`` per frame of ``df`` on the reference clock (ns; TSFT domain when
        the reference has TSFT), the model, the anchor pairs and a per-clock report.
    """
    local, clock, clocks = local_clocks(df) if clocks is None else clocks
    nclk = len(clocks)
    ref = reference_clock(clocks, reference)
    sigma = np.where(clocks.tsft.to_numpy(), TSFT_SIGMA_NS, HOST_SIGMA_NS)
    rows, kind, key = anchor_candidates(df, anchors)
    a_clock, a_local = clock[rows], local[rows]
    by_key = key_order(key)              # the one full sort of the anchor keys
    span = (clocks.t1_ns - clocks.t0_ns).to_numpy(np.float64)

    # 1. coarse offsets from keys that are unique per clock over the whole capture
    cid = _key_only_clusters(key, a_clock, by_key)
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
        P = cid = i = j = ok = r = None      # free the last stage's arrays before the next
        t_est = model.apply(a_local, a_clock)
        cid, by_cid = _cluster(key, t_est, a_clock, gate, by_key, pairs=True)
        del t_est
        i, j = anchor_pairs(cid, a_clock, by_cid)
        del by_cid
        P = _Pairs(i, j, a_clock, a_local, kind, cid, offset, rows)
        cid = i = j = None                   # the fit's peak memory sets much of its time
        per_clock = np.bincount(P.ca, minlength=nclk) + np.bincount(P.cb, minlength=nclk)
        knots = _knots(clocks, per_clock, knot_s * 1e9, max_knots, linear=False)
        held = (P.cid % holdout == holdout - 1) if (stage == "final" and holdout) else np.zeros(len(P.y), bool)
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
    pairs = pd.DataFrame({"row_a": P.ra, "row_b": P.rb, "clock_a": P.ca, "clock_b": P.cb,
                          "kind": pd.Categorical.from_codes(P.kind, list(anchors)),
                          "held_out": held, "used": ok, "residual_ns": r,
                          "ok": held & (np.abs(r) <= gate) | ok}, copy=False)   # no second copy
    return SyncResult(model, local, clock, common, pairs)

