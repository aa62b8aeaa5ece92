"""Data behind the analysis views (web UI and report), for the whole run or a time range.

Times sent to the browser are ns relative to the run's first PPDU; long series are
thinned to a bounded number of points so a view's payload never scales with frames.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from airtime.summary import bin_for_span, histogram, station_airtime
from sniffsync.decode.macs import mac_text

__all__ = ["analysis_data", "data_notes", "failed_bin_ns", "MAX_POINTS", "MAX_BINS"]

MAX_POINTS = 2000
MAX_BINS = 120                      # bars of the failed-MPDU histogram, whatever the time span


def failed_bin_ns(span_ns: int) -> int:
    """Bin of the failed-MPDU histogram: 1 s up to 30 s of PPDUs, then the ladder of
    :func:`airtime.summary.bin_for_span` giving at most :data:`MAX_BINS` bins (a run whose
    clock jumps by days must not cost a bar per 10 s)."""
    if span_ns <= 30_000_000_000:
        return 1_000_000_000
    return bin_for_span(span_ns, MAX_BINS)


def _thin(idx: np.ndarray, limit: int = MAX_POINTS) -> np.ndarray:
    return idx if len(idx) <= limit else idx[np.linspace(0, len(idx) - 1, limit).astype(np.int64)]


def _f(v, nd=3):
    return None if v is None or not np.isfinite(v) else round(float(v), nd)


def _fs(values, nd=3) -> list:
    """``values`` rounded to ``nd`` decimals as a JSON list, non-finite as None: numpy's
    rounding (``rint(v * 10**nd) / 10**nd``, which may pick the other neighbour where
    ``v * 10**nd`` lands on a tie; Python's ``round`` per value cost ~1.6 µs and a brushed
    range's series hold tens of thousands of values)."""
    a = np.round(np.asarray(values, np.float64), nd)
    ok = np.isfinite(a)
    if ok.all():
        return a.tolist()
    o = a.astype(object)
    o[~ok] = None
    return o.tolist()


def _flow_label(f) -> str:
    return f"{f['src']}:{f['sport']}→{f['dst']}:{f['dport']}"


def analysis_data(run, t0: int | None = None, t1: int | None = None) -> dict:
    """JSON-able dict for the charts; ``t0``/``t1`` are ns relative to the run start."""
    p = run.ppdus
    base = int(p["start_ns"].min()) if len(p) else 0
    lo = base + (t0 if t0 is not None else -(1 << 62) // 2)
    hi = base + (t1 if t1 is not None else (1 << 62) // 2)
    in_p = p[(p["start_ns"] >= lo) & (p["start_ns"] < hi)]
    ev = run.events
    in_ev = ev[(ev["start_ns"] >= lo) & (ev["start_ns"] < hi)] if len(ev) else ev
    out = {"range_ns": [t0, t1]}
    fair = run.fairness
    flows = fair.flows if fair is not None else pd.DataFrame()
    labels = {(f.run, f.fd): _flow_label(f._asdict()) for f in flows.itertuples(index=False)} \
        if len(flows) else {}
    if fair is not None:
        out.update(_fairness_series(fair, labels, lo, hi, base))
    if len(in_p):
        st = station_airtime(in_p)
        out["airtime_share"] = [{"station": mac_text(r.ta), "share_pct": float(r.share_pct)}
                                for r in st.itertuples()]
    out["hist"] = _histograms(in_p, in_ev, base)
    out["rts"] = _rts_table(in_p, in_ev)
    out["events"] = {k: int(v) for k, v in in_ev["kind"].value_counts().items()} if len(in_ev) else {}
    if len(flows):
        out["flows"] = [{"label": labels[(f.run, f.fd)], "bytes": int(f.bytes),
                         "goodput_mbps": _f(f.goodput_bytes * 8 / max(f.last_ns - f.first_ns, 1) * 1e3),
                         "retransmissions": int(f.retransmissions),
                         "rtt_p50_ms": _f(f.rtt_median_ns / 1e6) if pd.notna(f.rtt_median_ns) else None}
                        for f in flows.itertuples(index=False)]
    out["summary"] = fair.summary.get("runs") if fair is not None else None
    out["sync"] = sync_rows(run.sync_report, run.names)
    out["reception"] = (getattr(run, "detect_summary", None) or {}).get("reception")   # bad FCS per sniffer
    out["notes"] = data_notes(run)
    return out


def data_notes(run) -> dict:
    """Why a view may be empty for the whole run, in words, from the frame table's counts
    (or the counts :mod:`sniffsync.pipeline.uicols` kept for a cached run): ``flows`` (no
    TCP/UDP: encrypted, or no IP), ``mcs`` (legacy PHYs only). A view empty only in a brushed
    range says so itself."""
    notes = {}
    n = _frame_counts(run)
    flows = getattr(getattr(run, "fairness", None), "flows", None)
    if n is not None and (flows is None or not len(flows)):
        if not n["tcpudp"]:
            why = (f"{n['protected_data']} encrypted data frames" if n["protected_data"] else
                   f"{n['data']} data frames carry no IP" if n["data"] else "no data frames captured")
            notes["flows"] = f"no TCP/UDP: {why}"
        else:
            notes["flows"] = f"no TCP/UDP flow with data both ways among {n['tcpudp']} TCP/UDP frames"
    p = run.ppdus
    if len(p) and not p.loc[p["kind"].astype(str) == "data", "mcs"].notna().any():
        notes["mcs"] = "no HT/VHT/HE data PPDUs: legacy (non-MCS) rates only"
    return notes


def _frame_counts(run) -> dict | None:
    f = getattr(run, "frames", None)
    if f is None or not len(f):
        return run.ppdus.attrs.get("frame_counts")
    data = (f["type"] == 2).fillna(False).to_numpy(bool) if "type" in f else np.zeros(len(f), bool)
    prot = f["protected"].fillna(False).to_numpy(bool) if "protected" in f else np.zeros(len(f), bool)
    proto = f["ip_proto"] if "ip_proto" in f else pd.Series(pd.NA, index=f.index)
    return {"data": int(data.sum()), "protected_data": int((data & prot).sum()),
            "ip": int(proto.notna().sum()), "tcpudp": int(proto.isin([6, 17]).fillna(False).sum())}


def _fairness_series(fair, labels: dict, lo: int, hi: int, base: int) -> dict:
    """``goodput`` per flow direction, ``jain`` and its ``cdf``, ``rtt``: the series in [lo, hi)."""
    out = {}
    if len(fair.windows):
        w = fair.windows[(fair.windows["start_ns"] >= lo) & (fair.windows["start_ns"] < hi)]
        t_ns = np.sort(w["start_ns"].unique())
        series = []
        for (r, fd), g in w.groupby(["run", "fd"]):
            y = pd.Series(g["goodput_bps"].to_numpy() / 1e6, index=g["start_ns"]).reindex(t_ns)
            series.append({"label": labels.get((r, fd), f"flow {fd}"),
                           "mbps": _fs(y.to_numpy(float))})
        out["goodput"] = {"t_ns": (t_ns - base).tolist(), "series": series}
    if len(fair.jain):
        j = fair.jain[(fair.jain["start_ns"] >= lo) & (fair.jain["start_ns"] < hi)]
        out["jain"] = {"t_ns": (j["start_ns"].to_numpy(np.int64) - base).tolist(),
                       "goodput": _fs(j["jain"].to_numpy(float)),
                       "airtime": _fs(j["jain_airtime"].to_numpy(float))
                       if "jain_airtime" in j else [],
                       "why": [w if isinstance(w, str) else "" for w in j.get("why", pd.Series([""] * len(j)))]}
        out["cdf"] = [{"run": f"run {r}",
                       "x": _fs(g["jain"]), "p": _fs(g["frac"])}
                      for r, g in fair.cdf.groupby("run")] if len(fair.cdf) else []
    if len(fair.rtt):
        rt = fair.rtt[(fair.rtt["ts_ns"] >= lo) & (fair.rtt["ts_ns"] < hi)]
        series = []
        for (r, fd), g in rt.groupby(["run", "fd"]):
            k = _thin(np.arange(len(g)))
            series.append({"label": labels.get((r, fd), f"flow {fd}"),
                           "t_ns": (g["ts_ns"].to_numpy(np.int64)[k] - base).tolist(),
                           "rtt_ms": _fs(g["rtt_ns"].to_numpy(float)[k] / 1e6),
                           "qdelay_ms": _fs(g["qdelay_ns"].to_numpy(float)[k] / 1e6)})
        out["rtt"] = {"series": series}
    return out


def _histograms(in_p: pd.DataFrame, in_ev: pd.DataFrame, base: int) -> dict:
    """Failed MPDUs per bin (:func:`failed_bin_ns`), MPDUs per A-MPDU and MCS of data PPDUs."""
    span = (int(in_p["end_ns"].max()) - int(in_p["start_ns"].min())) if len(in_p) else 0
    bin_ns = failed_bin_ns(span)
    failed = in_ev[in_ev["kind"] == "mpdu_failed"]["start_ns"].to_numpy(np.int64) if len(in_ev) else np.zeros(0)
    first = int(in_p["start_ns"].min()) if len(in_p) else base
    nb = max(1, -(-span // bin_ns))
    counts = np.bincount(((failed - first) // bin_ns).clip(0, nb - 1).astype(np.int64), minlength=nb)[:nb]
    data = in_p[in_p["kind"].astype(str) == "data"]
    return {
        "failed_per_10s": {"x": [f"{(first - base + k * bin_ns) / 1e9:.1f} s" for k in range(nb)],
                           "y": counts.tolist(), "bin_s": bin_ns / 1e9},
        "mpdus_per_ampdu": histogram(data["n_mpdus"].to_numpy(np.int64), "int"),
        "mcs": histogram(data["mcs"].dropna().to_numpy(np.int64), "int"),
    }


def _rts_table(in_p: pd.DataFrame, in_ev: pd.DataFrame) -> list:
    """Per RTS sender: RTS sent, CTS received, their ratio, RTS/CTS collisions."""
    kinds = in_p["kind"].astype(str)
    rts = in_p[kinds == "rts"].groupby("ta").size()
    kinds_ev = in_ev["kind"] if len(in_ev) else pd.Series([], dtype=str)
    un = in_ev[kinds_ev == "rts_unanswered"].groupby("ta").size() if len(in_ev) else pd.Series(dtype=int)
    co = in_ev[kinds_ev == "rts_cts_collision"].groupby("ta").size() if len(in_ev) else pd.Series(dtype=int)
    return [{"station": mac_text(ta), "rts": int(n), "cts": int(n - un.get(ta, 0)),
             "ratio": _f((n - un.get(ta, 0)) / n, 4), "collisions": int(co.get(ta, 0))}
            for ta, n in rts.items()]


def sync_rows(report: dict | None, names) -> list | None:
    """Per-sniffer rows of a merge's sync report for the table view."""
    if not report:
        return None
    rows = []
    for i, s in enumerate(report.get("sniffers", [])):
        res = s.get("holdout_residual_us") or s.get("residuals_us") or {}
        # merge reports: held-out |residual| percentiles as a list, drift per clock segment
        pct = (s.get("heldout") or {}).get("abs_residual_us_p50_p95_p99")
        if pct and not res:
            res = {"p50": pct[0], "p99": pct[2]}
        drift = s.get("drift_ppm")
        if drift is None and s.get("model"):
            drift = max((m.get("drift_ppm") for m in s["model"] if m.get("drift_ppm") is not None),
                        key=abs, default=None)
        anchors = s.get("anchors", {})
        rows.append({"sniffer": s.get("name", names[i] if i < len(names) else str(i)),
                     "anchors": sum(anchors.values()) if isinstance(anchors, dict) else anchors,
                     "drift_ppm": drift, "p50_us": res.get("p50"), "p99_us": res.get("p99"),
                     "frames_in": s.get("frames_in"), "duplicates": s.get("duplicates")})
    return rows
