"""``sniffsync fairness``: TCP/UDP flows, windowed goodput, Jain's index and its CDF per run."""

HELP = "per-flow goodput, retransmissions, RTT, Jain's fairness index per window (one CDF per capture)"


def add_arguments(p):
    p.add_argument("captures", nargs="+", metavar="CAPTURE", help="one capture per run (pcap/pcapng)")
    p.add_argument("--window", type=float, default=0.4, metavar="S", help="window length, seconds (0.4)")
    p.add_argument("--step", type=float, default=0.2, metavar="S", help="window step, seconds (0.2)")
    p.add_argument("--bloat-ms", type=float, default=50.0, metavar="MS",
                   help="queueing delay p95 that flags a busy window (50)")
    p.add_argument("--origin", type=float, metavar="EPOCH_S",
                   help="start of the window grid (Unix seconds; default: each run's first data segment)")
    p.add_argument("--no-dedup", action="store_true",
                   help="keep 802.11 MAC retries of one MPDU as separate segments (as Wireshark does)")
    p.add_argument("-o", "--output", metavar="report.json", help="write the JSON report")
    p.add_argument("--csv", metavar="DIR", help="write flows.csv, windows.csv, jain.csv, rtt.csv into DIR")


def _ns(seconds: float) -> int:
    return int(round(seconds * 1e9))


def report_dict(res) -> dict:
    """The JSON report: flows, per-window series, Jain series, CDF points, summaries."""
    def recs(df):
        return [] if df is None or df.empty else \
            df.astype(object).where(df.notna(), None).to_dict(orient="records")
    return {"summary": res.summary, "flows": recs(res.flows), "windows": recs(res.windows),
            "jain": recs(res.jain), "cdf": recs(res.cdf), "stations": recs(res.stations)}


def _flow_lines(res) -> list[str]:
    head = (f"{'run':>3} {'flow':>4} {'dir':>3} {'proto':5} {'source':>21} {'destination':>21} "
            f"{'goodput Mb/s':>12} {'bytes':>10} {'retx':>5} {'fast':>4} {'rto':>4} {'ooo':>4} "
            f"{'MACdup':>6} {'RTT p50 ms':>10}")
    lines = [head]
    for r in res.flows[res.flows["bytes"] > 0].itertuples():
        dur = max(r.last_ns - r.first_ns, 1)
        lines.append(
            f"{r.run:>3} {r.flow:>4} {r.dir:>3} {r.proto:5} {f'{r.src}:{r.sport}':>21} "
            f"{f'{r.dst}:{r.dport}':>21} {r.goodput_bytes * 8e3 / dur:>12.2f} {r.bytes:>10} "
            f"{r.retransmissions:>5} {r.retx_fast:>4} {r.retx_timeout:>4} {r.out_of_order:>4} "
            f"{r.mac_duplicates:>6} {(r.rtt_median_ns / 1e6 if r.rtt_median_ns >= 0 else float('nan')):>10.2f}")
    return lines


def run(args) -> int:
    import json
    import os

    from ..errors import UsageError
    from ..fairness import fairness
    from ..frames import read_capture

    if args.window <= 0 or args.step <= 0:
        raise UsageError("--window and --step must be positive")
    frames = [read_capture(p, sniffer=0, columns=[   # what flows, RTT and PPDU grouping read
        "sniffer", "frame", "ts_ns", "caplen", "wirelen", "linktype", "bad", "rt_len", "mpdu_len",
        "tsft_us", "rt_flags", "fcs_bad", "short_preamble", "rate_kbps", "freq_mhz", "signal_dbm",
        "phy", "mcs", "nss", "bw_mhz", "gi_ns", "ldpc", "stbc", "ness", "ht_format", "he_format",
        "he_ltf_size", "he_n_ltf", "ampdu_ref", "ampdu_last", "type_subtype", "retry", "duration_us",
        "ra", "ta", "seq", "ethertype", "ip_src", "ip_dst", "ip_proto", "ip_len", "sport", "dport",
        "tcp_seq", "tcp_ack", "tcp_flags", "tcp_win", "tcp_wscale", "tcp_mss", "tcp_payload_len",
        "tcp_tsval", "tcp_tsecr", "tcp_sack", "udp_len"]) for p in args.captures]
    res = fairness(frames, _ns(args.window), _ns(args.step),
                   t0_ns=None if args.origin is None else int(round(args.origin * 1e9)),
                   qdelay_threshold_ns=_ns(args.bloat_ms / 1000), dedup=not args.no_dedup)
    print("\n".join(_flow_lines(res)))
    below = res.summary["unfair_below"]
    for s, path in zip(res.summary["runs"], args.captures):
        med = "n/a" if s["median"] is None else f"{s['median']:.3f}"
        p10 = "n/a" if s["p10"] is None else f"{s['p10']:.3f}"
        share = s[f"share_below_{below}"]
        share = "n/a" if share is None else f"{share:.0%}"
        print(f"run {s['run']} {os.path.basename(path)}: Jain over {s['windows']} windows "
              f"(>= 2 active flows): median {med}, p10 {p10}, below {below}: {share}; "
              f"bufferbloat windows: {s['bloat_windows']}")
    if args.output:
        with open(args.output, "w") as fh:
            json.dump(report_dict(res), fh, indent=1, default=str)
    if args.csv:
        os.makedirs(args.csv, exist_ok=True)
        res.flows.to_csv(os.path.join(args.csv, "flows.csv"), index=False)
        res.windows.to_csv(os.path.join(args.csv, "windows.csv"), index=False)
        res.jain.to_csv(os.path.join(args.csv, "jain.csv"), index=False)
        res.rtt.to_csv(os.path.join(args.csv, "rtt.csv"), index=False)
    return 0
