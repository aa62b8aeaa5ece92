"""The campaign's self-contained HTML page: the runs overlaid, the figures (SVG inline) and
every metric table.

Same style as ``report``: the UI's stylesheet, d3 and the page's script (``campaign.js``)
inlined, the overlaid series (:mod:`sniffsync.campaign.overlay`) as a JSON block the script
parses (never evaluates); nothing fetched, so the file opens offline and can be mailed as it is.
Without overlay data the page has no script at all.
"""
from __future__ import annotations

import html
import json
from pathlib import Path

import numpy as np
import pandas as pd

from viz.report import STATIC

__all__ = ["build_page"]


def _cell(v) -> str:
    if v is None or (not isinstance(v, str) and pd.isna(v)):
        return ""
    if isinstance(v, (float, np.floating)):
        return f"{v:.4g}"
    return html.escape(str(v))


def _table(df: pd.DataFrame) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in df.columns)
    rows = "".join("<tr>" + "".join(f"<td>{_cell(v)}</td>" for v in row) + "</tr>"
                   for row in df.itertuples(index=False))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def _svg(path: Path) -> str:
    text = path.read_text()
    return text[text.find("<svg"):]          # drop the XML prolog and doctype: inline SVG


def _overlay(overlay: dict | None) -> tuple[str, str]:
    """(section HTML, scripts) of the overlaid runs; empty without series."""
    if not overlay or not overlay.get("metrics"):
        return "", ""
    blob = json.dumps(overlay, separators=(",", ":")).replace("<", "\\u003c")
    d3 = (STATIC / "vendor" / "d3" / "d3.min.js").read_text().replace("</", "<\\/")
    js = (STATIC / "js" / "campaign.js").read_text().replace("</", "<\\/")
    section = ("<section class=\"overlay-runs\"><h2>Runs overlaid</h2><p>the same metrics of every run on one "
               "time axis (seconds since the run's first PPDU); tick the runs to compare</p>"
               "<div id=\"run-picker\"></div><div id=\"overlay\" class=\"grid\"></div></section>")
    return section, (f'<script type="application/json" id="campaign-data">{blob}</script>'
                     f"<script>{d3}</script><script>{js}</script>")


def build_page(tables: dict, captions: dict, figures: list, title: str, notes: dict, overlay: dict | None = None) -> str:
    """HTML text: ``tables`` (name -> DataFrame) with ``captions``, ``figures`` (SVG paths),
    ``notes`` (run -> notes text, shown when any run has notes), ``overlay``
    (:func:`sniffsync.campaign.overlay.overlay_series`: the runs overlaid, with a run picker)."""
    css = (STATIC / "style.css").read_text()
    section, scripts = _overlay(overlay)
    figs = "".join(f"<section><h2>{html.escape(p.stem)}</h2>{_svg(p)}</section>" for p in figures)
    tabs = "".join(f"<section><h2>{html.escape(name)}</h2><p>{html.escape(captions.get(name, ''))}</p>"
                   f"<div style=\"overflow-x:auto\">{_table(df)}</div></section>"
                   for name, df in tables.items())
    note_rows = pd.DataFrame({"run": list(notes), "notes": list(notes.values())})
    note_html = (f"<section><h2>notes</h2>{_table(note_rows)}</section>"
                 if any(notes.values()) else "")
    return (f"<!doctype html><html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{css}</style></head><body><header><h1>{html.escape(title)}</h1></header><main>"
            f"{section}<div class=\"grid\">{figs}</div><div class=\"grid\" style=\"grid-template-columns:1fr\">"
            f"{tabs}{note_html}</div></main>{scripts}</body></html>")
