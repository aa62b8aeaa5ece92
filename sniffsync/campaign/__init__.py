"""Campaigns: many runs of one experiment, analysed once, compared and queried together.

In data-flow order: ``runs`` (what a run and a campaign are on disk, labels), ``store``
(one run's tables as Parquet in its cache folder), ``schedule`` (in-process or on Dask),
``summary`` (per-flow and per-station summaries of one run), ``metrics`` (compare's
tables), ``figures`` and ``page`` (matplotlib figures, the HTML page), ``compare`` (all
of compare's outputs) and ``sql`` (DuckDB views over every run). docs/campaigns.md.
"""

# plain names (no numpy/pandas import: the CLI's parser reads them); the modules keep them in sync
METRIC_TABLES = ("throughput", "flows", "jain", "rtt", "retransmissions", "stations", "udp", "airtime", "wired", "channel")
FIGURE_NAMES = ("cdf_jain_window", "cdf_goodput_window", "box_goodput_flow", "box_rtt",
                "scatter_ampdu_rtt")


def output_files(baseline: bool) -> list:
    """Every file ``compare`` may write into its folder (checked against the inputs first)."""
    names = [f"{m}.csv" for m in METRIC_TABLES] + (["baseline.csv"] if baseline else []) + ["campaign.html"]
    return names + [f"{f}.{ext}" for f in FIGURE_NAMES for ext in ("svg", "pdf")]
