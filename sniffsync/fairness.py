"""Per-flow goodput in sliding windows, Jain's fairness index, its CDF, bufferbloat and
the 802.11 cross-layer view (airtime share vs goodput share per station).

Windows are ``[start, start + window_ns)`` with ``start = t0 + k * step_ns``, t0 the first
data segment of the run; the last window is the first one that reaches past the last data
segment. Per-window sums use one ``bincount`` over (unit, edge index) and a cumulative sum
along time, so any window/step pair costs the same.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .errors import UsageError
from .flows import KIND, classify_segments, flow_table, segments
from .tcp_rtt import MIN_RTO_NS, RETX_NAMES, analyze_acks, handshake_rtt, rtt_samples

__all__ = ["FairnessResult", "fairness", "analyze_run", "window_starts", "window_sums", "jain",
           "jain_series", "cdf", "summarize", "queueing_delay", "window_quantiles", "cross_layer",
           "mac_text", "DEFINITIONS"]

DEFINITIONS = {
    "goodput": "new payload bytes per flow direction, dated when delivered in order (the last "
               "transmission of each segment, running max in sequence order): bytes above the highest sequence number sent "
               "before (unwrapped cumulative max); UDP: every datagram's payload. MAC duplicates removed.",
    "throughput": "all payload bytes incl. TCP retransmissions (MAC duplicates removed)",
    "window": "[t0 + k*step, t0 + k*step + window), t0 = first data segment of the run",
    "active": "a flow direction is active in a window that overlaps [its first, its last data "
              "segment]; an idle or application-limited flow inside that span counts with its "
              "(low) goodput and lowers J; before its start or after its end it is not counted",
    "jain": "J = (sum x)^2 / (n * sum x^2) over the n active flow directions, x = goodput bytes "
            "in the window; NaN when no active flow sent anything; CDF and summary use windows "
            "with n >= 2",
    "jain_airtime": "the same index over the airtime of the stations that transmit active flows",
    "rtt": "Karn-filtered data->ACK samples at the capture point (TSval/TSecr echoes for flows "
           "without any)",
    "queueing_delay": "RTT sample - the flow's minimum RTT over the trailing min_rtt_horizon",
    "busy": "window throughput >= busy_fraction of the run's peak window, or airtime "
            "utilisation >= busy_fraction when PPDUs are known",
    "bloat": "busy window whose p95 queueing delay exceeds the threshold",
}


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


from .macs import mac_text  # noqa: E402,F401  (re-exported: callers import it from here)


def window_starts(t0_ns: int, t_last_ns: int, window_ns: int, step_ns: int) -> np.ndarray:
    """Window start times: from t0 every step until a window reaches past ``t_last_ns``."""
    if window_ns <= 0 or step_ns <= 0:
        raise UsageError("window and step must be positive")
    k = max(1, -(-(t_last_ns + 1 - t0_ns - window_ns) // step_ns) + 1)
    return t0_ns + step_ns * np.arange(k, dtype=np.int64)


def window_sums(unit: np.ndarray, ts_ns: np.ndarray, weight: np.ndarray, n_units: int,
                starts: np.ndarray, window_ns: int) -> np.ndarray:
    """``out[u, k]`` = sum of ``weight`` of unit ``u`` with ts in window k (vectorised)."""
    edges = np.unique(np.concatenate([starts, starts + window_ns]))
    pos = np.searchsorted(edges, ts_ns, side="right")       # edges <= ts
    width = len(edges) + 1
    m = np.bincount(unit * width + pos, weights=weight, minlength=n_units * width)
    c = np.cumsum(m.reshape(n_units, width), axis=1)         # c[:, j]: ts < edges[j]
    a = np.searchsorted(edges, starts)
    b = np.searchsorted(edges, starts + window_ns)
    return c[:, b] - c[:, a]


def jain(x: np.ndarray, active: np.ndarray) -> np.ndarray:
    """Jain's index per column of ``x`` (units x windows) over the ``active`` units."""
    x = np.where(active, x, 0.0)
    n = active.sum(axis=0)
    s, q = x.sum(axis=0), (x * x).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where((n > 0) & (q > 0), s * s / (n * q), np.nan)


def cdf(values: np.ndarray) -> pd.DataFrame:
    """Empirical CDF points (value, fraction of windows <= value) of the finite values."""
    v = np.sort(np.asarray(values, float)[np.isfinite(values)])
    return pd.DataFrame({"jain": v, "frac": np.arange(1, len(v) + 1) / max(len(v), 1)})


def summarize(j: np.ndarray, below: float = 0.8) -> dict:
    """Median, p10 and share of windows below ``below`` of a Jain series (finite values)."""
    v = np.asarray(j, float)
    v = v[np.isfinite(v)]
    if not len(v):
        return {"windows": 0, "median": None, "p10": None, f"share_below_{below}": None}
    return {"windows": int(len(v)), "median": float(np.median(v)),
            "p10": float(np.percentile(v, 10)), f"share_below_{below}": float((v < below).mean())}


def queueing_delay(rtt: pd.DataFrame, horizon_ns: int) -> pd.DataFrame:
    """Add ``min_rtt_ns`` (trailing minimum over ``horizon_ns`` per fd) and ``qdelay_ns``."""
    rtt = rtt.sort_values(["fd", "ts_ns"], kind="stable").reset_index(drop=True)
    if rtt.empty:
        return rtt.assign(min_rtt_ns=np.int64(0), qdelay_ns=np.int64(0))
    r = rtt.set_index(pd.to_datetime(rtt["ts_ns"], unit="ns"))
    mins = r.groupby("fd")["rtt_ns"].rolling(pd.Timedelta(horizon_ns, "ns"), min_periods=1).min()
    rtt["min_rtt_ns"] = mins.to_numpy().astype(np.int64)     # same (fd, time) order
    rtt["qdelay_ns"] = rtt["rtt_ns"] - rtt["min_rtt_ns"]
    return rtt


def window_quantiles(ts_ns: np.ndarray, values: np.ndarray, starts: np.ndarray,
                     window_ns: int, qs=(0.5, 0.95)) -> np.ndarray:
    """Quantiles of ``values`` per window (rows: windows, cols: qs); NaN for empty windows."""
    t0, step = starts[0], (starts[1] - starts[0]) if len(starts) > 1 else window_ns
    k_hi = np.minimum((ts_ns - t0) // step, len(starts) - 1)
    k_lo = np.maximum(-(-(ts_ns - t0 - window_ns + 1) // step), 0)
    cnt = np.maximum(k_hi - k_lo + 1, 0)
    rep = np.repeat(np.arange(len(ts_ns)), cnt)
    win = k_lo[rep] + (np.arange(len(rep)) - np.repeat(np.cumsum(cnt) - cnt, cnt))
    s = pd.Series(np.asarray(values, float)[rep])
    out = np.full((len(starts), len(qs)), np.nan)
    if len(rep):
        q = s.groupby(win).quantile(list(qs)).unstack()
        out[q.index.to_numpy()] = q.to_numpy()
    return out


def analyze_run(frames: pd.DataFrame, dedup: bool = True, min_rto_ns: int = MIN_RTO_NS):
    """Segments (classified and ACK-analysed), flow table and RTT samples of one capture."""
    seg = analyze_acks(classify_segments(segments(frames, dedup=dedup)), min_rto_ns)
    ft = flow_table(seg)
    kinds = (seg[seg["retx_kind"] > 0].groupby(["fd", "retx_kind"]).size().unstack(fill_value=0)
             .rename(columns=dict(enumerate(RETX_NAMES))))
    for k in RETX_NAMES[1:]:
        ft[f"retx_{k}"] = ft["fd"].map(kinds[k] if k in kinds else {}).fillna(0).astype(np.int64)
    ft["retx_spurious"] = ft["fd"].map(seg[seg["spurious"]].groupby("fd").size()).fillna(0).astype(np.int64)
    rtt = rtt_samples(seg, karn=True, tsecr=True)
    has_ack = set(rtt.loc[rtt["source"] == "ack", "fd"])
    rtt = rtt[(rtt["source"] == "ack") | ~rtt["fd"].isin(has_ack)].reset_index(drop=True)
    st = rtt.groupby("fd")["rtt_ns"]
    for name, fn in (("rtt_samples", "size"), ("rtt_min_ns", "min"), ("rtt_median_ns", "median")):
        ft[name] = ft["fd"].map(st.agg(fn)).fillna(-1 if name != "rtt_samples" else 0).astype(np.int64)
    hs = handshake_rtt(seg).set_index("flow")["hs_rtt_ns"]
    ft["hs_rtt_ns"] = ft["flow"].map(hs).fillna(-1).astype(np.int64)
    return seg, ft, rtt


def jain_series(seg, ft, starts, window_ns):
    """Per-window goodput/throughput matrices (units x windows), activity and Jain."""
    units = ft[ft["goodput_bytes"] > 0].reset_index(drop=True)     # ACK-only directions are not flows
    uidx = pd.Series(np.arange(len(units)), index=units["fd"].to_numpy())
    live = seg["is_data"].to_numpy() & ~seg["mac_dup"].to_numpy() & seg["fd"].isin(uidx.index).to_numpy()
    s = seg[live]
    u = uidx.reindex(s["fd"].to_numpy()).to_numpy()
    ts = s["ts_ns"].to_numpy()
    # goodput is dated by in-order delivery (flows._in_order_delivery), throughput by sending
    good = window_sums(u, s["deliver_ns"].to_numpy(), s["new_bytes"].to_numpy().astype(float), len(units),
                       starts, window_ns)
    thr = window_sums(u, ts, s["payload_len"].to_numpy().astype(float), len(units), starts, window_ns)
    active = ((starts[None, :] <= units["last_ns"].to_numpy()[:, None]) &
              (starts[None, :] + window_ns > units["first_ns"].to_numpy()[:, None]))
    return units, good, thr, active, jain(good, active)


def cross_layer(ppdus: pd.DataFrame, units: pd.DataFrame, seg: pd.DataFrame, good: np.ndarray,
                active: np.ndarray, starts: np.ndarray, window_ns: int) -> pd.DataFrame:
    """Per window and station: airtime share, goodput share, MAC retry rate, median MCS.

    ``ppdus`` needs ``ta``, ``start_ns``, ``airtime_ns`` (e.g. ``airtime.ppdu.group_ppdus``);
    a PPDU counts in the windows that contain its start. Stations are the transmitters of
    the active flow directions (``units.ta``).
    """
    st_ta = np.unique(units["ta"].to_numpy()[units["ta"].to_numpy() >= 0])
    if not len(st_ta) or ppdus is None or ppdus.empty:
        return pd.DataFrame()
    ppdus = ppdus[ppdus["airtime_ns"].to_numpy() >= 0]     # unknown airtime: not counted
    p_ta = ppdus["ta"].to_numpy(dtype=np.int64, na_value=-1)
    sidx = np.searchsorted(st_ta, p_ta)
    known = (sidx < len(st_ta)) & (st_ta[np.minimum(sidx, len(st_ta) - 1)] == p_ta)
    other = len(st_ta)                                 # everyone else (BAs, CTS, beacons...)
    pu = np.where(known, sidx, other)
    air = window_sums(pu, ppdus["start_ns"].to_numpy(np.int64), ppdus["airtime_ns"].to_numpy(float),
                      other + 1, starts, window_ns)
    u_st = np.searchsorted(st_ta, units["ta"].to_numpy())
    has = units["ta"].to_numpy() >= 0
    g_st = np.zeros((len(st_ta), len(starts)))
    np.add.at(g_st, u_st[has], good[has])
    act_st = np.zeros((len(st_ta), len(starts)), bool)
    np.logical_or.at(act_st, u_st[has], active[has])
    wifi = seg[seg["ta"].to_numpy() >= 0]
    widx = np.searchsorted(st_ta, wifi["ta"].to_numpy())
    ok = (widx < len(st_ta)) & (st_ta[np.minimum(widx, len(st_ta) - 1)] == wifi["ta"].to_numpy())
    frames_w = window_sums(widx[ok], wifi["ts_ns"].to_numpy()[ok], np.ones(ok.sum()), len(st_ta), starts, window_ns)
    retry_w = window_sums(widx[ok], wifi["ts_ns"].to_numpy()[ok], wifi["retry"].to_numpy()[ok].astype(float),
                          len(st_ta), starts, window_ns)
    mcs = wifi[ok & (wifi["mcs"].to_numpy() >= 0)].groupby("ta")["mcs"].median()
    tot_air = air.sum(axis=0)
    tot_good = g_st.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        rows = pd.DataFrame({
            "window": np.tile(np.arange(len(starts)), len(st_ta)),
            "ta": np.repeat(st_ta, len(starts)),
            "active": act_st.ravel(),
            "airtime_ns": air[:-1].ravel().astype(np.int64),
            "airtime_share": (air[:-1] / tot_air).ravel(),
            "goodput_bytes": g_st.ravel().astype(np.int64),
            "goodput_share": (g_st / tot_good).ravel(),
            "mac_retry_rate": (retry_w / frames_w).ravel(),
        })
    rows["mcs_median"] = rows["ta"].map(mcs)
    rows["utilisation"] = np.tile(tot_air / window_ns, len(st_ta))
    return rows


def _why(jrow: pd.DataFrame, st: pd.DataFrame, units, good, active, below: float) -> list:
    """A short explanation per unfair window (vectorised choice, text formatted per window)."""
    texts = [""] * len(jrow)
    unfair = np.flatnonzero(jrow["jain"].to_numpy() < below)
    if not len(unfair):
        return texts
    if len(st):
        s = st[st["active"] & st["window"].isin(unfair)].copy()
        s["gap"] = s["airtime_share"] - s["goodput_share"].fillna(0)
        pick = s.sort_values("gap", kind="stable").drop_duplicates("window", keep="last")
        best_mcs = st.groupby("window")["mcs_median"].max()
        for r in pick.itertuples():
            why = []
            if r.mac_retry_rate > 0.1:
                why.append(f"many MAC retries ({r.mac_retry_rate:.0%})")
            if pd.notna(r.mcs_median) and r.mcs_median < best_mcs.get(r.window, r.mcs_median):
                why.append(f"low MCS ({r.mcs_median:g} vs {best_mcs[r.window]:g})")
            texts[r.window] = (f"station {mac_text(r.ta)}: {r.airtime_share:.0%} airtime, "
                               f"{0 if pd.isna(r.goodput_share) else r.goodput_share:.0%} goodput"
                               + (": " + " / ".join(why) if why else ""))
        return texts
    share = good / np.where(good.sum(axis=0) > 0, good.sum(axis=0), 1)
    share = np.where(active, share, np.inf)
    lo = share.argmin(axis=0)
    for w in unfair:
        u = units.iloc[lo[w]]
        texts[w] = (f"flow {u['src']}:{u['sport']}->{u['dst']}:{u['dport']}: {share[lo[w], w]:.0%} "
                    f"of goodput, {u['retransmissions']} TCP retransmissions, {u['mac_retries']} MAC retries")
    return texts


def _one_run(frames, window_ns, step_ns, ppdus, qdelay_threshold_ns, busy_fraction, below,
             horizon_ns, dedup, min_rto_ns, t0_ns=None):
    if (frames["linktype"].to_numpy() == 127).any() and frames.attrs.get("stamps") != "end":
        # an MPDU reaches the receiver when its PPDU ends: date segments there, whatever the
        # sniffer's TSFT convention (an A-MPDU can last 5 ms)
        try:
            from airtime.ppdu import align_to_ppdu_end, group_ppdus
            grouped = group_ppdus(frames)
            frames = align_to_ppdu_end(frames, grouped=grouped)
            if ppdus is None:       # one grouping serves alignment and the cross-layer view
                ppdus = grouped[0]
        except ImportError:
            pass
    seg, ft, rtt = analyze_run(frames, dedup, min_rto_ns)
    data = ft[ft["goodput_bytes"] > 0]
    if data.empty:
        raise UsageError("no TCP/UDP data segments in the capture")
    t0 = int(data["first_ns"].min()) if t0_ns is None else int(t0_ns)
    starts = window_starts(t0, int(data["last_ns"].max()), window_ns, step_ns)
    units, good, thr, active, j = jain_series(seg, ft, starts, window_ns)
    if ppdus is None and (frames["linktype"].to_numpy() == 127).any():
        try:
            from airtime.ppdu import group_ppdus       # another helper's package
            ppdus = group_ppdus(frames)[0]
        except (ImportError, AttributeError):
            ppdus = None
    st = cross_layer(ppdus, units, seg, good, active, starts, window_ns) if ppdus is not None else pd.DataFrame()
    rtt = queueing_delay(rtt, horizon_ns)
    qd = window_quantiles(rtt["ts_ns"].to_numpy(), rtt["qdelay_ns"].to_numpy(), starts, window_ns)
    tot_thr = thr.sum(axis=0)
    if len(st):
        util = st.groupby("window")["utilisation"].first().reindex(range(len(starts))).to_numpy()
        busy = util >= busy_fraction
    else:
        busy = tot_thr >= busy_fraction * tot_thr.max()
    ja = np.full(len(starts), np.nan)
    if len(st):
        a = st.pivot(index="ta", columns="window", values="airtime_ns").to_numpy(float)
        act = st.pivot(index="ta", columns="window", values="active").to_numpy(bool)
        ja = jain(a, act)
    jt = pd.DataFrame({"window": np.arange(len(starts)), "start_ns": starts, "end_ns": starts + window_ns,
                       "n_active": active.sum(axis=0), "jain": j, "jain_airtime": ja,
                       "goodput_bytes": good.sum(axis=0).astype(np.int64),
                       "throughput_bytes": tot_thr.astype(np.int64),
                       "qdelay_p50_ns": qd[:, 0], "qdelay_p95_ns": qd[:, 1], "busy": busy})
    jt["bloat"] = jt["busy"] & (jt["qdelay_p95_ns"] > qdelay_threshold_ns)
    jt["why"] = _why(jt, st, units, good, active, below)
    wl = pd.DataFrame({"window": np.tile(np.arange(len(starts)), len(units)),
                       "start_ns": np.tile(starts, len(units)),
                       "fd": np.repeat(units["fd"].to_numpy(), len(starts)),
                       "flow": np.repeat(units["flow"].to_numpy(), len(starts)),
                       "dir": np.repeat(units["dir"].to_numpy(), len(starts)),
                       "active": active.ravel(), "goodput_bytes": good.ravel().astype(np.int64),
                       "throughput_bytes": thr.ravel().astype(np.int64)})
    wl["goodput_bps"] = wl["goodput_bytes"] * 8 * 1_000_000_000 // window_ns
    wl["throughput_bps"] = wl["throughput_bytes"] * 8 * 1_000_000_000 // window_ns
    ok = jt["n_active"].to_numpy() >= 2
    summ = summarize(j[ok], below)
    summ.update({"windows_total": int(len(starts)), "bloat_windows": int(jt["bloat"].sum()),
                 "jain_airtime_median": (float(np.nanmedian(ja[ok])) if np.isfinite(ja[ok]).any() else None),
                 "cross_layer": bool(len(st))})
    return ft, wl, jt, cdf(j[ok]), rtt, st, summ


def fairness(frames_or_list, window_ns: int = 400_000_000, step_ns: int = 200_000_000, *,
             ppdus=None, qdelay_threshold_ns: int = 50_000_000, busy_fraction: float = 0.5,
             unfair_below: float = 0.8, min_rtt_horizon_ns: int = 10_000_000_000,
             dedup: bool = True, min_rto_ns: int = MIN_RTO_NS, t0_ns: int | None = None) -> FairnessResult:
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

    Returns
    -------
    FairnessResult
    """
    runs = frames_or_list if isinstance(frames_or_list, (list, tuple)) else [frames_or_list]
    pp = ppdus if isinstance(ppdus, (list, tuple)) else [ppdus] * len(runs)
    parts = [_one_run(f, int(window_ns), int(step_ns), p, qdelay_threshold_ns, busy_fraction,
                      unfair_below, min_rtt_horizon_ns, dedup, min_rto_ns, t0_ns) for f, p in zip(runs, pp)]

    def cat(i):
        frames = [p[i].assign(run=r) for r, p in enumerate(parts) if len(p[i])]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    summary = {"runs": [dict(run=r, **p[6]) for r, p in enumerate(parts)],
               "window_ns": int(window_ns), "step_ns": int(step_ns),
               "qdelay_threshold_ns": int(qdelay_threshold_ns), "unfair_below": unfair_below,
               "definitions": DEFINITIONS}
    return FairnessResult(cat(0), cat(1), cat(2), cat(3), cat(4), cat(5), summary)
