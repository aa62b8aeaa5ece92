"""``sniffsync sql``: a DuckDB query over the Parquet tables of every run at once."""

HELP = "run an SQL query (DuckDB) over the tables of runs or a campaign and print the result"


def add_arguments(p):
    from sniffsync.cli.analyse import add_campaign_inputs
    from sniffsync.cli.common import add_output
    add_campaign_inputs(p)
    p.add_argument("query", metavar="QUERY",
                   help="e.g. \"select run, avg(jain) from jain group by run\" (views: docs/campaigns.md)")
    add_output(p, "-o", "--output", metavar="FILE", help="write the result as CSV instead of printing it")


def run(args) -> int:
    from sniffsync.campaign.sql import query
    from sniffsync.cli.analyse import analysed
    from sniffsync.cli.common import print_table
    from sniffsync.io.atomic import atomic_output
    df = query(analysed(args), args.query)
    if args.output:
        with atomic_output(args.output, "w") as fh:
            df.to_csv(fh, index=False)
    else:
        print_table(df, floatfmt="{:.6g}")
    return 0
