"""``sniffsync frames``: decode captures into the frame table and export it."""

HELP = "decode captures into the frame table (CSV to stdout, or -o .csv/.parquet/.jsonl)"


def add_arguments(p):
    p.add_argument("captures", nargs="+", metavar="CAPTURE", help="pcap / pcapng files (.gz ok)")
    p.add_argument("-o", "--output", help="output file: .csv, .parquet or .jsonl (default: CSV on stdout)")
    p.add_argument("--columns", help="comma-separated column names (default: all; see docs/columns.md)")
    p.add_argument("-q", "--quiet", action="store_true", help="no per-file problem lines on stderr")


def run(args) -> int:
    import sys

    from ..errors import UsageError
    from ..export import write_table
    from ..frames import concat_tables, decode_records
    from ..capture import read_records
    from ..schema import DTYPES

    columns = None
    if args.columns:
        columns = [c.strip() for c in args.columns.split(",") if c.strip()]
        unknown = [c for c in columns if c not in DTYPES]
        if unknown:
            raise UsageError(f"unknown column(s): {', '.join(unknown)} (see docs/columns.md)")
    tables, n_bad = [], 0
    for i, path in enumerate(args.captures):
        rec = read_records(path)
        if not args.quiet:
            for line in rec.problems:
                print(f"sniffsync: warning: {line}", file=sys.stderr)
        df = decode_records(rec, i, columns)
        del rec                      # free the file buffer before the next file / export
        n_bad += int(df["bad"].notna().sum())
        tables.append(df if columns is None else df[columns])
    write_table(concat_tables(tables), args.output)
    if n_bad and not args.quiet:
        print(f"sniffsync: {n_bad} frame(s) could not be fully decoded (see the 'bad' column)",
              file=sys.stderr)
    return 0
