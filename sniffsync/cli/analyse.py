"""``sniffsync analyse``: each run's tables as Parquet in its cache folder, once.

Also the shared arguments and the analysis step of ``compare`` and ``sql``, which
analyse whatever is not cached yet before they read the tables.
"""

HELP = "analyse runs (folders of captures + run.toml labels) into cached Parquet tables"

RUNS_HELP = ("a run folder (its captures + optional run.toml/run.json labels), a campaign folder "
             "(sub-folders are runs), or the capture files of one run")


def add_campaign_inputs(p) -> None:
    from sniffsync.cli.common import add_quiet, add_tsft_at, positive_float
    p.add_argument("runs", nargs="+", metavar="RUN", help=RUNS_HELP)
    p.set_defaults(_inputs="runs")
    p.add_argument("--cache", metavar="DIR",
                   help="keep each run's tables in DIR/<run> (default: RUN/.sniffsync/)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="Dask scheduler that analyses the runs (tcp://host:8786); 'none': in this "
                        "process; default: a local cluster with one worker per core")
    p.add_argument("--window", type=positive_float, default=0.4, metavar="S",
                   help="window length, seconds (0.4)")
    p.add_argument("--step", type=positive_float, default=0.2, metavar="S", help="window step, seconds (0.2)")
    add_tsft_at(p)
    p.add_argument("--force", action="store_true", help="re-analyse even runs whose cache is fresh")
    add_quiet(p)


def add_arguments(p):
    add_campaign_inputs(p)
    p.add_argument("--out", dest="cache", metavar="DIR", help="same as --cache")
    p.add_argument("--frames", action="store_true", help="also store the (large) merged frame table")


def analysed(args, frames: bool = False):
    """The runs named by ``args`` (:class:`~sniffsync.campaign.runs.RunSpec`), analysed or cached."""
    import sys

    from sniffsync.campaign.runs import discover
    from sniffsync.campaign.schedule import analyse_all
    specs = discover(args.runs, args.cache)
    options = {"tsft_at": args.tsft_at, "window_ns": int(round(args.window * 1e9)),
               "step_ns": int(round(args.step * 1e9))}

    def show(r):
        if not args.quiet:
            print(f"{r['run']}: {'cached' if r['cached'] else 'analysed'} -> {r['cache']}", file=sys.stderr)
    analyse_all(specs, args.scheduler, options, frames=frames, force=args.force, progress=show)
    return specs


def run(args) -> int:
    specs = analysed(args, frames=args.frames)
    if not args.quiet:
        print(f"{len(specs)} run(s) analysed")
    return 0
