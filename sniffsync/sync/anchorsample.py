"""A sample of the "unique" anchors of a large capture, chosen by content.

A long busy capture offers far more "unique" anchors (any frame with a transmitter
address heard by two sniffers) than a knot of the clock model needs: ~2,000 per 1 s knot
and TSF clock, where a few hundred fix a knot to tens of ns, far below the 1 µs TSF step.
Clustering and fitting them all was most of the merge's sync time. One row in ``k`` (a
power of two) is kept by bits of its content key, so every copy of a frame is kept or
dropped with the others and the kept rows still form whole clusters. The fit's weights
stay those of the whole set in expectation (Horvitz-Thompson): the subframes of one
A-MPDU share one stamp and together weigh one measurement (``fit._share``), so a kept
candidate weighs ``k m / n``, ``n`` the candidates of its stamp and ``m`` those kept
(``m / n`` for a key kept for sure). Beacons and Block-Acks are all kept, and so is every
key a sparse clock holds (few keys shared with another clock per knot, or a host clock,
whose stamps are ~30 times noisier): a clock with few anchors loses none. ``sample=1``
(``merge --all-anchors``) fits every anchor.
"""
from __future__ import annotations

import numpy as np

from sniffsync.errors import UsageError

__all__ = ["MIN_ROWS", "PER_KNOT", "MAX_SAMPLE", "check_sample", "sample_factor", "sample_anchors"]

MIN_ROWS = 1 << 18     # fewer unique candidates than this: all are used (their fit is cheap)
PER_KNOT = 128         # shared unique candidates kept per knot interval, at least, on every dense clock
MAX_SAMPLE = 64
_SHIFT = np.uint64(40)  # the key bits that choose (independent of the low bits the kind marks)


def check_sample(sample) -> None:
    """:class:`UsageError` unless ``sample`` is ``"auto"`` or a power of two >= 1."""
    ok = sample == "auto" or isinstance(sample, int | np.integer) and not isinstance(sample, bool) \
        and sample >= 1 and not sample & (sample - 1)
    if not ok:
        raise UsageError(f"anchor sample must be \"auto\" or a power of two >= 1, not {sample!r}")


def _shared(clock, by_key) -> np.ndarray:
    """Per candidate: its key is held by two clocks or more (``by_key``: the key order)."""
    order, run = by_key
    out = np.zeros(len(clock), bool)
    if not len(order):
        return out
    c = clock[order]
    start = np.flatnonzero(np.r_[True, run[1:] != run[:-1]])
    two = np.minimum.reduceat(c, start) != np.maximum.reduceat(c, start)
    out[order] = two[run]
    return out


def _density(clock_u, clocks, knot_ns) -> np.ndarray:
    """Per clock: candidates per knot interval (a span below one knot counts as one)."""
    per = np.bincount(clock_u, minlength=len(clocks)).astype(np.float64)
    span = (clocks.t1_ns - clocks.t0_ns).to_numpy(np.float64)
    return per / np.maximum(span / knot_ns, 1.0)


def _dense(kind, clock, clocks, unique, knot_ns, by_key) -> tuple[np.ndarray, np.ndarray]:
    """``(shared density per clock, dense)``: TSF clocks with >= 2 :data:`PER_KNOT` unique
    candidates per knot whose keys another clock also holds."""
    u = kind == unique
    dens = _density(clock[u & _shared(clock, by_key)], clocks, knot_ns)
    return dens, (dens >= 2 * PER_KNOT) & clocks.tsft.to_numpy(bool)


def sample_factor(kind, clock, clocks, unique: int, knot_ns: float, by_key) -> int:
    """``k``: keep one "unique" candidate in ``k`` (kind index ``unique``; ``clock`` per
    candidate, ``clocks`` the :func:`sniffsync.sync.clock.local_clocks` table, ``by_key``
    the candidates' key order). 1 below :data:`MIN_ROWS` candidates; else the largest
    power of two (<= :data:`MAX_SAMPLE`) leaving every dense clock that many shared ones
    per knot."""
    if unique < 0 or int(np.count_nonzero(kind == unique)) < MIN_ROWS:
        return 1
    return _factor(*_dense(kind, clock, clocks, unique, knot_ns, by_key))


def _factor(dens, dense) -> int:
    """:func:`sample_factor` from :func:`_dense`."""
    if not dense.any():
        return 1
    return int(min(MAX_SAMPLE, 1 << int(np.log2(dens[dense].min() / PER_KNOT))))


def _stamp_share(kind, clock, local, keep) -> np.ndarray:
    """Per candidate ``m / n``: of the candidates of its kind, clock and stamp (consecutive:
    candidates come kind by kind, each clock in capture order, an A-MPDU's subframes
    together), ``n`` in all and ``m`` kept."""
    n = len(kind)
    new = np.ones(n, bool)
    if n > 1:
        new[1:] = (kind[1:] != kind[:-1]) | (clock[1:] != clock[:-1]) | (local[1:] != local[:-1])
    g = np.cumsum(new) - 1
    return (np.bincount(g, weights=keep) / np.bincount(g))[g]


def sample_anchors(cand, clock, clocks, anchors, knot_ns: float, sample="auto", local=None):
    """``(candidates, weight, k)``: the candidates of :func:`sniffsync.sync.clock.sync_candidates`
    (``(rows, kind, key, key order)``; ``clock`` and ``local`` stamp per candidate) sampled
    by ``k`` (``sample``: ``"auto"`` for :func:`sample_factor`, or a power of two), and per
    kept candidate its pair weight (None when all are kept)."""
    check_sample(sample)
    rows, kind, key, (order, run) = cand
    unique = list(anchors).index("unique") if "unique" in anchors else -1
    u = kind == unique
    if unique < 0 or sample == 1 or sample == "auto" and int(np.count_nonzero(u)) < MIN_ROWS:
        return cand, None, 1             # (no "unique" anchors asked for: nothing to sample)
    dens, dense = _dense(kind, clock, clocks, unique, knot_ns, (order, run))
    k = _factor(dens, dense) if sample == "auto" else int(sample)
    if k == 1:
        return cand, None, 1
    drop = u & ((key >> _SHIFT) & np.uint64(k - 1) != 0)
    sparse = np.flatnonzero(~dense)
    forced = np.zeros(len(key), bool)
    if len(sparse):                      # the keys of sparse clocks: kept for sure
        held = np.unique(key[u & np.isin(clock, sparse)])
        forced = u & np.isin(key, held)
        drop &= ~forced
    keep = ~drop
    share = _stamp_share(kind, clock, local, keep) if local is not None else 1.0
    weight = (np.where(u & ~forced, float(k), 1.0) * share)[keep]
    at = np.cumsum(keep) - 1             # new index of each kept candidate
    kept = keep[order]
    order, run = at[order[kept]], run[kept]
    if len(run):
        run = np.cumsum(np.r_[False, run[1:] != run[:-1]])   # dense again
    return (rows[keep], kind[keep], key[keep], (order, run)), weight, k
