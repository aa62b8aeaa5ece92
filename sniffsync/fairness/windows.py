"""Sliding-window arithmetic of the fairness report, pandas-free.

Windows are ``[start, start + window_ns)`` with ``start = t0 + k * step_ns``. Per-window
sums use one ``bincount`` over (unit, edge index) and a cumulative sum along time, so any
window/step pair costs the same. Quantiles sort the samples once by value, then
(radix-)sort the (window, sample) pairs by window; the trailing minimum is a sparse
table (range minimum query), one level per power of two of the longest window.
"""
from __future__ import annotations

import numpy as np

from sniffsync.errors import UsageError
from sniffsync.nomask import median, percentile   # (re-exported: core and tests take them here)
from sniffsync.tcp.columns import sorted_unique

__all__ = ["window_starts", "median", "percentile", "last_window", "data_windows", "window_sums", "window_sums_of",
           "jain", "summarize", "cdf_arrays", "window_quantiles", "trailing_min"]


def window_starts(t0_ns: int, t_last_ns: int, window_ns: int, step_ns: int) -> np.ndarray:
    """Window start times: from t0 every step until a window reaches past ``t_last_ns``."""
    if window_ns <= 0 or step_ns <= 0:
        raise UsageError("window and step must be positive")
    k = max(1, -(-(t_last_ns + 1 - t0_ns - window_ns) // step_ns) + 1)
    return t0_ns + step_ns * np.arange(k, dtype=np.int64)


def last_window(t0_ns: int, t_last_ns: int, window_ns: int, step_ns: int) -> int:
    """Grid index of the last window :func:`data_windows` may list: the first that reaches
    past ``t_last_ns`` (0 at least)."""
    return max(0, -(-(t_last_ns + 1 - t0_ns - window_ns) // step_ns))


def data_windows(ts_ns, t0_ns: int, t_last_ns: int, window_ns: int, step_ns: int,
                 max_windows: int | None = None) -> np.ndarray:
    """Grid indices ``k`` (ascending) of the windows that hold at least one of ``ts_ns``
    (an array, or a list of arrays: their union, not concatenated), on the grid of
    :func:`window_starts` (its last window the first that reaches past
    ``t_last_ns``); at least window 0. More than ``max_windows``: UsageError (a step far
    below the window length makes every event open many windows).

    A window without any event has no goodput of any flow (Jain undefined), so it is not
    listed: the windows cost what the events cost (one frame stamped years late adds a
    window or two, not a grid over years). Each event opens at most ``window/step + 1``.
    """
    if window_ns <= 0 or step_ns <= 0:
        raise UsageError("window and step must be positive")
    k_max = last_window(t0_ns, t_last_ns, window_ns, step_ns)
    parts = [np.asarray(t, np.int64) for t in (ts_ns if isinstance(ts_ns, (list, tuple)) else [ts_ns])]
    if k_max < 4 * sum(map(len, parts)) + 4096:
        return _marked_windows(parts, t0_ns, k_max, window_ns, step_ns, max_windows)
    ts = sorted_unique(np.concatenate(parts))
    lo, hi = _event_windows(ts, t0_ns, k_max, window_ns, step_ns)
    if not len(lo):
        return np.zeros(1, np.int64)
    # lo and hi rise with ts: merge touching ranges into runs, then list each run's indices
    new = np.r_[True, lo[1:] > hi[:-1] + 1]
    a = lo[new]
    b = hi[np.append(np.flatnonzero(new)[1:] - 1, len(hi) - 1)]
    n = b - a + 1
    if max_windows is not None and int(n.sum()) > max_windows:
        raise UsageError(f"{int(n.sum())} windows of {window_ns / 1e9:g} s every {step_ns / 1e9:g} s hold data: "
                         f"more than {max_windows} (use a larger --step)")
    return np.repeat(a - np.cumsum(n) + n, n) + np.arange(int(n.sum()), dtype=np.int64)


def _event_windows(ts, t0_ns: int, k_max: int, window_ns: int, step_ns: int):
    """``(lo, hi)``: the grid indices of the first and last window holding each event."""
    ts = ts[(ts >= t0_ns) & (ts < t0_ns + k_max * step_ns + window_ns)]
    d = ts - t0_ns
    hi = np.minimum(d // step_ns, k_max)
    lo = np.maximum(-(-(d - window_ns + 1) // step_ns), 0)
    ok = lo <= hi
    return lo[ok], hi[ok]


def _marked_windows(parts: list, t0_ns: int, k_max: int, window_ns: int, step_ns: int,
                    max_windows) -> np.ndarray:
    """:func:`data_windows` on a grid not much longer than the events (no sort of them).

    An event's windows depend only on its step bin ``q`` and on whether its offset in
    the bin reaches the window's remainder ``w0`` (window = m * step + w0): windows
    ``max(q - m + late, 0) .. min(q, k_max)``. So the events mark their (bin, late)
    cells (one division each; a window of whole steps has no early cells), and only the
    occupied cells' windows are marked by +1/-1 at their ends and a running sum.
    """
    m, w0 = divmod(window_ns, step_ns)
    end = t0_ns + k_max * step_ns + window_ns          # events from here on are in no window
    used = np.zeros(0, np.int64)
    for ts in parts:
        if not len(ts):
            continue
        if int(ts.min()) < t0_ns or int(ts.max()) >= end:
            ts = ts[(ts >= t0_ns) & (ts < end)]
        q = ts - t0_ns
        if w0:
            d = q % step_ns                              # offset in the bin
            q //= step_ns
            q *= 2
            q += d >= w0
            del d
        else:                                            # every offset is late
            q //= step_ns
            q *= 2
            q += 1
        c = np.bincount(q)
        del q
        used = np.pad(used, (0, max(0, len(c) - len(used))))
        used[:len(c)] += c
    cell = np.flatnonzero(used)                          # occupied (bin, late) cells
    if not len(cell):
        return np.zeros(1, np.int64)
    b = cell >> 1
    hi = np.minimum(b, k_max)
    lo = np.maximum(b - m + (cell & 1), 0)
    ok = lo <= hi
    lo, hi = lo[ok], hi[ok]
    mark = np.bincount(lo, minlength=k_max + 2) - np.bincount(hi + 1, minlength=k_max + 2)
    ks = np.flatnonzero(np.cumsum(mark[:k_max + 1]) > 0)
    if not len(ks):
        return np.zeros(1, np.int64)
    if max_windows is not None and len(ks) > max_windows:
        raise UsageError(f"{len(ks)} windows of {window_ns / 1e9:g} s every {step_ns / 1e9:g} s hold data: "
                         f"more than {max_windows} (use a larger --step)")
    return ks.astype(np.int64)


def window_sums(unit: np.ndarray, ts_ns: np.ndarray, weight: np.ndarray, n_units: int,
                starts: np.ndarray, window_ns: int) -> np.ndarray:
    """``out[u, k]`` = sum of ``weight`` of unit ``u`` with ts in window k (vectorised)."""
    return window_sums_of(unit, ts_ns, [weight], n_units, starts, window_ns)[0]


def window_sums_of(unit: np.ndarray, ts_ns: np.ndarray, weights: list, n_units: int,
                   starts: np.ndarray, window_ns: int) -> list:
    """:func:`window_sums` of several weights of the same rows (each row's cell found once);
    a weight None counts the rows."""
    edges = sorted_unique(np.concatenate([starts, starts + window_ns]))
    gap = np.diff(edges)
    if len(gap) and (gap == gap[0]).all():                   # a regular grid: divide
        pos = np.clip((ts_ns - edges[0]) // gap[0] + 1, 0, len(edges))
    else:
        pos = np.searchsorted(edges, ts_ns, side="right")   # edges <= ts
    width = len(edges) + 1
    cell = unit * width
    cell += pos
    del pos
    a = np.searchsorted(edges, starts)
    b = np.searchsorted(edges, starts + window_ns)
    out = []
    for weight in weights:
        m = np.bincount(cell, weights=weight, minlength=n_units * width)
        c = np.cumsum(m.reshape(n_units, width), axis=1)     # c[:, j]: ts < edges[j]
        out.append((c[:, b] - c[:, a]).astype(np.float64, copy=False))
    return out


def jain(x: np.ndarray, active: np.ndarray) -> np.ndarray:
    """Jain's index per column of ``x`` (units x windows) over the ``active`` units."""
    x = np.where(active, x, 0.0)
    n = active.sum(axis=0)
    s, q = x.sum(axis=0), (x * x).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where((n > 0) & (q > 0), s * s / (n * q), np.nan)


def cdf_arrays(values: np.ndarray) -> dict:
    """Empirical CDF points: ``jain`` (sorted finite values) and ``frac`` (share <= value)."""
    v = np.sort(np.asarray(values, float)[np.isfinite(values)])
    return {"jain": v, "frac": np.arange(1, len(v) + 1) / max(len(v), 1)}


def summarize(j: np.ndarray, below: float = 0.8) -> dict:
    """Median, p10 and share of windows below ``below`` of a Jain series (finite values)."""
    v = np.asarray(j, float)
    v = v[np.isfinite(v)]
    if not len(v):
        return {"windows": 0, "median": None, "p10": None, f"share_below_{below}": None}
    return {"windows": int(len(v)), "median": median(v),
            "p10": percentile(v, 10), f"share_below_{below}": float((v < below).mean())}


def _sort_by_window(win: np.ndarray, n_windows: int) -> np.ndarray:
    """Stable order by window index (16-bit radix sort when the windows fit)."""
    if n_windows <= 1 << 16:
        return np.argsort(win.astype(np.uint16), kind="stable")
    return np.argsort(win, kind="stable")


def window_quantiles(ts_ns: np.ndarray, values: np.ndarray, starts: np.ndarray,
                     window_ns: int, qs=(0.5, 0.95), step_ns: int | None = None) -> np.ndarray:
    """Quantiles of ``values`` per window (rows: windows, cols: qs); NaN for empty windows.

    ``starts`` lie on a grid of ``step_ns`` (default: the contiguous grid
    ``starts[1] - starts[0]``); windows of the grid not in ``starts`` are skipped.
    Linear interpolation between order statistics, as pandas' ``groupby().quantile``:
    ``i = int(q * (n - 1))``, ``v[i] + (v[i + 1] - v[i]) * frac``.
    """
    ts_ns = np.asarray(ts_ns, np.int64)
    vals = np.asarray(values, float)
    out = np.full((len(starts), len(qs)), np.nan)
    t0 = starts[0]
    step = step_ns or ((starts[1] - starts[0]) if len(starts) > 1 else window_ns)
    grid = (starts - t0) // step                     # grid index of each listed window
    k_hi = np.minimum((ts_ns - t0) // step, grid[-1])
    k_lo = np.maximum(-(-(ts_ns - t0 - window_ns + 1) // step), 0)
    cnt = np.maximum(k_hi - k_lo + 1, 0)
    if not cnt.sum():
        return out
    raw = np.asarray(values)
    # by value (integers sort faster than their float copies), then expand to windows
    ov = np.argsort(raw if raw.dtype.kind in "iu" else vals, kind="stable")
    c = cnt[ov]
    rep = np.repeat(ov, c)
    win = k_lo[rep] + (np.arange(len(rep)) - np.repeat(np.cumsum(c) - c, c))
    if len(grid) != grid[-1] + 1:                    # a sparse grid: keep the listed windows
        pos = np.minimum(np.searchsorted(grid, win), len(grid) - 1)
        listed = grid[pos] == win
        rep, win = rep[listed], pos[listed]
        if not len(win):
            return out
    o = _sort_by_window(win, len(starts))
    w, v = win[o], vals[rep[o]]
    head = np.flatnonzero(np.r_[True, w[1:] != w[:-1]])
    n = np.diff(np.append(head, len(w)))
    for col, q in enumerate(qs):
        q_idx = q * (n - 1).astype(np.float64)
        i = q_idx.astype(np.int64)
        frac = q_idx % 1
        lo = v[head + i]
        hi = v[np.minimum(head + i + 1, head + n - 1)]
        out[w[head], col] = np.where(frac == 0.0, lo, lo + (hi - lo) * frac)
    return out


def trailing_min(key: np.ndarray, ts_ns: np.ndarray, values: np.ndarray, horizon_ns: int) -> np.ndarray:
    """Minimum of ``values`` over the rows of the same ``key`` with ts in ``(ts - horizon, ts]``
    up to this row (pandas' time-based ``rolling(horizon).min()`` per key).

    Rows sorted by (key, ts). A sparse table answers each window ``[start, i]`` with two
    overlapping power-of-two blocks; levels are built one after the other.
    """
    n = len(values)
    out = np.empty(n, values.dtype)
    if not n:
        return out
    gid = np.cumsum(np.r_[True, key[1:] != key[:-1]]) - 1
    t = ts_ns - ts_ns.min()
    span = int(t.max()) + int(horizon_ns) + 1
    if (int(gid[-1]) + 1) * span < 1 << 62:
        comp = gid * np.int64(span) + t
        start = np.searchsorted(comp, comp - horizon_ns, side="right")
    else:                                   # one search per key
        start = np.empty(n, np.int64)
        head = np.flatnonzero(np.r_[True, gid[1:] != gid[:-1]])
        for a, b in zip(head, np.append(head[1:], n)):
            start[a:b] = a + np.searchsorted(t[a:b], t[a:b] - horizon_ns, side="right")
    i = np.arange(n)
    length = i - start + 1
    level = np.frexp(length.astype(np.float64))[1] - 1      # floor(log2(length)), exact
    cur = values
    for lv in range(int(level.max()) + 1):
        sel = np.flatnonzero(level == lv)
        if len(sel):
            out[sel] = np.minimum(cur[start[sel]], cur[sel - (1 << lv) + 1])
        half = 1 << lv
        cur = np.minimum(cur[:-half], cur[half:])          # cur[j] = min(values[j : j + 2 * half])
    return out
