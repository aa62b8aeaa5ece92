"""The whole analysis of one run: read (and merge), PPDUs, detection, fairness.

``analyse(paths)`` is what ``serve``, ``report`` and ``demo`` run. Results can be
cached as Parquet + JSON under a key hashed from the inputs' paths, sizes, mtimes,
the options and the sniffsync version, so a second start is instant.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from sniffsync import __version__

__all__ = ["Run", "analyse", "load_frames", "cache_dir"]


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
    merged: object | None = None         # load_frames' Merged (records, stamps); None from the cache


def load_frames(paths, *, reference=0, allow_unsynced=False, progress=None, tsft_at="auto"):
    """The merged table of several captures (:class:`sniffsync.sync.merge.Merged`), or one
    capture's frame table as a ``Merged`` of one sniffer (no report, no records, its
    stamps as captured)."""
    from sniffsync.sync.merge import Merged, merge
    paths = [str(p) for p in paths]
    if len(paths) == 1:
        from sniffsync.decode.frames import read_capture
        return Merged(read_capture(paths[0]), None, None, [Path(paths[0]).stem], "capture")
    return merge(paths, reference=reference, allow_unsynced=allow_unsynced, progress=progress,
                 tsft_at=tsft_at)


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


def to_capture_clock(frames: pd.DataFrame, ppdus: pd.DataFrame, stamps: str = "capture") -> pd.DataFrame:
    """PPDU times moved from the TSF clock onto the capture (``ts_ns``) clock.

    PPDUs are placed with the radiotap TSFT (µs-true) but TCP windows use capture
    stamps; cross-layer views need one clock. Each sniffer's TSF is shifted by the
    median of ``ts_ns - tsft_us * 1000`` over its frames — one constant per sniffer (per
    table once merged), so the µs spacing of PPDUs is kept and host-stamp jitter is not
    injected. ``stamps``: the frames' convention (``"end"``: a merged table).
    """
    if "tsft_us" not in frames or not frames["tsft_us"].notna().any():
        return ppdus
    ts = frames["ts_ns"].to_numpy(np.int64)
    tsft = frames["tsft_us"].to_numpy(np.float64, na_value=np.nan) * 1000
    merged = stamps == "end" and "sniffers_heard" in frames
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
            window_ns=400_000_000, step_ns=200_000_000, progress=None) -> Run:
    """Run every stage on ``paths``; see :class:`Run`."""
    from airtime.detect import detect
    from airtime.ppdu import group_ppdus
    from airtime.summary import detect_summary
    from sniffsync.errors import UsageError
    from sniffsync.fairness.frames import fairness

    loaded = load_frames(paths, reference=reference, allow_unsynced=allow_unsynced,
                         progress=progress, tsft_at=tsft_at)
    frames = loaded.frames
    ppdus, frame_ppdu = group_ppdus(frames, tsft_at=tsft_at, stamps=loaded.stamps)
    ppdus = to_capture_clock(frames, ppdus, loaded.stamps)
    ppdus["heard_mask"] = _heard_mask(frames, frame_ppdu, len(ppdus))
    det = detect(frames, ppdus, frame_ppdu)
    try:
        fair = fairness(frames, window_ns, step_ns, ppdus=ppdus, stamps=loaded.stamps)
    except UsageError:
        fair = None          # no TCP/UDP (e.g. all protected): the air-side views still stand
    names = [Path(p).stem for p in paths]
    return Run([str(p) for p in paths], names, frames, ppdus, det["events"], det["mpdus"],
               det["stations"], fair, loaded.report, detect_summary(ppdus, det), loaded)


# ---- cache -------------------------------------------------------------------------

_TABLES = ("ppdus", "events", "mpdus", "stations")
_FAIR = ("flows", "windows", "jain", "cdf", "rtt", "stations")


def cache_dir(paths, options: dict) -> Path:
    """Cache folder for these inputs and options (``$SNIFFSYNC_CACHE`` or ~/.cache/sniffsync)."""
    h = hashlib.sha256(__version__.encode())
    for p in paths:
        st = os.stat(p)
        h.update(f"{os.path.abspath(p)}|{st.st_size}|{st.st_mtime_ns}".encode())
    h.update(json.dumps(options, sort_keys=True).encode())
    root = Path(os.environ.get("SNIFFSYNC_CACHE") or Path.home() / ".cache" / "sniffsync")
    return root / h.hexdigest()[:24]


def _jsonable(df: pd.DataFrame) -> pd.DataFrame:
    """Object columns (lists, mixed) as JSON text so Parquet can hold them."""
    out = df.copy()
    for c in out.columns:
        if out[c].dtype == object:
            out[c] = out[c].map(lambda v: v if v is None or isinstance(v, str) else json.dumps(v, default=str))
    return out


def save_run(run: Run, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in _TABLES:
        _jsonable(getattr(run, name)).to_parquet(folder / f"{name}.parquet", index=False)
    if run.fairness is not None:
        for name in _FAIR:
            _jsonable(getattr(run.fairness, name)).to_parquet(folder / f"fair_{name}.parquet", index=False)
    meta = {"paths": run.paths, "names": run.names, "sync_report": run.sync_report,
            "detect_summary": run.detect_summary,
            "fair_summary": run.fairness.summary if run.fairness is not None else None}
    (folder / "run.json").write_text(json.dumps(meta, default=_json_default))
    (folder / "complete").write_text("1")


def _json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


def load_run(folder: Path) -> Run | None:
    if not (folder / "complete").exists():
        return None
    from sniffsync.fairness.frames import FairnessResult
    meta = json.loads((folder / "run.json").read_text())
    t = {n: pd.read_parquet(folder / f"{n}.parquet") for n in _TABLES}
    fair = None
    if meta["fair_summary"] is not None:
        f = {n: pd.read_parquet(folder / f"fair_{n}.parquet") for n in _FAIR}
        fair = FairnessResult(**f, summary=meta["fair_summary"])
    return Run(meta["paths"], meta["names"], None, t["ppdus"], t["events"], t["mpdus"], t["stations"],
               fair, meta["sync_report"], meta["detect_summary"])


def analyse_cached(paths, *, use_cache=True, **options) -> tuple[Run, bool]:
    """:func:`analyse` through the cache; returns (run, came_from_cache)."""
    folder = cache_dir(paths, {k: v for k, v in options.items() if k != "progress"})
    if use_cache:
        run = load_run(folder)
        if run is not None:
            return run, True
    run = analyse(paths, **options)
    if use_cache:
        try:
            save_run(run, folder)
        except OSError:
            pass                  # a cache we cannot write is only slower
    return run, False
