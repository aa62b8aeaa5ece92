"""Fairness: goodput per window, Jain's index and its CDF, queueing delay, the air behind them.

In data-flow order: ``capture`` (a run's frames, their 802.11 preparation), ``windows``
(window arithmetic), ``core`` (one run's analysis, numpy tables), ``crosslayer`` (the 802.11 view), ``report`` (JSON/CSV writers) and ``frames``
(the DataFrame API: :func:`fairness`, :class:`FairnessResult`).
"""

CSV_TABLES = ("flows", "windows", "jain", "rtt")          # what ``fairness --csv DIR`` writes


def __getattr__(name):
    # lazy: the numpy core must not pull in the pandas layer
    if name in ("fairness", "FairnessResult"):
        from sniffsync.fairness import frames
        return getattr(frames, name)
    raise AttributeError(name)
