"""The DataFrame API of the fairness report: :func:`fairness` and its :class:`FairnessResult`.

A thin layer over :func:`sniffsync.fairness.core.fairness_tables`: each run's numpy
tables become DataFrames (text columns as text), concatenated over the runs with a
``run`` column. Definitions of every quantity in :data:`sniffsync.fairness.core.DEFINITIONS`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from sniffsync.fairness.core import TABLES, Capture, fairness_tables
from sniffsync.tcp.frames import flow_frame, rtt_frame
from sniffsync.tcp.rtt import MIN_RTO_NS

__all__ = ["FairnessResult", "fairness", "result_frames"]


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


def _run_frames(run: dict) -> dict:
    """The DataFrames of one run's tables (:func:`sniffsync.fairness.core.run_tables`)."""
    jt = pd.DataFrame({c: v for c, v in run["jain"].items() if c != "why"})
    jt["why"] = list(run["jain"]["why"])
    return {"flows": flow_frame(run["flows"], run["names"]), "windows": pd.DataFrame(run["windows"]),
            "jain": jt, "cdf": pd.DataFrame(run["cdf"]), "rtt": rtt_frame(run["rtt"]),
            "stations": pd.DataFrame(run["stations"]) if run["stations"] else pd.DataFrame()}


def result_frames(runs: list, summary: dict) -> FairnessResult:
    """:class:`FairnessResult` of :func:`sniffsync.fairness.core.fairness_tables` output."""
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
        by default ``airtime.ppdu.group_ppdus(frames)`` for 802.11 captures with radiotap.
    qdelay_threshold_ns, busy_fraction : float
        Bufferbloat flag (see :data:`sniffsync.fairness.core.DEFINITIONS`).
    t0_ns : int, optional
        Origin of the window grid (capture clock, ns); default: the run's first data segment.
    unfair_below : float
        Jain threshold for the summary share and the "why" strings.
    stamps : {"capture", "end"}
        What the tables' ``ts_ns`` mark: ``"capture"`` (a capture as read) or ``"end"``
        (PPDU ends: a merged table, ``Merged.stamps``).

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
