"""Counter tracks under the timeline: per-bucket values of a run's metrics on its time axis.

Each series is a time-sorted array with cumulative sums built once; a request for ``n``
buckets over [t0, t1) is two ``searchsorted`` per series at the bucket edges and differences
of the cumulative sums, so the answer's size is ``n`` x series, never the number of packets
(like the timeline's tiles). Three ways to fill a bucket, per track:

* ``mean``  — mean of the samples starting in the bucket (null without one): RTT, queueing
  delay (RTT - the flow's min RTT), bytes in flight, MCS, MPDUs per A-MPDU;
* ``step``  — a windowed metric's value holding from its window start until the next one
  (goodput per flow, Jain): the mean of the windows starting in the bucket, else the window
  in force at the bucket's start;
* ``count`` — how many samples start in the bucket (failed MPDUs, collisions);
* ``busy``  — the fraction of the bucket covered by PPDU airtime (channel utilisation; the sum
  of airtimes, so overlapping PPDUs — collisions — can take it past 1: it is clipped to 1).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from sniffsync.decode.macs import mac_text
from viz.jsonable import plain
from viz.keyed import search_within

__all__ = ["TrackIndex", "MAX_BUCKETS", "MAX_STATIONS"]

MAX_BUCKETS = 2000
MAX_STATIONS = 8           # stations shown per per-station track: the busiest by airtime


class _Series:
    """One series: sorted times, cumulative sums of the values (and their count)."""

    def __init__(self, label: str, t: np.ndarray, v: np.ndarray | None = None):
        order = np.argsort(t, kind="stable")
        self.label, self.t = label, np.asarray(t, np.int64)[order]
        self.v = None if v is None else np.asarray(v, np.float64)[order]
        if self.v is not None:
            ok = np.isfinite(self.v)
            self.t, self.v = self.t[ok], self.v[ok]
            self.csum = np.concatenate([[0.0], np.cumsum(self.v)])

    def counts(self, edges):
        k = np.searchsorted(self.t, edges)
        return k, np.diff(k)

    def mean(self, edges) -> np.ndarray:
        k, n = self.counts(edges)
        s = np.diff(self.csum[k])
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(n > 0, s / np.maximum(n, 1), np.nan)

    def step(self, edges) -> np.ndarray:
        out = self.mean(edges)
        if not len(self.v):
            return out
        k = np.searchsorted(self.t, edges[:-1], "right") - 1      # the window in force at the bucket start
        held = np.where(k >= 0, self.v[np.clip(k, 0, None)], np.nan)
        return np.where(np.isnan(out), held, out)


def _sorted_search(a: np.ndarray, t: np.ndarray) -> np.ndarray:
    """``np.searchsorted(a, t)`` for ascending ``t``, searching only a[first:last answer]."""
    lo, hi = np.searchsorted(a, [t[0], t[-1]])
    return np.searchsorted(a[lo:hi], t) + lo


class _Busy:
    """Airtime covered up to time T: sum over PPDUs of clip(T - start, 0, airtime), from
    sorted starts and ends and their cumulative sums."""

    def __init__(self, start: np.ndarray, end: np.ndarray):
        self.s, self.e = np.sort(start), np.sort(end)
        self.cs = np.concatenate([[0], np.cumsum(self.s)]).astype(np.float64)
        self.ce = np.concatenate([[0], np.cumsum(self.e)]).astype(np.float64)

    def covered(self, t: np.ndarray) -> np.ndarray:
        """For sorted ``t``: each search runs in the slice between the first and last answer."""
        ns, ne = _sorted_search(self.s, t), _sorted_search(self.e, t)
        tf = t.astype(np.float64)
        return (ns * tf - self.cs[ns]) - (ne * tf - self.ce[ne])

    def fraction(self, edges) -> np.ndarray:
        return np.clip(np.diff(self.covered(edges)) / np.diff(edges).astype(np.float64), 0, 1)


class TrackIndex:
    """``tracks(t0, t1, n)`` (run-relative ns) -> the tracks' values in ``n`` buckets."""

    def __init__(self, run):
        p = run.ppdus
        self.base = int(p["start_ns"].min()) if len(p) else 0
        b = self.base
        self.defs: list[dict] = []
        fair = getattr(run, "fairness", None)
        flows = fair.flows if fair is not None else pd.DataFrame()
        label = {(f.run, f.fd): f"{f.src}:{f.sport}→{f.dst}:{f.dport}" for f in flows.itertuples(index=False)} \
            if len(flows) else {}
        if fair is not None and len(fair.windows):
            self._add("goodput", "goodput per flow", "Mb/s", "step", [
                _Series(label.get(k, f"flow {k[1]}"), g["start_ns"].to_numpy(np.int64) - b,
                        g["goodput_bps"].to_numpy(float) / 1e6) for k, g in fair.windows.groupby(["run", "fd"])])
        if fair is not None and len(fair.rtt):
            self._add("rtt", "RTT per flow", "ms", "mean", [
                _Series(label.get(k, f"flow {k[1]}"), g["ts_ns"].to_numpy(np.int64) - b,
                        g["rtt_ns"].to_numpy(float) / 1e6) for k, g in fair.rtt.groupby(["run", "fd"])])
        if fair is not None and len(fair.rtt) and "qdelay_ns" in fair.rtt:
            self._add("qdelay", "queueing delay per flow (RTT - min RTT)", "ms", "mean", [
                _Series(label.get(k, f"flow {k[1]}"), g["ts_ns"].to_numpy(np.int64) - b,
                        g["qdelay_ns"].to_numpy(dtype=float, na_value=np.nan) / 1e6)
                for k, g in fair.rtt.groupby(["run", "fd"])])
        inflight = getattr(run, "inflight", None)
        if inflight is not None and len(inflight):
            by_fd = {fd: lab for (_, fd), lab in label.items()}
            self._add("inflight", "bytes in flight per flow", "kB", "mean", [
                _Series(by_fd.get(fd, f"flow {fd}"), g["ts_ns"].to_numpy(np.int64) - b,
                        g["bytes_in_flight"].to_numpy(float) / 1e3) for fd, g in inflight.groupby("fd")])
        data = p[(p["kind"].astype(str) == "data") & p["ta"].notna()]
        if len(data):
            air = (data["end_ns"] - data["start_ns"]).groupby(data["ta"]).sum().sort_values(ascending=False)
            tas = list(air.index[:MAX_STATIONS])
            per = {ta: data[data["ta"] == ta] for ta in tas}
            mcs = [_Series(mac_text(ta), g["start_ns"].to_numpy(np.int64) - b,
                           g["mcs"].to_numpy(dtype=float, na_value=np.nan)) for ta, g in per.items()]
            if any(len(s.t) for s in mcs):
                self._add("mcs", "MCS per station", "MCS", "mean", mcs)
            self._add("ampdu", "MPDUs per A-MPDU per station", "MPDUs", "mean", [
                _Series(mac_text(ta), g["start_ns"].to_numpy(np.int64) - b, g["n_mpdus"].to_numpy(float))
                for ta, g in per.items()])
        if len(p):
            self._busy = _Busy(p["start_ns"].to_numpy(np.int64) - b, p["end_ns"].to_numpy(np.int64) - b)
            self._add("util", "channel utilisation", "busy fraction", "busy", [])
        if fair is not None and len(fair.jain):
            self._add("jain", "Jain's index per window", "Jain", "step", [
                _Series("Jain (goodput)", fair.jain["start_ns"].to_numpy(np.int64) - b, fair.jain["jain"].to_numpy(float))])
        ev = run.events
        if len(ev):
            kinds = ev["kind"].astype(str)
            t = ev["start_ns"].to_numpy(np.int64) - b
            self._add("failed", "failed MPDUs and collisions per bucket", "count", "count", [
                _Series("failed MPDUs", t[(kinds == "mpdu_failed").to_numpy()]),
                _Series("RTS/CTS collisions", t[(kinds == "rts_cts_collision").to_numpy()]),
                _Series("overlaps", t[(kinds == "overlap").to_numpy()])])
        self._pack()

    def _add(self, tid, title, unit, how, series):
        self.defs.append({"id": tid, "title": title, "unit": unit, "how": how, "series": series})

    def _pack(self):
        """Every series' samples in one array keyed by series (``j * stride + t + 1``, t shifted
        to start at 0) with per-series cumulative sums side by side, so a request is one
        ``searchsorted`` for all series (two with the step tracks) instead of one per series."""
        ser = [(d["how"], s) for d in self.defs if d["how"] != "busy" for s in d["series"]]
        self._how = np.array([h for h, _ in ser], object)
        ts = [s.t for _, s in ser]
        vs = [s.v if s.v is not None else np.zeros(len(s.t)) for _, s in ser]
        allt = np.concatenate(ts) if ts else np.zeros(0, np.int64)
        self._tmin = int(allt.min()) if len(allt) else 0
        self._stride = (int(allt.max()) - self._tmin + 3) if len(allt) else 3
        if len(ser) * self._stride >= 1 << 62:           # would overflow int64: no packing
            self._keys = None
            return
        j = np.repeat(np.arange(len(ser), dtype=np.int64), [len(t) for t in ts])
        self._keys = j * self._stride + (allt - self._tmin) + 1
        self._off = np.concatenate([[0], np.cumsum([len(t) for t in ts])])[:-1].astype(np.int64)
        self._v = np.concatenate(vs) if vs else np.zeros(0)
        # series j's cumulative sums (a leading 0 each) start at _off[j] + j: the same additions
        # per series as _Series.mean, so the same floats
        self._csum = np.concatenate([s.csum if s.v is not None else np.zeros(len(s.t) + 1) for _, s in ser]
                                    or [np.zeros(0)])
        for j, (_, s) in enumerate(ser):     # the series read the packed arrays: no second copy
            if s.v is not None:
                o, n = int(self._off[j]), len(s.t)
                s.v, s.csum = self._v[o:o + n], self._csum[o + j:o + j + n + 1]

    def _keyed(self, q) -> np.ndarray:
        """Times ``q`` as (series, len(q)) keys: series j's band of the packed keys."""
        q = np.clip(np.asarray(q, np.int64) - self._tmin, -1, self._stride - 2) + 1
        return np.arange(len(self._how), dtype=np.int64)[:, None] * self._stride + q

    def _values(self, edges: np.ndarray) -> np.ndarray:
        """(series, buckets) values of every packed series, before rounding."""
        ends = self._keyed([edges[0], edges[-1]])
        k0 = np.searchsorted(self._keys, ends[:, 0])
        k1 = np.searchsorted(self._keys, ends[:, 1], "right")
        k = search_within(self._keys, k0, k1, self._keyed(edges))
        n = np.diff(k, axis=1)
        rows = np.arange(len(self._how))[:, None]
        s = np.diff(self._csum[k + rows], axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            y = np.where(n > 0, s / np.maximum(n, 1), np.nan)
        step = np.flatnonzero(self._how == "step")
        if len(step):               # a bucket without a window start holds the window in force
            kr = search_within(self._keys, k0[step], k1[step], self._keyed(edges[:-1])[step], "right") - 1
            v = self._v[np.clip(kr, 0, len(self._v) - 1)] if len(self._v) else np.nan
            held = np.where(kr >= self._off[step, None], v, np.nan)
            y[step] = np.where(np.isnan(y[step]), held, y[step])
        cnt = np.flatnonzero(self._how == "count")
        y[cnt] = n[cnt]
        return y

    def tracks(self, t0: int, t1: int, n: int) -> dict:
        """:meth:`tracks_arrays` with plain lists (NaN as None)."""
        return plain(self.tracks_arrays(t0, t1, n))

    def tracks_arrays(self, t0: int, t1: int, n: int) -> dict:
        """The tracks in ``n`` buckets over [t0, t1), values as numpy rows rounded to 3 decimals
        (NaN: no value; :mod:`viz.jsonable`)."""
        n = int(max(1, min(n, MAX_BUCKETS)))
        edges = np.linspace(t0, t1, n + 1).round().astype(np.int64)
        if self._keys is not None and len(self._how):
            y = np.round(self._values(edges), 3)
        else:                                           # per series (nothing packed)
            fn = {"mean": _Series.mean, "step": _Series.step, "count": lambda s, e: s.counts(e)[1].astype(float)}
            y = [np.round(fn[d["how"]](s, edges), 3) for d in self.defs if d["how"] != "busy" for s in d["series"]]
        out, i = [], 0
        for d in self.defs:
            if d["how"] == "busy":
                series = [{"label": "busy", "y": np.round(self._busy.fraction(edges), 3)}]
            else:
                series = [{"label": s.label, "y": y[i + j]} for j, s in enumerate(d["series"])]
                i += len(d["series"])
            out.append({"id": d["id"], "title": d["title"], "unit": d["unit"], "how": d["how"], "series": series})
        return {"t0_ns": int(t0), "t1_ns": int(t1), "n": n, "tracks": out}
