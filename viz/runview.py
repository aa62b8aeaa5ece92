"""A loaded run as the web UI and the report see it: PPDUs, events, analysis data.

Built once from the pipeline's tables; every method answers from prebuilt indexes,
so a tile is a few ``searchsorted`` calls whatever the run's size.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from sniffsync.decode.macs import mac_text
from viz.tiles import KINDS, build_index, tile as make_tile, tile_arrays
from viz.tilestations import bucket_masks, build_station_bits

__all__ = ["RunView", "with_legacy_rates", "flow_senders", "FIND"]

_DETAIL = ("ppdu", "kind", "phy", "mcs", "nss", "bw_mhz", "n_mpdus", "psdu_bytes", "retries", "signal_dbm",
           "rate_mbps")


# "find next" classes -> the detection event kinds they stand for
FIND = {"collision": ["rts_cts_collision", "overlap"], "failed": ["mpdu_failed"],
        "unanswered": ["rts_unanswered", "ba_missing"]}
FIND["event"] = sorted({k for v in FIND.values() for k in v} | {"retry"})       # any of them (arrow keys)


def with_legacy_rates(ppdus: pd.DataFrame, frames: pd.DataFrame | None) -> pd.DataFrame:
    """``ppdus`` plus ``rate_mbps``: the radiotap Rate of each PPDU's first frame (legacy
    DSSS/OFDM PPDUs have no MCS; their rate is what a reader wants), null where absent."""
    if "rate_mbps" in ppdus or frames is None or "rate_kbps" not in frames or "first_frame" not in ppdus \
            or not len(ppdus):
        return ppdus
    first = ppdus["first_frame"].to_numpy(np.int64)
    if first.min() < 0 or first.max() >= len(frames):
        return ppdus
    kbps = frames["rate_kbps"].to_numpy(dtype=float, na_value=np.nan)[first]
    return ppdus.assign(rate_mbps=pd.array(np.round(kbps / 1000, 1), dtype="Float64"))


def flow_senders(run) -> list:
    """Per flow of the analysis' flow table (the fairness flows, in order), the colon-hex TA of
    its data frames, or None (wired, unknown): the lanes a flow selection keeps."""
    flows = getattr(getattr(run, "fairness", None), "flows", None)
    if flows is None or not len(flows) or "ta" not in flows:
        return []
    return [v if isinstance(v, str) and v.count(":") == 5 else None for v in flows["ta"].astype(object)]


def _py(v):
    """numpy/pandas scalar -> JSON-able Python value (NA -> None)."""
    if v is None or (not isinstance(v, str) and pd.isna(v)):
        return None
    return v.item() if hasattr(v, "item") else v


class RunView:
    """Read-only view of one analysed run.

    Parameters
    ----------
    ppdus : DataFrame
        PPDU table (``ppdu``, ``start_ns``, ``end_ns``, ``ta``, ``ra``, ``kind``, ...);
        ``heard_mask`` (bit per sniffer) when merged.
    events : DataFrame
        Detection events (``kind``, ``ppdu``, optional ``seq``).
    analysis : callable ``(t0_ns, t1_ns) -> dict`` (run-relative, ``None`` = whole run) or dict
    sniffers : list of str
        Sniffer names in input order.
    """

    def __init__(self, ppdus: pd.DataFrame, events: pd.DataFrame | None, analysis, sniffers, title="",
                 tracks=None, drill=None):
        self.ppdus = ppdus.sort_values("ppdu", kind="stable").reset_index(drop=True)
        self.events = events if events is not None else pd.DataFrame({"kind": [], "ppdu": []})
        self._analysis = analysis
        self.sniffers = list(sniffers)
        self.title = title
        self._tracks = tracks          # a viz.tracks.TrackIndex, or None (no counter tracks)
        self._drill = drill            # a viz.drill.DrillIndex, or None (no MPDUs/BA/exchange in details)
        self.pcap = None               # a viz.pcap_export.PcapExport, or None (no /api/export.pcapng)
        self.tsg = None                # a viz.tsg.TsgIndex, or None (no /api/tsg)
        self._ids = self.ppdus["ppdu"].to_numpy(np.int64)
        # one PPDU's details: element reads from column arrays, its events a searchsorted slice
        # (pandas row and mask selection cost ~5 ms a request on a 23k-PPDU run)
        self._cols = {k: self.ppdus[k].array for k in (*_DETAIL, "ta", "ra", "start_ns", "end_ns",
                                                         "heard_mask", "sniffer") if k in self.ppdus}
        ev = self.events
        order = np.argsort(ev["ppdu"].to_numpy(np.int64), kind="stable") if len(ev) else np.zeros(0, np.int64)
        self._ev_ppdu = ev["ppdu"].to_numpy(np.int64)[order] if len(ev) else np.zeros(0, np.int64)
        self._ev_kind = ev["kind"].astype(str).to_numpy()[order] if len(ev) else np.zeros(0, object)
        self._ev_seq = (ev["seq"].to_numpy(dtype=float, na_value=np.nan)[order] if len(ev) and "seq" in ev
                        else None)
        self._index = {"station": build_index(self.ppdus, self.events)}
        self._index["sniffer"] = build_index(self.ppdus, self.events, lanes="sniffer",
                                             n_sniffers=len(self.sniffers), names=self.sniffers)
        # zoomed-out sniffer lanes: which stations each bucket holds (the page's station filter)
        self._sta_bits = build_station_bits(self._index["sniffer"], self._index["station"])
        # "find next": per class, the event PPDUs' starts in time order
        starts = self.ppdus["start_ns"].to_numpy(np.int64)
        self._find = {}
        for what, kinds in FIND.items():
            ids = np.unique(self._ev_ppdu[np.isin(self._ev_kind, kinds)]) if len(self._ev_ppdu) else np.zeros(0, np.int64)
            pos = np.searchsorted(self._ids, ids)
            ok = (pos < len(self._ids)) & (self._ids[np.minimum(pos, len(self._ids) - 1)] == ids) if len(ids) else ids.astype(bool)
            t = starts[pos[ok]]
            o = np.argsort(t, kind="stable")
            self._find[what] = (t[o], ids[ok][o])
        idx = self._index["station"]
        self._meta = {"title": title, "t0_abs_ns": idx.t0_ns, "span_ns": int(idx.t1_ns - idx.t0_ns),
                      "lanes": {k: v.lanes for k, v in self._index.items()}, "kinds": KINDS,
                      "sniffers": self.sniffers, "n_ppdus": int(len(self.ppdus)),
                      "n_events": int(len(self.events)), "tracks": tracks is not None,
                      "sta_bits": self._sta_bits.bits}

    def meta(self) -> dict:
        return self._meta

    def tile(self, t0_ns: int, t1_ns: int, px: int, lanes: str = "station", arrays: bool = False,
             stations: bool = False) -> dict:
        """``arrays``: columns as numpy arrays, for the server's encoder (viz.jsonable).
        ``stations``: bucketed sniffer lanes also carry ``sta_mask`` (the stations of each bucket,
        :mod:`viz.tilestations`): only a page with a station or flow filter on reads them."""
        out = (tile_arrays if arrays else make_tile)(self._index[lanes], t0_ns, t1_ns, px)
        if stations and lanes == "sniffer" and out["mode"] == "buckets":
            m = bucket_masks(self._sta_bits, self._index["sniffer"], out["edges_ns"])
            out["sta_mask"] = m if arrays else m.tolist()
        return out

    def ppdu_detail(self, ppdu_id: int) -> dict | None:
        i = int(np.searchsorted(self._ids, ppdu_id))
        if i >= len(self._ids) or self._ids[i] != ppdu_id:
            return None
        col = self._cols
        out = {k: _py(col[k][i]) for k in _DETAIL if k in col}
        out["ta"], out["ra"] = (mac_text(col[k][i]) if k in col else mac_text(None) for k in ("ta", "ra"))
        out["start_ns"] = int(col["start_ns"][i]) - self._meta["t0_abs_ns"]
        out["airtime_us"] = round((int(col["end_ns"][i]) - int(col["start_ns"][i])) / 1000, 1)
        a, b = np.searchsorted(self._ev_ppdu, ppdu_id, "left"), np.searchsorted(self._ev_ppdu, ppdu_id, "right")
        kinds = self._ev_kind[a:b]
        out["events"] = sorted(set(kinds))
        if self._ev_seq is None:
            out["failed_seqs"] = []
        else:
            seq = self._ev_seq[a:b][kinds == "mpdu_failed"]
            out["failed_seqs"] = sorted(int(v) for v in seq[~np.isnan(seq)])
        mask = int(col["heard_mask"][i]) if "heard_mask" in col else \
            1 << int(col["sniffer"][i] if "sniffer" in col else 0)
        out["heard_by"] = [n for s, n in enumerate(self.sniffers) if mask >> s & 1]
        if self._drill is not None:
            out.update(self._drill.detail(ppdu_id))
        return out

    def find(self, what: str, after_ns: int, before: bool = False) -> dict | None:
        """The first event of class ``what`` (:data:`FIND`) whose PPDU starts at or after
        ``after_ns`` (run-relative) — with ``before``, the last one starting before it:
        ``{ppdu, kind, start_ns, end_ns}``, or None."""
        t, ids = self._find.get(what, (np.zeros(0, np.int64), np.zeros(0, np.int64)))
        k = int(np.searchsorted(t, after_ns + self._meta["t0_abs_ns"])) - int(before)
        if k >= len(t) or k < 0:
            return None
        i = int(np.searchsorted(self._ids, ids[k]))
        return {"ppdu": int(ids[k]), "kind": what, "start_ns": int(t[k]) - self._meta["t0_abs_ns"],
                "end_ns": int(self._cols["end_ns"][i]) - self._meta["t0_abs_ns"]}

    def search(self, q: str, after_ns: int) -> dict:
        """What ``q`` names: a MAC (``aa:bb:..``) -> the first PPDU it sends or receives at or
        after ``after_ns``; ``seq N`` -> the first PPDU holding an MPDU with that sequence
        number; an IPv4 address or a port -> the flows (positions in the analysis' flow table)
        with it at either end. ``{"ppdu": {...}}``, ``{"flows": [...]}`` or ``{"none": why}``."""
        q = q.strip().lower()
        t0 = self._meta["t0_abs_ns"]
        if re.fullmatch(r"[0-9a-f]{2}(:[0-9a-f]{2}){5}", q):
            v = int(q.replace(":", ""), 16)
            hit = np.zeros(len(self._ids), bool)
            for k in ("ta", "ra"):
                if k in self._cols:
                    hit |= self.ppdus[k].to_numpy(dtype=float, na_value=np.nan) == v
            hit &= self._cols["start_ns"].to_numpy(np.int64) >= after_ns + t0
            return self._hit(np.flatnonzero(hit)) if hit.any() else {"none": f"no PPDU to or from {q}"}
        m = re.fullmatch(r"seq\s*([0-9]{1,4})", q)
        if m:
            pid = self._drill.ppdu_with_seq(int(m.group(1)), after_ns) if self._drill is not None else None
            if pid is None:
                return {"none": f"no MPDU with sequence number {m.group(1)}"}
            return self._hit(np.array([int(np.searchsorted(self._ids, pid))]))
        if re.fullmatch(r"[0-9]{1,3}(\.[0-9]{1,3}){3}|[0-9]{1,5}", q):
            flows = (self.analysis() or {}).get("flows") or []
            ends = [re.split(r"→", f["label"]) for f in flows]
            hit = [i for i, e in enumerate(ends) if any(q in (p.rsplit(":", 1)) for p in e)]
            return {"flows": hit} if hit else {"none": f"no flow with {q} at either end"}
        return {"none": "search for a MAC (aa:bb:cc:dd:ee:ff), an IPv4 address, a port or 'seq N'"}

    def _hit(self, rows: np.ndarray) -> dict:
        i = int(rows[np.argmin(self._cols["start_ns"].to_numpy(np.int64)[rows])])
        t0 = self._meta["t0_abs_ns"]
        return {"ppdu": {"ppdu": int(self._ids[i]), "start_ns": int(self._cols["start_ns"][i]) - t0,
                         "end_ns": int(self._cols["end_ns"][i]) - t0}}

    def tracks(self, t0_ns: int, t1_ns: int, n: int, arrays: bool = False) -> dict:
        if self._tracks is None:
            return {"tracks": []}
        return (self._tracks.tracks_arrays if arrays else self._tracks.tracks)(t0_ns, t1_ns, n)

    def analysis(self, t0_ns: int | None = None, t1_ns: int | None = None, **filters) -> dict:
        """The views' data for a range; ``filters`` (stations, kinds, flows) need an analysis
        that takes them (:class:`viz.analysis_index.AnalysisIndex`)."""
        if filters and not getattr(self._analysis, "takes_filters", False):
            raise ValueError("this run's analysis takes no station/kind/flow filters")
        if callable(self._analysis):
            return self._analysis(t0_ns, t1_ns, **filters) if filters else self._analysis(t0_ns, t1_ns)
        return self._analysis
