"""``sniffsync demo``: the whole pipeline on the shipped hidden-node samples, then the UI."""

HELP = "run merge, airtime, detect, fairness and the report on the shipped samples, then serve the UI"

# every file the demo writes into --out
OUTPUTS = ("merged.pcapng", "sync.json", "ppdus.csv", "events.csv", "summary.json", "flows.csv",
           "windows.csv", "rtt.csv", "report.html")


def add_arguments(p):
    from sniffsync.cli.common import add_quiet, port
    p.add_argument("--samples", metavar="DIR",
                   help="folder of sniffer pcaps, sniffers of one run (default: the shipped hidden-node samples)")
    p.add_argument("--out", default="sniffsync-demo", metavar="DIR",
                   help="folder for the outputs (default ./sniffsync-demo)")
    p.add_argument("--no-serve", action="store_true", help="write the outputs and exit (for scripts)")
    p.add_argument("--port", type=port, default=8050, help="TCP port, 1-65535 (default 8050)")
    p.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1: this machine only)")
    add_quiet(p)


def _write_text(path, text: str) -> None:
    from sniffsync.io.atomic import atomic_output
    with atomic_output(path, "w") as fh:
        fh.write(text)


def samples_dir():
    """The shipped hidden-node samples: package data of an installed sniffsync, else the
    source tree's top-level ``samples/`` (a checkout or an editable install)."""
    from importlib.resources import files
    from pathlib import Path
    installed = files("sniffsync") / "samples" / "hidden-node"
    if installed.is_dir():
        return Path(str(installed))
    return Path(__file__).resolve().parents[2] / "samples" / "hidden-node"


def run(args) -> int:
    import json
    from pathlib import Path

    from sniffsync.errors import NoDataError
    from sniffsync.export.tables import write_table
    from sniffsync.sync.merge import write_merged
    from sniffsync.pipeline.run import analyse
    from sniffsync.cli.common import print_table, progress_printer
    from sniffsync.cli.report import write_report
    from sniffsync.cli.serve import make_view, serve_view
    from sniffsync.io.atomic import check_outputs

    folder = Path(args.samples) if args.samples else samples_dir()
    paths = sorted(str(p) for p in [*folder.glob("*.pcap"), *folder.glob("*.pcap.gz"), *folder.glob("*.pcapng")])
    if not paths:
        raise NoDataError(f"{folder}: no .pcap samples found")
    out = Path(args.out)
    check_outputs([out / name for name in OUTPUTS] if out.is_dir() else [], paths)
    out.mkdir(parents=True, exist_ok=True)
    say = (lambda *a: None) if args.quiet else print
    say(f"sniffsync demo: {len(paths)} sniffers from {folder}")
    run_ = analyse(paths, progress=progress_printer(args.quiet))
    rep = run_.sync_report or {}
    tot = rep.get("totals", {})
    if tot:
        say(f"merge: frames in {tot['frames_in']} = frames out {tot['frames_out']} + duplicates removed "
            f"{tot['duplicates_removed']}")
        write_merged(str(out / "merged.pcapng"), run_.merged)
        _write_text(out / "sync.json", json.dumps(rep, indent=1, default=str))
    write_table(run_.ppdus, str(out / "ppdus.csv"))
    write_table(run_.events, str(out / "events.csv"))
    _write_text(out / "summary.json", json.dumps(run_.detect_summary, indent=1, default=str))
    say("events: " + ", ".join(f"{k} {v}" for k, v in run_.detect_summary["counts"].items()))
    if run_.fairness is not None and len(run_.fairness.flows):
        f = run_.fairness.flows
        t = f[["src", "sport", "dst", "dport", "bytes", "goodput_bytes", "retransmissions"]]
        print_table(t) if not args.quiet else None
        for name in ("flows", "windows", "rtt"):
            write_table(getattr(run_.fairness, name), str(out / f"{name}.csv"))
    title = "hidden-node demo: " + " + ".join(Path(p).name for p in paths)
    view = make_view(run_, title)
    write_report(run_, view, str(out / "report.html"))
    say(f"wrote {out}/: merged.pcapng sync.json ppdus.csv events.csv summary.json flows.csv report.html")
    if args.no_serve:
        return 0
    serve_view(view, args.host, args.port)
    return 0
