"""``sniffsync`` command line: a thin dispatcher.

Each subcommand lives in ``sniffsync/cli/<name>.py`` and exposes ``HELP``,
``add_arguments(parser)`` and ``run(args) -> int``; heavy imports stay inside ``run``
so ``sniffsync --help`` is instant. Before a command runs, :func:`main` checks what
argparse cannot (``--reference`` against the inputs; no output is an input or another
output). Every error funnels through :func:`main`, which prints one line (a traceback
only with ``--traceback``, before or after the command) and returns the exit code.
Problem lines of the reader (a damaged record, a wild timestamp, a read limit reached)
are logged by the library and printed here as ``sniffsync: warning: ...`` (not with ``-q``).
"""
from __future__ import annotations

import argparse
import importlib
import logging
import sys

from sniffsync.errors import SniffsyncError

# name -> module; order is the order of --help
COMMANDS = ["frames", "merge", "airtime", "detect", "fairness", "simulate", "serve", "report", "demo",
            "analyse", "compare", "sql"]


def _chosen(argv: list | None) -> str | None:
    """The command ``argv`` runs, or None when the top-level help or an error may need
    every command's help line (no command, an unknown one, ``-h`` before it)."""
    args = sys.argv[1:] if argv is None else argv
    for arg in args:
        if arg in ("-h", "--help"):
            return None
        if not arg.startswith("-"):
            return arg if arg in COMMANDS else None
    return None


def build_parser(argv: list | None = None) -> argparse.ArgumentParser:
    """The full parser; with ``argv`` naming a command, the parser of that command only
    (the others' modules are not imported: argparse needs them only for the top-level
    help and for an unknown command, when :func:`_chosen` says None)."""
    from sniffsync.cli.common import add_traceback
    parser = argparse.ArgumentParser(
        prog="sniffsync", description="Post-mortem of multi-sniffer Wi-Fi testbed captures.")
    add_traceback(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    only = _chosen(argv) if argv is not None else None
    for name in COMMANDS:
        if only is not None and name != only:
            continue
        mod = importlib.import_module(f"sniffsync.cli.{name}")
        p = sub.add_parser(name, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(p)
        add_traceback(p, default=argparse.SUPPRESS)
        p.set_defaults(_run=mod.run, _parser=p)
    return parser


class _StderrWarnings(logging.Handler):
    """Problem lines of the reader (logger ``sniffsync``) as ``sniffsync: warning: ...`` on
    the stderr of the moment (tests swap it)."""

    def emit(self, record):
        print(f"sniffsync: warning: {record.getMessage()}", file=sys.stderr)


def _run(args) -> int:
    """The command, with the reader's warnings on stderr (not with ``-q``) and the read limits."""
    from sniffsync.io.limits import read_limits
    log = logging.getLogger("sniffsync")
    handler = _StderrWarnings(logging.ERROR if getattr(args, "quiet", False) else logging.WARNING)
    log.addHandler(handler)
    log.setLevel(logging.WARNING)
    max_frames, max_bytes = getattr(args, "max_frames", None), getattr(args, "max_bytes", None)
    if (max_frames or max_bytes) and hasattr(args, "no_cache"):
        args.no_cache = True           # a partial read is neither cached nor served from the cache
    try:
        with read_limits(max_frames, max_bytes):
            return int(args._run(args) or 0)
    finally:
        log.removeHandler(handler)


# The commands fill every core with their own threads (sniffsync.runtime); OpenBLAS would start
# as many more, which only wait (spinning) between the few small solves of the clock fit.
# Set before numpy loads; a value the user gave is kept.
BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "1")


def main(argv: list[str] | None = None) -> int:
    import os
    os.environ.setdefault(*BLAS_THREADS)
    from sniffsync.cli.common import prepare
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    try:
        prepare(args)                  # --reference, outputs vs inputs: before any work
        return _run(args)
    except BrokenPipeError:
        # the reader went away (e.g. `| head`): not our error; silence the flush at exit
        import os
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except SniffsyncError as exc:
        if args.traceback:
            raise
        print(f"sniffsync: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except MemoryError:
        if args.traceback:
            raise
        print(f"sniffsync: error: out of memory while running {args.command}; try fewer or smaller "
              "inputs, or a machine with more memory", file=sys.stderr)
        return 2
    except OSError as exc:
        if args.traceback:
            raise
        print(f"sniffsync: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
