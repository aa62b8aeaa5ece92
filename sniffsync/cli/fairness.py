"""``sniffsync fairness``: TCP/UDP flows, windowed goodput, Jain's index and its CDF per run.

The command runs on the reader's numpy columns and the pandas-free fairness core; pandas
is imported only for 802.11 captures with radiotap (PPDU grouping) and for ``--csv``.
"""

import re

HELP = "per-flow goodput, retransmissions, RTT, Jain's fairness index per window (one CDF per capture)"

# what flows and RTT read of a wired (Ethernet, cooked, raw IP) capture: no 802.11 and
# no columns the analysis never reads, so less to decode and to hold
WIRED_COLUMNS = ["ts_ns", "linktype", "ip_src", "ip_dst", "ip_proto", "sport", "dport", "tcp_seq",
                 "tcp_ack", "tcp_flags", "tcp_win", "tcp_wscale", "tcp_payload_len", "tcp_tsval",
                 "tcp_tsecr", "udp_len"]

WIRED_BATCH_ROWS = 1 << 16     # frames per decoded batch of a wired read (~3 MB of those columns)

# what flows, RTT and the PPDUs' times read (airtime.columns: no pandas imported); the
# cross-layer view reads no PPDU column the other grouping columns give: ~5 % less to read
from airtime.columns import TIMING_COLUMNS  # noqa: E402
COLUMNS = list(dict.fromkeys(["linktype", "bad", *TIMING_COLUMNS, *WIRED_COLUMNS]))


# what --csv DIR writes (sniffsync.fairness.report.write_csv)
from sniffsync.fairness import CSV_TABLES  # noqa: E402  (no numpy: a plain tuple)

CSV_FILES = tuple(f"{name}.csv" for name in CSV_TABLES)


def add_arguments(p):
    from sniffsync.cli.common import RUNS, add_inputs, add_keep_bad_fcs, add_output, positive_float
    add_inputs(p, RUNS)
    add_keep_bad_fcs(p)
    p.add_argument("--window", type=positive_float, default=0.4, metavar="S", help="window length, seconds (0.4)")
    p.add_argument("--step", type=positive_float, default=0.2, metavar="S", help="window step, seconds (0.2)")
    p.add_argument("--bloat-ms", type=positive_float, default=50.0, metavar="MS",
                   help="queueing delay p95 that flags a busy window (50)")
    p.add_argument("--origin", type=epoch_ns, metavar="EPOCH_S",
                   help="start of the window grid (Unix seconds, decimal, to the ns; default: each "
                        "run's first segment with payload)")
    p.add_argument("--no-dedup", action="store_true",
                   help="keep 802.11 MAC retries of one MPDU as separate segments (as Wireshark does)")
    add_output(p, "-o", "--output", metavar="report.json", help="write the JSON report")
    add_output(p, "--csv", metavar="DIR", folder_files=CSV_FILES,
               help="write " + ", ".join(CSV_FILES) + " into DIR")


_DECIMAL = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)\Z", re.ASCII)


def epoch_ns(text: str) -> int:
    """``--origin``: non-negative decimal seconds, parsed exactly into integer ns
    (a float would round an epoch to 256 ns); digits past the ns are rounded."""
    import argparse
    from decimal import ROUND_HALF_EVEN, Decimal
    if not _DECIMAL.match(text):
        raise argparse.ArgumentTypeError(f"must be non-negative decimal seconds (e.g. 1700000000.5), not {text!r}")
    return int((Decimal(text) * 1_000_000_000).to_integral_value(ROUND_HALF_EVEN))


def _ns(seconds: float) -> int:
    return int(round(seconds * 1e9))


def _captures(paths, keep_bad_fcs=False):
    """One :class:`Capture` per path, read when the analysis reaches it (its parked columns'
    temporary file is deleted when the next is asked for, or the generator closed)."""
    from sniffsync.io.capture import head_linktypes
    from sniffsync.fairness.core import Capture
    from sniffsync.fairness.capture import PPDU_AND_TCP, TCP_ONLY
    from sniffsync.decode.frames import WIRED_LINKTYPES, read_columns
    from sniffsync.fairness.lean import read_lean
    from sniffsync.sync.mergedfile import read_merged
    for p in paths:
        if (merged := read_merged(p)) is not None:     # a merged pcapng: the merge's table
            yield Capture.from_frame(merged.frames, stamps=merged.stamps)
            continue
        kinds = head_linktypes(p)
        columns = WIRED_COLUMNS if kinds and kinds <= set(WIRED_LINKTYPES) else COLUMNS
        if columns is WIRED_COLUMNS:
            # walk/decode overlap; 64k-frame batches, each one walked window (no joins):
            # -15 % of the read's CPU against 32k batches of two 16k windows (docs/benchmarks.md)
            _rec, n, cols, marks = read_columns(p, 0, columns, records=False, batch_rows=WIRED_BATCH_ROWS,
                                                walk_rows=WIRED_BATCH_ROWS * 9 // 8)
        if columns is COLUMNS or not _all_in(cols["linktype"][0], WIRED_LINKTYPES):
            # 802.11 (or a pcapng interface described after the first packet is not wired):
            # every column the grouping reads, held narrow (sniffsync.fairness.lean)
            # the TCP-only columns parked on disk while the PPDUs are grouped, and a copy of
            # those both read (the grouping frees its own): sniffsync.fairness.spill
            n, cols, marks = read_lean(p, columns := COLUMNS, spill=TCP_ONLY, spill_copy=PPDU_AND_TCP)
        if keep_bad_fcs:          # no fcs_bad column: every frame is analysed (decode.quality)
            cols.pop("fcs_bad", None)
        # a wired capture is analysed once, without the frame table: its columns are freed as read
        try:
            yield Capture.from_columns(n, cols, marks, columns, consume=columns is WIRED_COLUMNS,
                                        stamps="capture", release=True)
        finally:                  # the analysis is done with it, or failed: its parked columns' file
            getattr(cols, "close", lambda: None)()


def _all_in(values, allowed) -> bool:
    """Whether every value is one of ``allowed`` (usually one value repeated: no set test)."""
    import numpy as np
    if not len(values):
        return True
    lo, hi = values.min(), values.max()
    return bool(lo in allowed) if lo == hi else bool(np.isin(values, allowed).all())


def run(args) -> int:
    import os
    from contextlib import closing

    from sniffsync.fairness.core import fairness_tables
    from sniffsync.fairness.report import flow_lines, write_csv, write_json
    from sniffsync.io.atomic import atomic_output

    with closing(_captures(args.captures, args.keep_bad_fcs)) as captures:   # (closes on an error too)
        runs, summary = fairness_tables(
            captures, _ns(args.window), _ns(args.step), t0_ns=args.origin,
            qdelay_threshold_ns=_ns(args.bloat_ms / 1000), dedup=not args.no_dedup)
    print("\n".join(flow_lines(runs)))
    below = summary["unfair_below"]
    for s, path in zip(summary["runs"], args.captures):
        med = "n/a" if s["median"] is None else f"{s['median']:.3f}"
        p10 = "n/a" if s["p10"] is None else f"{s['p10']:.3f}"
        share = s[f"share_below_{below}"]
        share = "n/a" if share is None else f"{share:.0%}"
        print(f"run {s['run']} {os.path.basename(path)}: Jain over {s['windows']} windows "
              f"(>= 2 active flows): median {med}, p10 {p10}, below {below}: {share}; "
              f"bufferbloat windows: {s['bloat_windows']}")
    if args.output:
        with atomic_output(args.output, "w") as fh:
            write_json(fh, runs, summary)
    if args.csv:
        write_csv(args.csv, runs, summary)
    return 0
