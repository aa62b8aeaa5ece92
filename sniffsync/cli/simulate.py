"""``sniffsync simulate``: write multi-sniffer captures of a built-in scenario plus ground truth."""
from __future__ import annotations

HELP = "simulate a Wi-Fi scenario: per-sniffer pcaps + truth files (hidden-node, fairness, clean)"


def add_arguments(parser) -> None:
    parser.add_argument("scenario", help="hidden-node, fairness or clean (see docs/scenarios.md)")
    parser.add_argument("-o", "--out", required=True, help="output directory")
    parser.add_argument("--seconds", type=float, default=None, help="simulated seconds")
    parser.add_argument("--seed", type=int, default=None, help="random seed (same seed, same bytes)")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                        help="override a parameter, e.g. udp_ac=vi, mcs=3, nodes.STA1.rts=false, "
                             "sniffers.*.jitter_us=5 (repeatable)")


def run(args) -> int:
    import time

    from sniffsync.sim import scenario, simulate
    cfg = scenario(args.scenario, args.sets, seconds=args.seconds, seed=args.seed)
    t0 = time.perf_counter()
    summary = simulate(cfg, args.out)
    took = time.perf_counter() - t0
    snif = ", ".join(f"{k} {v} frames" for k, v in summary["sniffers"].items())
    print(f"{cfg['name']}: {cfg['seconds']:g} s simulated in {took:.1f} s; {summary['ppdus']} PPDUs, "
          f"{summary['mpdus']} data MPDUs, {summary['rts']} RTS "
          f"({summary['rts_unanswered']} unanswered); {snif} -> {args.out}")
    return 0
