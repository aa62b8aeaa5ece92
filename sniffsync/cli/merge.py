"""``sniffsync merge``: sync several sniffers' clocks and write one merged pcapng."""
from __future__ import annotations

import json
import sys
import time

HELP = "put several sniffers' captures on one clock and merge copies of each frame"


def add_arguments(p) -> None:
    from sniffsync.cli.common import SNIFFERS, add_inputs, add_output, add_quiet, add_sync, add_tsft_at, \
        positive_float
    add_inputs(p, SNIFFERS, "802.11 pcap / pcapng, .gz ok")
    add_output(p, "-o", "--output", help="merged pcapng to write")
    add_output(p, "--report", metavar="JSON", help="write the sync/merge report as JSON")
    add_sync(p)
    add_tsft_at(p)
    p.add_argument("--anchors", default="beacon,ba,unique",
                   help="anchor kinds, comma-separated (default beacon,ba,unique)")
    p.add_argument("--knot-s", type=positive_float, default=1.0, help="clock model knot spacing, s (default 1)")
    p.add_argument("--all-anchors", action="store_true",
                   help="fit every \"unique\" anchor; by default a large capture fits one in k, chosen by "
                        "content (k in the report's totals.anchor_sample; docs/merge.md)")
    p.add_argument("--keep-duplicates", action="store_true",
                   help="write every copy on its own interface (on the common clock)")
    p.add_argument("--window-s", type=positive_float, default=None, metavar="S",
                   help="merge in two streamed passes, S seconds of output at a time: memory bounded "
                        "by a window, not the capture (needs -o; same file as without)")
    add_quiet(p)


def _progress(quiet: bool):
    t0 = time.monotonic()

    def say(stage: str) -> None:
        if not quiet:
            print(f"[{time.monotonic() - t0:7.1f} s] {stage}", file=sys.stderr, flush=True)
    return say


def run(args) -> int:
    anchors = tuple(a.strip() for a in args.anchors.split(",") if a.strip())
    say = _progress(args.quiet)
    if args.window_s is not None:
        return _run_windowed(args, anchors, say)
    from sniffsync.sync.readahead import read_ahead
    first = read_ahead(args.captures[0], []) if len(args.captures) > 1 else None
    from sniffsync.sync.merge import WRITTEN_COLUMNS, merge, write_merged   # (pandas: while that reads)
    merged = merge(args.captures, reference=args.reference, columns=[], keep=WRITTEN_COLUMNS,
                   tsft_at=args.tsft_at, allow_unsynced=args.allow_unsynced, anchors=anchors,
                   keep_duplicates=args.keep_duplicates, knot_s=args.knot_s, progress=say,
                   anchor_sample=1 if args.all_anchors else "auto", read_ahead=first)
    report = merged.report
    if args.output:
        say(f"write {args.output}")
        write_merged(args.output, merged)
    return _finish(args, report)


def _finish(args, report: dict) -> int:
    """The report file (``--report``) and the summary line on stderr."""
    from sniffsync.io.atomic import atomic_output
    if args.report:
        with atomic_output(args.report, "w") as fh:
            json.dump(report, fh, indent=1)
    if not args.quiet:
        print(summary(report), file=sys.stderr)
    return 0


def _run_windowed(args, anchors, say) -> int:
    """``--window-s``: :func:`sniffsync.sync.stream.merge_to_file`."""
    from sniffsync.errors import UsageError
    from sniffsync.sync.stream import merge_to_file
    if not args.output:
        raise UsageError("--window-s writes the merged file as it goes: give -o")
    report = merge_to_file(args.captures, args.output, window_s=args.window_s, reference=args.reference,
                           allow_unsynced=args.allow_unsynced, anchors=anchors,
                           keep_duplicates=args.keep_duplicates, knot_s=args.knot_s,
                           tsft_at=args.tsft_at, progress=say)
    return _finish(args, report)


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
    if t.get("anchor_sample", 1) > 1:
        lines.append(f"clock fit on 1 in {t['anchor_sample']} \"unique\" anchors, chosen by content "
                     "(--all-anchors: every one)")
    return "\n".join(lines)
