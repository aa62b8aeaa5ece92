"""``sniffsync detect``: RTS/CTS collisions, unanswered RTS, overlaps, failed MPDUs, retries."""

HELP = "find RTS/CTS collisions, unanswered RTS, overlaps, failed MPDUs (-o events.csv)"


def add_arguments(p):
    from sniffsync.cli.common import add_analysis_inputs, add_output, nonnegative_float
    add_analysis_inputs(p)
    add_output(p, "-o", "--output", help="events: .csv, .parquet or .jsonl")
    add_output(p, "--summary", help="counters and histograms as JSON")
    add_output(p, "--mpdus", help="per-MPDU outcomes (.csv/.parquet/.jsonl)")
    p.add_argument("--slack-us", type=nonnegative_float, default=6.0,
                   help="tolerance on response timing (µs, >= 0; default 6)")


def run(args) -> int:
    import json

    from airtime.detect import detect
    from airtime.summary import detect_summary

    from sniffsync.decode.quality import reception_rows
    from sniffsync.export.tables import write_table
    from sniffsync.cli.common import air_of, mac, print_table
    from sniffsync.io.atomic import atomic_output

    frames, (ppdus, frame_ppdu, _) = air_of(args)
    res = detect(frames, ppdus, frame_ppdu, slack_ns=int(args.slack_us * 1000))
    summ = detect_summary(ppdus, res)
    summ["reception"] = reception_rows(frames)          # bad-FCS frames per sniffer
    if args.output:
        write_table(res.events, args.output)
    if args.mpdus:
        write_table(res.mpdus, args.mpdus)
    if args.summary:
        with atomic_output(args.summary, "w") as fh:
            json.dump({"summary": summ, "stations": json.loads(
                res.stations.assign(ta=[mac(v) for v in res.stations.ta]).to_json(orient="records"))},
                fh, indent=1)
    print("events: " + ", ".join(f"{k} {v}" for k, v in summ["counts"].items()))
    print(("bad FCS (analysed: --keep-bad-fcs): " if args.keep_bad_fcs else "bad FCS (not analysed): ") + ", ".join(
        f"sniffer {r['sniffer']} {r['fcs_bad']} of {r['fcs_checked']} checked "
        f"({r['fcs_bad_known_ta']} from known stations)" for r in summ["reception"]))
    st = res.stations.copy()
    st["ta"] = [mac(v) for v in st["ta"]]
    cols = [c for c in ("ta", "ppdus", "rts", "cts_received", "cts_per_rts", "rts_cts_collisions", "mpdus",
                        "mpdu_retries", "mpdus_failed", "mpdus_lost", "ba_missing", "fcs_bad") if c in st]
    print_table(st[cols])
    return 0
