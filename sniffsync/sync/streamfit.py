"""The clock fit of hours of capture, hour by hour: knots that follow temperature.

:func:`sniffsync.sync.clock.sync` solves one dense system of at most ``max_knots`` knots
(1200) for all clocks: over 6 h and 3 sniffers a knot every ~54 s. A TSF whose drift
swings with temperature (+/- 15 ppm over 1.5-3 h, a quartz in a room whose heating
cycles) bends by several µs between such knots. So a capture longer than
:data:`TILE_NS` on the reference clock is fitted in tiles: one fit of the whole (its
model places every anchor on the common clock to within µs), then :func:`sync` again on
the anchors of each tile of common time and :data:`OVERLAP_NS` either side, with the
knot spacing asked for (``knot_s``, capped per tile as before). The whole fit then needs
only to place the anchors within a gate, so it sees a sample (:data:`GLOBAL_ROWS` rows,
every beacon and 1 in k other anchors by content key): its system and arrays stay
those of ~1M rows whatever the length, each tile's those of an hour. Each tile's map is kept
over its own stretch of common time; at a shared edge the two maps' values are
averaged (they differ by the fits' noise). Every fit maps to the same common clock (the
reference's TSF), so the pieces join. The fit holds one tile's system at a time.

What is taken from the tiles: each clock's knots and values (fitted on its own anchors
in that tile), its noise (the median of the tiles'), and the anchor pairs of the report
(each tile's pairs whose first stamp lies in its own stretch: held-out residuals of the
model used). Which clocks are synced and their coarse offsets are the whole fit's.
Tiles are also shortened (to :data:`MIN_TILE_NS` at least) so that each holds about
:data:`GLOBAL_ROWS` anchor rows: the fit's memory is then that of ~1M rows, not of the
capture's (at 5M frames a single fit peaked at 1.6 GB). Not tiled: a reference clock
absent from a tile (its TSF restarted), a capture shorter than 1.5 tiles.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from sniffsync.sync.anchors import anchor_candidates
from sniffsync.sync.clock import reference_clock, sync

__all__ = ["TILE_NS", "OVERLAP_NS", "fit_tiled"]

TILE_NS = 3_600 * 10**9      # common time fitted at once (a knot per <= 9 s at 1 knot/s, 3 clocks)
OVERLAP_NS = 120 * 10**9     # anchors beyond each edge: the tile's ends are not extrapolated
GLOBAL_ROWS = 1_000_000      # anchor rows of the whole fit when tiled (it only cuts the tiles)
MIN_TILE_NS = 600 * 10**9    # tiles shortened to hold ~GLOBAL_ROWS rows, not below this


def _g(model, c, local):
    """offset + g of clock ``c`` at ``local`` (float ns): common - local."""
    from sniffsync.sync.fit import _interp
    t0 = int(model.clocks.t0_ns.iloc[c])
    return model.offset_ns[c] + _interp(model.knots[c], model.values[c], np.asarray(local, np.float64) - t0)


def _local_at(model, c, common):
    """Local time of clock ``c`` at common times ``common`` (fixed point: drift << 1)."""
    common = np.asarray(common, np.float64)
    x = common - model.offset_ns[c]
    for _ in range(3):
        x = common - _g(model, c, x)
    return x


def _tile_clocks(clocks, local, clock):
    """The clocks table restricted to a tile's anchor rows (absent clocks: one instant)."""
    out = clocks.copy()
    n = len(clocks)
    lo = np.full(n, np.iinfo(np.int64).max)
    hi = np.full(n, np.iinfo(np.int64).min)
    np.minimum.at(lo, clock, local)
    np.maximum.at(hi, clock, local)
    none = lo > hi
    t0 = clocks.t0_ns.to_numpy(np.int64)
    out["t0_ns"], out["t1_ns"] = np.where(none, t0, lo), np.where(none, t0, hi)
    return out, ~none


def fit_tiled(at, local, clock, clocks, *, reference, anchors, knot_s, names,
              tile_ns: int = TILE_NS, overlap_ns: int = OVERLAP_NS, global_rows=None):
    """:func:`sync` of the anchor rows ``at`` (``local``, ``clock``: per row; ``clocks``: the
    clocks table of every frame), tiled over common time when the capture is long or
    holds more than 1.5 ``global_rows`` anchor rows (the whole fit then sees
    ``global_rows`` of them, sampled by key); ``tile_ns`` 0: one fit."""
    kw = dict(reference=reference, anchors=anchors, knot_s=knot_s, allow_unsynced=True, names=names,
              via_host=False)
    ref = reference_clock(clocks, reference)
    n_max = global_rows or GLOBAL_ROWS
    span = float(clocks.t1_ns.iloc[ref] - clocks.t0_ns.iloc[ref])
    if 0 < tile_ns and len(at) > 1.5 * n_max:      # shorter tiles: each fit holds ~n_max rows
        tile_ns = min(tile_ns, max(MIN_TILE_NS, span * n_max / len(at)))
    if tile_ns <= 0 or span <= 1.5 * tile_ns:      # 0: one fit
        return sync(at, clocks=(local, clock, clocks), **kw)
    sub = _sample(at, anchors, n_max)
    res = sync(at.iloc[sub], clocks=(local[sub], clock[sub], clocks), **kw)    # cuts the tiles
    model = res.model
    ends = clocks.loc[ref, ["t0_ns", "t1_ns"]].to_numpy(np.float64)
    c_lo, c_hi = (float(v) for v in ends + _g(model, ref, ends))     # the reference's common span
    m = int(np.ceil((c_hi - c_lo) / tile_ns))
    edges = c_lo + (c_hi - c_lo) * np.arange(m + 1) / m
    edges[0], edges[-1] = -np.inf, np.inf
    common = model.apply(local, clock)
    tiles = []
    for k in range(m):
        sel = np.flatnonzero((common >= edges[k] - overlap_ns) & (common < edges[k + 1] + overlap_ns))
        tc, present = _tile_clocks(clocks, local[sel], clock[sel])
        if not present[ref]:
            return res                   # the reference restarted: one fit
        t = sync(at.iloc[sel], clocks=(local[sel], clock[sel], tc), **kw)
        a = t.anchors
        own = (common[sel[a.row_a.to_numpy(np.int64)]] >= edges[k]) & (common[sel[a.row_a.to_numpy(np.int64)]] < edges[k + 1])
        a = a[own].assign(row_a=sel[a.row_a.to_numpy(np.int64)[own]], row_b=sel[a.row_b.to_numpy(np.int64)[own]],
                          cluster=a.cluster.to_numpy(np.int64)[own] * m + k)
        tiles.append((t.model, tc, present, a))
    _stitch(model, tiles, edges)
    res.anchors = pd.concat([a for *_, a in tiles], ignore_index=True)
    res.local_ns, res.clock, res.common_ns = local, clock, model.apply(local, clock)
    res.tiles = m                        # the report says so
    return res


def _sample(at, anchors, n_max: int) -> np.ndarray:
    """Rows of ``at`` for the whole fit: every beacon, 1 in k other anchors by content key
    (the same transmissions at every sniffer), about ``n_max`` in all."""
    rows, kind, key = anchor_candidates(at, anchors)
    beacon = list(anchors).index("beacon") if "beacon" in anchors else -1
    k = max(1, int(np.ceil(len(rows) / n_max)))
    keep = (kind == beacon) | ((key >> np.uint64(32)) % np.uint64(k) == 0)
    return np.unique(rows[keep])


def _stitch(model, tiles, edges) -> None:
    """Each clock's knots from the tiles that fitted it, over their own stretches."""
    for c in range(len(model.clocks)):
        if c == model.reference or not model.synced[c]:
            continue
        xs, vs, sig = [], [], []
        for k, (tm, tc, present, _) in enumerate(tiles):
            if not (present[c] and tm.synced[c]):
                continue
            e = edges[k:k + 2]
            fin = np.isfinite(e)
            lo, hi = np.where(fin, _local_at(model, c, np.where(fin, e, 0.0)), e)    # its stretch
            kn = int(tc.t0_ns.iloc[c]) + np.asarray(tm.knots[c])
            x = np.r_[[lo] if np.isfinite(lo) else [], kn[(kn > lo) & (kn < hi)], [hi] if np.isfinite(hi) else []]
            xs.append(x)
            vs.append(_g(tm, c, x))
            sig.append(tm.sigma_ns[c])
        if not xs:
            continue
        x, v = np.concatenate(xs), np.concatenate(vs)
        o = np.argsort(x, kind="stable")
        x, v = x[o], v[o]
        ux, inv = np.unique(x, return_inverse=True)               # a shared edge: the mean
        uv = np.bincount(inv, v) / np.bincount(inv)
        t0 = int(model.clocks.t0_ns.iloc[c])
        model.knots[c] = ux - t0
        model.values[c] = uv - model.offset_ns[c]
        model.sigma_ns[c] = float(np.median(sig))
