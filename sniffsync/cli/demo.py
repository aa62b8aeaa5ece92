"""``sniffsync demo``: the whole pipeline on the shipped hidden-node samples, then the UI."""

HELP = "run merge, airtime, detect, fairness and the report on the shipped samples, then serve the UI"


def add_arguments(p):
    p.add_argument("--samples", help="folder of sniffer pcaps (default: the shipped samples/hidden-node)")
    p.add_argument("--out", default="sniffsync-demo", help="folder for the outputs (default ./sniffsync-demo)")
    p.add_argument("--no-serve", action="store_true", help="write the outputs and exit (for scripts)")
    p.add_argument("--port", type=int, default=8050)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("-q", "--quiet", action="store_true")


def samples_dir():
    from pathlib import Path
    return Path(__file__).resolve().parents[2] / "samples" / "hidden-node"


def run(args) -> int:
    import json
    import os
    from pathlib import Path

    from viz.analysis import analysis_data
    from viz.runview import RunView

    from sniffsync.errors import UsageError
    from sniffsync.export.tables import write_table
    from sniffsync.io.atomic import atomic_output
    from sniffsync.sync.merge import write_merged
    from sniffsync.pipeline.run import analyse
    from sniffsync.cli.common import mac, print_table, progress_printer
    from sniffsync.cli.report import write_report
    from sniffsync.cli.serve import serve_view

    folder = Path(args.samples) if args.samples else samples_dir()
    paths = sorted(str(p) for p in [*folder.glob("*.pcap"), *folder.glob("*.pcap.gz"), *folder.glob("*.pcapng")])
    if not paths:
        raise UsageError(f"{folder}: no .pcap samples found")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    say = (lambda *a: None) if args.quiet else print
    say(f"sniffsync demo: {len(paths)} sniffers from {folder}")
    run_ = analyse(paths, progress=progress_printer(args.quiet))
    rep = run_.sync_report or {}
    tot = rep.get("totals", {})
    if tot:
        say(f"merge: frames in {tot['frames_in']} = frames out {tot['frames_out']} + duplicates removed "
            f"{tot['duplicates_removed']}")
        write_merged(str(out / "merged.pcapng"), run_.frames)
        with atomic_output(out / "sync.json", "w") as fh:
            fh.write(json.dumps(rep, indent=1, default=str))
    write_table(run_.ppdus, str(out / "ppdus.csv"))
    write_table(run_.events, str(out / "events.csv"))
    with atomic_output(out / "summary.json", "w") as fh:
        fh.write(json.dumps(run_.detect_summary, indent=1, default=str))
    say("events: " + ", ".join(f"{k} {v}" for k, v in run_.detect_summary["counts"].items()))
    if run_.fairness is not None and len(run_.fairness.flows):
        f = run_.fairness.flows
        t = f[["src", "sport", "dst", "dport", "bytes", "goodput_bytes", "retransmissions"]]
        print_table(t) if not args.quiet else None
        for name in ("flows", "windows", "rtt"):
            write_table(getattr(run_.fairness, name), str(out / f"{name}.csv"))
    title = "hidden-node demo: " + " + ".join(Path(p).name for p in paths)
    view = RunView(run_.ppdus, run_.events, lambda t0, t1: analysis_data(run_, t0, t1), run_.names, title)
    write_report(run_, view, str(out / "report.html"))
    say(f"wrote {out}/: merged.pcapng sync.json ppdus.csv events.csv summary.json flows.csv report.html")
    if args.no_serve:
        return 0
    serve_view(view, args.host, args.port, args.quiet)
    return 0
