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
        try:
            mod = importlib.import_module(f"sniffsync.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"sniffsync.cli.{name}":
                continue            # subcommand not built yet
            raise
        p = sub.add_parser(name, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def _one_malloc_arena() -> None:
    """glibc: let the decoding threads allocate from the main thread's heap.

    By default each thread gets its own arena, so the memory a decoding thread frees is
    not reused by the analysis that follows: every stage touches fresh pages (~80 MB
    more page faults on a 1M-frame capture). One arena costs a little lock contention.
    Only the command line does this: a library call must not retune its host process.
    """
    import os
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc"):
            return
        import ctypes
        ctypes.CDLL(None).mallopt(-8, 1)          # M_ARENA_MAX = 1
    except (OSError, ValueError, AttributeError):
        pass                                      # not glibc: nothing to tune


def _no_hugepage_advice() -> None:
    """Ask numpy not to advise huge pages for its large arrays (unless the user chose).

    A command's arrays live for about a second; on a huge-page fault in an advised
    region the kernel may first compact memory (THP ``defrag=madvise``, the common
    default), which costs far more than the TLB misses saved: 320 MB of fresh arrays
    took 0.13 s without the advice and 0.5-0.8 s with it on the benchmark VM. Read by
    numpy when it is imported, so this runs before any command imports it.
    """
    import os
    os.environ.setdefault("NUMPY_MADVISE_HUGEPAGE", "0")


def main(argv: list[str] | None = None) -> int:
    _one_malloc_arena()
    if "numpy" not in sys.modules:
        _no_hugepage_advice()
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
