"""``sniffsync merge``: sync several sniffers' clocks and write one merged pcapng."""
from __future__ import annotations

import json
import os
import sys
import time

HELP = "put several sniffers' captures on one clock and merge copies of each frame"


def add_arguments(p) -> None:
    p.add_argument("inputs", nargs="+", help="802.11 captures, one per sniffer (pcap/pcapng)")
    p.add_argument("-o", "--output", help="merged pcapng to write")
    p.add_argument("--report", metavar="JSON", help="write the sync/merge report as JSON")
    p.add_argument("--reference", default="0",
                   help="input whose clock is the common clock: index or file name (default 0)")
    p.add_argument("--anchors", default="beacon,ba,unique",
                   help="anchor kinds, comma-separated (default beacon,ba,unique)")
    p.add_argument("--knot-s", type=float, default=1.0, help="clock model knot spacing, s (default 1)")
    p.add_argument("--allow-unsynced", action="store_true",
                   help="keep sniffers that cannot be synced on their own clock (flagged)")
    p.add_argument("--keep-duplicates", action="store_true",
                   help="write every copy on its own interface (on the common clock)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress or summary on stderr")


def _reference(value: str, inputs: list[str]) -> int:
    from sniffsync.errors import UsageError
    if value.lstrip("-").isdigit():
        return int(value)
    for i, p in enumerate(inputs):
        if value in (p, os.path.basename(p)) or os.path.realpath(value) == os.path.realpath(p):
            return i
    raise UsageError(f"--reference {value!r} is neither an input index nor one of the inputs")


def _progress(quiet: bool):
    t0 = time.monotonic()

    def say(stage: str) -> None:
        if not quiet:
            print(f"[{time.monotonic() - t0:7.1f} s] {stage}", file=sys.stderr, flush=True)
    return say


def run(args) -> int:
    from sniffsync.io.atomic import atomic_output, check_outputs
    from sniffsync.sync.merge import merge, write_merged
    check_outputs([args.output, args.report], args.inputs)
    anchors = tuple(a.strip() for a in args.anchors.split(",") if a.strip())
    say = _progress(args.quiet)
    merged, report = merge(args.inputs, reference=_reference(args.reference, args.inputs), columns=[],
                           allow_unsynced=args.allow_unsynced, anchors=anchors,
                           keep_duplicates=args.keep_duplicates, knot_s=args.knot_s, progress=say)
    if args.output:
        say(f"write {args.output}")
        write_merged(args.output, merged)
    if args.report:
        with atomic_output(args.report, "w") as fh:
            json.dump(report, fh, indent=1)
    if not args.quiet:
        print(summary(report), file=sys.stderr)
    return 0


def summary(report: dict) -> str:
    """A few human lines: per sniffer anchors/fit/residuals, then the conservation line."""
    lines = []
    for s in report["sniffers"]:
        m = s["model"][0] if s["model"] else {}
        p50, p95, p99 = s["heldout"]["abs_residual_us_p50_p95_p99"]
        fit = ("reference" if s["reference"] else
               f"offset {m.get('offset_ns', 0) / 1e9:+.9f} s, drift {m.get('drift_ppm', 0):+.2f} ppm")
        lines.append(f"{s['name']}: {s['frames_in']} frames, {'synced' if s['synced'] else 'UNSYNCED'}"
                     f" ({fit}, {len(s['model'])} segment(s)); anchors "
                     + " ".join(f"{k}={v}" for k, v in s["anchors"].items())
                     + (f"; held-out |residual| p50/p95/p99 {p50}/{p95}/{p99} µs" if p50 is not None else ""))
    t = report["totals"]
    lines.append(f"frames in {t['frames_in']} = frames out {t['frames_out']} + duplicates removed "
                 f"{t['duplicates_removed']}  ({t['heard_by_2_or_more']} transmissions heard by >= 2 "
                 f"sniffers; gate {t['gate_us']} µs; unsynced frames {t['unsynced_frames']})")
    return "\n".join(lines)
