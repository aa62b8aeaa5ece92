"""The Parquet + JSON cache of :func:`sniffsync.pipeline.run.analyse`.

A run is stored under a key hashed from the inputs' paths, sizes and mtimes, the
options and the sniffsync version, so a second start of ``serve``/``report`` is instant
and any change of inputs, options or version misses the cache.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd

from sniffsync import __version__
from sniffsync.pipeline.run import Run, analyse

__all__ = ["cache_dir", "save_run", "load_run", "analyse_cached"]

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
    if getattr(run, "inflight", None) is not None:
        run.inflight.to_parquet(folder / "inflight.parquet", index=False)
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
    inflight = pd.read_parquet(folder / "inflight.parquet") if (folder / "inflight.parquet").exists() else None
    return Run(meta["paths"], meta["names"], None, t["ppdus"], t["events"], t["mpdus"], t["stations"],
               fair, meta["sync_report"], meta["detect_summary"], inflight=inflight)


def analyse_cached(paths, *, use_cache=True, **options) -> tuple[Run, bool]:
    """:func:`analyse` through the cache; returns (run, came_from_cache)."""
    folder = cache_dir(paths, {k: v for k, v in options.items() if k != "progress"})
    if use_cache:
        run = load_run(folder)
        if run is not None:
            return run, True
    from sniffsync.pipeline.uicols import attach_frame_columns
    run = attach_frame_columns(analyse(paths, **options))      # frame facts the UI shows, cached too
    if use_cache:
        try:
            save_run(run, folder)
        except OSError:
            pass                  # a cache we cannot write is only slower
    return run, False
