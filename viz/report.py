"""A self-contained HTML report: the UI's page with data and scripts inline, offline.

The page is ``web/static/index.html``; its marked asset tags are replaced by the CSS,
d3 (vendored, unmodified), the ES modules bundled into one script (their import lines
dropped, ``export`` keywords stripped — the modules are written to allow exactly that)
and the run's data as a JSON block the page parses (never evaluates).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

from sniffsync.decode.macs import mac_text, mac_texts
from viz.analysis import analysis_data
from viz.tiles import KINDS, SEVERITY

__all__ = ["build_report", "eventful_window", "MODULE_ORDER"]

STATIC = Path(__file__).resolve().parents[1] / "web" / "static"
MODULE_ORDER = ["colors", "format", "api", "timeline", "tracks", "lines", "bars", "table", "drill", "filters", "lanefilter", "export", "tsg", "analysis", "main"]
MAX_ITEMS = 30_000
MAX_TSG_FLOWS = 16          # time-sequence graphs embedded: the first flows of the flow table
MAX_TSG_POINTS = 4_000      # per graph and kind (segments, ACKs, SACK blocks): beyond, every k-th


def eventful_window(ppdus: pd.DataFrame, events: pd.DataFrame, width_ns: int = 2_000_000_000) -> tuple[int, int]:
    """Start/end (absolute ns) of the ``width_ns`` window with the most severe events."""
    t0 = int(ppdus["start_ns"].min())
    t1 = int(ppdus["end_ns"].max())
    if t1 - t0 <= width_ns or not len(events):
        return t0, min(t1, t0 + width_ns)
    sev = events["kind"].map(SEVERITY).fillna(0).to_numpy(float)
    step = width_ns // 4
    b = (events["start_ns"].to_numpy(np.int64) - t0) // step
    score = np.bincount(b, weights=sev)
    win = np.convolve(score, np.ones(4), mode="full")[: len(score)]   # windows ending at bin k
    k = int(np.argmax(win))
    start = t0 + max(0, (k - 3)) * step
    return start, min(t1, start + width_ns)


def _timeline_data(view, w0: int, w1: int) -> dict:
    p = view.ppdus
    sel = p[(p["end_ns"] > w0) & (p["start_ns"] < w1)].head(MAX_ITEMS)
    ta = pd.array(sel["ta"], dtype="UInt64").fillna(pd.array(sel["ra"], dtype="UInt64")).fillna(0)
    uniq, lane = np.unique(ta.to_numpy(np.uint64), return_inverse=True)
    kind = pd.Categorical(sel["kind"].astype(str), categories=KINDS).codes
    kind = np.where(kind < 0, KINDS.index("other"), kind)
    ev = view.events
    ev = ev[ev["ppdu"].isin(sel["ppdu"])] if len(ev) else ev
    sev = np.zeros(len(sel), np.int64)
    failed = {}
    if len(ev):
        pos = pd.Index(sel["ppdu"]).get_indexer(ev["ppdu"])
        np.maximum.at(sev, pos, ev["kind"].map(SEVERITY).fillna(0).to_numpy(np.int64))
        f = ev[ev["kind"] == "mpdu_failed"].dropna(subset=["seq"])
        failed = f.groupby("ppdu")["seq"].agg(lambda s: sorted(int(v) for v in s)).to_dict()
    mask = sel["heard_mask"].to_numpy(np.int64) if "heard_mask" in sel else np.ones(len(sel), np.int64)
    n_snf = len(view.sniffers)
    bits = (mask[:, None] >> np.arange(n_snf)) & 1
    names = np.array(view.sniffers, dtype=object)
    def col(name):
        return [None if pd.isna(v) else (v.item() if hasattr(v, "item") else v) for v in sel[name]] \
            if name in sel else [None] * len(sel)
    items = {
        "lane": lane.tolist(), "sniffer_lanes": [np.flatnonzero(b).tolist() for b in bits],
        "start_ns": (sel["start_ns"].to_numpy(np.int64) - w0).tolist(),
        "end_ns": (sel["end_ns"].to_numpy(np.int64) - w0).tolist(),
        "kind": kind.tolist(), "severity": sev.tolist(), "ppdu": sel["ppdu"].astype(int).tolist(),
        "ta": mac_texts(sel["ta"]), "ra": mac_texts(sel["ra"]), "phy": col("phy"), "mcs": col("mcs"),
        "nss": col("nss"), "bw_mhz": col("bw_mhz"), "n_mpdus": col("n_mpdus"), "rate_mbps": col("rate_mbps"),
        "airtime_us": ((sel["end_ns"] - sel["start_ns"]) / 1000).round(1).tolist(),
        "failed_seqs": [failed.get(int(i), []) for i in sel["ppdu"]],
        "heard_by": [names[b.astype(bool)].tolist() for b in bits],
    }
    labels = [mac_text(u) if u else "unknown" for u in uniq]
    meta = {"title": view.title, "span_ns": int(w1 - w0), "t0_abs_ns": int(w0),
            "lanes": {"station": labels, "sniffer": list(view.sniffers)}, "kinds": KINDS,
            "n_ppdus": len(sel), "offset_ns": int(w0 - int(view.ppdus["start_ns"].min()))}
    return {"meta": meta, "items": items}


def _window_tracks(run, t0: int, t1: int) -> dict:
    """The counter tracks of the report's window at the finest resolution the page asks for,
    on the window's own time axis (0 = its start, like the embedded timeline)."""
    from viz.tracks import MAX_BUCKETS, TrackIndex
    d = TrackIndex(run).tracks(t0, max(t1, t0 + 1), MAX_BUCKETS)
    d["t0_ns"], d["t1_ns"] = 0, d["t1_ns"] - t0
    return d


def _cut(d: dict | None, lo: int, hi: int, shift: int, keep_before: bool = False) -> tuple[dict | None, int]:
    """Columns ``d`` (``t_ns`` run-relative) cut to [lo, hi), times shifted to the window, at most
    MAX_TSG_POINTS rows (every k-th); with ``keep_before`` the last row before ``lo`` too (the
    ACK step entering the window). Returns (columns, stride)."""
    if d is None:
        return None, 1
    t = np.asarray(d["t_ns"], np.int64)
    a, b = np.searchsorted(t, lo), np.searchsorted(t, hi)
    a = max(0, a - 1) if keep_before and a > 0 else a
    k = max(1, -(-(b - a) // MAX_TSG_POINTS))
    rows = np.arange(a, b)[::k]
    out = {c: np.asarray(v)[rows].tolist() for c, v in d.items() if c != "t_ns"}
    out["t_ns"] = (t[rows] - shift).tolist()
    return out, k


def _window_tsg(view, flows: list, w0: int, w1: int) -> list:
    """The first flows' time-sequence graphs cut to the report's window (window-relative ns)."""
    if getattr(view, "tsg", None) is None:
        return []
    t0 = view.meta()["t0_abs_ns"]
    lo, hi, out = w0 - t0, w1 - t0, []
    for f in flows[:MAX_TSG_FLOWS]:
        g = view.tsg.graph(f["label"])
        if g.get("data") is None:
            out.append({"data": None, "why": g.get("why", "no data")})
            continue
        data, k1 = _cut(g["data"], lo, hi, lo)
        acks, k2 = _cut(g["acks"], lo, hi, lo, keep_before=True)
        sack, k3 = _cut(g.get("sack"), lo, hi, lo)
        out.append({**g, "data": data, "acks": acks, "sack": sack, "stride": max(k1, k2, k3)})
    return out


def bundle_js() -> str:
    """The ES modules as one classic script (imports dropped, exports stripped), in an IIFE."""
    parts = []
    for name in MODULE_ORDER:
        src = (STATIC / "js" / f"{name}.js").read_text()
        src = re.sub(r"^import .*?;\s*$", "", src, flags=re.M)
        src = re.sub(r"^export ", "", src, flags=re.M)
        parts.append(f"// ---- {name}.js\n{src}")
    return "(function () {\n\"use strict\";\n" + "\n".join(parts) + "\n})();"


def _safe(text: str) -> str:
    return text.replace("</", "<\\/")


def _safe_json(blob: str) -> str:
    """JSON for a <script> block: ``<`` only occurs inside strings, and as ``\\u003c`` it can
    neither close the block (``</script>``) nor open the ``<!--<script>`` state that swallows
    the real closing tag; JSON.parse gives the same text back."""
    return blob.replace("<", "\\u003c")


def build_report(view, run, title: str = "sniffsync report") -> str:
    """HTML text of the self-contained report for ``run`` (its :class:`viz.runview.RunView` ``view``)."""
    w0, w1 = eventful_window(view.ppdus, view.events)
    tl = _timeline_data(view, w0, w1)
    base = int(view.ppdus["start_ns"].min())
    tl["meta"]["title"] = (f"{title} — timeline of the most eventful seconds "
                           f"({(w0 - base) / 1e9:.1f}–{(w1 - base) / 1e9:.1f} s)")
    from viz.runview import flow_senders
    tl["meta"]["flow_ta"] = flow_senders(run)
    whole = analysis_data(run)
    data = {"timeline": tl, "analysis": whole, "tsg": _window_tsg(view, whole.get("flows") or [], w0, w1),
            "tracks": _window_tracks(run, w0 - base, w1 - base)}
    page = (STATIC / "index.html").read_text()
    css = (STATIC / "style.css").read_text()
    d3 = (STATIC / "vendor" / "d3" / "d3.min.js").read_text()
    js = bundle_js()
    blob = json.dumps(data, separators=(",", ":"), default=_json_default)
    page = re.sub(r"<link rel=\"stylesheet\"[^>]*><!--sniffsync:css-->", lambda _: f"<style>{css}</style>", page)
    page = re.sub(r"<script src=\"[^\"]*d3.min.js\"></script><!--sniffsync:d3-->",
                  lambda _: f"<script>{_safe(d3)}</script>", page)
    page = page.replace("<!--sniffsync:data-->",
                        f'<script type="application/json" id="sniffsync-data">{_safe_json(blob)}</script>')
    page = re.sub(r"<script type=\"module\"[^>]*></script><!--sniffsync:js-->",
                  lambda _: f"<script>{_safe(js)}</script>", page)
    return page.replace("<title>sniffsync</title>", f"<title>{_html_escape(title)}</title>")


def _html_escape(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _json_default(o):
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return None if not np.isfinite(o) else float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)
