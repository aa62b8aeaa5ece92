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


class _Busy:
    """Airtime covered up to time T: sum over PPDUs of clip(T - start, 0, airtime), from
    sorted starts and ends and their cumulative sums."""

    def __init__(self, start: np.ndarray, end: np.ndarray):
        self.s, self.e = np.sort(start), np.sort(end)
        self.cs = np.concatenate([[0], np.cumsum(self.s)]).astype(np.float64)
        self.ce = np.concatenate([[0], np.cumsum(self.e)]).astype(np.float64)

    def covered(self, t: np.ndarray) -> np.ndarray:
        ns, ne = np.searchsorted(self.s, t), np.searchsorted(self.e, t)
        tf = t.astype(np.float64)
        return (ns * tf - self.cs[ns]) - (ne * tf - self.ce[ne])

    def fraction(self, edges) -> np.ndarray:
        return np.clip(np.diff(self.covered(edges)) / np.diff(edges).astype(np.float64), 0, 1)


def _round(a: np.ndarray, nd: int) -> list:
    """Rounded values as a JSON list, NaN as null (vectorised: a track has ~1000 buckets x series)."""
    a = np.round(np.asarray(a, np.float64), nd)
    o = a.astype(object)
    o[~np.isfinite(a)] = None
    return o.tolist()


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

    def _add(self, tid, title, unit, how, series):
        self.defs.append({"id": tid, "title": title, "unit": unit, "how": how, "series": series})

    def tracks(self, t0: int, t1: int, n: int) -> dict:
        n = int(max(1, min(n, MAX_BUCKETS)))
        edges = np.linspace(t0, t1, n + 1).round().astype(np.int64)
        out = []
        for d in self.defs:
            if d["how"] == "busy":
                series = [{"label": "busy", "y": _round(self._busy.fraction(edges), 3)}]
            else:
                fn = {"mean": _Series.mean, "step": _Series.step,
                      "count": lambda s, e: s.counts(e)[1].astype(float)}[d["how"]]
                series = [{"label": s.label, "y": _round(fn(s, edges), 3)} for s in d["series"]]
            out.append({"id": d["id"], "title": d["title"], "unit": d["unit"], "how": d["how"], "series": series})
        return {"t0_ns": int(t0), "t1_ns": int(t1), "n": n, "tracks": out}
