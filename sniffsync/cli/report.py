"""``sniffsync report``: one self-contained HTML file (opens offline) for a run."""

HELP = "write a self-contained HTML report (-o report.html)"


def add_arguments(p):
    from sniffsync.cli.common import add_analysis_inputs, add_output
    add_analysis_inputs(p)
    add_output(p, "-o", "--output", required=True, help="report.html")
    p.add_argument("--no-cache", action="store_true", help="recompute instead of using the Parquet cache")


def write_report(run, view, path):
    from viz.report import build_report

    from sniffsync.io.atomic import atomic_output
    html = build_report(view, run, title=view.title)
    with atomic_output(path, "w") as fh:
        fh.write(html)
    return len(html)


def run(args) -> int:
    from sniffsync.cli.common import require_air
    from sniffsync.cli.serve import build_view
    from sniffsync.io.atomic import check_outputs
    check_outputs([args.output], args.captures)
    run_, view, _ = build_view(args)
    require_air(run_.ppdus, run_.frames, args.captures)
    size = write_report(run_, view, args.output)
    if not args.quiet:
        print(f"wrote {args.output} ({size / 1e6:.1f} MB)")
    return 0
