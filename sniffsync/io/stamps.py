"""Wild timestamps: frames stamped far from their neighbours are marked ``ts_outlier``.

Rule (rolling median in file order): frame ``i`` is an outlier when its ``ts_ns`` is
more than :data:`TS_OUTLIER_NS` (1 hour) away from the median stamp of the
``2 * NEIGHBOURS + 1`` frames around it in the file (``i - 8 .. i + 8``; at the file's
first and last 8 frames the window is shifted to stay inside the file; a file of fewer
than 17 frames uses its own (lower) median; in a file of 1 or 2 frames nothing is flagged,
as no majority tells which stamp is wrong). A capture is written in time order, so in a full
window the median of a monotonic run is the frame itself: no in-order frame is ever
flagged mid-file, however long a pause, and small reorderings (queues, CPUs) are far
below an hour. What is flagged: up to 8 consecutive frames departing from the run
around them (a stamp of 1970 or of 30 years later in the middle of a capture), and a
first or last frame an hour away from the rest. More than 8 consecutive frames on a
new clock are taken as a clock step, not flagged.

Cost: one ``ptp`` per batch; the windows (17 stamps per frame) are only built for
batches whose stamps span more than the threshold. Results never depend on batch
sizes: each batch is judged with the 16 stamps before and after it.
"""
from __future__ import annotations

from collections import deque

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

__all__ = ["TS_OUTLIER_NS", "NEIGHBOURS", "REASON", "outlier_rows", "flag_ts_outliers"]

TS_OUTLIER_NS = 3600 * 10**9   # farther than this from the neighbours' median: not trusted
NEIGHBOURS = 8                 # frames either side in the window
REASON = "ts_outlier"
_UNSTAMPED = ("no timestamp", "unknown interface")   # marks of the walk that already say it


def outlier_rows(z: np.ndarray, z_off: int, lo: int, hi: int, n_total: int | None,
                 w: int = NEIGHBOURS, gap_ns: int = TS_OUTLIER_NS) -> np.ndarray:
    """Global rows ``lo..hi`` that are outliers, as indices relative to ``lo``.

    ``z`` holds the stamps of global rows ``z_off ..`` (at least ``2 * w`` before ``lo``
    unless the file starts sooner, and ``2 * w`` after ``hi`` unless it ends sooner:
    then ``n_total`` is the file's frame count, else None).
    """
    z = np.asarray(z, np.int64)
    if hi <= lo or z.size == 0 or float(z.max()) - float(z.min()) <= gap_ns:
        return np.zeros(0, np.int64)
    size = 2 * w + 1
    rows = np.arange(lo, hi) - z_off
    if n_total is not None and n_total < 3:          # two stamps: no majority tells which is wild
        return np.zeros(0, np.int64)
    if n_total is not None and n_total < size:       # the whole file is in z
        k = (z.size - 1) // 2
        med = np.partition(z, k)[k:k + 1]
    else:
        start = np.arange(lo, hi) - w
        if n_total is not None:
            start = np.minimum(start, n_total - size)
        start = np.maximum(start, 0) - z_off
        med = np.partition(sliding_window_view(z, size)[start], w, axis=1)[:, w]
    far = np.abs(z[rows].astype(np.float64) - med.astype(np.float64)) > gap_ns
    return np.flatnonzero(far)


def flag_ts_outliers(batches, path, w: int = NEIGHBOURS, gap_ns: int = TS_OUTLIER_NS):
    """Pass consecutive :class:`~sniffsync.io.capture.Records` batches of one file through,
    each with a ``ts_outlier`` mark first in its ``marks`` (first reason wins in ``bad``);
    the last batch gets one problem line when any frame was flagged.

    A batch is held back until ``2 * w`` later frames (or the end) are seen.
    """
    hist = np.zeros(0, np.int64)       # the last 2w stamps before pending[0]
    done = 0                           # global row of pending[0]
    pending = deque()
    tally = [None, 0]                  # first flagged frame, count

    def judge(rec, after, eof):
        nonlocal hist, done
        n = len(rec.ts_ns)
        z = np.concatenate([hist, np.asarray(rec.ts_ns, np.int64), after])
        rows = outlier_rows(z, done - hist.size, done, done + n, done + n + after.size if eof else None,
                            w, gap_ns)
        stampless = [np.asarray(r) for r, why in rec.marks if why.startswith(_UNSTAMPED)]
        if rows.size and stampless:                 # already marked: no stamp, or none readable
            rows = np.setdiff1d(rows, np.concatenate(stampless))
        if rows.size:
            tally[0] = done + int(rows[0]) + 1 if tally[0] is None else tally[0]
            tally[1] += rows.size
            rec = rec._replace(marks=[(rows, REASON), *rec.marks])
        hist = z[:hist.size + n][-2 * w:]
        done += n
        return rec

    def following(k):
        """Stamps of the pending batches after the k-th (at most 2w of them)."""
        parts = [np.asarray(p.ts_ns[:2 * w], np.int64) for p in list(pending)[k + 1:]]
        return np.concatenate(parts)[:2 * w] if parts else np.zeros(0, np.int64)

    for rec in batches:
        pending.append(rec)
        while len(pending) > 1 and sum(len(p.ts_ns) for p in list(pending)[1:]) >= 2 * w:
            after = following(0)
            yield judge(pending.popleft(), after, False)
    while pending:
        after = following(0)
        rec = judge(pending.popleft(), after, True)
        if not pending and tally[1]:
            rec = rec._replace(problems=[*rec.problems, (
                f"{path}: {tally[1]} frame(s) stamped more than {gap_ns / 3.6e12:g} h away from their "
                f"{2 * w} neighbours (first: frame {tally[0]}); marked bad = {REASON}, not trusted")])
        yield rec
