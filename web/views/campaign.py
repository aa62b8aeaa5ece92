"""``serve CAMPAIGN``: the campaign's runs overlaid on one page, each run's own timeline under
``/run/<i>/``.

The page at ``/`` is ``campaign.html``'s overlaid view (``campaign.js``: a chart per metric, a line
per run, a run picker) plus a table of the runs side by side; each run links to its timeline, and
a click on a run's line opens that run's timeline around the clicked time (``#t0=&t1=``, the
timeline's own URL state). A run's timeline is the very app ``serve RUN/*.pcap`` builds
(:func:`web.create_app` over :func:`sniffsync.cli.serve.make_view`), mounted under its prefix and
built on its first request; its page takes its API base from its own path (``main.js``).
"""
from __future__ import annotations

import html
import json
import threading

import numpy as np
from flask import Blueprint, current_app, jsonify
from werkzeug.middleware.dispatcher import DispatcherMiddleware

__all__ = ["CampaignSite", "create_campaign_app", "bp"]

bp = Blueprint("campaign", __name__)


class CampaignSite:
    """The runs of a campaign, analysed: ``runs`` is (name, labels, notes, captures, Run) per run;
    ``make_view(run, title)`` wraps one for the UI (built once, on its first visit)."""

    def __init__(self, runs, title: str, make_view, overlay: dict):
        self.runs, self.title, self.overlay = list(runs), title, overlay
        self._make_view, self._views, self._lock = make_view, {}, threading.Lock()

    def view(self, i: int):
        with self._lock:
            if i not in self._views:
                name, _, _, caps, run = self.runs[i]
                self._views[i] = self._make_view(run, f"{name}: " + " + ".join(c.rsplit("/", 1)[-1] for c in caps))
            return self._views[i]

    def rows(self) -> list:
        """One row per run for the side-by-side table: its size and the overlay's means."""
        means = {(m["id"], s["run"]): s["y"] for m in self.overlay.get("metrics", []) for s in m["series"]}

        def mean(mid, name):
            y = [v for v in means.get((mid, name), []) if v is not None]
            return round(float(np.mean(y)), 3) if y else None
        out = []
        for i, (name, labels, notes, caps, run) in enumerate(self.runs):
            p = run.ppdus
            span = float((p["end_ns"].max() - p["start_ns"].min()) / 1e9) if len(p) else 0.0
            out.append({"i": i, "run": name, "labels": labels, "notes": notes, "captures": len(caps),
                        "ppdus": int(len(p)), "seconds": round(span, 3),
                        "goodput_mbps": mean("goodput", name), "jain": mean("jain", name),
                        "utilisation": mean("util", name), "href": f"run/{i}/"})
        return out


def _site() -> CampaignSite:
    return current_app.extensions["sniffsync.campaign"]


_COLS = [("run", "run"), ("labels", "labels"), ("captures", "captures"), ("ppdus", "PPDUs"),
         ("seconds", "seconds"), ("goodput_mbps", "goodput Mb/s (mean of windows)"),
         ("jain", "Jain (mean of windows)"), ("utilisation", "utilisation (mean)")]


def _cell(row, key) -> str:
    v = row[key]
    if key == "run":
        return f'<a class="run-link" href="{row["href"]}">{html.escape(v)}</a>'
    if key == "labels":
        return html.escape(", ".join(f"{k}={x}" for k, x in v.items()))
    return "" if v is None else html.escape(str(v))


def page(site: CampaignSite) -> str:
    rows = site.rows()
    head = "".join(f"<th>{html.escape(t)}</th>" for _, t in _COLS)
    body = "".join("<tr>" + "".join(f"<td>{_cell(r, k)}</td>" for k, _ in _COLS) + "</tr>" for r in rows)
    data = {**site.overlay, "links": {r["run"]: r["href"] for r in rows}}
    blob = json.dumps(data, separators=(",", ":")).replace("<", "\\u003c")
    title = html.escape(site.title)
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
            '<link rel="icon" href="data:,"><link rel="stylesheet" href="/static/style.css">'
            '<script src="/static/vendor/d3/d3.min.js"></script></head><body>'
            f'<header><h1>{title}</h1><span class="hint">{len(rows)} runs · a run\'s name opens its timeline; '
            'a click on a line opens that run at that time</span></header><main>'
            '<section><h2>Runs side by side</h2><div style="overflow-x:auto"><table id="runs">'
            f'<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div></section>'
            '<section class="overlay-runs"><h2>Runs overlaid</h2><p>the same metrics of every run on one time '
            "axis (seconds since the run's first PPDU); tick the runs to compare</p>"
            '<div id="run-picker"></div><div id="overlay" class="grid"></div></section></main>'
            f'<script type="application/json" id="campaign-data">{blob}</script>'
            '<script src="/static/js/campaign.js"></script></body></html>')


def index():
    return current_app.response_class(page(_site()), mimetype="text/html")


@bp.get("/api/campaign")
def runs_api():
    s = _site()
    return jsonify(runs=s.rows(), overlay=s.overlay)


class _LazyRun:
    """WSGI app of run ``i``: :func:`web.create_app` over its view, built on the first request."""

    def __init__(self, site: CampaignSite, i: int, config: dict | None):
        self.site, self.i, self.config, self.app, self.lock = site, i, config, None, threading.Lock()

    def __call__(self, environ, start_response):
        with self.lock:
            if self.app is None:
                from web import create_app
                self.app = create_app(self.site.view(self.i), self.config)
        if environ.get("PATH_INFO", "") == "":         # /run/3 -> /run/3/ (the page's relative base)
            start_response("301 Moved Permanently", [("Location", environ.get("SCRIPT_NAME", "") + "/"),
                                                     ("Content-Length", "0")])
            return [b""]
        return self.app(environ, start_response)


def create_campaign_app(site: CampaignSite, test_config: dict | None = None):
    """The Flask app of ``serve CAMPAIGN``: :func:`web.create_app`'s guard, headers and errors,
    ``/`` the campaign page, ``/run/<i>/...`` run i's own app."""
    from web import create_app
    app = create_app(None, test_config)            # no run: its run routes answer 404
    app.extensions["sniffsync.campaign"] = site
    app.view_functions["pages.index"] = index      # "/" is the campaign, not a timeline
    app.register_blueprint(bp)
    app.wsgi_app = DispatcherMiddleware(app.wsgi_app, {
        f"/run/{i}": _LazyRun(site, i, test_config) for i in range(len(site.runs))})
    return app
