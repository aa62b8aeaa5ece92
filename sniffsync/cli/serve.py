"""``sniffsync serve``: the local web UI (timeline + analysis views) for captures."""

HELP = "serve the interactive timeline and analysis views on localhost"


def add_arguments(p):
    from sniffsync.cli.common import add_analysis_inputs, port
    add_analysis_inputs(p)
    p.add_argument("--port", type=port, default=8050, help="TCP port, 1-65535 (default 8050)")
    p.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1: this machine only)")
    p.add_argument("--no-cache", action="store_true", help="recompute instead of using the Parquet cache")


def build_view(args):
    """Analyse (through the cache) and wrap the run for the UI."""
    from pathlib import Path

    from viz.analysis import analysis_data
    from viz.runview import RunView

    from sniffsync.pipeline.cache import analyse_cached
    from sniffsync.cli.common import progress_printer

    run, cached = analyse_cached(args.captures, use_cache=not args.no_cache, reference=args.reference,
                                 allow_unsynced=args.allow_unsynced, tsft_at=args.tsft_at,
                                 progress=progress_printer(args.quiet))
    title = " + ".join(Path(p).name for p in args.captures)
    view = RunView(run.ppdus, run.events, lambda t0, t1: analysis_data(run, t0, t1), run.names, title)
    return run, view, cached


def serve_view(view, host, port):
    import sys

    from web import create_app
    if host not in ("127.0.0.1", "localhost", "::1"):
        print(f"sniffsync: warning: serving on {host}: anyone who can reach this address sees the run",
              file=sys.stderr)
    app = create_app(view)
    print(f"sniffsync: serving on http://{host}:{port}/  (Ctrl-C to stop)", flush=True)
    from werkzeug.serving import run_simple
    run_simple(host, port, app, threaded=True, use_reloader=False, use_debugger=False)


def run(args) -> int:
    from sniffsync.cli.common import require_air
    run_, view, cached = build_view(args)
    require_air(run_.ppdus, run_.frames, args.captures)
    if not args.quiet:
        print(f"{view.meta()['n_ppdus']} PPDUs, {view.meta()['n_events']} events"
              f"{' (from cache)' if cached else ''}")
    serve_view(view, args.host, args.port)
    return 0
