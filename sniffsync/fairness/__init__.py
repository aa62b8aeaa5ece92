"""Fairness: goodput per window, Jain's index and its CDF, queueing delay, the air behind them."""


def __getattr__(name):
    # lazy: the numpy core must not pull in the pandas layer
    if name in ("fairness", "FairnessResult"):
        from sniffsync.fairness import frames
        return getattr(frames, name)
    raise AttributeError(name)
