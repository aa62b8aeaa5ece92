"""``sniffsync frames``: decode captures into the frame table and export it.

CSV and Parquet are written from the decoded numpy columns through Arrow, without
pandas (its import alone is a sizeable share of a run).
"""

HELP = "decode captures into the frame table (CSV to stdout, or -o .csv/.parquet/.jsonl)"


def add_arguments(p):
    from sniffsync.cli.common import FILES, add_inputs, add_output, add_quiet
    add_inputs(p, FILES)
    add_output(p, "-o", "--output", help="output file: .csv, .parquet or .jsonl (default: CSV on stdout)")
    p.add_argument("--columns", help="comma-separated column names (default: all; see docs/columns.md)")
    add_quiet(p, "no per-file problem lines on stderr")


def run(args) -> int:
    import os
    import sys

    # this process's Arrow buffers from the C allocator, not Arrow's default pool
    # (mimalloc: ~17 MB more at peak, most of the budget of a 100 MB capture; speed the
    # same): read when pyarrow starts, so only in a process that has not loaded it (the
    # command line, not a host calling main()), and only when the user has not chosen
    if "pyarrow" not in sys.modules:
        os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")

    from sniffsync.errors import UsageError
    from sniffsync.export.tables import FORMATS
    from sniffsync.decode.schema import COLUMNS, DTYPES
    from sniffsync.io.atomic import check_outputs

    names = [c.name for c in COLUMNS]
    if args.columns:
        names = [c.strip() for c in args.columns.split(",") if c.strip()]
        unknown = [c for c in names if c not in DTYPES]
        if unknown:
            raise UsageError(f"unknown column(s): {', '.join(unknown)} (see docs/columns.md)")
    out = args.output
    fmt = "csv" if out in (None, "-") else FORMATS.get(os.path.splitext(out)[1].lower())
    if fmt is None:
        raise UsageError(f"{out}: unknown output format (use .csv, .parquet or .jsonl)")
    check_outputs([out], args.captures)
    from sniffsync.sync.mergedfile import file_meta
    if len(args.captures) == 1 and file_meta(args.captures[0]) is not None:
        return _merged_file(args, names, out)        # a merged pcapng: the merge's table
    n_bad = _stream(args, names, out) if fmt in ("csv", "parquet") else _at_once(args, names, out, fmt)
    if n_bad and not args.quiet:
        print(f"sniffsync: {n_bad} frame(s) could not be fully decoded (see the 'bad' column)",
              file=sys.stderr)
    return 0


def _merged_file(args, names, out) -> int:
    """The merged table a ``sniffsync merge`` pcapng holds, with the merge's columns."""
    from sniffsync.export.tables import write_table
    from sniffsync.pipeline.run import load_merged
    frames = load_merged(args.captures).frames
    extra = [] if args.columns else [c for c in frames.columns if c not in names]
    write_table(frames[[*names, *extra]], None if out == "-" else out)
    return 0


def _batch_cols(n, cols, marks, names):
    """Every requested column of one batch (all-null where the file has none), with ``bad``."""
    import numpy as np

    from sniffsync.decode.table import bad_column
    bad = bad_column(n, marks)
    cols["bad"] = (bad, None)
    return {k: cols.get(k, _null(n, k)) for k in names}, int(np.count_nonzero(bad.codes >= 0))


def _stream(args, names, out) -> int:
    """CSV / Parquet: each batch converted on its decoding thread, written in order."""
    from sniffsync.export.stream import BatchWriter
    from sniffsync.decode.frames import iter_columns

    n_bad = 0
    with BatchWriter(out, names) as writer:
        def post(rec, n, cols, marks):
            cols, bad = _batch_cols(n, cols, marks, names)
            return bad, writer.convert(n, cols)
        for i, path in enumerate(args.captures):
            for bad, converted in iter_columns(path, i, names, post=post):   # problems: logged
                n_bad += bad
                writer.write(converted)
    return n_bad


def _at_once(args, names, out, fmt) -> int:
    """JSON lines: through one DataFrame."""
    from sniffsync.export.tables import write_columns
    from sniffsync.decode.frames import read_columns
    from sniffsync.decode.table import concat_cols

    parts, n_total, n_bad = [], 0, 0
    for i, path in enumerate(args.captures):
        _, n, cols, marks = read_columns(path, i, names, records=False)   # problems: logged
        cols, bad = _batch_cols(n, cols, marks, names)
        parts.append(cols)
        n_total += n
        n_bad += bad
    write_columns(n_total, concat_cols(parts), names, out, fmt)
    return n_bad


def _null(n: int, name: str):
    """An all-null column of ``n`` rows for ``name``."""
    import numpy as np

    from sniffsync.decode.schema import DTYPES
    from sniffsync.decode.table import Cat
    if DTYPES[name] in ("category", "string"):
        return Cat(np.full(n, -1, np.int32), []), None
    return np.zeros(n, np.int64), np.zeros(n, bool)
