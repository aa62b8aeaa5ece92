"""The best time of every copy, with its uncertainty and where it came from.

A copy's common time (:func:`sniffsync.sync.clock.sync`) is as good as its clock: a
radiotap TSFT (µs, fitted to ~1 µs) or a host clock (the capture timestamp, jittered
by the host: tens of µs). After the copies are matched (:mod:`sniffsync.sync.copies`)
each copy gets the best time the run supports, in this order (:data:`TS_SRC`):

``tsft``
    its own clock is a TSFT: its common time, error :func:`clock_errors`.
``other_sniffer``
    a TSFT sniffer heard the same transmission: the mean of those copies' times.
``protocol``
    inferred from the protocol's fixed timing against well-placed frames of the same
    sniffer's capture (the way Jigsaw rebuilt µs timing from many radios): a CTS,
    ACK or Block-Ack ends SIFS + its own airtime after the end of the frame it answers
    (the record before it, sent by its receiver) and that frame ends SIFS + the
    response's airtime before it; the subframes of an A-MPDU (one ``ampdu_ref``) share
    one PPDU end. Error: the anchor's + :data:`PROTOCOL_TOL_NS` (SIFS tolerance,
    µs rounding). A response is only placed when its host time agrees within the
    clock's copy gate, so a record that does not answer the one before is left alone.
    Passes repeat so one placement leads to the next (an A-MPDU placed by its
    Block-Ack places the frame before it...).
``host``
    its own host clock through the fitted model, error 3 x the clock's residual scale.

Pure numpy past the table; no per-frame Python loop. Beacons' interval is not used:
where the Timestamp field is set when the beacon is built (ns-3), PPDU end - Timestamp
varies by milliseconds (deferral), more than a host clock's error.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

from sniffsync.sync.copies import GATE_SIGMAS, clock_sigma
from sniffsync.sync.order import group_mean
from sniffsync.sync.streamstats import held_stats

__all__ = ["TS_SRC", "PROTOCOL_TOL_NS", "TSFT_ERR_NS", "Retimed", "clock_errors", "retime",
           "add_provenance", "provenance_totals"]

TS_SRC = ("tsft", "other_sniffer", "protocol", "host")
TSFT, OTHER, PROTOCOL, HOST = range(4)
TSFT_ERR_NS = 1_000        # a TSFT counts whole µs
PROTOCOL_TOL_NS = 2_000    # SIFS tolerance (+-0.9 µs at 5 GHz) + µs rounding of both ends
HOST_SIGMAS = 3.0          # a host-clock time's error, in its residual scales
PASSES = 4
_RESPONSES = (0x1C, 0x1D, 0x19)      # CTS, ACK, Block-Ack: sent SIFS after what they answer


class Retimed(NamedTuple):
    """Per row of the frame table: the correction to add to its common time (ns), the
    error bound of the corrected time (ns; -1: unsynced, unknown) and the source
    (index into :data:`TS_SRC`)."""
    shift_ns: np.ndarray
    err_ns: np.ndarray
    src: np.ndarray


def clock_errors(res, st=None) -> np.ndarray:
    """Per clock, the error bound of one frame's common time (ns): TSFT clocks max(1 µs,
    p99 of |held-out residual| of their pairs with other TSFT clocks); host clocks
    :data:`HOST_SIGMAS` x their residual scale. Residuals read of ``st`` as
    :func:`sniffsync.sync.copies.default_gate` does."""
    st = held_stats(res) if st is None else st
    tsft = res.model.kind == "tsft"      # a TSF segment placed via the host clock is "host"
    out = HOST_SIGMAS * clock_sigma(res)
    both = np.flatnonzero((tsft[:, None] & tsft[None, :]).ravel())
    for c in np.flatnonzero(tsft):       # per clock: a handful
        q = st.res.quantiles(np.intersect1d(st.keys_touching(np.arange(len(tsft)) == c), both), [99])
        out[c] = max(TSFT_ERR_NS, float(q[0]) if q is not None else 0.0)
    return np.ceil(out).astype(np.int64)


def _ppdus(df: pd.DataFrame, rows: np.ndarray):
    """``(ppdu id, PPDU airtime ns)`` of ``rows`` (one sniffer after the other, each in
    capture order): :func:`airtime.ppdu.group_ppdus` on those rows; -1 where none or
    not known exactly."""
    from airtime.ppdu import group_ppdus
    if not len(rows):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    sub = df.iloc[rows].reset_index(drop=True)
    g = group_ppdus(sub, "end")
    # the TXTIME of what was captured, where that is the whole PPDU (a single MPDU, or
    # an A-MPDU whose last subframe was heard); a cut one is not used (its extent is a guess)
    air = g.ppdus["captured_airtime_ns"].to_numpy(np.int64)
    fp = np.asarray(g.frame_ppdu, np.int64)
    ref = sub["ampdu_ref"].isna().to_numpy() if "ampdu_ref" in sub else np.ones(len(sub), bool)
    last = sub["ampdu_last"].fillna(False).to_numpy(bool) if "ampdu_last" in sub else np.zeros(len(sub), bool)
    whole = np.zeros(len(air), bool)
    whole[fp[(fp >= 0) & (ref | last)]] = True
    air = np.where(whole, air, -1)
    return fp, np.where(fp >= 0, air[np.maximum(fp, 0)], -1)


def retime(df: pd.DataFrame, res, group: np.ndarray, synced: np.ndarray) -> Retimed:
    """Best time of every row of ``df`` (module docstring): the correction to its common
    time ``res.common_ns``, its error bound and its source.

    ``group``: transmission of each row (:func:`sniffsync.sync.copies.match_copies`);
    ``synced``: per row, whether its clock is synced.
    """
    n = len(df)
    t0 = np.asarray(res.common_ns, np.int64)
    tsft_clock = (res.model.kind == "tsft")[res.clock] & synced
    own = getattr(res, "clock_err_ns", None)         # precomputed (the streamed merge's windows)
    err = (clock_errors(res) if own is None else own)[res.clock]
    src = np.where(tsft_clock, TSFT, HOST).astype(np.int8)
    t = t0.copy()
    # other_sniffer: the mean time of the group's TSFT copies
    ng = int(group.max()) + 1 if n else 0
    cnt = np.bincount(group[tsft_clock], minlength=ng)
    tg = group_mean(group, t0, ng, tsft_clock)
    eg = np.zeros(ng, np.int64)
    np.maximum.at(eg, group[tsft_clock], err[tsft_clock])
    take = synced & ~tsft_clock & (cnt[group] > 0)
    t[take] = tg[group[take]]
    err[take], src[take] = eg[group[take]], OTHER
    _protocol(df, res, t, err, src, synced)
    err = np.where(synced, err, -1)
    return Retimed(t - t0, err, src)


def _protocol(df, res, t, err, src, synced):
    """Protocol-inferred times for host rows, in place (module docstring)."""
    from airtime.phy import sifs_ns
    sn = df["sniffer"].to_numpy(np.int64)
    mine = np.flatnonzero(np.isin(sn, np.unique(sn[src == HOST])))   # sniffers with host rows only
    if len(mine) < 2:
        return
    order = mine[np.lexsort((df["frame"].to_numpy(np.int64)[mine], sn[mine]))]   # capture order
    s, ok = sn[order], synced[order]
    ppdu, air = _ppdus(df, order)
    ppdu = np.where(ppdu >= 0, ppdu, -1 - np.arange(len(ppdu)))   # frames in no PPDU: alone
    gate = GATE_SIGMAS * clock_sigma(res)[res.clock][order]

    def col(name, fill):
        return df[name].to_numpy(np.int64, na_value=fill)[order] if name in df else np.full(len(order), fill)

    tsub, ta, ra = col("type_subtype", -1), col("ta", -1), col("ra", -2)
    resp = np.isin(tsub, _RESPONSES)
    sifs = sifs_ns(col("freq_mhz", 5180))
    same = (s[1:] == s[:-1]) & ok[1:] & ok[:-1] & (ppdu[1:] != ppdu[:-1]) & (air[1:] > 0)
    # row k+1 sent SIFS after the end of row k's PPDU: a response from row k's receiver
    # (CTS, ACK, BA), or what the addressee of a CTS sends after it
    follows = same & (ra[1:] == ta[:-1]) & resp[1:] | same & (tsub[:-1] == 0x1C) & (ta[1:] == ra[:-1])
    step = sifs[1:] + air[1:]                       # end of row k -> end of row k+1
    host_t = t[order]
    tt, ee, ss = t[order], err[order], src[order]
    for _ in range(PASSES):              # each pass places what the last one placed leads to
        changed = _ampdu_pass(ppdu, tt, ee, ss)
        placed = ss != HOST
        fwd = follows & placed[:-1] & ~placed[1:] & (np.abs(host_t[1:] - (tt[:-1] + step)) <= gate[1:])
        k = np.flatnonzero(fwd)
        tt[k + 1], ee[k + 1], ss[k + 1] = tt[k] + step[k], ee[k] + PROTOCOL_TOL_NS, PROTOCOL
        placed = ss != HOST
        back = follows & placed[1:] & ~placed[:-1] & (np.abs(host_t[:-1] - (tt[1:] - step)) <= gate[:-1])
        k = np.flatnonzero(back)
        tt[k], ee[k], ss[k] = tt[k + 1] - step[k], ee[k + 1] + PROTOCOL_TOL_NS, PROTOCOL
        if not (changed or fwd.any() or back.any()):
            break
    t[order], err[order], src[order] = tt, ee, ss


def _ampdu_pass(ppdu, tt, ee, ss) -> bool:
    """Host rows of a PPDU (``ppdu``: ids, negative for frames alone) with a placed row
    take the time of its best-placed row; PPDUs with none share their mean host time."""
    ppdu = np.where(ppdu >= 0, ppdu, ppdu.max(initial=0) + 1 - ppdu)   # non-negative ids
    placed = ss != HOST
    npp = int(ppdu.max(initial=-1)) + 1
    big = np.iinfo(np.int64).max
    best_err = np.full(npp, big)
    np.minimum.at(best_err, ppdu[placed], ee[placed])
    has = best_err < big
    pick = np.full(npp, -1, np.int64)
    cand = np.flatnonzero(placed & (ee == best_err[ppdu]))
    pick[ppdu[cand[::-1]]] = cand[::-1]             # the first such row of each PPDU
    move = ~placed & has[ppdu]
    tt[move], ee[move], ss[move] = tt[pick[ppdu[move]]], ee[pick[ppdu[move]]], PROTOCOL
    # PPDUs no placed row reaches: one (mean) host time for their subframes
    free = ~placed & ~has[ppdu]
    cnt = np.bincount(ppdu[free], minlength=npp)
    multi = free & (cnt[ppdu] > 1)
    if multi.any():
        base = tt[multi].min()
        mean = np.bincount(ppdu[multi], weights=(tt[multi] - base).astype(np.float64), minlength=npp)
        tt[multi] = np.rint(mean[ppdu[multi]] / cnt[ppdu[multi]]).astype(np.int64) + base
    return bool(move.any())


def add_provenance(report: dict, rt: Retimed, sniffer: np.ndarray, res) -> None:
    """Per sniffer in ``report``: ``ts_src`` (its copies per source), ``ts_err_us_p50_p95_p99``
    (their error bounds) and per clock segment ``ts_err_us`` (one frame on that clock)."""
    tally = Tally(len(report["sniffers"]))
    tally.add(rt, sniffer)
    tally.fill(report, clock_errors(res), res.model.clocks)


class Tally:
    """The provenance of :func:`add_provenance`, added up batch by batch (the streamed
    merge): copies per sniffer and source, and each sniffer's error bounds as distinct
    values with their counts (a handful: one per clock, plus protocol steps)."""

    def __init__(self, n_sniffers: int):
        self.src = np.zeros((n_sniffers, len(TS_SRC)), np.int64)
        self.err = [{} for _ in range(n_sniffers)]

    def add(self, rt: Retimed, sniffer) -> None:
        sniffer = np.asarray(sniffer, np.int64)
        n = len(self.err)
        self.src += np.bincount(sniffer * len(TS_SRC) + rt.src,
                                minlength=n * len(TS_SRC)).reshape(n, len(TS_SRC))
        ok = rt.err_ns >= 0
        for s in np.unique(sniffer[ok]):              # per sniffer: a handful
            v, k = np.unique(rt.err_ns[ok & (sniffer == s)], return_counts=True)
            d = self.err[s]
            for a, b in zip(v.tolist(), k.tolist()):
                d[a] = d.get(a, 0) + b

    def fill(self, report: dict, per_clock: np.ndarray, clocks) -> None:
        for s, entry in enumerate(report["sniffers"]):   # per sniffer: a handful
            entry["ts_src"] = {k: int(v) for k, v in zip(TS_SRC, self.src[s])}
            entry["ts_err_us_p50_p95_p99"] = _pct_counts_us(self.err[s])
            mine = np.flatnonzero(clocks["sniffer"].to_numpy() == s)
            for seg, cid in zip(entry.get("model", []), mine):
                seg["ts_err_us"] = round(float(per_clock[cid]) / 1000, 3)


def _pct_counts_us(counts: dict):
    """``np.percentile(values, [50, 95, 99])`` (linear) of values given as value -> count, in µs."""
    if not counts:
        return [None, None, None]
    v = np.array(sorted(counts), np.float64)
    end = np.cumsum([counts[x] for x in sorted(counts)])
    pos = np.array([50, 95, 99], np.float64) / 100 * (end[-1] - 1)
    lo, hi = np.floor(pos).astype(np.int64), np.ceil(pos).astype(np.int64)
    at = lambda i: v[np.searchsorted(end, i, side="right")]   # value at sorted position i
    q = at(lo) + (at(hi) - at(lo)) * (pos - lo)
    return (q / 1000).round(3).tolist()


def provenance_totals(frames: pd.DataFrame) -> dict:
    """Merged frames per ``ts_src``."""
    v = frames["ts_src"].value_counts()
    return {k: int(v.get(k, 0)) for k in TS_SRC}
