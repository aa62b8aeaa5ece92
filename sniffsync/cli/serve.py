"""``sniffsync serve``: the local web UI (timeline + analysis views) for captures."""

HELP = "serve the interactive timeline and analysis views on localhost (folders: a campaign's runs side by side)"


def add_arguments(p):
    from sniffsync.cli.common import add_analysis_inputs, port
    add_analysis_inputs(p)
    p.add_argument("--port", type=port, default=8050, help="TCP port, 1-65535 (default 8050)")
    p.add_argument("--host", default="127.0.0.1",
                   help="bind address (default 127.0.0.1: this machine only); any other address adds a "
                        "per-start token to the URL printed")
    p.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                   help="also answer to this Host name (e.g. the LAN address the server is reached by); "
                        "repeatable. Loopback names and --host are always accepted")
    p.add_argument("--no-cache", action="store_true", help="recompute instead of using the Parquet cache")


def make_view(run, title, options=None):
    """The UI's view of an analysed run: timeline index, analysis index (ranges and filters),
    counter tracks, drill-down, legacy rates, pcapng export of a selection (``options``: the
    merge's, to redo it for an export after a start from the cache)."""
    from viz.analysis_index import AnalysisIndex
    from viz.drill import DrillIndex
    from viz.runview import RunView, with_legacy_rates
    from viz.tracks import TrackIndex

    from sniffsync.pipeline.uicols import attach_frame_columns
    run = attach_frame_columns(run)              # no-op when the pipeline (or the cache) did it
    from viz.pcap_export import PcapExport
    view = RunView(with_legacy_rates(run.ppdus, run.frames), run.events, AnalysisIndex(run), run.names, title,
                   tracks=TrackIndex(run), drill=DrillIndex(run))
    from viz.runview import flow_senders
    view.meta()["flow_ta"] = flow_senders(run)   # the lanes a flow selection keeps (lanefilter.js)
    if run.paths:
        view.pcap = PcapExport(run.paths, view.meta()["t0_abs_ns"], run.merged, options)
        from viz.tsg import TsgIndex
        pcap = view.pcap
        view.tsg = TsgIndex(lambda: run.frames if run.frames is not None else pcap.frames(), view.meta()["t0_abs_ns"])
    return view


def build_view(args):
    """Analyse (through the cache) and wrap the run for the UI."""
    from pathlib import Path

    from sniffsync.pipeline.cache import analyse_cached
    from sniffsync.cli.common import progress_printer

    run, cached = analyse_cached(args.captures, use_cache=not args.no_cache, reference=args.reference,
                                 allow_unsynced=args.allow_unsynced, tsft_at=args.tsft_at,
                                 keep_bad_fcs=getattr(args, "keep_bad_fcs", False),
                                 progress=progress_printer(args.quiet))
    title = " + ".join(Path(p).name for p in args.captures)
    options = {"reference": args.reference, "allow_unsynced": args.allow_unsynced, "tsft_at": args.tsft_at}
    return run, make_view(run, title, options), cached


def start_server(view, host, port, allow_hosts=(), factory=None):
    """(server bound but not serving, URL to print, token or None) for ``view`` on ``host:port``
    (``factory``: the app builder, default :func:`web.create_app`)."""
    from web import create_app
    from web.server import access, make_server, url_host

    hosts, token = access(host, tuple(allow_hosts))
    app = (factory or create_app)(view, {"ALLOWED_HOSTS": sorted(hosts), "TOKEN": token,
                            "TOKEN_COOKIE": f"sniffsync_token_{port}"})
    srv = make_server(app, host, port)
    url = f"http://{url_host(host)}:{srv.server_port}/" + (f"?token={token}" if token else "")
    return srv, url, token


def serve_view(view, host, port, allow_hosts=(), factory=None):
    """Serve ``view`` until Ctrl-C: Host names checked, a token when beyond loopback, no banner."""
    import sys

    srv, url, token = start_server(view, host, port, allow_hosts, factory)
    if token:
        print(f"sniffsync: warning: serving on {host}: anyone who can reach it and has the URL below "
              "sees the run", file=sys.stderr)
    print(f"sniffsync: serving on {url}  (Ctrl-C to stop)", flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        srv.server_close()


def run(args) -> int:
    from sniffsync.cli.common import require_air
    from sniffsync.cli.serve_campaign import is_campaign
    if is_campaign(args.captures):                # a campaign (or run folders): runs side by side
        from sniffsync.cli.serve_campaign import run as run_campaign
        return run_campaign(args)
    run_, view, cached = build_view(args)
    require_air(run_.ppdus, run_.frames, args.captures)
    if not args.quiet:
        print(f"{view.meta()['n_ppdus']} PPDUs, {view.meta()['n_events']} events"
              f"{' (from cache)' if cached else ''}")
    serve_view(view, args.host, args.port, args.allow_host)
    return 0
