"""``sniffsync frames``: decode captures into the frame table and export it.

CSV and Parquet are written from the decoded numpy columns through Arrow, without
pandas (its import alone is a sizeable share of a run).
"""

HELP = "decode captures into the frame table (CSV to stdout, or -o .csv/.parquet/.jsonl)"


def add_arguments(p):
    p.add_argument("captures", nargs="+", metavar="CAPTURE", help="pcap / pcapng files (.gz ok)")
    p.add_argument("-o", "--output", help="output file: .csv, .parquet or .jsonl (default: CSV on stdout)")
    p.add_argument("--columns", help="comma-separated column names (default: all; see docs/columns.md)")
    p.add_argument("-q", "--quiet", action="store_true", help="no per-file problem lines on stderr")


def run(args) -> int:
    import sys

    import numpy as np

    from ..capture import read_records
    from ..errors import UsageError
    from ..export import write_columns
    from ..frames import decode_columns
    from ..schema import COLUMNS, DTYPES
    from ..table import bad_column, concat_cols

    names = [c.name for c in COLUMNS]
    if args.columns:
        names = [c.strip() for c in args.columns.split(",") if c.strip()]
        unknown = [c for c in names if c not in DTYPES]
        if unknown:
            raise UsageError(f"unknown column(s): {', '.join(unknown)} (see docs/columns.md)")
    parts, n_total, n_bad = [], 0, 0
    for i, path in enumerate(args.captures):
        rec = read_records(path)
        if not args.quiet:
            for line in rec.problems:
                print(f"sniffsync: warning: {line}", file=sys.stderr)
        n, cols, marks = decode_columns(rec, i, names)
        del rec                      # unmap the file before the next file / export
        bad = bad_column(n, marks)
        n_bad += int(np.count_nonzero(bad.codes >= 0))
        cols["bad"] = (bad, None)
        # every file contributes every requested column (all-null where it has none)
        parts.append({k: cols.get(k, _null(n, k)) for k in names})
        n_total += n
    write_columns(n_total, concat_cols(parts), names, args.output)
    if n_bad and not args.quiet:
        print(f"sniffsync: {n_bad} frame(s) could not be fully decoded (see the 'bad' column)",
              file=sys.stderr)
    return 0


def _null(n: int, name: str):
    """An all-null column of ``n`` rows for ``name``."""
    import numpy as np

    from ..schema import DTYPES
    from ..table import Cat
    if DTYPES[name] in ("category", "string"):
        return Cat(np.full(n, -1, np.int32), []), None
    return np.zeros(n, np.int64), np.zeros(n, bool)
