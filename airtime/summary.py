"""The tables and histograms a researcher puts in a paper, as data.

Pure functions over the PPDU table and a :class:`airtime.detect.DetectResult`.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from airtime.detect import DetectResult, EVENT_KINDS
from sniffsync.decode.macs import mac_text

__all__ = ["station_airtime", "detect_summary", "histogram", "bin_for_span"]

BIN_10S_NS = 10_000_000_000
MAX_SUMMARY_BINS = 100_000          # 10 s bins over 11 days; a clock that jumps by years widens them
_LADDER_S = (10, 60, 600, 3600, 21_600, 86_400, 604_800)


def bin_for_span(span_ns: int, max_bins: int) -> int:
    """The first of 10 s, 1 min, 10 min, 1 h, 6 h, 1 d, 1 week that cuts ``span_ns`` into at
    most ``max_bins`` bins, else whole seconds for exactly that many: a histogram over time
    costs what its bars cost, not what a wild timestamp's span would."""
    for b in _LADDER_S:
        if -(-span_ns // (b * 1_000_000_000)) <= max_bins:
            return b * 1_000_000_000
    return -(-span_ns // (max_bins * 1_000_000_000)) * 1_000_000_000


def station_airtime(ppdus: pd.DataFrame) -> pd.DataFrame:
    """Per transmitter: PPDUs, busy time, airtime share %, PSDU bytes, MPDUs per A-MPDU, MCS mix.

    The share is of the summed airtime of all PPDUs with a known transmitter (so
    overlapping transmissions each count their own airtime).
    """
    p = ppdus[ppdus["ta"].notna()]
    air = (p["end_ns"] - p["start_ns"]).astype("int64")
    g = p.assign(airtime_ns=air).groupby("ta", observed=True)
    out = pd.DataFrame({"ppdus": g.size(), "busy_us": g["airtime_ns"].sum() // 1000,
                        "bytes": g["psdu_bytes"].sum()})
    out["share_pct"] = 100.0 * out["busy_us"] / max(int(out["busy_us"].sum()), 1)
    agg = p[p["n_mpdus"] > 1].groupby("ta", observed=True)["n_mpdus"].mean()
    out["mpdus_per_ampdu"] = agg.reindex(out.index)
    data = p[(p["kind"].astype(str) == "data") & p["mcs"].notna()]
    mix = data.groupby(["ta", "mcs"], observed=True).size()
    out["mcs_mix"] = [" ".join(f"{int(m)}:{c}" for (_, m), c in mix[mix.index.get_level_values(0) == ta].items())
                      if ta in mix.index.get_level_values(0) else "" for ta in out.index]
    out = out.sort_values("busy_us", ascending=False).reset_index()
    return out


def histogram(values, bins) -> dict:
    """``{"x": left edges or labels, "y": counts}`` for JSON."""
    values = np.asarray(values)
    if isinstance(bins, str) and bins == "int":
        if values.size == 0:
            return {"x": [], "y": []}
        lo, hi = int(values.min()), int(values.max())
        counts = np.bincount(values.astype(np.int64) - lo, minlength=hi - lo + 1)
        return {"x": list(range(lo, hi + 1)), "y": counts.tolist()}
    counts, edges = np.histogram(values, bins=bins)
    return {"x": edges[:-1].tolist(), "y": counts.tolist()}


def _per_bin(t_ns, t0, n_bins, width=BIN_10S_NS, weights=None):
    b = ((np.asarray(t_ns, np.int64) - t0) // width).clip(0, max(n_bins - 1, 0))
    return np.bincount(b, weights=weights, minlength=n_bins)[:n_bins]


def detect_summary(ppdus: pd.DataFrame, result: DetectResult, bin_ns: int = BIN_10S_NS) -> dict:
    """Counters and histograms of a detection run (JSON-able).

    - ``rts``: per source, RTS sent, CTS received, CTS/RTS ratio, RTS/CTS collisions;
    - ``failed_per_bin``: failed MPDUs per ``bin_ns`` (10 s), with the bin start (s);
    - ``mpdus_per_ampdu`` and ``mcs``: histograms over data PPDUs;
    - ``collision_ratio_per_bin``: RTS colliding with a CTS over successful RTS, per bin.
    """
    ev, st = result.events, result.stations
    t0 = int(ppdus["start_ns"].min()) if len(ppdus) else 0
    t1 = int(ppdus["end_ns"].max()) if len(ppdus) else 0
    if -(-(t1 - t0) // bin_ns) > MAX_SUMMARY_BINS:
        bin_ns = bin_for_span(t1 - t0, MAX_SUMMARY_BINS)
    n_bins = max(1, -(-(t1 - t0) // bin_ns))
    kinds = ppdus["kind"].astype(str)
    rts = st[st["rts"] > 0]
    table = [{"station": mac_text(r.ta), "rts": int(r.rts), "cts": int(r.cts_received),
              "ratio": round(float(r.cts_per_rts), 4), "collisions": int(r.rts_cts_collisions)}
             for r in rts.itertuples()]
    failed = ev[ev["kind"] == "mpdu_failed"]["start_ns"]
    rts_t = ppdus.loc[kinds == "rts", "start_ns"]
    coll_t = ev[ev["kind"] == "rts_cts_collision"]["start_ns"]
    unans_t = ev[ev["kind"] == "rts_unanswered"]["start_ns"]
    ok = _per_bin(rts_t, t0, n_bins, bin_ns) - _per_bin(unans_t, t0, n_bins, bin_ns)
    coll = _per_bin(coll_t, t0, n_bins, bin_ns)
    data = ppdus[kinds == "data"]
    counts = ev["kind"].value_counts()
    return {
        "bin_s": bin_ns / 1e9,
        "counts": {k: int(counts.get(k, 0)) for k in EVENT_KINDS},
        "rts": table,
        "failed_per_bin": {"x": (np.arange(n_bins) * bin_ns / 1e9).tolist(),
                           "y": _per_bin(failed, t0, n_bins, bin_ns).astype(int).tolist()},
        "collision_ratio_per_bin": {"x": (np.arange(n_bins) * bin_ns / 1e9).tolist(),
                                    "y": [round(float(c / o), 4) if o > 0 else None for c, o in zip(coll, ok)]},
        "mpdus_per_ampdu": histogram(data["n_mpdus"].to_numpy(np.int64), "int"),
        "mcs": histogram(data["mcs"].dropna().to_numpy(np.int64), "int"),
    }
