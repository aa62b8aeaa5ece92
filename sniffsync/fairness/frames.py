"""Per-flow goodput in sliding windows, Jain's fairness index, its CDF, bufferbloat and
the 802.11 cross-layer view (airtime share vs goodput share per station).

Windows are ``[start, start + window_ns)`` with ``start = t0 + k * step_ns``, t0 the first
data segment of the run; the last window is the first one that reaches past the last data
segment. Per-window sums use one ``bincount`` over (unit, edge index) and a cumulative sum
along time, so any window/step pair costs the same. The computations live in the
pandas-free :mod:`sniffsync.fairness_core`; this module is the DataFrame API over them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from sniffsync.fairness.core import (DEFINITIONS, TABLES, Capture, analyze_arrays, cross_layer_arrays,  # noqa: F401
                            fairness_tables, jain_arrays)
from sniffsync.fairness.windows import (cdf_arrays, jain, summarize, trailing_min, window_quantiles,  # noqa: F401
                               window_starts, window_sums)
from sniffsync.tcp.frames import flow_frame, seg_frame, seg_view
from sniffsync.tcp.core import api_column
from sniffsync.tcp.sequence import CLASSIFY_COLUMNS
from sniffsync.tcp.acks import ACK_COLUMNS, MIN_RTO_NS
from sniffsync.tcp.rtt_frames import rtt_frame

__all__ = ["FairnessResult", "fairness", "analyze_run", "window_starts", "window_sums", "jain",
           "jain_series", "cdf", "summarize", "queueing_delay", "window_quantiles", "cross_layer",
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


_SEG_ADDED = CLASSIFY_COLUMNS + ACK_COLUMNS


def analyze_run(frames: pd.DataFrame, dedup: bool = True, min_rto_ns: int = MIN_RTO_NS):
    """Segments (classified and ACK-analysed), flow table and RTT samples of one capture."""
    seg, names, ft, rtt = analyze_arrays(Capture.from_frame(frames), dedup, min_rto_ns)
    sf = seg_frame(seg, names)
    for c in _SEG_ADDED:
        sf[c] = api_column(seg[c])
    return sf, flow_frame(ft, names), rtt_frame(rtt)


def jain_series(seg, ft, starts, window_ns):
    """Per-window goodput/throughput matrices (units x windows), activity and Jain."""
    cols = {c: ft[c].to_numpy() for c in ("fd", "goodput_bytes", "first_ns", "last_ns")}
    _, good, thr, active, j = jain_arrays(seg_view(seg), cols, starts, window_ns)
    return ft[ft["goodput_bytes"] > 0].reset_index(drop=True), good, thr, active, j


def cross_layer(ppdus: pd.DataFrame, units: pd.DataFrame, seg: pd.DataFrame, good: np.ndarray,
                active: np.ndarray, starts: np.ndarray, window_ns: int) -> pd.DataFrame:
    """Per window and station: airtime share, goodput share, MAC retry rate, median MCS.

    ``ppdus`` needs ``ta``, ``start_ns``, ``airtime_ns`` (e.g. ``airtime.ppdu.group_ppdus``);
    a PPDU counts in the windows that contain its start. Stations are the transmitters of
    the active flow directions (``units.ta``).
    """
    st = cross_layer_arrays(ppdus, {"ta": units["ta"].to_numpy()}, seg_view(seg), good, active,
                            starts, window_ns)
    return pd.DataFrame() if st is None else pd.DataFrame(st)


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
    stamps : {"capture", "end"}
        What the tables' stamps mark: ``"end"`` for PPDU ends (a merge's
        ``Merged.stamps``), so segments are not moved to PPDU ends again.

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
