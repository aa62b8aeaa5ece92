"""The analysis views' data for any time range, from arrays built once per run.

:func:`viz.analysis.analysis_data` answers a range with pandas filters and group-bys over
the whole tables: ~20-40 ms of interpreter work whatever the range, which under concurrent
clients holds the GIL and delays every other request. :class:`AnalysisIndex` sorts each
table by time once, keeps the columns the views read as numpy arrays (stations, frame kinds
and flows as integer codes) and the range-independent parts (flows, summary, sync, Jain CDF)
ready-made. A plain range (no station/kind filter) costs no work per PPDU: every count and
sum it needs (airtime and PPDUs per station, RTS per station, histogram bars, events per kind
and per station) is a difference of prefix positions found by ``searchsorted`` in arrays
sorted by (code, time) once (:class:`_Counts`), so it costs the same on 1M PPDUs as on 1k;
a filtered range counts over its slice with ``bincount``. The answer equals
``analysis_data(run, t0, t1)`` (``tests/viz/test_analysis_index.py`` checks it on random
ranges), which stays the plain reference implementation.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from sniffsync.decode.macs import mac_text
from viz.analysis import _f, analysis_data, failed_bin_ns
from viz.jsonable import Raw, Texts, dumpb, plain
from viz.rangeseries import GoodputGrid, RangeSeries
from airtime.summary import histogram

__all__ = ["AnalysisIndex"]

_FAR = (1 << 62) // 2


def _r3(values) -> np.ndarray:
    """``viz.analysis._fs`` as an array: rounded to 3 decimals, NaN where it writes None."""
    return np.round(np.asarray(values, np.float64), 3)


def _by_time(df: pd.DataFrame, col: str) -> pd.DataFrame:
    return df.sort_values(col, kind="stable").reset_index(drop=True) if len(df) else df


def _codes(values: pd.Series, uniques: np.ndarray) -> np.ndarray:
    """Index of each value in sorted ``uniques``; -1 for NA."""
    na = values.isna().to_numpy()
    v = values.to_numpy(dtype=np.uint64, na_value=0)
    c = np.searchsorted(uniques, v).astype(np.int64)
    c[na] = -1
    return c


class _Counts:
    """Per code, how many items (and their weights' sum) lie between two positions of a
    time-ordered table: positions sorted by (code, position) once, then two ``searchsorted``
    calls over all codes at once, whatever the number of items between the positions."""

    def __init__(self, codes: np.ndarray, n_codes: int, weights: np.ndarray | None = None):
        pos = np.flatnonzero(codes >= 0)
        self.stride = len(codes) + 1
        key = codes[pos].astype(np.int64) * self.stride + pos
        order = np.argsort(key, kind="stable")
        self.key = key[order]
        self.base = np.arange(n_codes, dtype=np.int64) * self.stride
        self.csum = None if weights is None else \
            np.concatenate([[0], np.cumsum(np.asarray(weights, np.int64)[pos][order])])

    def _ends(self, a: int, b: int):
        return np.searchsorted(self.key, self.base + a), np.searchsorted(self.key, self.base + b)

    def counts(self, a: int, b: int) -> np.ndarray:
        lo, hi = self._ends(a, b)
        return hi - lo

    def counts_sums(self, a: int, b: int):
        lo, hi = self._ends(a, b)
        return hi - lo, self.csum[hi] - self.csum[lo]


def _value_codes(values: np.ndarray, keep: np.ndarray):
    """(codes into the sorted distinct kept values, those values); -1 where not kept."""
    uniq = np.unique(values[keep])
    codes = np.where(keep, np.searchsorted(uniq, values), -1)
    return codes, uniq


def _int_histogram(uniq: np.ndarray, counts: np.ndarray) -> dict:
    """:func:`airtime.summary.histogram` (``"int"``) from per-value counts."""
    seen = np.flatnonzero(counts)
    if not len(seen):
        return {"x": [], "y": []}
    lo, hi = int(uniq[seen[0]]), int(uniq[seen[-1]])
    y = np.zeros(hi - lo + 1, np.int64)
    y[uniq[seen] - lo] = counts[seen]
    return {"x": list(range(lo, hi + 1)), "y": y.tolist()}


class AnalysisIndex:
    """``index(t0, t1)`` -> the dict :func:`viz.analysis.analysis_data` gives for ``run``."""

    takes_filters = True
    takes_arrays = True

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
        self.kind_code, self.kind_names = pd.factorize(kind)      # hashing: np.unique sorts strings
        self.kind_names = np.asarray(self.kind_names, object)
        self.is_data, self.is_rts = kind == "data", kind == "rts"
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
        self._build_counts()
        # whole-run answer: the parts that do not depend on the range come from it
        self.whole = analysis_data(run)
        fair = run.fairness
        self.fair = fair
        if fair is not None:
            flows = fair.flows
            labels = {(f.run, f.fd): lab["label"] for f, lab in
                      zip(flows.itertuples(index=False), self.whole.get("flows", []))} if len(flows) else {}
            self.windows = RangeSeries(fair.windows, "start_ns", labels) if len(fair.windows) else None
            self.goodput = GoodputGrid.build(self.windows, self.windows.df["goodput_bps"].to_numpy() / 1e6,
                                             self.base) if self.windows is not None else None
            self.jain = fair.jain if len(fair.jain) else None
            self.jain_t = self.jain["start_ns"].to_numpy(np.int64) if self.jain is not None else None
            if self.jain is not None:      # the columns a range reads, as arrays and lists once
                j = self.jain
                self.jain_cols = {"goodput": j["jain"].to_numpy(float),
                                  "airtime": j["jain_airtime"].to_numpy(float) if "jain_airtime" in j else None,
                                  "why": [v if isinstance(v, str) else "" for v in j["why"]] if "why" in j
                                  else [""] * len(j)}
                c = self.jain_cols            # ... and the numbers' JSON text, encoded once
                c["t_ns"] = Texts(self.jain_t - self.base)
                c["goodput_text"] = Texts(np.round(c["goodput"], 3))
                c["airtime_text"] = Texts(np.round(c["airtime"], 3)) if c["airtime"] is not None else None
                self.cdf = Raw(dumpb(self.whole["cdf"]))
            self.rtt = RangeSeries(fair.rtt, "ts_ns", labels) if len(fair.rtt) else None
            if self.rtt is not None:
                r = self.rtt                # the series' JSON text, encoded once
                r.text = {"t_ns": r.texts(r.t - self.base),
                          "rtt_ms": r.texts(np.round(fair.rtt["rtt_ns"].to_numpy(float) / 1e6, 3)),
                          "qdelay_ms": r.texts(np.round(fair.rtt["qdelay_ns"].to_numpy(float) / 1e6, 3))}

    def _build_counts(self):
        """The prefix structures of an unfiltered range (see the module's docstring)."""
        k = len(self.ta_values)
        self.longest = int((self.end - self.start).max()) if len(self.start) else 0
        self.c_ta = _Counts(self.ta, k, self.end - self.start)
        self.c_rts = _Counts(np.where(self.is_rts, self.ta, -1), k)
        codes, self.u_mpdus = _value_codes(self.n_mpdus, self.is_data)
        self.c_mpdus = _Counts(codes, len(self.u_mpdus))
        codes, self.u_mcs = _value_codes(self.mcs, self.is_data & ~self.mcs_na)
        self.c_mcs = _Counts(codes, len(self.u_mcs))
        self.c_ev = _Counts(self.ev_kind, len(self.ev_cats))
        self.c_ev_ta = {kind: _Counts(np.where((self.ev_kind == self._ev_code(kind)) & (self.ev_ta >= 0),
                                               self.ev_ta, -1), k)
                        for kind in ("rts_unanswered", "rts_cts_collision")}
        self.failed_t = self.ev_start[self.ev_kind == self._ev_code("mpdu_failed")]

    def __call__(self, t0: int | None = None, t1: int | None = None, stations=None, kinds=None,
                 flows=None, arrays: bool = False) -> dict:
        """The views' data for [t0, t1) (run-relative ns, None = open), optionally only for the
        PPDUs and events of ``stations`` (TA as colon-hex), PPDUs of ``kinds`` and the flows at
        positions ``flows`` of the whole run's flow table. ``arrays``: the time series as numpy
        arrays (rounded; NaN for null), for the server's encoder (:mod:`viz.jsonable`)."""
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
        counts = (self.c_ev.counts(es.start, es.stop) if isinstance(es, slice) else
                  np.bincount(self.ev_kind[es], minlength=len(self.ev_cats))) if n_ev else []
        out["events"] = {k: int(c) for k, c in zip(self.ev_cats, counts)
                         if self.ev_categorical or c} if n_ev else {}
        for k in ("flows", "summary", "sync", "notes", "reception"):     # whole-run facts
            if k in self.whole:
                out[k] = self.whole[k]
        if flows is not None and "flows" in self.whole:
            out["flows"] = [f for i, f in enumerate(self.whole["flows"]) if i in set(flows)]
        return out if arrays else plain(out)

    def _filter(self, sl: slice, es: slice, stations, kinds):
        """Index arrays (in time order) of the PPDUs / events in the slices that pass the filters.
        An event follows its station (TA); a kind filter keeps the events of the kept PPDUs' kinds
        only through the station test (events have no PPDU kind). Each test is a lookup table
        indexed by code (code -1, no TA, reads the table's last entry: False)."""
        keep = np.ones(_n(sl), bool)
        ekeep = np.ones(_n(es), bool)
        if stations is not None:
            lut = np.zeros(len(self.ta_values) + 1, bool)
            lut[[self.ta_text.index(m) for m in stations if m in self.ta_text]] = True
            keep &= lut[self.ta[sl]]
            ekeep &= lut[self.ev_ta[es]]
        if kinds is not None:
            keep &= np.isin(self.kind_names, list(kinds))[self.kind_code[sl]]
        return sl.start + np.flatnonzero(keep), es.start + np.flatnonzero(ekeep)

    def _airtime_share(self, sl) -> list:
        if isinstance(sl, slice):
            n, busy_ns = self.c_ta.counts_sums(sl.start, sl.stop)
            busy_us = busy_ns // 1000
        else:
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
        fast = isinstance(sl, slice)
        if fast and n:     # the latest end: among the PPDUs starting within `longest` of the last start
            j = max(sl.start, int(np.searchsorted(self.start, self.start[sl.stop - 1] - self.longest)))
            span = int(self.end[j:sl.stop].max()) - first
        else:
            span = int(self.end[sl].max()) - first if n else 0
        bin_ns = failed_bin_ns(span)
        nb = max(1, -(-span // bin_ns))
        if fast and isinstance(es, slice):
            counts = self._failed_bins(es, first, bin_ns, nb)
        else:
            failed = self.ev_start[es][self.ev_kind[es] == self._ev_code("mpdu_failed")]
            counts = np.bincount(((failed - first) // bin_ns).clip(0, nb - 1), minlength=nb)[:nb]
        if fast:
            mpdus = _int_histogram(self.u_mpdus, self.c_mpdus.counts(sl.start, sl.stop))
            mcs = _int_histogram(self.u_mcs, self.c_mcs.counts(sl.start, sl.stop))
        else:
            data = self.is_data[sl]
            mcs_ok = data & ~self.mcs_na[sl]
            mpdus, mcs = histogram(self.n_mpdus[sl][data], "int"), histogram(self.mcs[sl][mcs_ok], "int")
        return {
            "failed_per_10s": {"x": [f"{(first - self.base + k * bin_ns) / 1e9:.1f} s" for k in range(nb)],
                               "y": counts.tolist(), "bin_s": bin_ns / 1e9},
            "mpdus_per_ampdu": mpdus,
            "mcs": mcs,
        }

    def _failed_bins(self, es: slice, first: int, bin_ns: int, nb: int) -> np.ndarray:
        """Failed-MPDU events of the event slice per bin [first + k bin, first + (k+1) bin),
        the first bin also taking those before it and the last those after it."""
        if not _n(es):
            return np.zeros(nb, np.int64)
        # the failed events of the slice: events are sorted by start, so are the failed ones
        a = int(np.searchsorted(self.failed_t, self.ev_start[es.start]))
        b = int(np.searchsorted(self.failed_t, self.ev_start[es.stop - 1], side="right"))
        inner = first + bin_ns * np.arange(1, nb, dtype=np.int64)
        cut = np.concatenate([[a], a + np.searchsorted(self.failed_t[a:b], inner), [b]])
        return np.diff(cut)

    def _ev_code(self, kind: str) -> int:
        return self.ev_cats.index(kind) if kind in self.ev_cats else -2

    def _rts(self, sl: slice, es: slice) -> list:
        k = len(self.ta_values)
        fast = isinstance(sl, slice) and isinstance(es, slice)
        if fast:
            rts = self.c_rts.counts(sl.start, sl.stop)
        else:
            ta = self.ta[sl][self.is_rts[sl]]
            rts = np.bincount(ta[ta >= 0], minlength=k)
        ev_ta, ev_kind = self.ev_ta[es], self.ev_kind[es]

        def per_ta(kind):
            if fast:
                return self.c_ev_ta[kind].counts(es.start, es.stop)
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
        if w is not None and keep is None and self.goodput is not None:
            out["goodput"] = self.goodput.select(lo, hi)
        elif w is not None:
            m = w.mask(lo, hi) & (True if keep is None else np.isin(w.group, [g for g, lab in enumerate(w.labels) if lab in keep]))
            t_ns = np.unique(w.t[m])
            bps = w.df["goodput_bps"].to_numpy() / 1e6
            series = []
            for g in np.unique(w.group[m]):
                rows = np.flatnonzero(m & (w.group == g))
                y = np.full(len(t_ns), np.nan)
                y[np.searchsorted(t_ns, w.t[rows])] = bps[rows]
                series.append({"label": w.labels[g], "mbps": _r3(y)})
            out["goodput"] = {"t_ns": t_ns - self.base, "series": series}
        if self.jain is not None and keep is not None:
            out["jain"] = self._jain_of(lo, hi, keep)
            out["cdf"] = []
        elif self.jain is not None:
            m = np.flatnonzero((self.jain_t >= lo) & (self.jain_t < hi))
            c = self.jain_cols
            k = slice(int(m[0]), int(m[-1]) + 1) if len(m) and m[-1] - m[0] + 1 == len(m) else m
            out["jain"] = {"t_ns": c["t_ns"].select(k), "goodput": c["goodput_text"].select(k),
                           "airtime": c["airtime_text"].select(k) if c["airtime"] is not None else [],
                           "why": c["why"][k] if isinstance(k, slice) else [c["why"][i] for i in m.tolist()]}
            out["cdf"] = self.cdf
        r = self.rtt
        if r is not None:
            series = []
            for g in range(len(r.labels)):
                if keep is not None and r.labels[g] not in keep:
                    continue
                pos = r.pos_in(g, lo, hi)
                if (pos.stop <= pos.start) if isinstance(pos, slice) else not len(pos):
                    continue
                k = r.select(g, pos)
                series.append({"label": r.labels[g], **{c: t.select(k) for c, t in r.text.items()}})
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
        return {"t_ns": ts - self.base, "goodput": _r3(j), "airtime": [],
                "why": [""] * len(ts)}


def _n(sel) -> int:
    return sel.stop - sel.start if isinstance(sel, slice) else len(sel)


def _first(sel) -> int:
    return sel.start if isinstance(sel, slice) else int(sel[0])
