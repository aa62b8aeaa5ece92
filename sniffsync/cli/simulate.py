"""``sniffsync simulate``: write multi-sniffer captures of a built-in scenario plus ground truth."""
from __future__ import annotations

HELP = "simulate a Wi-Fi scenario: per-sniffer pcaps + truth files (hidden-node, fairness, clean)"


def add_arguments(parser) -> None:
    from sniffsync.cli.common import add_quiet, nonnegative_int, positive_float
    parser.add_argument("scenario", help="hidden-node, fairness or clean (see docs/scenarios.md)")
    parser.add_argument("-o", "--out", required=True, metavar="DIR", help="output directory")
    parser.add_argument("--seconds", type=positive_float, default=None,
                        help="simulated seconds (default: the scenario's)")
    parser.add_argument("--seed", type=nonnegative_int, default=None,
                        help="random seed >= 0 (same seed, same bytes)")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                        help="override a parameter, e.g. udp_ac=vi, mcs=3, nodes.STA1.rts=false, "
                             "sniffers.*.jitter_us=5 (repeatable)")
    add_quiet(parser, "no summary line")


def run(args) -> int:
    import time

    from sniffsync.sim import scenario, simulate
    cfg = scenario(args.scenario, args.sets, seconds=args.seconds, seed=args.seed)
    t0 = time.perf_counter()
    summary = simulate(cfg, args.out)
    took = time.perf_counter() - t0
    if args.quiet:
        return 0
    snif = ", ".join(f"{k} {v} frames" for k, v in summary["sniffers"].items())
    print(f"{cfg['name']}: {cfg['seconds']:g} s simulated in {took:.1f} s; {summary['ppdus']} PPDUs, "
          f"{summary['mpdus']} data MPDUs, {summary['rts']} RTS "
          f"({summary['rts_unanswered']} unanswered); {snif} -> {args.out}")
    return 0
