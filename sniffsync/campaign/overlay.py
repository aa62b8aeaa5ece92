"""The campaign page's overlaid time series: the same metrics of every run on one time axis
(seconds since the run's first PPDU), for the page's run picker (:mod:`sniffsync.campaign.page`).

Per run, from its cached tables (:mod:`sniffsync.campaign.store`): total goodput per fairness
window (sum over flow directions), Jain's index per window, the window's median queueing delay,
channel utilisation per window (``utilisation``). A series longer than :data:`MAX_POINTS` keeps
every k-th point, so the page's size follows runs x metrics, not packets.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["OVERLAY_METRICS", "OVERLAY_NEEDS", "MAX_POINTS", "overlay_series", "overlay_of_runs"]

MAX_POINTS = 2000
# id -> (title, unit, table, time column, value column, scale, aggregate over rows of one time)
OVERLAY_METRICS = {
    "goodput": ("goodput, all flows, per window", "Mb/s", "windows", "start_ns", "goodput_bps", 1e-6, "sum"),
    "jain": ("Jain's index per window", "", "jain", "start_ns", "jain", 1.0, "mean"),
    "qdelay": ("queueing delay per window (median)", "ms", "jain", "start_ns", "qdelay_p50_ns", 1e-6, "mean"),
    "util": ("channel utilisation per window", "busy fraction", "utilisation", "ts_ns", "utilisation", 1.0, "mean"),
}
# what a metric needs, said when the picked runs have no value of it
OVERLAY_NEEDS = {
    "goodput": "TCP data some sniffer captured",
    "jain": "at least one flow with data outstanding per window",
    "qdelay": "RTT samples: a data segment and its ACK heard by one sniffer",
    "util": "PPDUs with a known airtime",
}


def _origin(spec) -> int | None:
    path = Path(spec.cache) / "ppdus.parquet"
    if not path.exists():
        return None
    s = pd.read_parquet(path, columns=["start_ns"])["start_ns"]
    return int(s.min()) if len(s) else None


def _series(df: pd.DataFrame, t_col: str, v_col: str, scale: float, how: str, t0: int) -> dict:
    if not len(df) or t_col not in df or v_col not in df:
        return {"t_s": [], "y": []}
    v = pd.to_numeric(df[v_col], errors="coerce").astype(np.float64) * scale
    g = v.groupby(df[t_col].to_numpy(np.int64)).agg(how)
    k = max(1, -(-len(g) // MAX_POINTS))
    g = g.iloc[::k]
    y = np.round(g.to_numpy(np.float64), 4)
    return {"t_s": np.round((g.index.to_numpy(np.int64) - t0) / 1e9, 6).tolist(),
            "y": [None if not np.isfinite(x) else float(x) for x in y]}


def _overlay(items) -> dict:
    """``items``: (name, labels, t0 ns, table name -> DataFrame loader) per run."""
    runs, metrics = [], {m: [] for m in OVERLAY_METRICS}
    for name, labels, t0, load in items:
        if t0 is None:
            continue
        runs.append({"name": name, "labels": {k: str(v) for k, v in labels.items()}})
        tables = {}
        for mid, (_, _, table, t_col, v_col, scale, how) in OVERLAY_METRICS.items():
            if table not in tables:
                tables[table] = load(table)
            metrics[mid].append({"run": name, **_series(tables[table], t_col, v_col, scale, how, t0)})
    return {"runs": runs, "metrics": [
        {"id": mid, "title": d[0], "unit": d[1], "needs": OVERLAY_NEEDS[mid], "series": metrics[mid]}
        for mid, d in OVERLAY_METRICS.items()
        if any(s["t_s"] for s in metrics[mid])]}


def overlay_series(specs) -> dict:
    """``{"runs": [{name, labels}], "metrics": [{id, title, unit, series: [{run, t_s, y}]}]}``
    from each run's campaign cache (:mod:`sniffsync.campaign.store`)."""
    from sniffsync.campaign.store import load_table
    return _overlay((s.name, s.labels, _origin(s), lambda t, s=s: load_table(s.cache, t)) for s in specs)


def _run_tables(run, step_ns: int) -> dict:
    """The overlay's tables of an analysed :class:`~sniffsync.pipeline.run.Run` (as the store holds them)."""
    from sniffsync.campaign.quantities import airtime_tables
    fair = run.fairness
    empty = pd.DataFrame()
    return {"windows": lambda: fair.windows if fair is not None else empty,
            "jain": lambda: fair.jain if fair is not None else empty,
            "utilisation": lambda: airtime_tables(run.ppdus, run.events, step_ns)["utilisation"]}


def overlay_of_runs(named_runs, step_ns: int = 200_000_000) -> dict:
    """:func:`overlay_series` of runs analysed in memory (``serve CAMPAIGN``): ``named_runs`` is
    (name, labels, Run) per run; ``step_ns`` the utilisation windows (the store's ``step_ns``)."""
    def item(name, labels, run):
        p = run.ppdus
        t0 = int(p["start_ns"].min()) if p is not None and len(p) else None
        tables = _run_tables(run, step_ns)
        return name, labels, t0, lambda t: tables[t]()
    return _overlay(item(*r) for r in named_runs)
