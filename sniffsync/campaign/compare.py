"""``compare``'s outputs for analysed runs: one CSV and Parquet file per metric, figures, one HTML page."""
from __future__ import annotations

from pathlib import Path

__all__ = ["compare"]


def compare(specs, out_dir, by=(), baseline: str | None = None, title: str = "sniffsync campaign") -> dict:
    """Write the tables, figures and page of already analysed ``specs``; returns name -> table."""
    from sniffsync.campaign.figures import write_figures
    from sniffsync.campaign.metrics import METRICS, baseline_ratios, grouped, run_tables, samples
    from sniffsync.campaign.page import build_page
    from sniffsync.io.atomic import atomic_output
    by = list(by)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    per_run = run_tables(specs)
    tables = grouped(per_run, specs, by)
    captions = dict(METRICS)
    if baseline is not None:
        tables["baseline"] = baseline_ratios(tables, specs, baseline, by)
        captions["baseline"] = f"headline metrics divided by those of {baseline}" + \
            (" (its group)" if by else "")
    for name, df in tables.items():          # CSV to read, Parquet to query (types kept)
        with atomic_output(out / f"{name}.csv", "w") as fh:
            df.to_csv(fh, index=False, float_format="%.10g")
        with atomic_output(out / f"{name}.parquet", "wb") as fh:
            df.to_parquet(fh, index=False)
    figures = write_figures(samples(specs, by), out)
    from sniffsync.campaign.overlay import overlay_series
    page = build_page(tables, captions, figures, title, {s.name: s.notes for s in specs}, overlay_series(specs))
    with atomic_output(out / "campaign.html", "w", encoding="utf-8") as fh:
        fh.write(page)
    return tables
