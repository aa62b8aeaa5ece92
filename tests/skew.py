"""Skew a capture's clock: make multi-sniffer test sets from captures that share one clock.

Used by tests and benchmarks only. The true time of a frame is its original TSFT
(ns-3: the end of the PPDU, identical at every sniffer); the skewed sniffer reads
``true + offset + ppm * (true - start) + jitter`` rounded to whole µs (the counter's
sub-µs phase is taken as part of its offset, so the reference's clock is ``true``),
optionally wrapping modulo ``wrap_us``, and misses a fraction ``drop`` of the frames.
All MPDUs of one PPDU share TSFT, so jitter is drawn per PPDU (per distinct true TSFT).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["skew"]


def skew(df: pd.DataFrame, *, offset_us: int = 0, ppm: float = 0.0, jitter_us: float = 0.0,
         drop: float = 0.0, wrap_us: int | None = None, no_tsft: bool = False,
         host_offset_ns: int = 0, ppm_wander: float = 0.0, seed: int = 0):
    """A copy of ``df`` as seen by a sniffer with another clock.

    Parameters
    ----------
    df : DataFrame
        Frame table with ``tsft_us`` (the true clock) for every row.
    offset_us, ppm, jitter_us : clock offset at the first frame, drift, Gaussian jitter (sd).
    drop : float
        Fraction of frames missed (independently per frame).
    wrap_us : int, optional
        The TSF counter wraps modulo this value (a TSF wrap/reset mid-capture).
    no_tsft : bool
        Drop TSFT; the capture timestamp carries the skewed clock (ns) instead.
    host_offset_ns : int
        Offset of the capture timestamp (host clock) from the unwrapped TSF clock.
    ppm_wander : float
        Amplitude (ppm) of a slow sinusoidal drift change (period 0.5 s), to make drift
        non-linear.

    Returns
    -------
    (DataFrame, ndarray)
        The skewed table (rows dropped, original row order kept) and each kept row's
        true time in ns.
    """
    rng = np.random.default_rng(seed)
    true_us = df["tsft_us"].to_numpy(np.int64)
    keep = rng.random(len(df)) >= drop
    start = true_us.min() if len(true_us) else 0
    uniq, inv = np.unique(true_us, return_inverse=True)
    jit = rng.normal(0.0, jitter_us, len(uniq))[inv] if jitter_us else 0.0
    x = (true_us - start).astype(np.float64)
    period_us = 0.5e6
    wander = ppm_wander * 1e-6 * period_us / (2 * np.pi) * (1 - np.cos(2 * np.pi * x / period_us))
    local_f = true_us + offset_us + ppm * 1e-6 * x + wander + jit
    out = df.loc[keep].copy()
    loc = local_f[keep]
    tsft = np.rint(loc).astype(np.int64)
    if wrap_us:
        tsft = tsft % wrap_us
    if no_tsft:
        out["ts_ns"] = np.rint(loc * 1000).astype(np.int64) + host_offset_ns
        out["tsft_us"] = pd.array(np.zeros(len(out), np.int64), dtype="Int64")
        out["tsft_us"] = pd.NA
        out["tsft_us"] = out["tsft_us"].astype("Int64")
    else:
        out["ts_ns"] = np.rint(loc).astype(np.int64) * 1000 + host_offset_ns
        out["tsft_us"] = pd.array(tsft, dtype="Int64")
    return out, true_us[keep] * 1000
