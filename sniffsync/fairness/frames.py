"""Per-flow goodput in sliding windows, Jain's fairness index, its CDF, bufferbloat and
the 802.11 cross-layer view (airtime share vs goodput share per station).

Windows are ``[start, start + window_ns)`` with ``start = t0 + k * step_ns``, t0 the first
data segment of the run; the last window is the first one that reaches past the last data
segment. Per-window sums use one ``bincount`` over (unit, edge index) and a cumulative sum
along time, so any window/step pair costs the same. The computations live in the
pandas-free :mod:`sniffsync.fairness.core`; this module is the DataFrame API over them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from sniffsync.fairness.core import DEFINITIONS, TABLES, Capture, fairness_tables
from sniffsync.fairness.windows import (cdf_arrays, jain, summarize, trailing_min, window_quantiles,  # noqa: F401
                                        window_starts, window_sums)
from sniffsync.tcp.acks import MIN_RTO_NS
from sniffsync.tcp.frames import flow_frame
from sniffsync.tcp.rtt_frames import rtt_frame

__all__ = ["FairnessResult", "fairness", "window_starts", "window_sums", "jain",
           "cdf", "summarize", "queueing_delay", "window_quantiles",
           "mac_text", "DEFINITIONS", "result_frames"]


@dataclass
class FairnessResult:
    """Result of :func:`fairness`; every table has a ``run`` column (input order)."""
    flows: pd.DataFrame
    windows: pd.DataFrame
    jain: pd.DataFrame
    cdf: pd.DataFrame
    rtt: pd.DataFrame
    stations: pd.DataFrame
    summary: dict = field(default_factory=dict)


from sniffsync.decode.macs import mac_text  # noqa: E402,F401  (re-exported: callers import it from here)


def cdf(values: np.ndarray) -> pd.DataFrame:
    """Empirical CDF points (value, fraction of windows <= value) of the finite values."""
    return pd.DataFrame(cdf_arrays(values))


def queueing_delay(rtt: pd.DataFrame, horizon_ns: int) -> pd.DataFrame:
    """Add ``min_rtt_ns`` (trailing minimum over ``horizon_ns`` per fd) and ``qdelay_ns``."""
    rtt = rtt.sort_values(["fd", "ts_ns"], kind="stable").reset_index(drop=True)
    if rtt.empty:
        return rtt.assign(min_rtt_ns=np.int64(0), qdelay_ns=np.int64(0))
    r_ns = rtt["rtt_ns"].to_numpy(np.int64)
    rtt["min_rtt_ns"] = trailing_min(rtt["fd"].to_numpy(), rtt["ts_ns"].to_numpy(np.int64), r_ns, horizon_ns)
    rtt["qdelay_ns"] = rtt["rtt_ns"] - rtt["min_rtt_ns"]
    return rtt


def _run_frames(run: dict) -> dict:
    """The DataFrames of one run's tables (:func:`sniffsync.fairness_core.run_tables`)."""
    jt = pd.DataFrame({c: v for c, v in run["jain"].items() if c != "why"})
    jt["why"] = list(run["jain"]["why"])
    return {"flows": flow_frame(run["flows"], run["names"]), "windows": pd.DataFrame(run["windows"]),
            "jain": jt, "cdf": pd.DataFrame(run["cdf"]), "rtt": rtt_frame(run["rtt"]),
            "stations": pd.DataFrame(run["stations"]) if run["stations"] else pd.DataFrame()}


def result_frames(runs: list, summary: dict) -> FairnessResult:
    """:class:`FairnessResult` of :func:`sniffsync.fairness_core.fairness_tables` output."""
    parts = [_run_frames(r) for r in runs]

    def cat(name):
        frames = [p[name].assign(run=r) for r, p in enumerate(parts) if len(p[name])]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return FairnessResult(*(cat(t) for t in TABLES), summary)


def fairness(frames_or_list, window_ns: int = 400_000_000, step_ns: int = 200_000_000, *,
             ppdus=None, qdelay_threshold_ns: int = 50_000_000, busy_fraction: float = 0.5,
             unfair_below: float = 0.8, min_rtt_horizon_ns: int = 10_000_000_000,
             dedup: bool = True, min_rto_ns: int = MIN_RTO_NS, t0_ns: int | None = None,
             stamps: str = "capture") -> FairnessResult:
    """TCP/UDP flows, windowed goodput, Jain's index, its CDF, bufferbloat and cross-layer view.

    Parameters
    ----------
    frames_or_list : DataFrame or list of DataFrame
        One frame table per run (a merged multi-sniffer table counts as one run).
    window_ns, step_ns : int
        Sliding window length and step.
    ppdus : DataFrame or list, optional
        PPDU table(s) with ``ta``, ``start_ns``, ``airtime_ns`` for the cross-layer view;
        by default ``airtime.ppdu.group_ppdus(frames)`` when that package is present.
    qdelay_threshold_ns, busy_fraction : bufferbloat flag (see :data:`DEFINITIONS`).
    t0_ns : int, optional
        Origin of the window grid (capture clock, ns); default: the run's first data segment.
    unfair_below : float
        Jain threshold for the summary share and the "why" strings.

    Returns
    -------
    FairnessResult
    """
    runs = frames_or_list if isinstance(frames_or_list, (list, tuple)) else [frames_or_list]
    tables, summary = fairness_tables(
        (Capture.from_frame(f, stamps) for f in runs), window_ns, step_ns, ppdus=ppdus,
        qdelay_threshold_ns=qdelay_threshold_ns, busy_fraction=busy_fraction, unfair_below=unfair_below,
        min_rtt_horizon_ns=min_rtt_horizon_ns, dedup=dedup, min_rto_ns=min_rto_ns, t0_ns=t0_ns)
    return result_frames(tables, summary)
