"""Argument groups and helpers shared by the subcommands."""
from __future__ import annotations

import sys


def add_input_args(p, merge_opts=True):
    p.add_argument("captures", nargs="+", metavar="CAPTURE",
                   help="one capture, or several sniffers' captures (merged onto one clock first)")
    if merge_opts:
        p.add_argument("--reference", type=int, default=0, help="input whose clock is the common clock")
        p.add_argument("--allow-unsynced", action="store_true",
                       help="keep sniffers that cannot be synced on their own clock (flagged)")
    p.add_argument("--tsft-at", choices=["auto", "start", "end"], default="auto",
                   help="what radiotap TSFT marks (default: detected from response gaps)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress or summary on stderr")


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
