"""``sniffsync report``: one self-contained HTML file (opens offline) for a run."""

HELP = "write a self-contained HTML report (-o report.html)"


def add_arguments(p):
    from sniffsync.cli.common import add_analysis_inputs, add_output
    add_analysis_inputs(p)
    add_output(p, "-o", "--output", required=True, help="report.html")
    p.add_argument("--no-cache", action="store_true", help="recompute instead of using the Parquet cache")


def write_report(run, view, path):
    import os
    import tempfile

    from viz.report import build_report

    from sniffsync.errors import CaptureError
    html = build_report(view, run, title=view.title)
    folder = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".sniffsync-", suffix=".html", dir=folder)
    except OSError as exc:
        raise CaptureError(f"{path}: cannot write: {exc.strerror or exc}") from None
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(html)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)          # mkstemp makes 0600; a report is a normal file
    os.replace(tmp, path)
    return len(html)


def run(args) -> int:
    from sniffsync.cli.serve import build_view
    run_, view, _ = build_view(args)
    size = write_report(run_, view, args.output)
    if not args.quiet:
        print(f"wrote {args.output} ({size / 1e6:.1f} MB)")
    return 0
