"""Airtime accounting over the PPDU table: channel utilisation and idle time per window,
airtime by sender and frame class, aggregation and MCS per transmitter and window.

- **Sender**: the PPDU's TA; a CTS or ACK carries none, so it is attributed to the RA of the
  PPDU that ended one SIFS before it on the same sniffer (gap within ``[0, RESPONSE_GAP_NS]``,
  and that PPDU's TA is the response's RA: the RTS / data it answers).
- **Class**: data; control (RTS, CTS, ACK, BA, BAR); management (beacons and other
  management frames); other. Of which **retried** (the share of a PPDU's MPDUs that are
  retries, times its airtime) and **collided** (PPDUs in an ``overlap`` or
  ``rts_cts_collision`` event of :mod:`airtime.detect`).
- **Utilisation**: busy time = the union of PPDU intervals (overlaps counted once) inside
  each window ``[k·bin, (k+1)·bin)`` of the PPDUs' clock; idle = bin − busy.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["CLASSES", "RESPONSE_GAP_NS", "senders", "utilisation", "airtime_by_sender", "station_windows"]

CLASSES = {"data": "data", "rts": "control", "cts": "control", "ack": "control", "ba": "control",
           "bar": "control", "beacon": "management", "mgmt": "management"}
RESPONSE_GAP_NS = 40_000         # SIFS (10 or 16 µs) plus stamp rounding; a DIFS is at least 28 µs + slots
COLLIDED_EVENTS = ("overlap", "rts_cts_collision")


def senders(ppdus: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """``(sender, attributed)``: the TA (-1 none) or, for a CTS/ACK, the RA of the PPDU one
    SIFS before; ``attributed`` marks the latter."""
    n = len(ppdus)
    ta = ppdus["ta"].to_numpy(np.int64, na_value=-1)
    ra = ppdus["ra"].to_numpy(np.int64, na_value=-1)
    out, attr = ta.copy(), np.zeros(n, bool)
    if not n:
        return out, attr
    o = np.lexsort((ppdus["start_ns"].to_numpy(np.int64), ppdus["sniffer"].to_numpy(np.int64)))
    sn, st, en = (ppdus[c].to_numpy(np.int64)[o] for c in ("sniffer", "start_ns", "end_ns"))
    kind = ppdus["kind"].astype(str).to_numpy()[o]
    p = np.arange(n) - 1                               # the PPDU before, in start order
    ok = (p >= 0) & np.isin(kind, ("cts", "ack")) & (ta[o] < 0)
    pp = np.maximum(p, 0)
    gap = st - en[pp]
    ok &= (sn[pp] == sn) & (gap >= 0) & (gap <= RESPONSE_GAP_NS) & (ta[o][pp] == ra[o]) & (ra[o][pp] >= 0)
    out[o[ok]] = ra[o][pp[ok]]
    attr[o[ok]] = True
    return out, attr


def _merged(start: np.ndarray, end: np.ndarray):
    """Disjoint busy intervals (union of ``[start, end)``) and busy time before each start."""
    o = np.argsort(start, kind="stable")
    s, e = start[o], end[o]
    reach = np.maximum.accumulate(e)
    new = np.ones(len(s), bool)
    new[1:] = s[1:] > reach[:-1]
    ms = s[new]
    me = np.maximum.reduceat(e, np.flatnonzero(new)) if len(s) else e
    me = np.maximum.accumulate(me) if len(me) else me
    before = np.concatenate([[0], np.cumsum(me - ms)[:-1]]) if len(ms) else ms
    return ms, me, before


def _busy_before(t: np.ndarray, ms, me, before) -> np.ndarray:
    i = np.searchsorted(ms, t, side="right") - 1
    ii = np.maximum(i, 0)
    inside = np.clip(t - ms[ii], 0, me[ii] - ms[ii]) if len(ms) else np.zeros(len(t), np.int64)
    return np.where(i >= 0, before[ii] + inside, 0) if len(ms) else np.zeros(len(t), np.int64)


def utilisation(ppdus: pd.DataFrame, bin_ns: int) -> pd.DataFrame:
    """Per window ``k`` (``ts_ns`` = k·bin) from the first to the last PPDU: ``busy_ns``,
    ``idle_ns``, ``utilisation`` (busy / bin)."""
    if not len(ppdus):
        return pd.DataFrame({"window": [], "ts_ns": [], "busy_ns": [], "idle_ns": [], "utilisation": []})
    st, en = ppdus["start_ns"].to_numpy(np.int64), ppdus["end_ns"].to_numpy(np.int64)
    ms, me, before = _merged(st, en)
    k = np.arange(st.min() // bin_ns, en.max() // bin_ns + 1)
    edges = np.concatenate([k, [k[-1] + 1]]) * bin_ns
    busy = np.diff(_busy_before(edges, ms, me, before))
    return pd.DataFrame({"window": k, "ts_ns": k * bin_ns, "busy_ns": busy, "idle_ns": bin_ns - busy,
                         "utilisation": busy / bin_ns})


def airtime_by_sender(ppdus: pd.DataFrame, events: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per sender (see :func:`senders`; -1 = unknown): airtime total and by class, retried,
    collided, and how many CTS/ACK were attributed to it."""
    cols = ["sender", "ppdus", "airtime_ns", "data_ns", "control_ns", "management_ns", "other_ns",
            "retried_ns", "collided_ns", "responses_attributed"]
    if not len(ppdus):
        return pd.DataFrame(columns=cols)
    snd, attr = senders(ppdus)
    air = ppdus["airtime_ns"].to_numpy(np.int64).astype(np.float64)
    cls = pd.Series(ppdus["kind"].astype(str).to_numpy()).map(CLASSES).fillna("other").to_numpy()
    n_mpdus = ppdus["n_mpdus"].to_numpy(np.float64)
    retried = air * np.clip(ppdus["retries"].to_numpy(np.float64) / np.maximum(n_mpdus, 1), 0, 1)
    hit = np.zeros(len(ppdus), bool)
    if events is not None and len(events):
        ev = events[events["kind"].astype(str).isin(COLLIDED_EVENTS)]
        ids = np.concatenate([ev["ppdu"].to_numpy(np.int64), ev["other_ppdu"].to_numpy(np.int64)])
        hit = np.isin(ppdus["ppdu"].to_numpy(np.int64), ids[ids >= 0])
    d = pd.DataFrame({"sender": snd, "ppdus": 1, "airtime_ns": air, "retried_ns": retried,
                      "collided_ns": np.where(hit, air, 0.0), "responses_attributed": attr.astype(np.int64)})
    for c in ("data", "control", "management", "other"):
        d[f"{c}_ns"] = np.where(cls == c, air, 0.0)
    out = d.groupby("sender", sort=True).sum().reset_index()
    ints = [c for c in cols if c.endswith("_ns")]
    out[ints] = out[ints].round().astype(np.int64)
    return out[cols]


def station_windows(ppdus: pd.DataFrame, bin_ns: int) -> pd.DataFrame:
    """Per window and transmitter of data PPDUs: PPDUs, airtime, MPDUs per A-MPDU (mean,
    max; a single MPDU counts 1), median MCS: per transmitter, never pooled."""
    d = ppdus[(ppdus["kind"].astype(str) == "data") & ppdus["ta"].notna()]
    cols = ["window", "ts_ns", "ta", "data_ppdus", "airtime_ns", "mpdus_per_ampdu_mean", "mpdus_per_ampdu_max",
            "mcs_median"]
    if not len(d):
        return pd.DataFrame(columns=cols)
    k = d["start_ns"].to_numpy(np.int64) // bin_ns
    g = pd.DataFrame({"window": k, "ta": d["ta"].to_numpy(np.int64), "air": d["airtime_ns"].to_numpy(np.int64),
                      "n": d["n_mpdus"].to_numpy(np.float64),
                      "mcs": d["mcs"].to_numpy(np.float64, na_value=np.nan)}).groupby(["window", "ta"], sort=True)
    out = pd.DataFrame({"data_ppdus": g.size(), "airtime_ns": g["air"].sum(), "mpdus_per_ampdu_mean": g["n"].mean(),
                        "mpdus_per_ampdu_max": g["n"].max(), "mcs_median": g["mcs"].median()}).reset_index()
    out["ts_ns"] = out["window"] * bin_ns
    return out[cols]
