"""Clocks without anchors placed through their sniffer's host clock (issue 18).

A TSF segment too short to have anchors of its own (a driver reload, then a few hundred
ms until the sniffer stops) cannot be fitted by :mod:`sniffsync.sync.clock`. Its
sniffer's capture stamps (``ts_ns``, the host clock) run on across the TSF reset, and
the sniffer's fitted segments tie that host clock to the common clock. So:

1. *Relation.* Over the frames of the sniffer's fitted clocks (those within
   :data:`WINDOW_NS` of the segment, all of them when fewer than :data:`MIN_FRAMES`), a
   robust line ``common - ts ~ a + b (ts - x0)`` (least squares, MAD rejection, then
   moved to the median of its residuals: host latency is skewed, and the segment's
   offset below is a median too; centred in int64 first: epoch stamps are ~1.7e18 ns,
   where float64 steps are 256 ns). Its residual scale ``s`` (1.4826 MAD) is the host
   clock's per-frame noise.
2. *Placement.* The segment keeps its own local time (TSFT: µs-exact between its
   frames) and the slope of the sniffer's fitted TSF segments (one crystal; the host
   line's slope for a host-clock segment or when there is none); its offset is the
   median over its frames of (host-mapped time - local time).
3. *Uncertainty.* The clock's ``sigma_ns`` is ``sqrt(s^2 + se^2)``, ``se`` the line's
   standard error at the segment (extrapolation). That is one host stamp's error: the
   median over the segment's frames is far better, so it is an upper scale, stated, and
   copies are matched in a gate of that width (:func:`sniffsync.sync.copies.copy_gates`,
   kind ``"host"``).

A sniffer with no fitted clock (another channel) has no relation, and a host clock
noisier than :data:`MAX_SIGMA_NS` (broken stamps) ties nothing: those stay unsynced.
"""
from __future__ import annotations

import numpy as np

__all__ = ["WINDOW_NS", "MIN_FRAMES", "MAX_SIGMA_NS", "host_line", "place_by_host"]

WINDOW_NS = 30_000_000_000     # host-clock line fitted on the fitted frames within 30 s
MIN_FRAMES = 32                # ... when at least this many, else on all of the sniffer's
MAX_FIT = 200_000              # frames fitted at most (evenly sampled)
MAX_SIGMA_NS = 5_000_000       # a host clock noisier than this ties nothing (stamps broken)


def host_line(ts_ns: np.ndarray, common_ns: np.ndarray):
    """Robust line of ``common - ts`` against ``ts`` (int64 ns): returns ``(to_common,
    scale_ns, se_at)``: the map of host stamps to common time, the residual scale and the
    standard error (ns) of the line at a host time."""
    step = max(1, len(ts_ns) // MAX_FIT)
    ts, d_int = ts_ns[::step], (common_ns - ts_ns)[::step]
    x0, d0 = np.int64(ts[len(ts) // 2]), np.int64(np.median(d_int))
    x, d = (ts - x0).astype(np.float64), (d_int - d0).astype(np.float64)
    ok = np.ones(len(x), bool)
    a, b = float(np.median(d)), 0.0
    for _ in range(5):                   # refit without the outliers (host latency tails)
        if np.ptp(x[ok]) > 0 and ok.sum() >= 3:
            b, a = np.polyfit(x[ok], d[ok], 1)
        r = d - (a + b * x)
        scale = 1.4826 * float(np.median(np.abs(r[ok])))
        new = np.abs(r) <= max(5 * scale, 1_000.0)
        if (new == ok).all():
            break
        ok = new
    a += float(np.median(d - (a + b * x)))   # the median line: a segment's offset is a median
    xm, n = float(x[ok].mean()), int(ok.sum())
    sxx = float(((x[ok] - xm) ** 2).sum()) or np.inf

    def to_common(t):
        t = np.asarray(t, np.int64)
        return t + d0 + np.rint(a + b * (t - x0)).astype(np.int64)

    def se_at(t):
        return scale * np.sqrt(1.0 / n + (float(np.int64(t) - x0) - xm) ** 2 / sxx)

    return to_common, max(scale, 1.0), se_at


def place_by_host(model, local_ns, clock, sniffer, ts_ns, common_ns, floor_ns=250.0):
    """Place every unsynced clock whose sniffer has fitted clocks through its host clock.

    ``local_ns``, ``clock``, ``sniffer``, ``ts_ns``, ``common_ns``: per frame (common
    time from ``model``). Updates ``model`` in place (offset, knots, values, synced,
    sigma, ``via_host`` = the fitted clock of the sniffer that gave most of the line's
    frames) and returns the ids of the clocks placed.
    """
    cl = model.clocks
    fitted = model.synced & (model.via_host < 0)
    todo = np.flatnonzero(~model.synced)
    placed = []
    sn_c = cl.sniffer.to_numpy(np.int64)
    tsft = cl.tsft.to_numpy(bool)
    for c in todo:                        # per unsynced clock: a handful
        s = sn_c[c]
        mine = np.flatnonzero(fitted & (sn_c == s))
        if not len(mine):
            continue                      # no fitted clock of its sniffer: nothing ties it
        rows = np.flatnonzero(clock == c)
        ref_rows = np.flatnonzero((sniffer == s) & fitted[clock])
        if len(rows) == 0 or len(ref_rows) < 8:
            continue
        t_lo, t_hi = ts_ns[rows].min(), ts_ns[rows].max()
        near = ref_rows[(ts_ns[ref_rows] >= t_lo - WINDOW_NS) & (ts_ns[ref_rows] <= t_hi + WINDOW_NS)]
        use = near if len(near) >= MIN_FRAMES else ref_rows
        to_common, scale, se_at = host_line(ts_ns[use], common_ns[use])
        sigma = max(floor_ns, float(np.hypot(scale, se_at((t_lo + t_hi) // 2))))
        if sigma > MAX_SIGMA_NS:
            continue
        t0 = int(cl.t0_ns[c])
        span = float(cl.t1_ns[c] - t0)
        tsf_mine = mine[tsft[mine]]
        if tsft[c] and len(tsf_mine):     # the TSF's own slope (same crystal), span-weighted
            w = np.array([model.knots[k][-1] for k in tsf_mine])
            g = np.array([(model.values[k][-1] - model.values[k][0]) / model.knots[k][-1]
                          if model.knots[k][-1] > 0 else 0.0 for k in tsf_mine])
            slope = float((g * w).sum() / w.sum()) if w.sum() > 0 else 0.0
        else:                             # host line: common - ts has slope b in ts
            probe = np.array([t_lo, t_lo + 1_000_000_000], np.int64)
            slope = float(np.diff(to_common(probe) - probe)[0]) / 1e9
        z = (local_ns[rows] - t0).astype(np.float64)
        e = to_common(ts_ns[rows]) - local_ns[rows] - np.rint(slope * z).astype(np.int64)
        model.offset_ns[c] = np.int64(np.median(e))
        model.knots[c] = np.array([0.0, span]) if span > 0 else np.zeros(1)
        model.values[c] = np.array([0.0, slope * span]) if span > 0 else np.zeros(1)
        model.sigma_ns[c] = sigma
        near_c = clock[use]
        model.via_host[c] = int(np.bincount(near_c).argmax())
        model.synced[c] = True
        placed.append(int(c))
    return np.array(placed, np.int64)
