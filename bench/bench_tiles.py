"""Timeline tile latency on a synthetic 10M-PPDU run, through the Flask test client.

    python bench/bench_tiles.py [--ppdus 10000000] [--requests 200] [--seed 1] [--json out.json]

The run is built vectorised: ~12 stations, minutes long, a realistic mix of kinds (A-MPDU
data with its Block-Ack, RTS/CTS pairs, ACKed singles, beacons), airtimes from tens of µs
to a few ms, and ~0.5 % of PPDUs carrying an event. Each request picks a random lane mode,
a zoom from the whole run down to 50 µs and a random pan; the time includes JSON encoding.
"""
from __future__ import annotations

import argparse
import json
import resource
import time

import numpy as np
import pandas as pd

KIND_MIX = {"data": 0.45, "ba": 0.2, "ack": 0.12, "rts": 0.08, "cts": 0.08, "beacon": 0.03,
            "mgmt": 0.02, "bar": 0.01, "other": 0.01}
# airtime range (µs) per kind
AIRTIME_US = {"data": (60, 5400), "ba": (32, 44), "ack": (28, 44), "rts": (28, 52), "cts": (28, 44),
              "beacon": (200, 400), "mgmt": (40, 300), "bar": (32, 44), "other": (20, 200)}
EVENTS = {"mpdu_failed": 0.003, "rts_unanswered": 0.001, "rts_cts_collision": 0.0005, "overlap": 0.0005}


def synth(n: int, n_sta: int = 12, seed: int = 1, span_s: float = 600):
    """(ppdus, events) DataFrames: ``n`` PPDUs with uniform random starts over ``span_s``
    (several co-located BSSs: PPDUs of different stations overlap, as in a dense testbed)."""
    rng = np.random.default_rng(seed)
    kinds = np.array(list(KIND_MIX))
    kind = rng.choice(len(kinds), n, p=list(KIND_MIX.values()))
    lo = np.array([AIRTIME_US[k][0] for k in kinds])[kind]
    hi = np.array([AIRTIME_US[k][1] for k in kinds])[kind]
    air_ns = (lo + (hi - lo) * rng.random(n) ** 2).astype(np.int64) * 1000
    start = 1_700_000_000_000_000_000 + np.sort(rng.integers(0, int(span_s * 1e6), n)) * 1000
    ta = pd.array(0x020000000000 + rng.integers(1, n_sta + 1, n), dtype="UInt64")
    ta[(kinds[kind] == "cts") | (kinds[kind] == "ack")] = pd.NA       # responses carry no TA
    ppdus = pd.DataFrame({
        "ppdu": np.arange(n), "start_ns": start, "end_ns": start + air_ns, "ta": ta,
        "ra": pd.array(0x020000000000 + rng.integers(1, n_sta + 1, n), dtype="UInt64"),
        "kind": pd.Categorical.from_codes(kind, kinds), "sniffer": np.zeros(n, np.int16),
        "heard_mask": rng.integers(1, 8, n)})
    n_ev = {k: int(n * f) for k, f in EVENTS.items()}
    ev_ppdu = rng.choice(n, sum(n_ev.values()), replace=False)
    events = pd.DataFrame({"kind": np.repeat(list(n_ev), list(n_ev.values())), "ppdu": ev_ppdu,
                           "start_ns": start[ev_ppdu]})
    return ppdus, events


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ppdus", type=int, default=10_000_000)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--px", type=int, default=1200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--span-s", type=float, default=600, help="run length (default 10 minutes)")
    ap.add_argument("--json")
    a = ap.parse_args(argv)

    from viz.runview import RunView
    from web import create_app

    t = time.perf_counter()
    ppdus, events = synth(a.ppdus, seed=a.seed, span_s=a.span_s)
    synth_s = time.perf_counter() - t
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t = time.perf_counter()
    view = RunView(ppdus, events, {"none": True}, ["A", "B", "C"], "bench")
    build_s = time.perf_counter() - t
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    client = create_app(view, {"TESTING": True}).test_client()
    span = view.meta()["span_ns"]
    rng = np.random.default_rng(a.seed + 1)
    # zoom: log-uniform visible width from the whole run down to 50 µs
    widths = np.exp(rng.uniform(np.log(50_000), np.log(span), a.requests)).astype(np.int64)
    widths[:5] = span                                    # the first view is always the whole run
    t0s = (rng.random(a.requests) * (span - widths)).astype(np.int64)
    modes = rng.choice(["station", "station", "station", "sniffer"], a.requests)
    ms, kinds, sizes = [], [], []
    for w, t0, mode in zip(widths, t0s, modes):
        t = time.perf_counter()
        r = client.get(f"/api/tile?t0={t0}&t1={t0 + w}&px={a.px}&lanes={mode}")
        ms.append((time.perf_counter() - t) * 1e3)
        assert r.status_code == 200, r.data[:200]
        kinds.append(r.get_json()["mode"])
        sizes.append(len(r.data))
    ms = np.array(ms)
    out = {"ppdus": a.ppdus, "events": len(events), "span_s": round(span / 1e9, 1),
           "lanes": len(view.meta()["lanes"]["station"]), "requests": a.requests, "px": a.px,
           "synth_s": round(synth_s, 2), "build_s": round(build_s, 2),
           "rss_tables_mb": round(rss0), "rss_after_build_mb": round(rss1),
           "p50_ms": round(float(np.percentile(ms, 50)), 1), "p95_ms": round(float(np.percentile(ms, 95)), 1),
           "max_ms": round(float(ms.max()), 1), "whole_run_ms": round(float(np.median(ms[:5])), 1),
           "items_tiles": kinds.count("items"), "bucket_tiles": kinds.count("buckets"),
           "p95_kb": round(float(np.percentile(sizes, 95)) / 1e3, 1), "target_p95_ms": 50}
    print(json.dumps(out, indent=1))
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(out, fh, indent=1)
    return 0 if out["p95_ms"] <= 50 else 1


if __name__ == "__main__":
    raise SystemExit(main())
