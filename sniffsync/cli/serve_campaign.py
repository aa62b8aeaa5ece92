"""``sniffsync serve CAMPAIGN_DIR`` (or several run folders): the runs overlaid and side by side,
each linked to its own timeline (:mod:`web.views.campaign`).

Each run is analysed as ``serve RUN/*.pcap`` would (the same Parquet cache, so a run served alone
before starts instantly, and the other way round); its UI view is built on its first visit.
"""
from __future__ import annotations

from pathlib import Path


def is_campaign(paths) -> bool:
    """Folders (a campaign, or run folders) rather than capture files."""
    return bool(paths) and all(Path(p).is_dir() for p in paths)


def build_site(paths, *, use_cache=True, progress=None, **options):
    """A :class:`web.views.campaign.CampaignSite` of the runs ``paths`` name (campaign or run folders)."""
    from sniffsync.campaign.overlay import overlay_of_runs
    from sniffsync.campaign.runs import discover
    from sniffsync.cli.serve import make_view
    from sniffsync.pipeline.cache import analyse_cached
    from web.views.campaign import CampaignSite

    specs = discover(paths)
    runs = []
    for spec in specs:
        run, _ = analyse_cached(list(spec.captures), use_cache=use_cache, progress=progress, **options)
        runs.append((spec.name, spec.labels, spec.notes, spec.captures, run))
    title = " + ".join(Path(p).resolve().name for p in paths)
    overlay = overlay_of_runs([(name, labels, run) for name, labels, _, _, run in runs])
    merge = {k: options.get(k) for k in ("reference", "allow_unsynced", "tsft_at")}   # as serve's build_view
    return CampaignSite(runs, title, lambda run, t: make_view(run, t, merge), overlay)


def run(args) -> int:
    from sniffsync.cli.common import progress_printer
    from sniffsync.cli.serve import serve_view
    from web.views.campaign import create_campaign_app
    site = build_site(args.captures, use_cache=not args.no_cache, progress=progress_printer(args.quiet),
                      reference=args.reference, allow_unsynced=args.allow_unsynced, tsft_at=args.tsft_at,
                      keep_bad_fcs=getattr(args, "keep_bad_fcs", False))
    if not args.quiet:
        print(f"{len(site.runs)} runs: " + ", ".join(r[0] for r in site.runs))
    serve_view(site, args.host, args.port, args.allow_host, factory=create_campaign_app)
    return 0
