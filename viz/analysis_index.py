"""The analysis views' data for any time range, from arrays built once per run.

:func:`viz.analysis.analysis_data` answers a range with pandas filters and group-bys over
the whole tables: ~20-40 ms of interpreter work whatever the range, which under concurrent
clients holds the GIL and delays every other request. :class:`AnalysisIndex` sorts each
table by time once, keeps the columns the views read as numpy arrays (stations, frame kinds
and flows as integer codes) and the range-independent parts (flows, summary, sync, Jain CDF)
ready-made; a range is then two ``searchsorted`` per table and ``bincount`` over the slice.
The answer equals ``analysis_data(run, t0, t1)`` (``tests/viz/test_analysis_index.py`` checks
it on random ranges), which stays the plain reference implementation.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from sniffsync.decode.macs import mac_text
from viz.analysis import _f, _thin, analysis_data, failed_bin_ns
from airtime.summary import histogram

__all__ = ["AnalysisIndex"]

_FAR = (1 << 62) // 2


def _by_time(df: pd.DataFrame, col: str) -> pd.DataFrame:
    return df.sort_values(col, kind="stable").reset_index(drop=True) if len(df) else df


def _codes(values: pd.Series, uniques: np.ndarray) -> np.ndarray:
    """Index of each value in sorted ``uniques``; -1 for NA."""
    na = values.isna().to_numpy()
    v = values.to_numpy(dtype=np.uint64, na_value=0)
    c = np.searchsorted(uniques, v).astype(np.int64)
    c[na] = -1
    return c


class _Series:
    """One fairness table, rows in their own order (the reference keeps it), with the
    (run, fd) group code per row; a range is a mask over the time column."""

    def __init__(self, df: pd.DataFrame, time_col: str, labels: dict):
        self.t = df[time_col].to_numpy(np.int64)
        keys = sorted(set(zip(df["run"], df["fd"])))
        self.labels = [labels.get(k, f"flow {k[1]}") for k in keys]
        pos = {k: i for i, k in enumerate(keys)}
        self.group = np.array([pos[k] for k in zip(df["run"], df["fd"])], np.int64)
        self.df = df

    def mask(self, lo, hi) -> np.ndarray:
        return (self.t >= lo) & (self.t < hi)


class AnalysisIndex:
    """``index(t0, t1)`` -> the dict :func:`viz.analysis.analysis_data` gives for ``run``."""

    takes_filters = True

    def __init__(self, run):
        p = _by_time(run.ppdus, "start_ns")
        ev = _by_time(run.events, "start_ns") if len(run.events) else run.events
        self.base = int(p["start_ns"].min()) if len(p) else 0
        self.start = p["start_ns"].to_numpy(np.int64)
        self.end = p["end_ns"].to_numpy(np.int64)
        tas = [s.dropna().to_numpy(np.uint64) for s in (p["ta"], ev["ta"] if "ta" in ev else p["ta"][:0])]
        self.ta_values = np.unique(np.concatenate(tas))
        self.ta_text = [mac_text(int(v)) for v in self.ta_values]
        self.ta = _codes(p["ta"], self.ta_values)
        kind = p["kind"].astype(str).to_numpy()
        self.is_data, self.is_rts = kind == "data", kind == "rts"
        self.kind = kind
        self.n_mpdus = p["n_mpdus"].to_numpy(np.int64)
        self.mcs_na = p["mcs"].isna().to_numpy()
        self.mcs = p["mcs"].to_numpy(dtype=np.float64, na_value=0).astype(np.int64)
        self.ev_start = ev["start_ns"].to_numpy(np.int64) if len(ev) else np.zeros(0, np.int64)
        kinds_ev = ev["kind"]
        self.ev_categorical = isinstance(kinds_ev.dtype, pd.CategoricalDtype)
        self.ev_cats = [str(c) for c in kinds_ev.cat.categories] if self.ev_categorical \
            else sorted(set(kinds_ev.astype(str)))
        self.ev_kind = pd.Categorical(kinds_ev.astype(str), categories=self.ev_cats).codes.astype(np.int64)
        self.ev_ta = _codes(ev["ta"], self.ta_values) if "ta" in ev else np.full(len(ev), -1)
        # whole-run answer: the parts that do not depend on the range come from it
        self.whole = analysis_data(run)
        fair = run.fairness
        self.fair = fair
        if fair is not None:
            flows = fair.flows
            labels = {(f.run, f.fd): lab["label"] for f, lab in
                      zip(flows.itertuples(index=False), self.whole.get("flows", []))} if len(flows) else {}
            self.windows = _Series(fair.windows, "start_ns", labels) if len(fair.windows) else None
            self.jain = fair.jain if len(fair.jain) else None
            self.jain_t = self.jain["start_ns"].to_numpy(np.int64) if self.jain is not None else None
            self.rtt = _Series(fair.rtt, "ts_ns", labels) if len(fair.rtt) else None

    def __call__(self, t0: int | None = None, t1: int | None = None, stations=None, kinds=None,
                 flows=None) -> dict:
        """The views' data for [t0, t1) (run-relative ns, None = open), optionally only for the
        PPDUs and events of ``stations`` (TA as colon-hex), PPDUs of ``kinds`` and the flows at
        positions ``flows`` of the whole run's flow table."""
        filtered = stations is not None or kinds is not None or flows is not None
        if t0 is None and t1 is None and not filtered:
            return self.whole
        lo = self.base + (t0 if t0 is not None else -_FAR)
        hi = self.base + (t1 if t1 is not None else _FAR)
        sl = slice(int(np.searchsorted(self.start, lo)), int(np.searchsorted(self.start, hi)))
        es = slice(int(np.searchsorted(self.ev_start, lo)), int(np.searchsorted(self.ev_start, hi)))
        if stations is not None or kinds is not None:
            sl, es = self._filter(sl, es, stations, kinds)
        out = {"range_ns": [t0, t1]}
        if filtered:
            out["filters"] = {"stations": stations, "kinds": kinds, "flows": flows}
        if self.fair is not None:
            out.update(self._fairness(lo, hi, flows))
        if _n(sl):
            out["airtime_share"] = self._airtime_share(sl)
        out["hist"] = self._histograms(sl, es)
        out["rts"] = self._rts(sl, es)
        n_ev = _n(es)
        counts = np.bincount(self.ev_kind[es], minlength=len(self.ev_cats)) if n_ev else []
        out["events"] = {k: int(c) for k, c in zip(self.ev_cats, counts)
                         if self.ev_categorical or c} if n_ev else {}
        for k in ("flows", "summary", "sync", "notes", "reception"):     # whole-run facts
            if k in self.whole:
                out[k] = self.whole[k]
        if flows is not None and "flows" in self.whole:
            out["flows"] = [f for i, f in enumerate(self.whole["flows"]) if i in set(flows)]
        return out

    def _filter(self, sl: slice, es: slice, stations, kinds):
        """Index arrays (in time order) of the PPDUs / events in the slices that pass the filters.
        An event follows its station (TA); a kind filter keeps the events of the kept PPDUs' kinds
        only through the station test (events have no PPDU kind)."""
        idx, eidx = np.arange(sl.start, sl.stop), np.arange(es.start, es.stop)
        if stations is not None:
            codes = np.array([self.ta_text.index(m) for m in stations if m in self.ta_text], np.int64)
            idx = idx[np.isin(self.ta[idx], codes)]
            eidx = eidx[np.isin(self.ev_ta[eidx], codes)]
        if kinds is not None:
            idx = idx[np.isin(self.kind[idx], list(kinds))]
        return idx, eidx

    def _airtime_share(self, sl: slice) -> list:
        ta = self.ta[sl]
        ok = ta >= 0
        k = len(self.ta_values)
        n = np.bincount(ta[ok], minlength=k)
        busy_us = np.bincount(ta[ok], weights=(self.end[sl] - self.start[sl])[ok], minlength=k)
        busy_us = busy_us.astype(np.int64) // 1000
        seen = np.flatnonzero(n)
        share = 100.0 * busy_us[seen] / max(int(busy_us[seen].sum()), 1)
        order = np.argsort(-busy_us[seen], kind="stable")
        return [{"station": self.ta_text[seen[i]], "share_pct": float(share[i])} for i in order]

    def _histograms(self, sl, es) -> dict:
        n = _n(sl)
        first = int(self.start[_first(sl)]) if n else self.base
        span = int(self.end[sl].max()) - first if n else 0
        bin_ns = failed_bin_ns(span)
        nb = max(1, -(-span // bin_ns))
        failed = self.ev_start[es][self.ev_kind[es] == self._ev_code("mpdu_failed")]
        counts = np.bincount(((failed - first) // bin_ns).clip(0, nb - 1), minlength=nb)[:nb]
        data = self.is_data[sl]
        mcs_ok = data & ~self.mcs_na[sl]
        return {
            "failed_per_10s": {"x": [f"{(first - self.base + k * bin_ns) / 1e9:.1f} s" for k in range(nb)],
                               "y": counts.tolist(), "bin_s": bin_ns / 1e9},
            "mpdus_per_ampdu": histogram(self.n_mpdus[sl][data], "int"),
            "mcs": histogram(self.mcs[sl][mcs_ok], "int"),
        }

    def _ev_code(self, kind: str) -> int:
        return self.ev_cats.index(kind) if kind in self.ev_cats else -2

    def _rts(self, sl: slice, es: slice) -> list:
        k = len(self.ta_values)
        ta = self.ta[sl][self.is_rts[sl]]
        rts = np.bincount(ta[ta >= 0], minlength=k)
        ev_ta, ev_kind = self.ev_ta[es], self.ev_kind[es]

        def per_ta(kind):
            t = ev_ta[(ev_kind == self._ev_code(kind)) & (ev_ta >= 0)]
            return np.bincount(t, minlength=k)
        un, co = per_ta("rts_unanswered"), per_ta("rts_cts_collision")
        return [{"station": self.ta_text[i], "rts": int(rts[i]), "cts": int(rts[i] - un[i]),
                 "ratio": _f((rts[i] - un[i]) / rts[i], 4), "collisions": int(co[i])}
                for i in np.flatnonzero(rts)]

    def _fairness(self, lo: int, hi: int, flows=None) -> dict:
        out = {}
        w = self.windows
        keep = None if flows is None else {self.whole["flows"][i]["label"] for i in flows
                                           if i < len(self.whole.get("flows", []))}
        if w is not None:
            m = w.mask(lo, hi) & (True if keep is None else np.isin(w.group, [g for g, lab in enumerate(w.labels) if lab in keep]))
            t_ns = np.unique(w.t[m])
            bps = w.df["goodput_bps"].to_numpy() / 1e6
            series = []
            for g in np.unique(w.group[m]):
                rows = np.flatnonzero(m & (w.group == g))
                y = np.full(len(t_ns), np.nan)
                y[np.searchsorted(t_ns, w.t[rows])] = bps[rows]
                series.append({"label": w.labels[g], "mbps": [_f(v) for v in y]})
            out["goodput"] = {"t_ns": (t_ns - self.base).tolist(), "series": series}
        if self.jain is not None and keep is not None:
            out["jain"] = self._jain_of(lo, hi, keep)
            out["cdf"] = []
        elif self.jain is not None:
            m = (self.jain_t >= lo) & (self.jain_t < hi)
            j = self.jain[m]
            out["jain"] = {"t_ns": (self.jain_t[m] - self.base).tolist(),
                           "goodput": [_f(v) for v in j["jain"].to_numpy(float)],
                           "airtime": [_f(v) for v in j["jain_airtime"].to_numpy(float)]
                           if "jain_airtime" in j else [],
                           "why": [v if isinstance(v, str) else "" for v in j["why"]] if "why" in j
                           else [""] * len(j)}
            out["cdf"] = self.whole["cdf"]
        r = self.rtt
        if r is not None:
            m = r.mask(lo, hi) & (True if keep is None else np.isin(r.group, [g for g, lab in enumerate(r.labels) if lab in keep]))
            rtt_ns, q_ns = r.df["rtt_ns"].to_numpy(float), r.df["qdelay_ns"].to_numpy(float)
            series = []
            for g in np.unique(r.group[m]):
                rows = np.flatnonzero(m & (r.group == g))
                k = rows[_thin(np.arange(len(rows)))]
                series.append({"label": r.labels[g], "t_ns": (r.t[k] - self.base).tolist(),
                               "rtt_ms": [_f(v / 1e6) for v in rtt_ns[k]],
                               "qdelay_ms": [_f(v / 1e6) for v in q_ns[k]]})
            out["rtt"] = {"series": series}
        return out

    def _jain_of(self, lo: int, hi: int, keep: set) -> dict:
        """Jain's index of goodput per window over the selected flows active in it:
        (sum x)^2 / (n sum x^2)."""
        w = self.windows
        m = w.mask(lo, hi) & np.isin(w.group, [g for g, lab in enumerate(w.labels) if lab in keep])
        if "active" in w.df:
            m &= w.df["active"].fillna(False).to_numpy(bool)
        t = w.t[m]
        x = w.df["goodput_bps"].to_numpy(float)[m]
        ts, inv = np.unique(t, return_inverse=True)
        s1, s2 = np.bincount(inv, x, len(ts)), np.bincount(inv, x * x, len(ts))
        n = np.bincount(inv, minlength=len(ts))
        with np.errstate(invalid="ignore", divide="ignore"):
            j = np.where(s2 > 0, s1 * s1 / (n * s2), np.nan)
        return {"t_ns": (ts - self.base).tolist(), "goodput": [_f(v) for v in j], "airtime": [],
                "why": [""] * len(ts)}


def _n(sel) -> int:
    return sel.stop - sel.start if isinstance(sel, slice) else len(sel)


def _first(sel) -> int:
    return sel.start if isinstance(sel, slice) else int(sel[0])
