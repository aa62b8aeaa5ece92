"""``sniffsync`` command line: a thin dispatcher.

Each subcommand lives in ``sniffsync/cli/<name>.py`` and exposes ``HELP``,
``add_arguments(parser)`` and ``run(args) -> int``; heavy imports stay inside ``run``
so ``sniffsync --help`` is instant. Before a command runs, :func:`main` checks what
argparse cannot (``--reference`` against the inputs; no output is an input or another
output). Every error funnels through :func:`main`, which prints one line (a traceback
only with ``--traceback``, before or after the command) and returns the exit code.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from sniffsync.errors import SniffsyncError

# name -> module; order is the order of --help
COMMANDS = ["frames", "merge", "airtime", "detect", "fairness", "simulate", "serve", "report", "demo",
            "analyse", "compare", "sql"]


def build_parser() -> argparse.ArgumentParser:
    from sniffsync.cli.common import add_traceback
    parser = argparse.ArgumentParser(
        prog="sniffsync", description="Post-mortem of multi-sniffer Wi-Fi testbed captures.")
    add_traceback(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS:
        mod = importlib.import_module(f"sniffsync.cli.{name}")
        p = sub.add_parser(name, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(p)
        add_traceback(p, default=argparse.SUPPRESS)
        p.set_defaults(_run=mod.run, _parser=p)
    return parser


def main(argv: list[str] | None = None) -> int:
    from sniffsync.cli.common import prepare
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        prepare(args)                  # --reference, outputs vs inputs: before any work
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
