"""The fairness analysis of one run, pandas-free: its flows (TCP analysis), goodput and
throughput per window, Jain's index, queueing delay and bufferbloat, and the 802.11
cross-layer view, as tables of numpy columns.

A table is a dict ``{column: values}`` of numpy arrays in column order; text columns are
codes (see :func:`run_tables`). :mod:`sniffsync.fairness.frames` turns them into
DataFrames for the Python API; :mod:`sniffsync.fairness.report` writes them as JSON.
"""
from __future__ import annotations

import itertools
import threading

import numpy as np

from sniffsync.errors import NoDataError, UsageError
from sniffsync.fairness.capture import STAMPS, Capture, airtime_frames, resolved, skipping, wait_quietly
from sniffsync.fairness.crosslayer import cross_layer_arrays, station_windows, why_texts
from sniffsync.runtime import pool, release_free_heap, workers
from sniffsync.fairness.windows import (cdf_arrays, data_windows, jain, last_window, median, summarize,
                                        trailing_min, window_quantiles, window_sums)
from sniffsync.tcp.acks import RETX_NAMES, ack_arrays, time_rank
from sniffsync.tcp.columns import flow_parts, group_median
from sniffsync.tcp.flows import capture_end_ns, flow_arrays, outstanding_arrays
from sniffsync.tcp.rtt import MIN_RTO_NS, handshake_arrays, rtt_arrays
from sniffsync.tcp.segments import copy_part, join_parts, part_tables, segment_arrays
from sniffsync.tcp.sequence import classify_arrays

__all__ = ["Capture", "DEFINITIONS", "TABLES", "PROTO_NAMES", "STAMPS", "queue_delay", "analyze_arrays",
           "jain_arrays", "run_tables", "fairness_tables"]

TABLES = ("flows", "windows", "jain", "cdf", "rtt", "stations")

DEFINITIONS = {
    "goodput": "new payload bytes per flow direction, dated when delivered in order (the last "
               "transmission of each segment, running max in sequence order): bytes above the highest sequence number sent "
               "before (unwrapped cumulative max), plus bytes no captured segment carried that the receiver's "
               "cumulative ACK covers (inferred_bytes, dated at that ACK); UDP: every datagram's payload. "
               "MAC duplicates removed.",
    "throughput": "all payload bytes incl. TCP retransmissions (MAC duplicates removed)",
    "window": "[t0 + k*step, t0 + k*step + window), t0 = first segment with payload of the run (or --origin); "
              "only windows holding a goodput or throughput event are listed (k = 'window')",
    "active": "a flow direction is active in a window that overlaps [its first segment with payload, the "
              "later of its last payload transmission (retransmissions and MAC retries included) or ACK of "
              "inferred bytes and the first ACK covering its highest byte (active_until_ns); the end of the "
              "capture when the receiver's ACKs were captured but none covers it: a flow with data "
              "outstanding counts, so a starved flow lowers J]; "
              "an idle or application-limited flow inside that span counts with its "
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
MAX_CELLS = 20_000_000          # (flow direction, window) cells of one run: ~1.6 GB of tables
MAX_STEPS_PER_WINDOW = 1000     # window / step
PARALLEL_MIN_ROWS = 1 << 17     # segments below which the flows are analysed on one thread
PARALLEL_MAX_ROWS = 1 << 22     # segments above which the flow groups run one after the other (memory)
SEQUENTIAL_PART_ROWS = 1 << 20  # rows of a group then (as many groups as whole flows allow)
MAX_WINDOW_NS = 10**18          # window and step: at most ~31 years (int64 ns arithmetic)


# segment columns :func:`run_tables` reads after :func:`analyze_arrays`
_WINDOW_COLUMNS = {"fd", "is_data", "mac_dup", "deliver_ns", "new_bytes", "ts_ns", "payload_len",
                   "ta", "retry", "mcs"}


def _per_fd(fd: np.ndarray, mask: np.ndarray, fds: np.ndarray, size: int) -> np.ndarray:
    return np.bincount(fd[mask], minlength=size)[fds].astype(np.int64)


# lazy segment columns the fairness tables never read: their thunks hold the ACK analysis's
# per-row arrays (``tcp.acks._AckRows``) and the sequence analysis's (``frontier``)
_UNREAD_LAZY = ("dup_ack", "dup_ack_num", "acked", "bytes_in_flight", "frontier")


def analyze_arrays(cap: Capture, dedup: bool = True, min_rto_ns: int = MIN_RTO_NS, lean: bool = False,
                   horizon_ns: int | None = None):
    """Segments (classified and ACK-analysed), flow table and RTT samples of one capture.

    Returns ``(seg, names, ft, rtt)``: segment columns, endpoint names of the
    ``src``/``dst`` codes, per-fd flow table (with retransmission kinds, RTT and
    handshake statistics), RTT samples (ACK samples; TSecr samples only for directions
    without any). ``lean``: ``seg`` without the lazy columns of :data:`_UNREAD_LAZY`
    (their arrays freed right after the ACK analysis: a lower peak) and, for a big
    table of several flows, only the columns :func:`run_tables` reads: its flows are
    then analysed in groups on :func:`sniffsync.runtime.workers` threads (flows are
    independent; numpy releases the GIL), or, above :data:`PARALLEL_MAX_ROWS` rows, in
    groups of ~:data:`SEQUENTIAL_PART_ROWS` rows one after the other (a lower peak). ``horizon_ns``: ``rtt`` also gets
    :func:`queue_delay`'s columns (per fd: computed with each group).
    """
    seg, names = segment_arrays(skipping(cap.get, cap.skip), cap.ip_codes, dedup)
    n = len(seg["fd"])
    # a big table: groups of ~SEQUENTIAL_PART_ROWS run one by one (each one's temporaries alone)
    k = workers() if n <= PARALLEL_MAX_ROWS else max(workers(), -(-n // SEQUENTIAL_PART_ROWS))
    parts = flow_parts(seg["fd"], k, PARALLEL_MIN_ROWS) if lean else [slice(None)]
    ft, rtt = _analyze_parts(seg, parts, min_rto_ns, horizon_ns) if len(parts) > 1 else \
        _analyze(seg, min_rto_ns, lean, horizon_ns=horizon_ns)
    return seg, names, ft, rtt


def _analyze(seg, min_rto_ns: int, lean: bool, end_ns=None, release: bool = True, horizon_ns=None):
    """``(ft, rtt)`` of :func:`analyze_arrays` on a segment table (or a part of whole
    flows of one: ``end_ns`` the capture's end, :func:`outstanding_arrays`)."""
    if lean:                             # the MAC identity columns go once read (a lower peak)
        seg["mac_dup"]                   # noqa: B018 (computed now: its thunk reads them)
        _free(seg, ("sniffer", "wlan_seq"))
    classify_arrays(seg)
    if release:
        release_free_heap()              # each stage's freed temporaries (a lower peak)
    pairs = ack_arrays(seg, min_rto_ns, free_raw=lean)
    if lean:
        for name in _UNREAD_LAZY:
            seg.thunks.pop(name, None)
    if release:
        release_free_heap()
    ft = flow_arrays(seg)
    ft.update(outstanding_arrays(seg, ft, end_ns))
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
    _rtt_stats(ft, rtt, size)
    hs = handshake_arrays(seg)
    flows = ft["flow"]
    hs_lut = np.full(max(int(flows.max()) + 1 if len(flows) else 1, int(hs["flow"].max()) + 1
                         if len(hs["flow"]) else 1), -1, np.int64)
    hs_lut[hs["flow"]] = hs["hs_rtt_ns"]
    ft["hs_rtt_ns"] = hs_lut[flows]
    if horizon_ns is not None:
        rtt.update(queue_delay(rtt, horizon_ns))
    return ft, rtt


def _analyze_parts(seg, parts: list, min_rto_ns: int, horizon_ns=None):
    """:func:`_analyze` of each part of whole flows on its own thread (one after the other on
    this thread above :data:`PARALLEL_MAX_ROWS` rows: one part's temporaries at a time); the flow table and
    RTT samples concatenated in part order (= fd order, as one table gives them), and the
    segment columns :func:`run_tables` reads and ``seg.inferred`` put together in ``seg``."""
    if "tr" not in seg:                  # the capture's time ranks, computed by a group
        seg.thunks["tr"] = lambda: time_rank(seg["row"], seg["ts_ns"])
    n, end_ns, lock, copied = len(seg["fd"]), capture_end_ns(seg["ts_ns"]), threading.RLock(), {}
    tables = part_tables(seg, parts, lock)
    # the columns seg holds already (parts see views of them) are neither copied nor joined
    gather = _WINDOW_COLUMNS - set(dict.keys(seg))

    rows = [sl.stop - sl.start for sl in parts]
    one_by_one = sum(rows) > PARALLEL_MAX_ROWS      # their temporaries at once would set the peak

    def run(i):
        out = _analyze(tables[i], min_rto_ns, lean=True, end_ns=end_ns, release=one_by_one, horizon_ns=horizon_ns)
        if not one_by_one:           # on this part's thread (one by one: concatenated at the join)
            copy_part(tables[i], parts[i], n, gather, copied, lock)
        _trim_part(tables[i])
        if one_by_one:
            release_free_heap()          # the next part grows into the pages this one freed
        return out
    big = max(range(len(parts)), key=rows.__getitem__)
    if one_by_one:
        out = [run(i) for i in range(len(parts))]
    else:
        with pool(len(parts) - 1, limit=len(parts) - 1) as ex:    # the largest part on this thread
            rest = {i: ex.submit(run, i) for i in range(len(parts)) if i != big}
            mine = run(big)
            out = [mine if i == big else rest[i].result() for i in range(len(parts))]
    ft, rtt = ({k: np.concatenate([o[j][k] for o in out]) for k in out[0][j]} for j in (0, 1))
    join_parts(seg, tables, _WINDOW_COLUMNS, copied)
    inf = [t.inferred for t in tables]
    seg.inferred = {"row": np.concatenate([i["row"] + sl.start for i, sl in zip(inf, parts)]),
                    "fd": np.concatenate([i["fd"] for i in inf]), "bytes": np.concatenate([i["bytes"] for i in inf])}
    tables.clear()                        # (the groups' columns: freed before the trim)
    del out
    if one_by_one:
        # (on threads the windows grow into the freed pages as they are: no lower peak on
        # 1M frames, 802.11 or wired, and each page given back was zeroed again on reuse)
        release_free_heap()
    return ft, rtt


def _free(seg, names) -> None:
    """Frees the computed columns ``names`` of ``seg`` that no later stage reads (a part
    reads every one of them: :func:`part_tables` frees the frame column at its last gather)."""
    for name in names:
        if dict.__contains__(seg, name):
            del seg[name]


def _trim_part(t) -> None:
    """Frees the columns of an analysed part that :func:`join_parts` does not keep (not
    held while the next part runs). Each stays named, empty: the join frees the frame
    column of every name a part gathered."""
    for name in [c for c in dict.keys(t) if c not in _WINDOW_COLUMNS]:
        t[name] = t[name][:0]


def _rtt_stats(ft: dict, rtt: dict, size: int) -> None:
    """Adds ``rtt_samples``, ``rtt_min_ns`` and ``rtt_median_ns`` (-1: none) to ``ft``."""
    fds = ft["fd"]
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


def data_units(seg, ft: dict):
    """``(units, lut, live)``: the flow directions with goodput (ACK-only directions are
    not flows), fd -> unit index, and their live data rows (MAC duplicates removed)."""
    keep = ft["goodput_bytes"] > 0
    units = {k: v[keep] for k, v in ft.items()}
    fd = seg["fd"]
    lut = np.full(int(fd.max()) + 1, -1, np.int64)
    lut[units["fd"]] = np.arange(len(units["fd"]))
    live = seg["is_data"] & ~seg["mac_dup"]
    live &= (lut >= 0)[fd]                              # (a boolean lookup: no int64 gather)
    live = np.flatnonzero(live)
    return units, lut, live


def jain_arrays(seg, ft: dict, starts: np.ndarray, window_ns: int, prepared=None, events=None, sent_ns=None):
    """Per-window goodput/throughput matrices (units x windows), activity and Jain
    (``prepared``: :func:`data_units`, ``events``: :func:`_goodput_events`, ``sent_ns``: the
    live data rows' ``ts_ns``, when known)."""
    units, lut, live = prepared or data_units(seg, ft)
    nu = len(units["fd"])
    # goodput is dated by in-order delivery (tcp.sequence.in_order_delivery), bytes of a
    # sniffer's hole by the ACK that covered them (tcp.holes), throughput by sending
    g_u, g_ts, g_b = events or _goodput_events(seg, lut, live)
    u = g_u[:len(live)]                                 # (the live rows' units come first)
    good = window_sums(g_u, g_ts, g_b, nu, starts, window_ns)
    thr = window_sums(u, seg["ts_ns"][live] if sent_ns is None else sent_ns, seg["payload_len"][live].astype(float),
                      nu, starts, window_ns)
    active = ((starts[None, :] <= units["active_until_ns"][:, None]) &
              (starts[None, :] + window_ns > units["first_ns"][:, None]))
    return units, good, thr, active, jain(good, active)


def _goodput_events(seg, lut: np.ndarray, live: np.ndarray):
    """(unit, time, bytes) of every goodput event: captured new bytes at in-order
    delivery, inferred bytes at their ACK (``seg.inferred``)."""
    inf = getattr(seg, "inferred", None) or {"row": np.zeros(0, np.int64), "fd": np.zeros(0, np.int64),
                                             "bytes": np.zeros(0, np.int64)}
    keep = lut[np.minimum(inf["fd"], len(lut) - 1)] >= 0
    keep &= inf["fd"] < len(lut)
    unit = np.concatenate([lut[seg["fd"][live]], lut[inf["fd"][keep]]])
    ts = np.concatenate([seg["deliver_ns"][live], seg["ts_ns"][inf["row"][keep]]])
    return unit, ts, np.concatenate([seg["new_bytes"][live], inf["bytes"][keep]]).astype(float)


def queue_delay(rtt: dict, horizon_ns: int) -> dict:
    """``min_rtt_ns`` (trailing minimum over ``horizon_ns`` per fd) and ``qdelay_ns`` of
    RTT samples sorted by (fd, ts_ns)."""
    mins = trailing_min(rtt["fd"], rtt["ts_ns"], rtt["rtt_ns"], horizon_ns)
    return {"min_rtt_ns": mins, "qdelay_ns": rtt["rtt_ns"] - mins}


def run_tables(cap: Capture, window_ns: int, step_ns: int, ppdus=None,
               qdelay_threshold_ns: int = 50_000_000, busy_fraction: float = 0.5, below: float = 0.8,
               horizon_ns: int = 10_000_000_000, dedup: bool = True, min_rto_ns: int = MIN_RTO_NS,
               t0_ns=None) -> dict:
    """Every table of one run (:data:`TABLES`), its ``summary`` and endpoint ``names``.

    Text columns stay codes: ``flows`` ``proto`` (6/17), ``src``/``dst`` (into ``names``),
    ``rtt`` ``source`` (into :data:`sniffsync.tcp.rtt.SOURCES`); ``jain`` ``why`` is str.
    """
    if (cap.get("linktype", 0, np.int64) == 127).any():
        cap, ppdus = airtime_frames(cap, ppdus)
    try:
        seg, names, ft, rtt = analyze_arrays(cap, dedup, min_rto_ns, lean=True, horizon_ns=horizon_ns)
    except BaseException:                # the extents' thread ends before the error goes on
        wait_quietly(ppdus)
        raise
    ppdus = resolved(ppdus)              # (its extents may have been estimated beside the analysis)
    # the windows and the cross-layer view read only these: free the rest (a lower peak)
    for name in [c for c in seg if c not in _WINDOW_COLUMNS]:
        del seg[name]
    data = ft["goodput_bytes"] > 0
    if not data.any():
        raise NoDataError("no TCP/UDP data segments in the capture")
    t0 = int(ft["first_ns"][data].min()) if t0_ns is None else int(t0_ns)
    t_last = int(ft["last_ns"][data].max())
    with pool(2, limit=1) as ex:         # the RTT samples' quantiles beside the windows' sums
        # on every window of a grid not much longer than the samples (a window's quantiles
        # depend on its samples only: the listed windows' rows are taken below), so they
        # start before the windows holding data are known
        k_all = last_window(t0, t_last, window_ns, step_ns) + 1
        every = k_all <= 4 * len(rtt["ts_ns"]) + 4096

        def quantiles(starts):
            return ex.submit(window_quantiles, rtt["ts_ns"], rtt["qdelay_ns"], starts, window_ns, step_ns=step_ns)
        qd = quantiles(t0 + step_ns * np.arange(k_all, dtype=np.int64)) if every else None
        prepared = data_units(seg, ft)
        # only the windows that hold a goodput or throughput event (bounded by the frames)
        _, lut, live = prepared
        gev = _goodput_events(seg, lut, live)
        sent_ns = seg["ts_ns"][live]
        ks = data_windows([gev[1], sent_ns], t0, t_last, window_ns, step_ns,
                          max_windows=max(1, MAX_CELLS // len(prepared[0]["fd"])))
        starts = t0 + step_ns * ks
        qd = qd or quantiles(starts)
        # the cross-layer view's air side needs no goodput: beside the windows' sums
        sw = ex.submit(station_windows, ppdus, prepared[0], seg, starts, window_ns) if ppdus is not None else None
        units, good, thr, active, j = jain_arrays(seg, ft, starts, window_ns, prepared, gev, sent_ns)
        del gev, sent_ns
        st = cross_layer_arrays(ppdus, units, seg, good, active, starts, window_ns, sw.result()) \
            if ppdus is not None else None
        qd = qd.result()[ks] if every else qd.result()
    jt = _jain_table(starts, window_ns, good, thr, active, j, qd, st, busy_fraction, qdelay_threshold_ns)
    jt["why"] = why_texts(j, st, units, names, good, active, below)
    jt["window"] = ks                    # grid index: window k starts at t0 + k * step
    if st is not None:
        st["window"] = ks[st["window"]]
    ok = jt["n_active"] >= 2
    ja = jt["jain_airtime"]
    summ = summarize(j[ok], below)
    summ.update({"windows_total": len(starts), "bloat_windows": int(jt["bloat"].sum()),
                 "jain_airtime_median": median(ja[ok][~np.isnan(ja[ok])]) if np.isfinite(ja[ok]).any() else None,
                 "cross_layer": st is not None})
    return {"flows": ft, "windows": _window_table(units, ks, starts, window_ns, good, thr, active),
            "jain": jt, "cdf": cdf_arrays(j[ok]), "rtt": rtt, "stations": st or {}, "summary": summ,
            "names": names}


def _jain_table(starts, window_ns: int, good, thr, active, j, qd, st, busy_fraction: float,
                qdelay_threshold_ns: int) -> dict:
    """The ``jain`` table but ``why``: per window activity, Jain's indices, totals,
    queueing delay and the busy / bufferbloat flags."""
    W = len(starts)
    tot_thr = thr.sum(axis=0)
    ja = np.full(W, np.nan)
    if st is not None:
        busy = st["utilisation"][:W] >= busy_fraction          # the same for every station
        ja = jain(st["airtime_ns"].reshape(-1, W).astype(float), st["active"].reshape(-1, W))
    else:
        busy = tot_thr >= busy_fraction * tot_thr.max()
    jt = {"window": np.arange(W), "start_ns": starts, "end_ns": starts + window_ns,
          "n_active": active.sum(axis=0), "jain": j, "jain_airtime": ja,
          "goodput_bytes": good.sum(axis=0).astype(np.int64), "throughput_bytes": tot_thr.astype(np.int64),
          "qdelay_p50_ns": qd[:, 0], "qdelay_p95_ns": qd[:, 1], "busy": busy}
    jt["bloat"] = busy & (qd[:, 1] > qdelay_threshold_ns)
    return jt


def _window_table(units: dict, ks, starts, window_ns: int, good, thr, active) -> dict:
    """The ``windows`` table: one row per (flow direction, window)."""
    W, nu = len(starts), len(units["fd"])
    gb, tb = good.ravel().astype(np.int64), thr.ravel().astype(np.int64)
    return {"window": np.tile(ks, nu), "start_ns": np.tile(starts, nu),
            "fd": np.repeat(units["fd"], W), "flow": np.repeat(units["flow"], W),
            "dir": np.repeat(units["dir"], W), "active": active.ravel(), "goodput_bytes": gb,
            "throughput_bytes": tb, "goodput_bps": gb * 8 * 1_000_000_000 // window_ns,
            "throughput_bps": tb * 8 * 1_000_000_000 // window_ns}


def fairness_tables(captures, window_ns: int = 400_000_000, step_ns: int = 200_000_000, *,
                    ppdus=None, qdelay_threshold_ns: int = 50_000_000, busy_fraction: float = 0.5,
                    unfair_below: float = 0.8, min_rtt_horizon_ns: int = 10_000_000_000,
                    dedup: bool = True, min_rto_ns: int = MIN_RTO_NS, t0_ns=None):
    """:func:`run_tables` of every capture (an iterable of :class:`Capture`, consumed one
    at a time) and the report summary; arguments as ``sniffsync.fairness.fairness``."""
    for name, v in (("window", window_ns), ("step", step_ns)):
        if not 0 < v <= MAX_WINDOW_NS:
            raise UsageError(f"{name} must be positive and at most {MAX_WINDOW_NS / 1e9:g} s, not {v / 1e9:g} s")
    if window_ns > MAX_STEPS_PER_WINDOW * step_ns:     # each sample would fall in that many windows
        raise UsageError(f"window must be at most {MAX_STEPS_PER_WINDOW} steps long, not "
                         f"{window_ns / 1e9:g} s every {step_ns / 1e9:g} s")
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
