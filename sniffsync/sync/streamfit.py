"""The clock fit of hours of capture, hour by hour: knots that follow temperature.

:func:`sniffsync.sync.clock.sync` solves one dense system of at most ``max_knots`` knots
(1200) for all clocks: over 6 h and 3 sniffers a knot every ~54 s. A TSF whose drift
swings with temperature (+/- 15 ppm over 1.5-3 h, a quartz in a room whose heating
cycles) bends by several µs between such knots. So a capture longer than
:data:`TILE_NS` on the reference clock is fitted in tiles: one fit of the whole (its
model places every anchor on the common clock to within µs), then :func:`sync` again on
the anchors of each tile of common time and :data:`OVERLAP_NS` either side, with the
knot spacing asked for (``knot_s``, capped per tile as before). The whole fit then needs
only to place the anchors within a gate, so it sees a sample (about :data:`GLOBAL_ROWS`
rows whatever the length: 1 in k anchors by content key, beacons 1 in <= 4 while they fill
at most :data:`BEACON_SHARE` of it): its system and arrays stay those of 250k rows, each
tile's those of <= an hour. Each tile's map is kept
over its own stretch of common time; at a shared edge the two maps' values are
averaged (they differ by the fits' noise). Every fit maps to the same common clock (the
reference's TSF), so the pieces join. The fit holds one tile's system at a time.

What is taken from the tiles: each clock's knots and values (fitted on its own anchors
in that tile), its noise (the median of the tiles'), and the anchor pairs of the report
(each tile's pairs whose first stamp lies in its own stretch: held-out residuals of the
model used): written to disk per tile, then summed one tile at a time on the final model
into :class:`sniffsync.sync.streamstats.PairStats` (counts exact, quantiles from a
log-spaced histogram: within 0.54 %), so no table of the run's pairs is ever held.
Which clocks are synced and their coarse offsets are the whole fit's.
Tiles are also shortened (to :data:`MIN_TILE_NS` at least) so that each holds about
:data:`TILE_ROWS` anchor rows: the fit's memory is then that of 250k rows, not of the
capture's (at 5M frames a single fit peaked at 1.6 GB; ~1 kB per row in :func:`sync`).
All tiles but the last two have that length (:func:`tile_edges`): equal tiles would hold
from 2/3 to all of it depending on the length, and the peak with them.
The anchor rows wait on disk (:mod:`sniffsync.sync.streamspill`): they are read once for
the sample, once to be cut into tiles (each tile's rows spilled too), and one tile is
loaded at a time. Not tiled: a reference clock
absent from a tile (its TSF restarted), a capture shorter than 1.5 tiles.
"""
from __future__ import annotations

import numpy as np

from sniffsync.sync.anchors import anchor_candidates
from sniffsync.sync.clock import reference_clock, sync
from sniffsync.runtime import release_free_heap
from sniffsync.sync.streamspill import AnchorSpill, join
from sniffsync.sync.streamstats import PairStats

__all__ = ["TILE_NS", "OVERLAP_NS", "fit_tiled", "tile_pair_stats", "tile_edges"]

TILE_NS = 3_600 * 10**9      # common time fitted at once (a knot per <= 9 s at 1 knot/s, 3 clocks)
OVERLAP_NS = 120 * 10**9     # anchors beyond each edge: the tile's ends are not extrapolated
GLOBAL_ROWS = 250_000        # anchor rows of the whole fit when tiled (it only cuts the tiles)
TILE_ROWS = 250_000          # tiles shortened to hold about this many anchor rows (~1 kB each in sync)
MIN_TILE_NS = 600 * 10**9    # ... not below this
BEACON_EVERY = 4             # beacons in the whole fit: >= 1 in 4 (~2.4/s of an AP at 102.4 TU) ...
BEACON_SHARE = 0.25          # ... unless they would fill more than this share of its rows


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


def fit_tiled(pieces, n_rows, clocks, *, reference, anchors, knot_s, names,
              tile_ns: int = TILE_NS, overlap_ns: int = OVERLAP_NS, global_rows=None, spill_dir=None,
              n_beacon: int = 0):
    """:func:`sync` of the anchor rows that ``pieces()`` yields as ``(input, rows)`` (rows
    with ``local_`` and ``clock_`` columns; ``n_rows`` in all; ``clocks``: the clocks table
    of every frame), tiled over common time when the capture is long or holds more than
    1.5 ``global_rows`` anchor rows (the whole fit then sees ``global_rows`` of them,
    sampled by key); ``tile_ns`` 0: one fit. Tiled, the rows are read twice and held one
    tile at a time (the tiles' rows go to ``spill_dir``, :mod:`sniffsync.sync.streamspill`)."""
    kw = dict(reference=reference, anchors=anchors, knot_s=knot_s, allow_unsynced=True, names=names,
              via_host=False)
    ref = reference_clock(clocks, reference)
    n_max = global_rows or GLOBAL_ROWS
    span = float(clocks.t1_ns.iloc[ref] - clocks.t0_ns.iloc[ref])
    if 0 < tile_ns and n_rows > 1.5 * min(n_max, TILE_ROWS):      # shorter tiles: each fit holds ~TILE_ROWS
        tile_ns = min(tile_ns, max(MIN_TILE_NS, span * TILE_ROWS / n_rows))
    if tile_ns <= 0 or span <= 1.5 * tile_ns:      # 0: one fit
        at, local, clock = join(list(pieces()))
        return sync(at, clocks=(local, clock, clocks), **kw)
    k_of, k_b = _rates(n_rows, n_beacon, n_max)
    at, local, clock = join([(s, df.iloc[_sample(df, anchors, k_of, k_b)]) for s, df in pieces()])
    res = sync(at, clocks=(local, clock, clocks), **kw)    # cuts the tiles
    del at, local, clock
    model = res.model
    ends = clocks.loc[ref, ["t0_ns", "t1_ns"]].to_numpy(np.float64)
    c_lo, c_hi = (float(v) for v in ends + _g(model, ref, ends))     # the reference's common span
    edges = tile_edges(c_lo, c_hi, tile_ns)
    m = len(edges) - 1
    edges[0], edges[-1] = -np.inf, np.inf
    store = [AnchorSpill(spill_dir, f"tile{k}") for k in range(m)]
    for s, df in pieces():               # each row to the tiles (with overlaps) its time falls in
        common = model.apply(df["local_"].to_numpy(np.int64), df["clock_"].to_numpy(np.int64))
        for k in range(m):
            sel = np.flatnonzero((common >= edges[k] - overlap_ns) & (common < edges[k + 1] + overlap_ns))
            if len(sel):
                store[k].add(df.iloc[sel].assign(input_=s))
                store[k].finish()        # to disk now: not a buffer per tile (m x SPILL_ROWS rows)
    tiles, parts = [], []
    for k in range(m):
        if not len(store[k]):
            for st in store + parts:
                st.drop()
            return res                   # no anchor in a tile: one fit
        at, local, clock = join([(int(d.input_.iloc[0]), d.drop(columns="input_")) for d in store[k].pieces()])
        store[k].drop()
        tc, present = _tile_clocks(clocks, local, clock)
        if not present[ref]:
            for st in store + parts:
                st.drop()
            return res                   # the reference restarted: one fit
        t = sync(at, clocks=(local, clock, tc), **kw)
        del at
        parts.append(_own_pairs(t.anchors, local, clock, model.apply(local, clock), edges, k, m, spill_dir))
        tiles.append((t.model, tc, present))
        del t, local, clock
        release_free_heap()              # each tile's fit in the same pages, not beside the last's
    _stitch(model, tiles, edges)
    # the report's pairs stay on disk: tile_pair_stats sums them once the model is final
    res.anchors, res.pair_parts = None, parts
    res.local_ns = res.common_ns = res.clock = np.zeros(0, np.int64)
    res.tiles = m                        # the report says so
    return res


def tile_edges(lo: float, hi: float, d: float) -> np.ndarray:
    """Tiles of ``d`` from ``lo``, the last two sharing what is left evenly (each >= d / 2),
    so that a tile holds at most what one of ``d`` holds, and the longest tiles that,
    whatever the capture's length (``m`` equal tiles held from (m - 1) / m to all of it)."""
    n = int((hi - lo) // d)
    e = lo + d * np.arange(n + 1, dtype=np.float64)
    if n == 0:
        return np.array([lo, hi], np.float64)
    if hi - e[-1] > 1e-9 * d:            # a rest: the last full tile and it, halved
        e = np.r_[e[:-1], (e[-2] + hi) / 2, hi]
    return e


def _own_pairs(a, local, clock, common, edges, k, m, spill_dir) -> AnchorSpill:
    """Tile ``k``'s anchor pairs whose first copy lies in its own stretch (held-out
    residuals of the model used), with their rows' local times, to disk."""
    ra, rb = a.row_a.to_numpy(np.int64), a.row_b.to_numpy(np.int64)
    own = (common[ra] >= edges[k]) & (common[ra] < edges[k + 1])
    p = a[own].drop(columns=["row_a", "row_b"]).assign(
        cluster=a.cluster.to_numpy(np.int64)[own] * m + k, local_a=local[ra[own]], local_b=local[rb[own]])
    st = AnchorSpill(spill_dir, f"pairs{k}")
    st.add(p)
    st.finish()
    return st


def tile_pair_stats(res, kinds) -> None:
    """``res.pair_stats``: the tiles' pairs (:func:`fit_tiled`) summed one tile at a time
    on the final model (:class:`sniffsync.sync.streamstats.PairStats`, histograms)."""
    parts = getattr(res, "pair_parts", None)
    if parts is None:
        return
    model = res.model
    st = PairStats(len(model.clocks), kinds, exact=False)
    for part in parts:
        for p in part.pieces():
            st.add(p, model.apply(p.pop("local_a").to_numpy(np.int64), p.clock_a.to_numpy(np.int64)),
                   model.apply(p.pop("local_b").to_numpy(np.int64), p.clock_b.to_numpy(np.int64)))
        part.drop()
    res.pair_stats, res.pair_parts = st, None


def _rates(n_rows: int, n_beacon: int, n_max: int) -> tuple:
    """``(k, k_beacon)``: the whole fit sees 1 in ``k`` of the other anchors and 1 in
    ``k_beacon`` beacons, about ``n_max`` rows in all whatever the capture's length
    (beacons, a few per second per sniffer, are kept 1 in min(k, 4) up to
    :data:`BEACON_SHARE` of them: ~30k rows per sniffer and hour would grow it)."""
    k = max(1, int(np.ceil(n_rows / n_max)))
    k_b = max(min(k, BEACON_EVERY), int(np.ceil(n_beacon / (BEACON_SHARE * n_max))))
    rest = max(n_max - n_beacon / k_b, n_max * (1 - BEACON_SHARE))
    return max(1, int(np.ceil((n_rows - n_beacon) / rest))), k_b


def _sample(at, anchors, k: int, k_beacon: int) -> np.ndarray:
    """Rows of ``at`` for the whole fit: 1 in ``k`` anchors by content key (the same
    transmissions at every sniffer), beacons 1 in ``k_beacon``."""
    rows, kind, key = anchor_candidates(at, anchors)
    beacon = list(anchors).index("beacon") if "beacon" in anchors else -1
    h = key >> np.uint64(32)
    keep = np.where(kind == beacon, h % np.uint64(k_beacon) == 0, h % np.uint64(k) == 0)
    return np.unique(rows[keep])


def _stitch(model, tiles, edges) -> None:
    """Each clock's knots from the tiles that fitted it, over their own stretches."""
    for c in range(len(model.clocks)):
        if c == model.reference or not model.synced[c]:
            continue
        xs, vs, sig = [], [], []
        for k, (tm, tc, present) in enumerate(tiles):
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
