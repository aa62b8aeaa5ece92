"""Argument groups and helpers shared by the subcommands.

Every command builds its parser from these groups, so an option means one thing in
every command: ``CAPTURE`` (its help says what several mean), ``-q``, ``--reference``,
``--tsft-at``, ``--traceback`` and the outputs. Values out of range are refused by
argparse itself; :func:`prepare` checks what needs several arguments at once, before
any work starts.
"""
from __future__ import annotations

import argparse
import math
import os
import sys

# what several CAPTURE arguments mean (each command's help says which)
SNIFFERS = "several are sniffers of one run, merged onto one clock first"
RUNS = "several are separate runs, each analysed on its own"
FILES = "several are separate captures, decoded one after another into one table (column sniffer = input index)"


# ---- values argparse refuses itself ----------------------------------------------

def _float(text: str, low: float, low_ok: bool, what: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = math.nan
    if not math.isfinite(v) or v < low or (v == low and not low_ok):
        raise argparse.ArgumentTypeError(f"must be a {what} number, not {text!r}")
    return v


def positive_float(text: str) -> float:
    """A finite number > 0 (``nan``, ``inf``, 0 and negatives refused)."""
    return _float(text, 0.0, False, "positive finite")


def nonnegative_float(text: str) -> float:
    """A finite number >= 0."""
    return _float(text, 0.0, True, "finite, non-negative")


def nonnegative_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        v = -1
    if v < 0:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 0, not {text!r}")
    return v


_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def positive_int(text: str) -> int:
    """A whole number >= 1 (plain ASCII digits only: no ``_``, sign or other scripts)."""
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, not {text!r}")
    return int(text)


def byte_size(text: str) -> int:
    """A size in bytes >= 1, optionally with a binary suffix: ``500M``, ``2G`` (K, M, G, T)."""
    t = text.strip().lower().removesuffix("ib").removesuffix("b")
    unit = t[-1:] if t[-1:] in _UNITS and t[-1:] else ""
    digits = t[:-1] if unit else t
    if not (digits.isascii() and digits.isdigit()) or int(digits) < 1:
        raise argparse.ArgumentTypeError(f"must be a size in bytes >= 1 (e.g. 500M, 2G), not {text!r}")
    return int(digits) * _UNITS[unit]


def port(text: str) -> int:
    """A TCP port 1-65535 (0, "any free port", is refused: the URL printed must be the real one)."""
    try:
        v = int(text)
    except ValueError:
        v = 0
    if not 1 <= v <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port number 1-65535, not {text!r}")
    return v


# ---- argument groups ---------------------------------------------------------------

def add_inputs(p, several: str, what: str = "pcap / pcapng, .gz ok") -> None:
    """Positional ``CAPTURE...``; ``several`` is one of :data:`SNIFFERS`, :data:`RUNS`, :data:`FILES`."""
    p.add_argument("captures", nargs="+", metavar="CAPTURE", help=f"capture file ({what}); {several}")
    p.set_defaults(_inputs="captures")
    add_limits(p)


def add_limits(p) -> None:
    """``--max-frames`` / ``--max-bytes``: every reading command stops reading each capture
    there, analyses what came before and warns (exit status unchanged)."""
    g = _group(p, "limits (each capture)")
    g.add_argument("--max-frames", type=positive_int, metavar="N",
                   help="read at most N frames of each capture; the rest is ignored with a warning")
    g.add_argument("--max-bytes", type=byte_size, metavar="SIZE",
                   help="read at most SIZE bytes of each capture (after gunzip; e.g. 500M, 2G); "
                        "the rest is ignored with a warning")


def add_quiet(p, help: str = "no progress or summary on stderr") -> None:
    p.add_argument("-q", "--quiet", action="store_true", help=help)


def _group(p, title: str):
    """The parser's argument group ``title`` (made on first use), so --help lists it as one block."""
    for g in p._action_groups:
        if g.title == title:
            return g
    return p.add_argument_group(title)


def add_sync(p) -> None:
    """How several sniffers are put on one clock: ``--reference``, ``--allow-unsynced``."""
    g = _group(p, "sync (several captures)")
    g.add_argument("--reference", default="0", metavar="INPUT",
                   help="input whose clock is the common clock: index or file name (default 0)")
    g.add_argument("--allow-unsynced", action="store_true",
                   help="keep sniffers that cannot be synced on their own clock (flagged)")


def add_tsft_at(p) -> None:
    p.add_argument("--tsft-at", choices=["auto", "start", "end"], default="auto",
                   help="what radiotap TSFT marks (default: detected from response gaps)")


def add_keep_bad_fcs(p) -> None:
    p.add_argument("--keep-bad-fcs", action="store_true",
                   help="analyse frames that failed their FCS too (default: counted, not analysed)")


def add_analysis_inputs(p) -> None:
    """What every command reading one run's sniffers (merged first) takes."""
    add_inputs(p, SNIFFERS)
    add_sync(p)
    add_tsft_at(p)
    add_keep_bad_fcs(p)
    add_quiet(p)


def add_output(p, *flags, folder_files: tuple = (), **kw) -> None:
    """An output option; :func:`prepare` checks it against the inputs and the other outputs.

    ``folder_files``: the option names a folder and these are the files written into it.
    """
    action = _group(p, "outputs").add_argument(*flags, **kw)
    p.set_defaults(_outputs=[*(p.get_default("_outputs") or []), (action.dest, tuple(folder_files))])


def add_traceback(p, default=False) -> None:
    """``--traceback``: on the top parser (default False) and on every subcommand
    (``SUPPRESS``, so an absent flag after the subcommand keeps the one given before it)."""
    p.add_argument("--traceback", action="store_true", default=default,
                   help="show the Python traceback on errors")


def output_paths(args) -> list:
    """Every file the command will write (folder outputs: the files inside an existing folder)."""
    paths = []
    for dest, files in getattr(args, "_outputs", ()):
        value = getattr(args, dest, None)
        if value is None:
            continue
        if files:
            paths += [os.path.join(value, f) for f in files] if os.path.isdir(value) else []
        else:
            paths.append(value)
    return paths


def reference_index(value, inputs: list) -> int | None:
    """``--reference`` as an input index: a number in range or one input's (file) name."""
    text = str(value)
    if text.isdigit():
        return int(text) if int(text) < len(inputs) else None
    for i, p in enumerate(inputs):
        if text in (p, os.path.basename(p)) or os.path.realpath(text) == os.path.realpath(p):
            return i
    return None


def prepare(args) -> None:
    """Checks needing several arguments, before any work: ``--reference`` against the
    inputs (an argparse error), then no output is an input or another output."""
    from sniffsync.io.atomic import check_outputs
    inputs = list(getattr(args, args._inputs)) if getattr(args, "_inputs", None) else []
    if getattr(args, "reference", None) is not None and inputs:
        idx = reference_index(args.reference, inputs)
        if idx is None:
            args._parser.error(f"argument --reference: {args.reference!r} is neither an input index "
                               f"(0..{len(inputs) - 1}) nor one of the inputs")
        args.reference = idx
    check_outputs(output_paths(args), inputs)


def air_of(args):
    """``(frames, PpduGrouping)`` of the command's captures (merged when several), checked by
    :func:`require_air`: what ``airtime`` and ``detect`` start from."""
    from airtime.ppdu import group_ppdus
    from sniffsync.pipeline.run import load_merged
    m = load_merged(args.captures, reference=args.reference, allow_unsynced=args.allow_unsynced,
                    progress=progress_printer(args.quiet), tsft_at=args.tsft_at)
    grouped = group_ppdus(m.frames, tsft_at=args.tsft_at, stamps=m.stamps, keep_bad_fcs=args.keep_bad_fcs)
    require_air(grouped.ppdus, m.frames, args.captures)
    return m.frames, grouped


def require_air(ppdus, frames, paths) -> None:
    """NoDataError ("nothing to analyse") when a run holds no 802.11 frame: airtime, detect,
    report and serve have nothing to show for a 0-frame or a wired-only capture.
    ``frames`` is None for a run from the cache (then its PPDUs tell)."""
    if frames is None:
        if len(ppdus):
            return
    elif "type_subtype" in frames and frames["type_subtype"].notna().any():
        return
    from sniffsync.errors import NoDataError
    n = 0 if frames is None else len(frames)
    kinds = sorted({int(v) for v in frames["linktype"].unique()}) if n and "linktype" in frames else []
    what = f"{n} frame(s)" + (f", link type(s) {', '.join(map(str, kinds))}" if kinds else "")
    raise NoDataError(f"nothing to analyse: no 802.11 frames in {', '.join(map(str, paths))} ({what})")


# ---- output helpers ------------------------------------------------------------------

def progress_printer(quiet: bool):
    """Callback ``(done, total, what)`` drawing a one-line progress bar on stderr."""
    if quiet or not sys.stderr.isatty():
        return None

    def show(done, total, what=""):
        frac = 0 if not total else min(1.0, done / total)
        bar = "#" * int(frac * 30)
        print(f"\r{what[:24]:24s} [{bar:30s}] {frac * 100:5.1f}%", end="", file=sys.stderr, flush=True)
        if frac >= 1.0:
            print(file=sys.stderr)
    return show


from sniffsync.decode.macs import mac_text as mac  # noqa: E402,F401  (re-exported for the commands)


def print_table(df, file=None, floatfmt="{:.2f}"):
    """Small aligned text table (no per-row formatting beyond what a terminal shows)."""
    file = file or sys.stdout
    cols = list(df.columns)
    cells = [[str(c) for c in cols]]
    for row in df.itertuples(index=False):
        cells.append([floatfmt.format(v) if isinstance(v, float) else str(v) for v in row])
    widths = [max(len(r[i]) for r in cells) for i in range(len(cols))]
    for k, r in enumerate(cells):
        print("  ".join(c.rjust(w) for c, w in zip(r, widths)), file=file)
        if k == 0:
            print("  ".join("-" * w for w in widths), file=file)
