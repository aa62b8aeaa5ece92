"""Paper figures of a campaign: one file per figure, SVG and PDF, readable in greyscale.

Series are told apart by line style, marker and grey level, never by hue alone; fonts and
sizes are one style for every figure. SVG output is deterministic (fixed hash salt, no
date) so a figure that did not change gives the same bytes.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = ["FIGURES", "write_figures"]

STYLE = {"font.size": 9, "axes.titlesize": 9, "axes.labelsize": 9, "legend.fontsize": 7,
         "xtick.labelsize": 8, "ytick.labelsize": 8, "lines.linewidth": 1.3, "axes.grid": True,
         "grid.color": "0.85", "grid.linewidth": 0.5, "svg.hashsalt": "sniffsync", "svg.fonttype": "none",
         "figure.figsize": (4.2, 2.8), "savefig.bbox": "tight"}
LINES = ["-", "--", ":", "-.", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 3))]
MARKERS = ["o", "s", "^", "v", "D", "x", "+", "*"]
HOLLOW = ["o", "s", "^", "v", "D", "p", "h", "<"]     # markers with an outline (scatter draws them empty)

# figure name -> (samples key, kind, x or y label)
FIGURES = {
    "cdf_jain_window": ("jain", "cdf", "Jain's index per window"),
    "cdf_goodput_window": ("window_goodput", "cdf", "goodput per flow and window (Mb/s)"),
    "box_goodput_flow": ("flow_goodput", "box", "goodput per flow (Mb/s)"),
    "box_rtt": ("rtt", "box", "RTT (ms)"),
    "scatter_ampdu_rtt": ("ampdu_rtt", "scatter", ("MPDUs per A-MPDU (station, window)", "RTT p50 (ms)")),
}


def _grey(i: int, n: int) -> str:
    return str(round(0.6 * i / max(n - 1, 1), 2))       # black .. mid grey: visible on white


def _cdf(ax, series: dict, xlabel: str) -> None:
    n = len(series)
    for i, (label, v) in enumerate(series.items()):
        v = np.sort(v[np.isfinite(v)])
        if not len(v):
            continue
        y = np.arange(1, len(v) + 1) / len(v)
        every = max(1, len(v) // 6)
        ax.step(v, y, where="post", color=_grey(i, n), linestyle=LINES[i % len(LINES)],
                marker=MARKERS[i % len(MARKERS)], markevery=every, markersize=3.5, label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("fraction ≤ x")
    ax.set_ylim(0, 1.02)
    ax.legend(loc="best", frameon=False)


def _box(ax, series: dict, ylabel: str) -> None:
    labels = list(series)
    data = [v[np.isfinite(v)] for v in series.values()]
    ax.boxplot(data, tick_labels=labels, widths=0.5, patch_artist=True,
               boxprops={"facecolor": "0.9", "edgecolor": "0"}, medianprops={"color": "0", "linewidth": 1.6},
               flierprops={"marker": ".", "markersize": 3, "markerfacecolor": "0.4",
                           "markeredgecolor": "0.4"})
    ax.set_ylabel(ylabel)
    ax.tick_params(axis="x", labelrotation=30 if len(labels) > 3 else 0)
    for t in ax.get_xticklabels():
        t.set_ha("right" if len(labels) > 3 else "center")


def _scatter(ax, series: dict, labels) -> None:
    """One point per (station, window): A-MPDU size against the RTT of that station's flows."""
    n = len(series)
    for i, (label, v) in enumerate(series.items()):
        v = v.reshape(-1, 2)
        if not len(v):
            continue
        ax.scatter(v[:, 0], v[:, 1], s=9, marker=HOLLOW[i % len(HOLLOW)], facecolors="none",
                   edgecolors=_grey(i, n), linewidths=0.8, label=label)
    ax.set_xlabel(labels[0])
    ax.set_ylabel(labels[1])
    ax.legend(loc="best", frameon=False)


def write_figures(samples: dict, folder) -> list:
    """Write every figure of :data:`FIGURES` (``samples``: :func:`~sniffsync.campaign.metrics.samples`)
    as ``<name>.svg`` and ``<name>.pdf`` into ``folder``; returns the SVG paths written."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from sniffsync.io.atomic import atomic_output
    folder = Path(folder)
    written = []
    with plt.rc_context(STYLE):
        for name, (key, kind, label) in FIGURES.items():
            series = {k: np.asarray(v, np.float64) for k, v in samples[key].items()}
            if not any(np.isfinite(v).any() for v in series.values()):
                continue                      # nothing to draw (e.g. no RTT samples): no empty figure
            fig, ax = plt.subplots()
            {"cdf": _cdf, "box": _box, "scatter": _scatter}[kind](ax, series, label)
            for ext, meta in (("svg", {"Date": None}), ("pdf", {"CreationDate": None})):
                path = folder / f"{name}.{ext}"
                with atomic_output(path, "wb") as fh:
                    fig.savefig(fh, format=ext, metadata=meta)
            plt.close(fig)
            written.append(folder / f"{name}.svg")
    return written
