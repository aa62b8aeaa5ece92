"""One run's tables as Parquet in its cache folder, written once and reused.

The folder holds what :func:`sniffsync.pipeline.cache.save_run` writes (PPDUs, events,
MPDUs, detection counters, the fairness tables), the two summaries of
:mod:`sniffsync.campaign.summary`, optionally the merged frame table, and
``campaign.json`` (written last): the cache key, the run's name and captures. The key is
:func:`sniffsync.pipeline.cache.cache_dir`'s hash of the captures' paths, sizes and
mtimes, the analysis options and the sniffsync version, so any change recomputes.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from sniffsync import __version__

__all__ = ["TABLES", "analyse_run", "cached", "load_table", "manifest", "OPTIONS"]

# SQL/view name -> file in the cache folder
TABLES = {
    "ppdus": "ppdus.parquet", "events": "events.parquet", "mpdus": "mpdus.parquet",
    "station_counters": "stations.parquet", "flows": "fair_flows.parquet",
    "windows": "fair_windows.parquet", "jain": "fair_jain.parquet", "cdf": "fair_cdf.parquet",
    "rtt": "fair_rtt.parquet", "window_stations": "fair_stations.parquet",
    "flow_summary": "flow_summary.parquet", "station_summary": "station_summary.parquet",
    "frames": "frames.parquet", "inflight": "inflight.parquet",
    "icmp": "icmp.parquet", "udp": "udp.parquet", "utilisation": "utilisation.parquet",
    "airtime_senders": "airtime_senders.parquet", "station_windows": "station_windows.parquet",
    "wired": "wired.parquet",
}
MANIFEST = "campaign.json"
OPTIONS = {"reference": 0, "allow_unsynced": False, "tsft_at": "auto",
           "window_ns": 400_000_000, "step_ns": 200_000_000}


LAYOUT = 2          # bump when the summaries or this folder's layout change


def _key(captures, options: dict) -> str:
    from sniffsync.pipeline.cache import cache_dir
    return cache_dir(list(captures), {**options, "campaign_layout": LAYOUT}).name


def manifest(cache) -> dict | None:
    """The ``campaign.json`` of a cache folder (None when absent or unreadable)."""
    try:
        return json.loads((Path(cache) / MANIFEST).read_text())
    except (OSError, ValueError):
        return None


def _fresh(cache: Path, key: str, frames: bool) -> bool:
    m = manifest(cache)
    return (m is not None and m.get("key") == key and (cache / "complete").exists()
            and (not frames or (cache / TABLES["frames"]).exists()))


def cached(spec, options: dict | None = None, frames: bool = False) -> dict | None:
    """``analyse_run``'s answer when ``spec``'s cache is fresh, else None (no analysis)."""
    options = {**OPTIONS, **(options or {})}
    key = _key((*spec.captures, *spec.wired), options)
    if _fresh(Path(spec.cache), key, frames):
        return {"run": spec.name, "cache": str(spec.cache), "key": key, "cached": True}
    return None


def _clear(cache: Path) -> None:
    """Remove our files of a stale or half-written cache (only ours: never a folder)."""
    for name in (*TABLES.values(), MANIFEST, "complete", "run.json",
                 *(f"fair_{n}.parquet" for n in ("flows", "windows", "jain", "cdf", "rtt", "stations"))):
        (cache / name).unlink(missing_ok=True)


def analyse_run(spec, options: dict | None = None, frames: bool = False, force: bool = False) -> dict:
    """Analyse ``spec`` (a :class:`~sniffsync.campaign.runs.RunSpec`) unless its cache is fresh.

    Returns ``{"run", "cache", "key", "cached"}`` (small: this runs on Dask workers too).
    """
    from sniffsync.campaign.quantities import airtime_tables, quantity_tables
    from sniffsync.campaign.summary import flow_summary, station_summary
    from sniffsync.pipeline.cache import _jsonable, save_run
    from sniffsync.pipeline.run import analyse

    options = {**OPTIONS, **(options or {})}
    cache = Path(spec.cache)
    key = _key((*spec.captures, *spec.wired), options)
    out = {"run": spec.name, "cache": str(cache), "key": key}
    if not force and _fresh(cache, key, frames):
        return {**out, "cached": True}
    _clear(cache)
    run = analyse(list(spec.captures), **options)
    save_run(run, cache)
    extra = quantity_tables(run.frames)
    for name, df in {**extra, **airtime_tables(run.ppdus, run.events, options["step_ns"])}.items():
        df.to_parquet(cache / TABLES[name], index=False)
    from sniffsync.campaign.quantities import wired_table
    wired_table(run.frames, spec.wired).to_parquet(cache / TABLES["wired"], index=False)
    flow_summary(run.fairness, extra).to_parquet(cache / TABLES["flow_summary"], index=False)
    station_summary(run.ppdus, run.stations).to_parquet(cache / TABLES["station_summary"], index=False)
    if frames:
        _jsonable(run.frames).to_parquet(cache / TABLES["frames"], index=False)
    meta = {"key": key, "run": spec.name, "captures": list(spec.captures), "version": __version__,
            "options": options, "frames": bool(frames)}
    (cache / MANIFEST).write_text(json.dumps(meta, indent=1))
    return {**out, "cached": False}


def load_table(cache, name: str) -> pd.DataFrame:
    """One table of a run's cache folder (an empty frame when the run has none)."""
    path = Path(cache) / TABLES[name]
    return pd.read_parquet(path) if path.exists() else pd.DataFrame()
