"""The tables of ``compare``: one per metric, a row per run or per group of runs.

Every table is built from the runs' cached Parquet tables (:mod:`sniffsync.campaign.store`):
per-run rows first (:func:`run_tables`), then, with ``by``, one row per group of runs
sharing those label values: the **mean over the group's runs** of every numeric column,
with ``runs`` = how many (:func:`grouped`). Ratios against a baseline divide each row by
the baseline run's row (its group's row when grouped).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from sniffsync.campaign.store import load_table
from sniffsync.campaign.summary import jain
from sniffsync.decode.macs import mac_texts
from sniffsync.tcp.icmp import echo_rtts, echo_summary
from sniffsync.errors import UsageError

__all__ = ["run_tables", "grouped", "baseline_ratios", "samples", "METRICS", "BASELINE_METRICS"]

# table name -> what it says (also the HTML page's captions)
METRICS = {
    "throughput": "goodput per flow direction with payload (Mb/s over its span): mean, min, max, std over "
                  "the run's flows, total, and max/min ratio; efficiency = goodput bytes / payload bytes "
                  "sent (retransmissions included; bytes a sniffer missed but the receiver acknowledged "
                  "count as sent once)",
    "flows": "each flow direction: goodput over its span and over the windows where it was active "
             "(mean, min, max, std), retransmissions, RTT and queueing delay",
    "jain": "Jain's index over the run (flows' goodput over their activity span; jain_run_active: over "
            "the span each flow had data outstanding, so a starved flow reads as unfairness) and per "
            "window (windows with >= 2 active flows): median, p10",
    "rtt": "RTT and queueing delay (RTT - the flow's trailing minimum RTT) over every Karn-filtered "
           "sample of the run, ms; ICMP echo (ping) requests, replies, loss and RTT, and ping p50 - "
           "TCP RTT p50",
    "retransmissions": "TCP retransmissions and their share of data segments; MAC retries; MPDUs "
                       "failed (not acknowledged) and lost (never delivered)",
    "stations": "per transmitter: RTS sent, CTS received, RTS/CTS collisions, failed MPDUs (and per 10 s), "
                "MPDUs per data PPDU (A-MPDU size), MCS of data PPDUs, airtime share",
    "udp": "per UDP flow direction: datagrams, loss, reordering, duplicates and RFC 3550 jitter from "
           "iperf2/iperf3 sequence numbers and send times (method), else from IP IDs (method ip_id, no "
           "jitter)",
    "airtime": "airtime per sender (CTS and ACK attributed to the RA of the PPDU one SIFS before) split into "
               "data / control (RTS, CTS, ACK, BA, BAR) / management / other, and of it retried and collided, "
               "ms; share of the run's airtime",
    "wired": "a wired capture (the run's wired/ folder) joined by 5-tuple, IP ID and TCP sequence: per flow "
             "direction, packets on both sides, one-way delay p50 (both clocks' offset included) and the "
             "queueing delay (one-way delay - its minimum: the AP's queue for downlink) mean/p50/p95/max, ms",
    "channel": "channel utilisation per window (union of PPDU intervals, overlaps once): mean, median, max; "
               "busy and idle time, s",
}
BASELINE_METRICS = {"throughput": ["total_goodput_mbps", "flow_goodput_mbps_mean"],
                    "jain": ["jain_run", "jain_window_median"], "rtt": ["rtt_p50_ms", "rtt_p95_ms"],
                    "retransmissions": ["retx_pct", "mpdus_failed"]}


def _flow_label(f: pd.DataFrame) -> pd.Series:
    return (f["proto"].astype(str) + " " + f["src"].astype(str) + ":" + f["sport"].astype(str) + "→"
            + f["dst"].astype(str) + ":" + f["dport"].astype(str))


def _per_run(spec) -> dict:
    """One run's rows of every metric table (before labels are added)."""
    fs, ss = load_table(spec.cache, "flow_summary"), load_table(spec.cache, "station_summary")
    jt, rtt = load_table(spec.cache, "jain"), load_table(spec.cache, "rtt")
    g = fs["goodput_mbps"].astype(np.float64) if len(fs) else pd.Series([], dtype=np.float64)
    thr = {"flows": len(fs), "total_goodput_mbps": g.sum(), "flow_goodput_mbps_mean": g.mean(),
           "flow_goodput_mbps_min": g.min(), "flow_goodput_mbps_max": g.max(),
           "flow_goodput_mbps_std": g.std(ddof=0),
           "max_min_ratio": g.max() / g.min() if len(g) and g.min() > 0 else np.nan}
    jw = (jt.loc[jt["n_active"] >= 2, "jain"].dropna().astype(np.float64) if len(jt)
          else pd.Series([], dtype=np.float64))
    ga = fs["active_mbps"].astype(np.float64).dropna() if "active_mbps" in fs else pd.Series([], dtype=float)
    sent = (fs["bytes"].sum() + fs["inferred_bytes"].fillna(0).sum()) if len(fs) else 0
    thr["efficiency"] = fs["goodput_bytes"].sum() / sent if sent > 0 else np.nan
    ja = {"jain_run": jain(g), "jain_run_active": jain(ga), "windows": len(jw),
          "jain_window_median": jw.median() if len(jw) else np.nan,
          "jain_window_p10": jw.quantile(0.1) if len(jw) else np.nan}
    r = rtt[rtt["rtt_ns"] >= 0] if len(rtt) else rtt
    icmp = load_table(spec.cache, "icmp")
    q = r["qdelay_ns"].dropna().astype(np.float64) if len(r) else pd.Series([], dtype=float)
    rt = {"rtt_samples": len(r),
          "rtt_p50_ms": r["rtt_ns"].quantile(0.5) / 1e6 if len(r) else np.nan,
          "rtt_p95_ms": r["rtt_ns"].quantile(0.95) / 1e6 if len(r) else np.nan,
          "qdelay_p50_ms": q.quantile(0.5) / 1e6 if len(q) else np.nan,
          "qdelay_p95_ms": q.quantile(0.95) / 1e6 if len(q) else np.nan}
    ping = echo_summary(icmp if len(icmp) else echo_rtts(pd.DataFrame()),
                        r["rtt_ns"].to_numpy() if len(r) else [])
    rt.update({k: v for k, v in ping.items() if k != "tcp_rtt_p50_ms"})
    seg = int(fs["data_segments"].sum()) if len(fs) else 0
    rx = {"data_segments": seg, "retransmissions": int(fs["retransmissions"].sum()) if len(fs) else 0,
          "mac_retries": int(fs["mac_retries"].sum()) if len(fs) else 0,
          "mpdus": int(ss["mpdus"].sum()) if len(ss) else 0,
          "mpdus_failed": int(ss["mpdus_failed"].sum()) if len(ss) else 0,
          "mpdus_lost": int(ss["mpdus_lost"].sum()) if len(ss) else 0}
    rx["retx_pct"] = 100.0 * rx["retransmissions"] / seg if seg else np.nan
    rx["mpdu_loss_pct"] = 100.0 * rx["mpdus_lost"] / rx["mpdus"] if rx["mpdus"] else np.nan
    flows = fs.drop(columns=["fd", "flow", "src", "sport", "dst", "dport", "proto", "ta"]) if len(fs) else fs
    if len(fs):
        flows.insert(0, "flow", _flow_label(fs))
        ta = _mac_ints(fs["ta"])
        flows.insert(1, "station", mac_texts(ta.where(ta >= 0).astype("UInt64")))    # -1: no 802.11 TA
    ud = load_table(spec.cache, "udp")
    if len(ud):
        ud.insert(0, "flow", "udp " + ud.pop("src").astype(str) + ":" + ud.pop("sport").astype(str) + "→"
                  + ud.pop("dst").astype(str) + ":" + ud.pop("dport").astype(str))
    at = load_table(spec.cache, "airtime_senders")
    if len(at):
        snd = pd.to_numeric(at.pop("sender"))
        at.insert(0, "station", mac_texts(snd.where(snd >= 0).astype("UInt64")))
        at["station"] = at["station"].fillna("unknown")
        total = at["airtime_ns"].sum()
        for c in [c for c in at.columns if c.endswith("_ns")]:
            at[c.replace("_ns", "_ms")] = at.pop(c) / 1e6
        at["airtime_share"] = at["airtime_ms"] * 1e6 / total if total else np.nan
    ut = load_table(spec.cache, "utilisation")
    ch = {"windows": len(ut), "utilisation_mean": ut["utilisation"].mean() if len(ut) else np.nan,
          "utilisation_p50": ut["utilisation"].median() if len(ut) else np.nan,
          "utilisation_max": ut["utilisation"].max() if len(ut) else np.nan,
          "busy_s": ut["busy_ns"].sum() / 1e9 if len(ut) else np.nan,
          "idle_s": ut["idle_ns"].sum() / 1e9 if len(ut) else np.nan}
    wt = load_table(spec.cache, "wired")
    if len(wt):
        from sniffsync.tcp.wired import wired_summary
        wt = wired_summary(wt)
        wt.insert(0, "flow", wt.pop("proto").map({6: "tcp", 17: "udp"}) + " "
                  + wt.pop("src") + ":" + wt.pop("sport").astype(str) + "→" + wt.pop("dst") + ":"
                  + wt.pop("dport").astype(str))
    st = ss.copy()
    if len(st):
        st.insert(0, "station", mac_texts(st.pop("ta")))
    return {"throughput": pd.DataFrame([thr]), "flows": flows, "jain": pd.DataFrame([ja]),
            "rtt": pd.DataFrame([rt]), "retransmissions": pd.DataFrame([rx]), "stations": st,
            "udp": ud, "airtime": at, "channel": pd.DataFrame([ch]),
            "wired": wt}


def _labels(specs) -> pd.DataFrame:
    rows = [{"run": s.name, **s.labels} for s in specs]
    return pd.DataFrame(rows)


def run_tables(specs) -> dict:
    """Metric name -> DataFrame with a row per run (per run and flow / station for those two)."""
    labels = _labels(specs)
    parts = {name: [] for name in METRICS}
    for spec in specs:
        for name, df in _per_run(spec).items():
            if len(df):
                parts[name].append(df.assign(run=spec.name))
    out = {}
    for name, frames in parts.items():
        df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame({"run": []})
        # a label named like a metric keeps its name (--by uses it); the metric gets "_metric"
        per_row = name in ("flows", "stations", "udp", "airtime", "wired")       # rows per run and item
        df = labels.merge(df, on="run", how="right" if per_row else "left",
                          suffixes=("", "_metric"))
        out[name] = df
    return out


def _check_by(specs, by) -> None:
    for key in by:
        missing = [s.name for s in specs if key not in s.labels]
        if missing:
            raise UsageError(f"--by {key}: run(s) {', '.join(missing)} have no label {key!r}")


def grouped(tables: dict, specs, by: list) -> dict:
    """Rows per group of runs sharing the ``by`` label values: means, and ``runs`` counted."""
    if not by:
        return tables
    _check_by(specs, by)
    labels = {k for s in specs for k in s.labels}
    out = {}
    for name, df in tables.items():
        keys = by + [k for k in ("flow", "station") if k in df]
        num = [c for c in df.columns if c not in labels and c not in keys and c != "run"
               and pd.api.types.is_numeric_dtype(df[c])]
        g = df.groupby(keys, dropna=False, sort=True)
        out[name] = g[num].mean().join(g["run"].nunique().rename("runs")).reset_index()
    return out


def baseline_ratios(tables: dict, specs, baseline: str, by: list) -> pd.DataFrame:
    """Each row's headline metrics divided by the baseline run's (or its group's) row."""
    spec = next((s for s in specs if s.name == baseline), None)
    if spec is None:
        raise UsageError(f"--baseline {baseline}: not one of the runs ({', '.join(s.name for s in specs)})")
    keys = by or ["run"]
    base_key = tuple(spec.labels[k] for k in by) if by else (baseline,)
    out = None
    for name, cols in BASELINE_METRICS.items():
        df = tables[name].set_index(keys)
        base = df.loc[[base_key] if len(keys) > 1 else [base_key[0]], cols].iloc[0]
        base = base.astype(np.float64).replace(0, np.nan)            # a ratio against 0 is empty
        ratio = (df[cols].astype(np.float64) / base).add_suffix("_ratio")
        out = ratio if out is None else out.join(ratio)
    return out.reset_index()


def _mac_ints(s: pd.Series) -> pd.Series:
    """MAC addresses as integers whether a table holds them as integers or colon-hex text."""
    if pd.api.types.is_numeric_dtype(s.dtype):
        return s.astype("Int64")
    return s.map(lambda m: int(str(m).replace(":", ""), 16) if isinstance(m, str) and m else pd.NA,
                 na_action="ignore").astype("Int64")       # per distinct station, not per frame


def ampdu_rtt(spec) -> pd.DataFrame:
    """Per (window, station) of ``station_windows``: its mean MPDUs per A-MPDU (``ampdu``) and
    the median RTT (ms) of the samples, in that window, of the flow directions it transmits
    (``flows.ta``): the aggregation-vs-latency trade-off of TSQ and pacing."""
    from sniffsync.campaign.store import manifest
    sw, rtt, fl = (load_table(spec.cache, n) for n in ("station_windows", "rtt", "flows"))
    step = ((manifest(spec.cache) or {}).get("options") or {}).get("step_ns")
    if not (len(sw) and len(rtt) and len(fl) and step):
        return pd.DataFrame({"ampdu": [], "rtt_ms": []})
    r = rtt[rtt["rtt_ns"] >= 0].merge(fl[["fd", "ta"]], on="fd")
    r = r.assign(window=r["ts_ns"].to_numpy(np.int64) // int(step), ta=_mac_ints(r["ta"]))
    med = (r["rtt_ns"] / 1e6).groupby([r["window"], r["ta"]]).median().rename("rtt_ms").reset_index()
    sw = sw.assign(ta=_mac_ints(sw["ta"]))
    m = sw.merge(med, on=["window", "ta"])
    return pd.DataFrame({"ampdu": m["mpdus_per_ampdu_mean"].astype(np.float64), "rtt_ms": m["rtt_ms"]})


def samples(specs, by: list) -> dict:
    """The raw values behind the figures, per run (or group label): per-window Jain, per-window
    per-flow goodput (Mb/s, active windows of flows with payload), per-flow goodput, RTT (ms)."""
    out = {"jain": {}, "window_goodput": {}, "flow_goodput": {}, "rtt": {}, "ampdu_rtt": {}}
    for spec in specs:
        label = ", ".join(f"{k}={spec.labels[k]}" for k in by) if by else spec.name
        jt, w = load_table(spec.cache, "jain"), load_table(spec.cache, "windows")
        fs, rtt = load_table(spec.cache, "flow_summary"), load_table(spec.cache, "rtt")
        vals = {
            "jain": jt.loc[jt["n_active"] >= 2, "jain"].dropna().to_numpy(np.float64) if len(jt) else [],
            "window_goodput": (w.loc[w["active"].astype(bool) & w["fd"].isin(fs["fd"]), "goodput_bps"]
                               .to_numpy(np.float64) / 1e6) if len(w) and len(fs) else [],
            "flow_goodput": fs["goodput_mbps"].dropna().to_numpy(np.float64) if len(fs) else [],
            "rtt": rtt.loc[rtt["rtt_ns"] >= 0, "rtt_ns"].to_numpy(np.float64) / 1e6 if len(rtt) else [],
            "ampdu_rtt": ampdu_rtt(spec).to_numpy(np.float64).ravel(),
        }
        for k, v in vals.items():
            out[k][label] = np.concatenate([out[k].get(label, np.empty(0)), np.asarray(v, np.float64)])
    return out
