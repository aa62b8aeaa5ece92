"""``sniffsync compare``: runs side by side, one CSV + Parquet per metric, figures and an HTML page."""

HELP = "compare runs or a campaign: one CSV + Parquet per metric, SVG/PDF figures, campaign.html (-o DIR)"


def add_arguments(p):
    from sniffsync.campaign import output_files
    from sniffsync.cli.analyse import add_campaign_inputs
    from sniffsync.cli.common import add_output
    add_campaign_inputs(p)
    p.add_argument("--by", action="append", default=[], metavar="LABEL",
                   help="one row per group of runs sharing this label's value (repeatable; rows are means)")
    p.add_argument("--baseline", metavar="RUN", help="also write baseline.csv: metrics divided by this run's")
    p.add_argument("--title", default="sniffsync campaign", help="title of campaign.html")
    add_output(p, "-o", "--output", required=True, metavar="DIR", folder_files=tuple(output_files(True)),
               help="folder for the CSVs, figures and campaign.html")


def run(args) -> int:
    from sniffsync.campaign.compare import compare
    from sniffsync.cli.analyse import analysed
    by = [k.strip() for item in args.by for k in item.split(",") if k.strip()]
    specs = analysed(args)
    tables = compare(specs, args.output, by=by, baseline=args.baseline, title=args.title)
    if not args.quiet:
        print(f"{len(specs)} run(s), {len(tables)} tables -> {args.output}")
    return 0
