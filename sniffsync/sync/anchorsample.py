"""A sample of the "unique" anchors of a large capture, chosen by content.

A long busy capture offers far more "unique" anchors (any frame with a transmitter
address heard by two sniffers) than a knot of the clock model needs: ~2,000 per 1 s knot
and clock, where a few hundred fix a knot to tens of ns, far below the 1 µs TSF step.
Clustering and fitting them all was most of the merge's sync time. One row in ``k`` (a
power of two) is kept by bits of its content key, so every copy of a frame is kept or
dropped with the others and the kept rows still form whole clusters; a kept pair weighs
``k`` in the fit, so each kind keeps its weight in the whole set (beacons and Block-Acks
are all kept). Keys a sparse clock holds are all kept (weight 1): a clock with few
anchors never loses pairs. ``sample=1`` (``merge --all-anchors``) fits every anchor.
"""
from __future__ import annotations

import numpy as np

from sniffsync.errors import UsageError

__all__ = ["MIN_ROWS", "PER_KNOT", "MAX_SAMPLE", "sample_factor", "sample_anchors"]

MIN_ROWS = 1 << 18     # fewer unique candidates than this: all are used (their fit is cheap)
PER_KNOT = 128         # unique candidates kept per knot interval, at least, on every dense clock
MAX_SAMPLE = 64
_SHIFT = np.uint64(40)  # the key bits that choose (independent of the low bits the kind marks)


def _density(clock_u, clocks, knot_ns) -> tuple[np.ndarray, np.ndarray]:
    """Per clock: unique candidates and candidates per knot interval (a span below one knot
    counts as one)."""
    per = np.bincount(clock_u, minlength=len(clocks)).astype(np.float64)
    span = (clocks.t1_ns - clocks.t0_ns).to_numpy(np.float64)
    return per, per / np.maximum(span / knot_ns, 1.0)


def sample_factor(kind, clock, clocks, unique: int, knot_ns: float) -> int:
    """``k``: keep one "unique" candidate in ``k`` (kind index ``unique``; ``clock`` per
    candidate, ``clocks`` the :func:`sniffsync.sync.clock.local_clocks` table). 1 below
    :data:`MIN_ROWS` candidates; else the largest power of two (<= :data:`MAX_SAMPLE`)
    leaving every dense clock (>= 2 :data:`PER_KNOT` per knot) that many per knot."""
    u = kind == unique
    if unique < 0 or int(u.sum()) < MIN_ROWS:
        return 1
    _, dens = _density(clock[u], clocks, knot_ns)
    dense = dens[dens >= 2 * PER_KNOT]
    if not len(dense):
        return 1
    return int(min(MAX_SAMPLE, 1 << int(np.log2(dense.min() / PER_KNOT))))


def sample_anchors(cand, clock, clocks, anchors, knot_ns: float, sample="auto"):
    """``(candidates, weight, k)``: the candidates of :func:`sniffsync.sync.clock.sync_candidates`
    (``(rows, kind, key, key order)``; ``clock`` per candidate) sampled by ``k``
    (``sample``: ``"auto"`` for :func:`sample_factor`, or a power of two), and per kept
    candidate its pair weight (None when all are kept)."""
    rows, kind, key, (order, run) = cand
    unique = list(anchors).index("unique") if "unique" in anchors else -1
    k = sample_factor(kind, clock, clocks, unique, knot_ns) if sample == "auto" else sample
    if not isinstance(k, int | np.integer) or k < 1 or k & (k - 1):
        raise UsageError(f"anchor sample must be \"auto\" or a power of two >= 1, not {sample!r}")
    if k == 1 or unique < 0:             # (no "unique" anchors asked for: nothing to sample)
        return cand, None, 1
    u = kind == unique
    drop = u & ((key >> _SHIFT) & np.uint64(k - 1) != 0)
    per, dens = _density(clock[u], clocks, knot_ns)
    sparse = np.flatnonzero((dens < 2 * PER_KNOT) & (per > 0))
    forced = np.zeros(len(key), bool)
    if len(sparse):                      # the keys of sparse clocks: kept, weight 1
        held = np.unique(key[u & np.isin(clock, sparse)])
        forced = u & np.isin(key, held, assume_unique=False)
        drop &= ~forced
    keep = ~drop
    weight = np.where(u & ~forced, np.float32(k), np.float32(1))[keep]
    at = np.cumsum(keep) - 1             # new index of each kept candidate
    kept = keep[order]
    order, run = at[order[kept]], run[kept]
    if len(run):
        run = np.cumsum(np.r_[False, run[1:] != run[:-1]])   # dense again
    return (rows[keep], kind[keep], key[keep], (order, run)), weight, k
