"""Latency of every `sniffsync serve` endpoint under concurrent clients, over real loopback HTTP.

    python bench/server_load.py [CAPTURE ...] [--clients 8] [--requests 400] [--seed 1] [--json out.json]
    python bench/server_load.py --synthetic 1000000 ...     # a synthetic run of N PPDUs instead

The server (the same app and WSGI server as ``sniffsync serve``, loopback only) runs in a
child process so the clients' Python does not share its GIL. ``--clients`` threads send a
fixed list of ``--requests`` requests in total (one connection each, as the browser's
fetches do: the server closes after every answer), a mix per endpoint as a page session
makes them: the meta, timeline tiles and counter tracks at random zooms and pans, PPDU
details, "find next", the whole-run analysis and analyses of brushed ranges (each range asked
by two clients, as when a user brushes and the page re-asks). Prints p50 / p95 / max per endpoint; every answer must be
200 with a JSON body, or the run fails.

Without captures it uses the ns-3 hidden-node sniffers A/B/C of tests/data/captures;
``--synthetic N`` serves :func:`bench_tiles.synth_run` of N PPDUs (a larger run than the
test captures give) with the view ``serve`` builds (analysis index, counter tracks).
"""
from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing as mp
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = [ROOT / "tests/data/captures" / f"ns3-11n-ht20-hidden-sniffer{s}.pcap"
           for s in ("A-nearAP", "B-nearSTA1", "C-nearSTA2")]


def get(base: tuple, path: str, headers=None, timeout: float = 30):
    """(status, headers dict (lower-case names), body, seconds) of one GET on a new connection."""
    t = time.perf_counter()
    c = http.client.HTTPConnection(*base, timeout=timeout)
    try:
        c.request("GET", path, headers=headers or {})
        r = c.getresponse()
        body = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, body, time.perf_counter() - t
    finally:
        c.close()


def hammer(base: tuple, paths: list, clients: int, timeout: float = 60) -> list:
    """Send ``paths`` from ``clients`` threads (path i by thread i % clients); results in order.

    Each result is ``(path, status, headers, body, seconds)`` or ``(path, None, None, repr(error), s)``.
    Raises TimeoutError if the whole batch is not done within ``timeout`` seconds.
    """
    out = [None] * len(paths)

    def work(k):
        for i in range(k, len(paths), clients):
            try:
                out[i] = (paths[i], *get(base, paths[i], timeout=timeout))
            except Exception as e:            # recorded, the caller decides
                out[i] = (paths[i], None, None, repr(e), 0.0)

    threads = [threading.Thread(target=work, args=(k,), daemon=True) for k in range(clients)]
    end = time.monotonic() + timeout
    for th in threads:
        th.start()
    for th in threads:
        th.join(max(0.0, end - time.monotonic()))
    if any(th.is_alive() for th in threads):
        raise TimeoutError(f"{len(paths)} requests not done within {timeout} s")
    return out


def session_paths(meta: dict, n: int, seed: int = 1) -> list:
    """A fixed, shuffled mix of ``n`` GET paths over every endpoint for a run with ``meta``."""
    rng = np.random.default_rng(seed)
    span = meta["span_ns"]
    n_ppdus = max(meta["n_ppdus"], 1)
    kinds = rng.choice(["meta", "tile", "tile", "tile", "tracks", "tracks", "ppdu", "find", "analysis",
                        "range"], n)
    paths = []
    ranges = []
    for k in kinds:
        if k == "meta":
            paths.append("/api/meta")
        elif k == "tile":
            w = int(np.exp(rng.uniform(np.log(min(50_000, span)), np.log(span))))
            t0 = int(rng.integers(0, max(span - w, 0) + 1))
            lanes = rng.choice(["station", "sniffer"])
            paths.append(f"/api/tile?t0={t0}&t1={min(t0 + w, span + 1)}&px=1200&lanes={lanes}")
        elif k == "tracks":                  # as the page asks: one bucket per 2 px of a 1200 px plot
            w = int(np.exp(rng.uniform(np.log(min(50_000, span)), np.log(span))))
            t0 = int(rng.integers(0, max(span - w, 0) + 1))
            paths.append(f"/api/tracks?t0={t0}&t1={min(t0 + w, span + 1)}&n=600")
        elif k == "find":
            what = rng.choice(["collision", "failed", "unanswered", "event"])
            paths.append(f"/api/find?what={what}&after={int(rng.integers(0, span + 1))}")
        elif k == "ppdu":
            paths.append(f"/api/ppdu/{int(rng.integers(0, n_ppdus))}")
        elif k == "analysis":
            paths.append("/api/analysis")
        else:                                # a new brushed range, or the last one asked again
            if not ranges or rng.random() < 0.5:
                a, b = np.sort(rng.integers(0, span + 1, 2))
                ranges.append((int(a), int(max(b, a + 1))))
            a, b = ranges[-1]
            paths.append(f"/api/analysis?t0={a}&t1={b}")
    return paths


def _serve(captures, conn, synthetic=0):
    """Child process: analyse, build the app as `serve` does (loopback), report the port, serve."""
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "bench"))
    from sniffsync.pipeline.run import analyse
    from viz.analysis import analysis_data
    from viz.runview import RunView
    from web import create_app
    try:
        from web.server import make_server
        srv_of = lambda app: make_server(app, "127.0.0.1", 0)         # noqa: E731
    except ImportError:                                   # before web/server.py existed
        from werkzeug.serving import make_server
        srv_of = lambda app: make_server("127.0.0.1", 0, app, threaded=True)   # noqa: E731
    import logging
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    t = time.perf_counter()
    if synthetic:
        from bench_tiles import synth_run, synth_view
        view = synth_view(synth_run(synthetic))
        srv = srv_of(create_app(view))
        conn.send((srv.server_port, time.perf_counter() - t))
        srv.serve_forever()
        return
    run = analyse([str(p) for p in captures])
    try:
        from viz.analysis_index import AnalysisIndex
        analysis = AnalysisIndex(run)
    except ImportError:                                   # before viz/analysis_index.py existed
        analysis = lambda t0, t1: analysis_data(run, t0, t1)                    # noqa: E731
    view = RunView(run.ppdus, run.events, analysis, run.names, "bench")
    srv = srv_of(create_app(view))
    conn.send((srv.server_port, time.perf_counter() - t))
    srv.serve_forever()


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) the process ``pid`` used so far (0 where /proc is absent)."""
    try:
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def endpoint(path: str) -> str:
    p = path.split("?")[0]
    if p == "/api/analysis":
        return "analysis (range)" if "?" in path else "analysis (whole run)"
    return "ppdu" if p.startswith("/api/ppdu/") else p.rsplit("/", 1)[-1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("captures", nargs="*", default=[str(p) for p in DEFAULT])
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--requests", type=int, default=400, help="total requests (default 400)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--synthetic", type=int, default=0, metavar="N", help="serve a synthetic run of N PPDUs")
    ap.add_argument("--json")
    a = ap.parse_args(argv)

    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_serve, args=(a.captures, child, a.synthetic), daemon=True)
    proc.start()
    try:
        if not parent.poll(600):
            raise SystemExit("server did not start")
        port, build_s = parent.recv()
        base = ("127.0.0.1", port)
        status, _, body, _ = get(base, "/api/meta")
        meta = json.loads(body)
        get(base, "/")                                     # a first page load, untimed
        paths = session_paths(meta, a.requests, a.seed)
        cpu0, t = cpu_s(proc.pid), time.perf_counter()
        res = hammer(base, paths, a.clients, timeout=600)
        wall, cpu = time.perf_counter() - t, cpu_s(proc.pid) - cpu0
    finally:
        proc.terminate()
        proc.join(10)
    bad = [r for r in res if r[1] != 200]
    rows = {}
    for path, status, _, body, s in res:
        rows.setdefault(endpoint(path), []).append(s * 1000)
    out = {"clients": a.clients, "requests": len(res), "wall_s": round(wall, 2), "errors": len(bad),
           "n_ppdus": meta["n_ppdus"], "build_s": round(build_s, 2), "server_cpu_s": round(cpu, 2),
           "load": os.getloadavg()[0], "cores": os.cpu_count(), "endpoints": {}}
    print(f"{meta['n_ppdus']} PPDUs (view built in {build_s:.1f} s); {len(res)} requests from {a.clients} clients in {wall:.2f} s; "
          f"{len(bad)} not 200")
    print(f"server CPU {cpu:.2f} s ({1e3 * cpu / max(len(res), 1):.2f} ms a request); {os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.1f}")
    print(f"{'endpoint':22} {'n':>5} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}")
    for name, ms in sorted(rows.items()):
        ms = np.array(ms)
        r = {"n": len(ms), "p50_ms": round(float(np.percentile(ms, 50)), 1),
             "p95_ms": round(float(np.percentile(ms, 95)), 1), "max_ms": round(float(ms.max()), 1)}
        out["endpoints"][name] = r
        print(f"{name:22} {r['n']:5d} {r['p50_ms']:8.1f} {r['p95_ms']:8.1f} {r['max_ms']:8.1f}")
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))
    for r in bad[:5]:
        print("error:", r[0], r[1], r[3][:200], file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
