"""The 802.11 side of the fairness report: per window and station, airtime share against
goodput share, MAC retry rate and median MCS, and the short "why" text of each unfair
window (the station whose airtime share most exceeds its goodput share, or else the flow
with the smallest goodput share).
"""
from __future__ import annotations

import numpy as np

from sniffsync.decode.macs import mac_text
from sniffsync.fairness.windows import window_sums, window_sums_of
from sniffsync.tcp.columns import group_median, group_starts, sorted_unique

__all__ = ["station_windows", "cross_layer_arrays", "why_texts"]


def _known(table: np.ndarray, values: np.ndarray):
    """(index into the sorted ``table``, found) of every value."""
    idx = np.searchsorted(table, values)
    if len(table) == 0:                 # e.g. no station with a known MCS (legacy rates only)
        return idx, np.zeros(len(idx), bool)
    return idx, (idx < len(table)) & (table[np.minimum(idx, len(table) - 1)] == values)


def _station_rows(st_ta: np.ndarray, ta: np.ndarray):
    """``(rows, station)``: the rows whose transmitter is one of ``st_ta`` (sorted) and its
    index there (a slice when that is every row). Rows come in flow-direction order, so
    ``ta`` runs are few: each run is looked up once (per row when runs are many)."""
    head = np.flatnonzero(group_starts(ta))
    if len(head) * 8 > len(ta):
        idx, found = _known(st_ta, ta)
        rows = np.flatnonzero(found)
        return rows, idx[rows]
    idx, found = _known(st_ta, ta[head])
    length = np.diff(np.append(head, len(ta)))
    h, n, i = head[found], length[found], idx[found]
    station = np.repeat(i, n)
    if n.sum() == len(ta):
        return slice(None), station
    return np.arange(len(station)) + np.repeat(h - (np.cumsum(n) - n), n), station


def _column(ppdus, name: str, dtype, fill) -> np.ndarray:
    """Column ``name`` of a PPDU table as numpy (nulls -> ``fill``): a DataFrame, or a dict
    of numpy arrays (no pandas needed)."""
    v = ppdus[name]
    if hasattr(v, "to_numpy"):
        return v.to_numpy(dtype, na_value=fill)
    return np.asarray(v).astype(dtype, copy=False)


def station_windows(ppdus, units: dict, seg, starts: np.ndarray, window_ns: int):
    """What :func:`cross_layer_arrays` reads of the air, before the goodput is known (it may
    run beside :func:`sniffsync.fairness.core.jain_arrays`): the stations ``st_ta``, airtime per
    station and window (last row: everyone else), frames and MAC retries per station and
    window, median MCS per station. None when there is no station or no PPDU."""
    u_ta = units["ta"]
    st_ta = sorted_unique(u_ta[u_ta >= 0])
    if not len(st_ta) or ppdus is None:
        return None
    airtime = _column(ppdus, "airtime_ns", np.int64, -1)
    if not len(airtime):
        return None
    ok = airtime >= 0                                  # unknown airtime: not counted
    sidx, known = _known(st_ta, _column(ppdus, "ta", np.int64, -1)[ok])
    other = len(st_ta)                                 # everyone else (BAs, CTS, beacons...)
    air = window_sums(np.where(known, sidx, other), _column(ppdus, "start_ns", np.int64, 0)[ok],
                      airtime[ok].astype(float), other + 1, starts, window_ns)
    rows, widx = _station_rows(st_ta, seg["ta"])
    frames_w, retry_w = window_sums_of(widx, seg["ts_ns"][rows], [None, seg["retry"][rows]], len(st_ta),
                                       starts, window_ns)
    mcs = seg["mcs"][rows]
    m_st, m_med = group_median(widx[mcs >= 0], mcs[mcs >= 0])
    mcs_st = np.full(len(st_ta), np.nan)
    mcs_st[m_st] = m_med
    return {"st_ta": st_ta, "air": air, "frames": frames_w, "retries": retry_w, "mcs": mcs_st}


def cross_layer_arrays(ppdus, units: dict, seg, good: np.ndarray, active: np.ndarray,
                       starts: np.ndarray, window_ns: int, stations=False):
    """Per window and station: airtime share, goodput share, MAC retry rate, median MCS.

    ``ppdus`` (a DataFrame or a dict of numpy arrays) needs ``ta`` (-1 or null: none),
    ``start_ns``, ``airtime_ns`` (< 0 or null: unknown); a PPDU counts in the
    windows that contain its start. Stations are the transmitters of the active flow
    directions (``units['ta']``). None when there is no station or no PPDU.
    ``stations``: :func:`station_windows` of the same arguments, when computed already.
    """
    sw = station_windows(ppdus, units, seg, starts, window_ns) if stations is False else stations
    if sw is None:
        return None
    st_ta, air, frames_w, retry_w, mcs_st = (sw[k] for k in ("st_ta", "air", "frames", "retries", "mcs"))
    u_ta = units["ta"]
    u_st = np.searchsorted(st_ta, u_ta)
    has = u_ta >= 0
    W = len(starts)
    g_st = np.zeros((len(st_ta), W))
    np.add.at(g_st, u_st[has], good[has])
    act_st = np.zeros((len(st_ta), W), bool)
    np.logical_or.at(act_st, u_st[has], active[has])
    tot_air = air.sum(axis=0)
    tot_good = g_st.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return {
            "window": np.tile(np.arange(W), len(st_ta)),
            "ta": np.repeat(st_ta, W),
            "active": act_st.ravel(),
            "airtime_ns": air[:-1].ravel().astype(np.int64),
            "airtime_share": (air[:-1] / tot_air).ravel(),
            "goodput_bytes": g_st.ravel().astype(np.int64),
            "goodput_share": (g_st / tot_good).ravel(),
            "mac_retry_rate": (retry_w / frames_w).ravel(),
            "mcs_median": np.repeat(mcs_st, W),
            "utilisation": np.tile(tot_air / window_ns, len(st_ta)),
        }


def why_texts(j: np.ndarray, st, units: dict, names, good, active, below: float) -> np.ndarray:
    """A short explanation per unfair window (vectorised choice, text formatted per window)."""
    texts = np.full(len(j), "", dtype=object)
    unfair = np.flatnonzero(j < below)
    if not len(unfair):
        return texts
    if st is not None:
        win = st["window"]
        rows = np.flatnonzero(st["active"] & np.isin(win, unfair))
        share = st["goodput_share"]
        gap = st["airtime_share"][rows] - np.where(np.isnan(share[rows]), 0, share[rows])
        o = rows[np.argsort(gap, kind="stable")]       # NaN last, as pandas sorts
        pick = {int(win[i]): i for i in o}             # the largest gap per window wins
        mcs = st["mcs_median"]
        W = len(j)
        best = np.full(W, np.nan)
        fin = ~np.isnan(mcs)
        np.fmax.at(best, win[fin], mcs[fin])
        for w, i in pick.items():
            why = []
            if st["mac_retry_rate"][i] > 0.1:
                why.append(f"many MAC retries ({st['mac_retry_rate'][i]:.0%})")
            m = mcs[i]
            if not np.isnan(m) and m < (best[w] if not np.isnan(best[w]) else m):
                why.append(f"low MCS ({m:g} vs {best[w]:g})")
            gs = share[i]
            texts[w] = (f"station {mac_text(int(st['ta'][i]))}: {st['airtime_share'][i]:.0%} airtime, "
                        f"{0 if np.isnan(gs) else gs:.0%} goodput" + (": " + " / ".join(why) if why else ""))
        return texts
    tot = good.sum(axis=0)
    share = np.where(active, good / np.where(tot > 0, tot, 1), np.inf)
    lo = share.argmin(axis=0)
    for w in unfair:
        u = lo[w]

        def name(code):
            return names[code] if code >= 0 else "nan"
        texts[w] = (f"flow {name(units['src'][u])}:{units['sport'][u]}->{name(units['dst'][u])}:"
                    f"{units['dport'][u]}: {share[u, w]:.0%} of goodput, {units['retransmissions'][u]} "
                    f"TCP retransmissions, {units['mac_retries'][u]} MAC retries")
    return texts
