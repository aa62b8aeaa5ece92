"""The whole analysis of one run: read (and merge), PPDUs, detection, fairness.

``analyse(paths)`` is what ``serve``, ``report`` and ``demo`` run; its cache is in
:mod:`sniffsync.pipeline.cache`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from sniffsync.errors import NoDataError

__all__ = ["Run", "analyse", "load_merged", "to_capture_clock"]


@dataclass
class Run:
    paths: list
    names: list
    frames: pd.DataFrame | None          # None when loaded from the cache
    ppdus: pd.DataFrame
    events: pd.DataFrame
    mpdus: pd.DataFrame
    stations: pd.DataFrame
    fairness: object | None              # sniffsync.fairness.FairnessResult
    sync_report: dict | None = None
    detect_summary: dict = field(default_factory=dict)
    merged: object | None = None         # sniffsync.sync.merge.Merged of several sniffers (not cached)
    inflight: pd.DataFrame | None = None  # sniffsync.tcp.inflight samples (pipeline.uicols; the UI's track)


def load_merged(paths, *, reference=0, allow_unsynced=False, progress=None, tsft_at="auto"):
    """:class:`~sniffsync.sync.merge.Merged` of ``paths``. One path is read as it is, not
    merged: a file ``sniffsync merge`` wrote gives back the merge's table, sniffers,
    stamps and report (:func:`sniffsync.sync.mergedfile.read_merged`)."""
    from sniffsync.sync.merge import Merged, merge
    from sniffsync.sync.mergedfile import read_merged
    paths = [str(p) for p in paths]
    if len(paths) == 1:
        from sniffsync.decode.frames import read_capture
        m = read_merged(paths[0])
        if m is None:
            m = Merged(read_capture(paths[0]), {}, None, [Path(paths[0]).stem], "capture")
    else:
        m = merge(paths, reference=reference, allow_unsynced=allow_unsynced, progress=progress,
                  tsft_at=tsft_at)
    return m


def _heard_mask(frames: pd.DataFrame, frame_ppdu: np.ndarray, n_ppdus: int) -> np.ndarray:
    """Bitmask of sniffers that heard each PPDU (OR over its frames)."""
    if "sniffers_heard" in frames and pd.api.types.is_integer_dtype(frames["sniffers_heard"].dtype):
        m = frames["sniffers_heard"].to_numpy(np.int64, na_value=0)
    else:
        m = np.left_shift(1, frames["sniffer"].to_numpy(np.int64))
    out = np.zeros(n_ppdus, np.int64)
    ok = frame_ppdu >= 0
    np.bitwise_or.at(out, frame_ppdu[ok], m[ok])
    return out


def to_capture_clock(frames: pd.DataFrame, ppdus: pd.DataFrame, merged: bool = False) -> pd.DataFrame:
    """PPDU times moved from the TSF clock onto the capture (``ts_ns``) clock.

    PPDUs are placed with the radiotap TSFT (µs-true) but TCP windows use capture
    stamps; cross-layer views need one clock. Each sniffer's TSF is shifted by the
    median of ``ts_ns - tsft_us * 1000`` over its frames — one constant per sniffer (per
    table once merged), so the µs spacing of PPDUs is kept and host-stamp jitter is not
    injected. ``merged``: the frames are one merged table on one clock.
    """
    if "tsft_us" not in frames or not frames["tsft_us"].notna().any():
        return ppdus
    ts = frames["ts_ns"].to_numpy(np.int64)
    tsft = frames["tsft_us"].to_numpy(np.float64, na_value=np.nan) * 1000
    merged = merged and "sniffers_heard" in frames
    key = np.zeros(len(frames), np.int64) if merged else frames["sniffer"].to_numpy(np.int64)
    delta = pd.Series(ts - tsft).groupby(key).median()
    p_key = np.zeros(len(ppdus), np.int64) if merged else ppdus["sniffer"].to_numpy(np.int64)
    # whole µs: the TSF's own resolution, so TSFT-placed PPDUs keep their µs grid
    shift = (np.nan_to_num(delta.reindex(p_key).to_numpy(np.float64)) / 1000).round().astype(np.int64) * 1000
    out = ppdus.copy()
    for c in ("start_ns", "end_ns"):
        out[c] = ppdus[c].to_numpy(np.int64) + shift
    for c in ("start_us", "end_us"):
        if c in out:
            out[c] = out[c.replace("_us", "_ns")] // 1000
    return out


def analyse(paths, *, reference=0, allow_unsynced=False, tsft_at="auto",
            window_ns=400_000_000, step_ns=200_000_000, progress=None, keep_bad_fcs=False) -> Run:
    """Run every stage on ``paths``; see :class:`Run`."""
    from airtime.detect import detect
    from airtime.ppdu import group_ppdus
    from airtime.summary import detect_summary
    from sniffsync.decode.quality import reception_rows
    from sniffsync.fairness.frames import fairness

    merged = load_merged(paths, reference=reference, allow_unsynced=allow_unsynced, progress=progress,
                         tsft_at=tsft_at)
    frames, stamps = merged.frames, merged.stamps
    several = len(paths) > 1 or len(merged.sniffers) > 1     # or a merged file read back
    sync_report = merged.report if several else None
    ppdus, frame_ppdu, _ = group_ppdus(frames, tsft_at=tsft_at, stamps=stamps, keep_bad_fcs=keep_bad_fcs)
    ppdus = to_capture_clock(frames, ppdus, merged=stamps == "end")
    ppdus["heard_mask"] = _heard_mask(frames, frame_ppdu, len(ppdus))
    det = detect(frames, ppdus, frame_ppdu)
    try:
        # without an fcs_bad column the TCP stage has no FCS verdict and keeps every frame
        fair = fairness(frames.drop(columns="fcs_bad", errors="ignore") if keep_bad_fcs else frames,
                        window_ns, step_ns, ppdus=ppdus, stamps=stamps)
    except NoDataError:
        fair = None          # no TCP/UDP (e.g. all protected): the air-side views still stand
    names = list(merged.sniffers) if several else [Path(p).stem for p in paths]
    summary = detect_summary(ppdus, det)
    summary["reception"] = reception_rows(frames)        # bad-FCS counts per sniffer
    return Run([str(p) for p in paths], names, frames, ppdus, det.events, det.mpdus,
               det.stations, fair, sync_report, summary,
               merged if len(paths) > 1 else None)

