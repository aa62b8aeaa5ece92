"""Per-flow and per-station summaries of one analysed run (pure; written beside its tables).

``flow_summary``: one row per flow direction that carried payload: bytes, goodput over
its span and over the windows where it was active (mean/min/max/std), retransmissions,
RTT and queueing delay quantiles. ``station_summary``: one row per transmitter: PPDUs,
airtime, RTS sent / CTS received / RTS-CTS collisions, MPDUs failed and lost, MPDUs per
data PPDU (A-MPDU size, a single MPDU counts as 1) and MCS of its data PPDUs.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["flow_summary", "station_summary", "jain", "FLOW_COLUMNS", "STATION_COLUMNS"]

FLOW_COLUMNS = ["fd", "flow", "proto", "src", "sport", "dst", "dport", "ta", "data_segments", "bytes",
                "goodput_bytes", "duration_ns", "goodput_mbps", "win_mean_mbps", "win_min_mbps",
                "win_max_mbps", "win_std_mbps", "windows_active", "retransmissions", "retx_pct",
                "mac_retries", "rtt_samples", "rtt_p50_ms", "rtt_p95_ms", "qdelay_p50_ms", "qdelay_p95_ms",
                "inflight_p50_bytes", "inflight_p95_bytes", "inflight_max_bytes", "qdelay_mean_ms",
                "qdelay_max_ms", "active_until_ns", "active_mbps", "fct_ms", "inferred_bytes"]
STATION_COLUMNS = ["ta", "ppdus", "airtime_ns", "airtime_share", "rts_sent", "cts_received",
                   "rts_unanswered", "rts_cts_collisions", "mpdus", "mpdu_retries", "mpdus_failed",
                   "mpdus_lost", "failed_per_10s", "data_ppdus", "mpdus_per_ampdu_mean",
                   "mpdus_per_ampdu_p50", "mpdus_per_ampdu_max", "mcs_median", "mcs_mode"]


def jain(x) -> float:
    """Jain's index (Σx)² / (n·Σx²); NaN for no values or all zero."""
    x = np.asarray(x, np.float64)
    s2 = float(np.sum(x * x))
    return float(np.sum(x) ** 2 / (len(x) * s2)) if len(x) and s2 > 0 else float("nan")


def _quantiles(df: pd.DataFrame, key: str, col: str, qs: dict, scale: float) -> pd.DataFrame:
    """Per ``key`` quantiles of ``col`` (``qs``: output name -> q), times ``scale``."""
    if not len(df) or col not in df:
        return pd.DataFrame(columns=[key, *qs])
    v = df[[key, col]].copy()
    v[col] = pd.to_numeric(v[col], errors="coerce").astype(np.float64)
    v = v[v[col] >= 0]
    g = v.groupby(key)[col]
    return pd.DataFrame({name: g.quantile(q) * scale for name, q in qs.items()}).reset_index()


def flow_summary(fair, extra: dict | None = None) -> pd.DataFrame:
    """Per flow direction with payload (``fair``: :class:`~sniffsync.fairness.FairnessResult`;
    ``extra``: :func:`sniffsync.campaign.quantities.quantity_tables` of the same run)."""
    if fair is None or not len(fair.flows):
        return pd.DataFrame(columns=FLOW_COLUMNS)
    f = fair.flows[(fair.flows["data_segments"] > 0) & (fair.flows["bytes"] > 0)].copy()
    f["duration_ns"] = (f["last_ns"] - f["first_ns"]).astype(np.int64)
    f["goodput_mbps"] = np.where(f["duration_ns"] > 0,
                                 f["goodput_bytes"] * 8e3 / f["duration_ns"].clip(lower=1), np.nan)
    w = fair.windows
    if len(w):
        w = w[w["active"].astype(bool)]
        g = (w["goodput_bps"].astype(np.float64) / 1e6).groupby(w["fd"])
        win = pd.DataFrame({"win_mean_mbps": g.mean(), "win_min_mbps": g.min(), "win_max_mbps": g.max(),
                            "win_std_mbps": g.std(ddof=0), "windows_active": g.size()}).reset_index()
        f = f.merge(win, on="fd", how="left")
    f["retx_pct"] = 100.0 * f["retransmissions"] / f["data_segments"]
    if "active_until_ns" in f:
        # goodput over the span the direction had data outstanding: a starved flow's rate drops
        span = (f["active_until_ns"] - f["first_ns"]).astype(np.int64)
        f["active_mbps"] = np.where(span > 0, f["goodput_bytes"] * 8e3 / span.clip(lower=1), np.nan)
        f["fct_ms"] = np.where(f["fct_ns"] >= 0, f["fct_ns"] / 1e6, np.nan)
    rtt = _quantiles(fair.rtt, "fd", "rtt_ns", {"rtt_p50_ms": 0.5, "rtt_p95_ms": 0.95}, 1e-6)
    qd = _quantiles(fair.rtt, "fd", "qdelay_ns", {"qdelay_p50_ms": 0.5, "qdelay_p95_ms": 0.95}, 1e-6)
    f = f.merge(rtt, on="fd", how="left").merge(qd, on="fd", how="left")
    if len(fair.rtt) and "qdelay_ns" in fair.rtt:
        q = fair.rtt[fair.rtt["rtt_ns"] >= 0]
        g = (q["qdelay_ns"].astype(np.float64) / 1e6).groupby(q["fd"])
        f = f.merge(pd.DataFrame({"qdelay_mean_ms": g.mean(), "qdelay_max_ms": g.max()}).reset_index(),
                    on="fd", how="left")
    if extra is not None and len(extra.get("inflight", ())):
        from sniffsync.tcp.inflight import inflight_stats
        f = f.merge(inflight_stats(extra["inflight"]).drop(columns="inflight_samples"), on="fd", how="left")
    for c in FLOW_COLUMNS:
        if c not in f:
            f[c] = np.nan
    return f[FLOW_COLUMNS].reset_index(drop=True)


def _mode(s: pd.Series) -> float:
    """Most frequent value (the smallest on a tie); NaN when none."""
    return float(s.mode().min()) if s.notna().any() else np.nan


def station_summary(ppdus: pd.DataFrame, stations: pd.DataFrame) -> pd.DataFrame:
    """Per transmitter (``stations``: detect's per-station counters)."""
    p = ppdus[ppdus["ta"].notna()]
    if not len(p):
        return pd.DataFrame(columns=STATION_COLUMNS)
    ta = p["ta"].astype("UInt64")
    air = p["airtime_ns"].astype(np.int64).groupby(ta).sum()
    out = pd.DataFrame({"ppdus": ta.groupby(ta).size(), "airtime_ns": air,
                        "airtime_share": air / max(int(air.sum()), 1)})
    out.index.name = "ta"
    d = p[p["kind"].astype(str) == "data"]
    dta = d["ta"].astype("UInt64")
    n = d["n_mpdus"].astype(np.float64).groupby(dta)
    mcs = pd.to_numeric(d["mcs"], errors="coerce").astype(np.float64).groupby(dta)
    out = out.join(pd.DataFrame({"data_ppdus": n.size(), "mpdus_per_ampdu_mean": n.mean(),
                                 "mpdus_per_ampdu_p50": n.median(), "mpdus_per_ampdu_max": n.max(),
                                 "mcs_median": mcs.median(),
                                 "mcs_mode": mcs.agg(_mode)}))
    if len(stations):
        s = stations.set_index(stations["ta"].astype("UInt64")).drop(columns="ta")
        s = s.rename(columns={"rts": "rts_sent"})
        out = out.join(s[[c for c in s.columns if c in STATION_COLUMNS and c not in out]])
    out = out.reset_index()
    for c in STATION_COLUMNS:
        if c not in out:
            out[c] = 0 if c != "failed_per_10s" else np.nan
    span_s = (int(ppdus["end_ns"].max()) - int(ppdus["start_ns"].min())) / 1e9
    out["failed_per_10s"] = out["mpdus_failed"].astype(np.float64) * 10 / span_s if span_s > 0 else np.nan
    counts = ["rts_sent", "cts_received", "rts_unanswered", "rts_cts_collisions", "mpdus", "mpdu_retries",
              "mpdus_failed", "mpdus_lost", "data_ppdus"]
    out[counts] = out[counts].fillna(0).astype(np.int64)
    return out[STATION_COLUMNS]
