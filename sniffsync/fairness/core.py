"""Pandas-free core of :mod:`sniffsync.fairness`: one run's flows, windows, Jain's index,
bufferbloat and 802.11 cross-layer view, as tables of numpy columns.

A table is a dict ``{column: values}`` of numpy arrays in column order; text columns are
codes (see :func:`run_tables`). :mod:`sniffsync.fairness` turns them
into DataFrames for the Python API; :mod:`sniffsync.fairness_report` writes them as JSON.
"""
from __future__ import annotations

import itertools
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from sniffsync.errors import NoDataError
from sniffsync.fairness.windows import (cdf_arrays, jain, summarize, trailing_min, window_quantiles,
                               window_starts, window_sums)
from sniffsync.tcp.core import cat_codes, flow_arrays, frame_getter, segment_arrays
from sniffsync.tcp.sequence import classify_arrays
from sniffsync.tcp.acks import MIN_RTO_NS, RETX_NAMES, ack_arrays, group_median, handshake_arrays, rtt_arrays
from sniffsync.runtime import Inline
from sniffsync.decode.macs import mac_text

__all__ = ["Capture", "DEFINITIONS", "TABLES", "PROTO_NAMES", "queue_delay", "analyze_arrays", "jain_arrays", "cross_layer_arrays",
           "why_texts", "run_tables", "fairness_tables"]

TABLES = ("flows", "windows", "jain", "cdf", "rtt", "stations")

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
PROTO_NAMES = {6: "tcp", 17: "udp"}


class Capture:
    """One run's frames as the analysis reads them.

    ``get`` and ``ip_codes`` as :func:`sniffsync.flows_core.segment_arrays` takes them;
    ``to_frame()`` gives the frame-table DataFrame (built only when the ``airtime``
    package needs one: 802.11 captures with radiotap); ``attrs`` the table's attrs.
    """

    def __init__(self, get, ip_codes, to_frame, attrs=None, threads: bool = False):
        self.get, self.ip_codes, self.to_frame = get, ip_codes, to_frame
        self.attrs = attrs or {}
        self.threads = threads        # ``get`` may run on another thread (numpy columns)

    @classmethod
    def from_columns(cls, n: int, cols: dict, marks=(), columns=None, consume: bool = False) -> "Capture":
        """From :func:`sniffsync.frames.decode_columns` output (no pandas).

        ``consume``: the analysis frees each column of ``cols`` once it has read it (for
        a capture analysed once; ``to_frame`` is then unavailable).
        """
        def to_frame():
            if consume:
                raise ValueError("the columns of a consumed capture are gone")
            from sniffsync.decode.table import frame_table
            return frame_table(n, cols, list(marks), columns)
        return cls(frame_getter(n, cols, consume), lambda rows: cat_codes(n, cols, rows, consume),
                   to_frame, threads=True)

    @classmethod
    def from_frame(cls, frames) -> "Capture":
        """From a frame-table DataFrame."""
        from sniffsync.tcp.frames import frame_source
        get, ip_codes = frame_source(frames)
        return cls(get, ip_codes, lambda: frames, frames.attrs)


# segment columns :func:`run_tables` reads after :func:`analyze_arrays`
_WINDOW_COLUMNS = {"fd", "is_data", "mac_dup", "deliver_ns", "new_bytes", "ts_ns", "payload_len",
                   "ta", "retry", "mcs"}


def _per_fd(fd: np.ndarray, mask: np.ndarray, fds: np.ndarray, size: int) -> np.ndarray:
    return np.bincount(fd[mask], minlength=size)[fds].astype(np.int64)


def analyze_arrays(cap: Capture, dedup: bool = True, min_rto_ns: int = MIN_RTO_NS):
    """Segments (classified and ACK-analysed), flow table and RTT samples of one capture.

    Returns ``(seg, names, ft, rtt)``: segment columns, endpoint names of the
    ``src``/``dst`` codes, per-fd flow table, RTT samples (ACK samples; TSecr samples
    only for directions without any), as ``fairness.analyze_run`` documents them.
    """
    seg, names = segment_arrays(cap.get, cap.ip_codes, dedup)
    # numpy releases the GIL: when the capture allows it, a second thread gathers the
    # columns the ACK analysis reads while the sequence analysis runs, then dates
    # deliveries while the ACK analysis runs (otherwise each runs at once, in turn)
    with ThreadPoolExecutor(1) if cap.threads else Inline() as pool:
        seg.compute_async(["ack_raw", "win", "tsval", "tsecr"], pool)
        classify_arrays(seg, pool)
        pairs = ack_arrays(seg, min_rto_ns)
        # handshakes read only computed columns: beside the flow table and RTT samples
        return _analyze_rest(seg, names, pairs, pool.submit(handshake_arrays, seg))


def _analyze_rest(seg, names, pairs, handshakes):
    """Flow table, retransmission counts, RTT samples and handshakes after the ACK analysis
    (``handshakes``: the future of :func:`handshake_arrays`)."""
    ft = flow_arrays(seg)
    fds, fd = ft["fd"], seg["fd"]
    size = int(fds.max()) + 3 if len(fds) else 3          # room for fd ^ 1
    rk = seg["retx_kind"]
    r = np.flatnonzero(rk)                                  # retransmissions only
    for code, name in enumerate(RETX_NAMES[1:], 1):
        ft[f"retx_{name}"] = _per_fd(fd[r], rk[r] == code, fds, size)
    ft["retx_spurious"] = _per_fd(fd[r], seg["spurious"][r], fds, size)
    no_ack = np.ones(size, bool)
    no_ack[fd[pairs[1]]] = False
    rtt = rtt_arrays(seg, karn=True, tsecr=True, tsecr_fds=no_ack, ack_pairs=pairs)
    rfd, r_ns = rtt["fd"], rtt["rtt_ns"]
    ft["rtt_samples"] = np.bincount(rfd, minlength=size)[fds].astype(np.int64)
    lo = np.full(size, -1, np.int64)
    med = np.full(size, -1, np.int64)
    if len(rfd):
        head = np.flatnonzero(np.r_[True, rfd[1:] != rfd[:-1]])     # sorted by fd
        lo[rfd[head]] = np.minimum.reduceat(r_ns, head)
        k, m = group_median(rfd, r_ns)
        med[k] = m.astype(np.int64)
    ft["rtt_min_ns"], ft["rtt_median_ns"] = lo[fds], med[fds]
    hs = handshakes.result()
    flows = ft["flow"]
    hs_lut = np.full(max(int(flows.max()) + 1 if len(flows) else 1, int(hs["flow"].max()) + 1
                         if len(hs["flow"]) else 1), -1, np.int64)
    hs_lut[hs["flow"]] = hs["hs_rtt_ns"]
    ft["hs_rtt_ns"] = hs_lut[flows]
    return seg, names, ft, rtt


def jain_arrays(seg, ft: dict, starts: np.ndarray, window_ns: int):
    """Per-window goodput/throughput matrices (units x windows), activity and Jain."""
    keep = ft["goodput_bytes"] > 0                 # ACK-only directions are not flows
    units = {k: v[keep] for k, v in ft.items()}
    fd = seg["fd"]
    lut = np.full(int(fd.max()) + 1, -1, np.int64)
    lut[units["fd"]] = np.arange(len(units["fd"]))
    live = np.flatnonzero(seg["is_data"] & ~seg["mac_dup"] & (lut[fd] >= 0))
    u = lut[fd[live]]
    nu = len(units["fd"])
    # goodput is dated by in-order delivery (flows_core.in_order_delivery), throughput by sending
    good = window_sums(u, seg["deliver_ns"][live], seg["new_bytes"][live].astype(float), nu, starts, window_ns)
    thr = window_sums(u, seg["ts_ns"][live], seg["payload_len"][live].astype(float), nu, starts, window_ns)
    active = ((starts[None, :] <= units["last_ns"][:, None]) &
              (starts[None, :] + window_ns > units["first_ns"][:, None]))
    return units, good, thr, active, jain(good, active)


def _known(table: np.ndarray, values: np.ndarray):
    """(index into the sorted ``table``, found) of every value."""
    idx = np.searchsorted(table, values)
    return idx, (idx < len(table)) & (table[np.minimum(idx, len(table) - 1)] == values)


def cross_layer_arrays(ppdus, units: dict, seg, good: np.ndarray, active: np.ndarray,
                       starts: np.ndarray, window_ns: int):
    """Per window and station: airtime share, goodput share, MAC retry rate, median MCS.

    ``ppdus`` (DataFrame) needs ``ta``, ``start_ns``, ``airtime_ns``; a PPDU counts in the
    windows that contain its start. Stations are the transmitters of the active flow
    directions (``units['ta']``). None when there is no station or no PPDU.
    """
    u_ta = units["ta"]
    st_ta = np.unique(u_ta[u_ta >= 0])
    if not len(st_ta) or ppdus is None or len(ppdus) == 0:
        return None
    ppdus = ppdus[ppdus["airtime_ns"].to_numpy() >= 0]     # unknown airtime: not counted
    sidx, known = _known(st_ta, ppdus["ta"].to_numpy(dtype=np.int64, na_value=-1))
    other = len(st_ta)                                 # everyone else (BAs, CTS, beacons...)
    air = window_sums(np.where(known, sidx, other), ppdus["start_ns"].to_numpy(np.int64),
                      ppdus["airtime_ns"].to_numpy(float), other + 1, starts, window_ns)
    u_st = np.searchsorted(st_ta, u_ta)
    has = u_ta >= 0
    W = len(starts)
    g_st = np.zeros((len(st_ta), W))
    np.add.at(g_st, u_st[has], good[has])
    act_st = np.zeros((len(st_ta), W), bool)
    np.logical_or.at(act_st, u_st[has], active[has])
    w = np.flatnonzero(seg["ta"] >= 0)
    w_ta = seg["ta"][w]
    widx, ok = _known(st_ta, w_ta)
    w_ts = seg["ts_ns"][w][ok]
    frames_w = window_sums(widx[ok], w_ts, np.ones(ok.sum()), len(st_ta), starts, window_ns)
    retry_w = window_sums(widx[ok], w_ts, seg["retry"][w][ok].astype(float), len(st_ta), starts, window_ns)
    mcs = seg["mcs"][w]
    m_ta, m_med = group_median(w_ta[ok & (mcs >= 0)], mcs[ok & (mcs >= 0)])
    mi, mk = _known(m_ta, st_ta)
    mcs_st = np.where(mk, m_med[np.minimum(mi, max(len(m_med) - 1, 0))] if len(m_med) else np.nan, np.nan)
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


def queue_delay(rtt: dict, horizon_ns: int) -> dict:
    """``min_rtt_ns`` (trailing minimum over ``horizon_ns`` per fd) and ``qdelay_ns`` of
    RTT samples sorted by (fd, ts_ns)."""
    mins = trailing_min(rtt["fd"], rtt["ts_ns"], rtt["rtt_ns"], horizon_ns)
    return {"min_rtt_ns": mins, "qdelay_ns": rtt["rtt_ns"] - mins}


def _queueing(rtt: dict, starts: np.ndarray, window_ns: int, horizon_ns: int) -> np.ndarray:
    """Adds ``min_rtt_ns``/``qdelay_ns`` to ``rtt``; p50/p95 queueing delay per window."""
    rtt.update(queue_delay(rtt, horizon_ns))
    return window_quantiles(rtt["ts_ns"], rtt["qdelay_ns"], starts, window_ns)


def _airtime_frames(cap: Capture, ppdus):
    """802.11 captures: date segments at their PPDU's end (airtime package); (cap, ppdus)."""
    if cap.attrs.get("stamps") == "end":
        return cap, ppdus
    # an MPDU reaches the receiver when its PPDU ends: date segments there, whatever the
    # sniffer's TSFT convention (an A-MPDU can last 5 ms)
    try:
        from airtime.ppdu import align_to_ppdu_end, group_ppdus
        frames = cap.to_frame()
        grouped = group_ppdus(frames)
        frames = align_to_ppdu_end(frames, grouped=grouped)
    except ImportError:
        return cap, ppdus
    # one grouping serves alignment and the cross-layer view
    return Capture.from_frame(frames), grouped[0] if ppdus is None else ppdus


def run_tables(cap: Capture, window_ns: int, step_ns: int, ppdus=None,
               qdelay_threshold_ns: int = 50_000_000, busy_fraction: float = 0.5, below: float = 0.8,
               horizon_ns: int = 10_000_000_000, dedup: bool = True, min_rto_ns: int = MIN_RTO_NS,
               t0_ns=None) -> dict:
    """Every table of one run (:data:`TABLES`), its ``summary`` and endpoint ``names``.

    Text columns stay codes: ``flows`` ``proto`` (6/17), ``src``/``dst`` (into ``names``),
    ``rtt`` ``source`` (into :data:`sniffsync.flows_tcp.SOURCES`); ``jain`` ``why`` is str.
    """
    radiotap = bool((cap.get("linktype", 0, np.int64) == 127).any())
    if radiotap:
        cap, ppdus = _airtime_frames(cap, ppdus)
    seg, names, ft, rtt = analyze_arrays(cap, dedup, min_rto_ns)
    # the windows and the cross-layer view read only these: the rest of the segment
    # table is freed, so their temporaries reuse its memory instead of fresh pages
    for name in [c for c in seg if c not in _WINDOW_COLUMNS]:
        del seg[name]
    data = ft["goodput_bytes"] > 0
    if not data.any():
        raise NoDataError("no TCP/UDP data segments in the capture")
    t0 = int(ft["first_ns"][data].min()) if t0_ns is None else int(t0_ns)
    starts = window_starts(t0, int(ft["last_ns"][data].max()), window_ns, step_ns)
    W = len(starts)
    # queueing delay per window needs only the RTT samples: on a second thread when the
    # capture allows it, beside the goodput windows and the cross-layer view
    with ThreadPoolExecutor(1) if cap.threads else Inline() as pool:
        queueing = pool.submit(_queueing, rtt, starts, window_ns, horizon_ns)
        units, good, thr, active, j = jain_arrays(seg, ft, starts, window_ns)
        if ppdus is None and radiotap:
            try:
                from airtime.ppdu import group_ppdus  # another helper's package
                ppdus = group_ppdus(cap.to_frame())[0]
            except (ImportError, AttributeError):
                ppdus = None
        st = cross_layer_arrays(ppdus, units, seg, good, active, starts, window_ns) if ppdus is not None else None
        qd = queueing.result()
    tot_thr = thr.sum(axis=0)
    ja = np.full(W, np.nan)
    if st is not None:
        busy = st["utilisation"][:W] >= busy_fraction          # the same for every station
        ja = jain(st["airtime_ns"].reshape(-1, W).astype(float), st["active"].reshape(-1, W))
    else:
        busy = tot_thr >= busy_fraction * tot_thr.max()
    n_active = active.sum(axis=0)
    jt = {"window": np.arange(W), "start_ns": starts, "end_ns": starts + window_ns, "n_active": n_active,
          "jain": j, "jain_airtime": ja, "goodput_bytes": good.sum(axis=0).astype(np.int64),
          "throughput_bytes": tot_thr.astype(np.int64), "qdelay_p50_ns": qd[:, 0],
          "qdelay_p95_ns": qd[:, 1], "busy": busy}
    jt["bloat"] = busy & (qd[:, 1] > qdelay_threshold_ns)
    jt["why"] = why_texts(j, st, units, names, good, active, below)
    nu = len(units["fd"])
    gb, tb = good.ravel().astype(np.int64), thr.ravel().astype(np.int64)
    wl = {"window": np.tile(np.arange(W), nu), "start_ns": np.tile(starts, nu),
          "fd": np.repeat(units["fd"], W), "flow": np.repeat(units["flow"], W),
          "dir": np.repeat(units["dir"], W), "active": active.ravel(), "goodput_bytes": gb,
          "throughput_bytes": tb, "goodput_bps": gb * 8 * 1_000_000_000 // window_ns,
          "throughput_bps": tb * 8 * 1_000_000_000 // window_ns}
    ok = n_active >= 2
    summ = summarize(j[ok], below)
    summ.update({"windows_total": int(W), "bloat_windows": int(jt["bloat"].sum()),
                 "jain_airtime_median": (float(np.nanmedian(ja[ok])) if np.isfinite(ja[ok]).any() else None),
                 "cross_layer": st is not None})
    return {"flows": ft, "windows": wl, "jain": jt, "cdf": cdf_arrays(j[ok]), "rtt": rtt,
            "stations": st or {}, "summary": summ, "names": names}


def fairness_tables(captures, window_ns: int = 400_000_000, step_ns: int = 200_000_000, *,
                    ppdus=None, qdelay_threshold_ns: int = 50_000_000, busy_fraction: float = 0.5,
                    unfair_below: float = 0.8, min_rtt_horizon_ns: int = 10_000_000_000,
                    dedup: bool = True, min_rto_ns: int = MIN_RTO_NS, t0_ns=None):
    """:func:`run_tables` of every capture (an iterable of :class:`Capture`, consumed one
    at a time) and the report summary; arguments as ``sniffsync.fairness.fairness``."""
    pp_runs = ppdus if isinstance(ppdus, (list, tuple)) else itertools.repeat(ppdus)
    runs = []
    for cap, pp in zip(captures, pp_runs):
        runs.append(run_tables(cap, int(window_ns), int(step_ns), pp, qdelay_threshold_ns, busy_fraction,
                               unfair_below, min_rtt_horizon_ns, dedup, min_rto_ns, t0_ns))
    summary = {"runs": [dict(run=r, **p["summary"]) for r, p in enumerate(runs)],
               "window_ns": int(window_ns), "step_ns": int(step_ns),
               "qdelay_threshold_ns": int(qdelay_threshold_ns), "unfair_below": unfair_below,
               "definitions": DEFINITIONS}
    return runs, summary
