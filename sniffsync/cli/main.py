"""``sniffsync`` command line: a thin dispatcher.

Each subcommand lives in ``sniffsync/cli/<name>.py`` and exposes ``HELP``,
``add_arguments(parser)`` and ``run(args) -> int``; heavy imports stay inside ``run``
so ``sniffsync --help`` is instant. Every error funnels through :func:`main`, which
prints one line (a traceback only with ``--traceback``) and returns the exit code.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from sniffsync.errors import SniffsyncError

# name -> module; order is the order of --help
COMMANDS = ["frames", "merge", "airtime", "detect", "fairness", "simulate", "serve", "report", "demo"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sniffsync", description="Post-mortem of multi-sniffer Wi-Fi testbed captures.")
    parser.add_argument("--traceback", action="store_true", help="show the Python traceback on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS:
        mod = importlib.import_module(f"sniffsync.cli.{name}")
        p = sub.add_parser(name, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args._run(args) or 0)
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
    except (OSError, MemoryError) as exc:
        if args.traceback:
            raise
        print(f"sniffsync: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
