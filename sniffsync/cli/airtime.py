"""``sniffsync airtime``: one row per PPDU with its exact on-air duration, and a per-station table."""

HELP = "PPDUs with exact airtime (-o ppdus.csv) and a per-station airtime table"

COLUMNS = ["ppdu", "start_us", "end_us", "airtime_us", "ta", "ra", "kind", "n_mpdus", "psdu_bytes",
           "phy", "mcs", "nss", "bw_mhz", "gi_ns", "retries"]


def add_arguments(p):
    from sniffsync.cli.common import add_analysis_inputs, add_output
    add_analysis_inputs(p)
    add_output(p, "-o", "--output", help="PPDU table: .csv, .parquet or .jsonl")
    p.add_argument("--all-columns", action="store_true", help="write every PPDU column, not the standard set")


def run(args) -> int:
    from airtime.summary import station_airtime

    from sniffsync.export.tables import write_table
    from sniffsync.cli.common import air_of, mac, print_table

    frames, (ppdus, _, tsft_at) = air_of(args)
    if args.output:
        write_table(ppdus if args.all_columns else ppdus[[c for c in COLUMNS if c in ppdus]], args.output)
    st = station_airtime(ppdus)
    st["ta"] = [mac(v) for v in st["ta"]]
    st = st.rename(columns={"share_pct": "airtime_%", "mpdus_per_ampdu": "mpdus/ampdu"})
    print(f"{len(ppdus)} PPDUs from {len(frames)} frames; TSFT marks: {tsft_at}")
    print_table(st[["ta", "ppdus", "busy_us", "airtime_%", "bytes", "mpdus/ampdu", "mcs_mix"]])
    return 0
