"""Benchmark: `sniffsync fairness` vs tshark's TCP analysis on the same 1M-packet capture.

The wired capture is built by tiling the TCP packets of the ns-3 hidden-node capture (sniffer A)
as Ethernet/IPv4/TCP frames (headers + TCP timestamp option, payload not captured:
caplen 66, original length kept): tile k is shifted by k x the capture's span in time
and by k x each direction's sequence span in seq/ack/TSval, so the flows continue.
``--wifi``: the 802.11 capture of ``bench/make_capture.py`` instead (radiotap, A-MPDUs,
the test captures pooled and tiled; the PPDU grouping and the cross-layer view run too).

    python bench/bench_fairness.py [--packets 1000000] [--wifi] [--repeat 3] [--phases] [--keep PATH]
                                   [--no-compile] [--peer TREE]

``--peer TREE``: also time ``sniffsync fairness`` of another checkout (e.g. the code
before a change: ``git worktree add /tmp/before HEAD~1``), interleaved with ours, and
check that both write the same report bytes.

Both sides are whole processes, timed in the same run, interleaved (ours, tshark, ours,
tshark, ..., then the rest of ours; medians): tshark with the tcp.analysis fields the
fairness report needs, and
``python -m sniffsync fairness`` (read + analyse + report). ``--phases`` adds in-process
phase timers (minimum over the repeats) of the command's stages. Each command's CPU time
(user + sys) is printed too: under load the wall ratio follows the share of the two cores
each process gets, the CPU ratio the work.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "..", "tests", "data", "captures", "ns3-11n-ht20-hidden-snifferA-nearAP.pcap")
HDR = 14 + 20 + 32            # Ethernet + IPv4 + TCP with NOP NOP TS


def _ip_int(text) -> np.ndarray:
    parts = np.array([list(map(int, t.split("."))) for t in text], np.int64)
    return (parts[:, 0] << 24) | (parts[:, 1] << 16) | (parts[:, 2] << 8) | parts[:, 3]


def build_capture(path: str, packets: int) -> int:
    """Write the tiled Ethernet pcap; returns the number of packets written."""
    import sniffsync
    f = sniffsync.read_capture(SRC)
    f = f[(f["ip_proto"] == 6).fillna(False).to_numpy() & f["tcp_seq"].notna().to_numpy()]
    n0 = len(f)
    tiles = -(-packets // n0)
    ts = f["ts_ns"].to_numpy()
    span_ns = int(ts.max() - ts.min()) + 1_000_000
    src = _ip_int(f["ip_src"].astype(str)); dst = _ip_int(f["ip_dst"].astype(str))
    sport = f["sport"].to_numpy(np.int64); dport = f["dport"].to_numpy(np.int64)
    seq = f["tcp_seq"].to_numpy(np.int64); ack = f["tcp_ack"].to_numpy(np.int64)
    plen = f["tcp_payload_len"].to_numpy(np.int64)
    tsval = f["tcp_tsval"].to_numpy(np.int64, na_value=0); tsecr = f["tcp_tsecr"].to_numpy(np.int64, na_value=0)
    # per-direction sequence span, so tile k continues where tile k-1 ended
    key = (src << 16) | sport
    span = {k: int((seq[key == k] + plen[key == k]).max() - seq[key == k].min()) + 1 for k in np.unique(key)}
    seq_span = np.array([span[k] for k in key], np.int64)
    rkey = (dst << 16) | dport
    ack_span = np.array([span.get(k, 0) for k in rkey], np.int64)
    ts_span = int(tsval.max() - tsval.min()) + 1
    tiles += 1
    k = np.repeat(np.arange(tiles, dtype=np.int64), n0)
    i = np.tile(np.arange(n0), tiles)
    # one connection across tiles: SYNs only in the first tile, FINs only in the last
    fl = f["tcp_flags"].to_numpy(np.int64)[i]
    keep = ~(((fl & 0x02) > 0) & (k > 0)) & ~(((fl & 0x01) > 0) & (k < tiles - 1))
    keep &= np.cumsum(keep) <= packets
    k, i = k[keep], i[keep]
    n = len(i)
    rec = np.zeros((n, 16 + HDR), np.uint8)

    def put(col, val, width, big=True):
        shifts = 8 * np.arange(width)
        b = np.asarray(val, np.int64)[:, None] >> (shifts[::-1] if big else shifts)
        rec[:, col:col + width] = (b & 0xFF).astype(np.uint8)

    t = ts[i] + k * span_ns
    put(0, t // 1_000_000_000, 4, big=False); put(4, (t % 1_000_000_000) // 1000, 4, big=False)
    put(8, np.full(n, HDR), 4, big=False); put(12, HDR + plen[i], 4, big=False)
    e = 16
    rec[:, e + 12], rec[:, e + 13] = 0x08, 0x00
    ip = e + 14
    rec[:, ip] = 0x45
    put(ip + 2, 20 + 32 + plen[i], 2); rec[:, ip + 8] = 64; rec[:, ip + 9] = 6
    put(ip + 12, src[i], 4); put(ip + 16, dst[i], 4)
    tcp = ip + 20
    put(tcp, sport[i], 2); put(tcp + 2, dport[i], 2)
    put(tcp + 4, (seq[i] + k * seq_span[i]) & 0xFFFFFFFF, 4)
    put(tcp + 8, (ack[i] + k * ack_span[i]) & 0xFFFFFFFF, 4)
    rec[:, tcp + 12] = 0x80
    put(tcp + 13, f["tcp_flags"].to_numpy(np.int64)[i] & 0xFF, 1)
    put(tcp + 14, f["tcp_win"].to_numpy(np.int64, na_value=0)[i], 2)
    rec[:, tcp + 20], rec[:, tcp + 21], rec[:, tcp + 22], rec[:, tcp + 23] = 1, 1, 8, 10
    put(tcp + 24, (tsval[i] + k * ts_span) & 0xFFFFFFFF, 4)
    put(tcp + 28, (tsecr[i] + k * ts_span) & 0xFFFFFFFF, 4)
    header = np.array([0xa1b2c3d4], "<u4").tobytes() + np.array([2, 4], "<u2").tobytes() + \
        np.array([0, 0, 65535, 1], "<u4").tobytes()
    with open(path, "wb") as fh:
        fh.write(header)
        fh.write(rec.tobytes())
    return n


def compile_package() -> None:
    """Byte-compile sniffsync (and airtime) as an installed package has it.

    An install compiles bytecode, and Python caches it on first import; a machine with
    PYTHONDONTWRITEBYTECODE=1 (this one) never writes it, so every run would compile
    ~5,000 lines again (~40 ms): not the cost a user pays on the second run.
    """
    import compileall
    import importlib.util
    for name in ("sniffsync", "airtime"):
        spec = importlib.util.find_spec(name)
        if spec and spec.submodule_search_locations:
            for d in spec.submodule_search_locations:
                compileall.compile_dir(d, quiet=1)
    print("bytecode: compiled first (PYTHONDONTWRITEBYTECODE=%s)" % os.environ.get("PYTHONDONTWRITEBYTECODE", ""))


def _count_records(path: str) -> int:
    """Records of an existing capture (the reader's walk: no decoding)."""
    from sniffsync.io.capture import read_records
    return len(read_records(path).caplen)


def build_wifi_capture(path: str, frames: int) -> int:
    """The 802.11 capture of ``bench/make_capture.py``; returns the number of frames."""
    subprocess.run([sys.executable, os.path.join(HERE, "make_capture.py"), path, "--frames", str(frames)],
                   check=True, stdout=subprocess.DEVNULL)
    return frames


CPU: dict = {}                 # command label -> CPU seconds (user + sys) of each run


def timed(cmd, env=None, label=None) -> float:
    """Wall seconds of one run; its CPU seconds (children's user + sys) go to ``CPU[label]``:
    on a loaded machine the wall time follows the share of the cores a process gets, the
    CPU time what it had to do."""
    import resource
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    # from a neutral directory: `python -m` puts the working directory first on sys.path,
    # so run from a checkout it would time that checkout whatever PYTHONPATH says
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env=env, cwd=tempfile.gettempdir())
    wall = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.setdefault(label, []).append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
    return wall


def _tree_env(tree: str) -> dict:
    """Environment running the ``sniffsync`` of checkout ``tree``."""
    return dict(os.environ, PYTHONPATH=os.path.abspath(tree))


def phases(path: str, repeat: int, wifi: bool = False) -> list[tuple[str, float]]:
    """Minimum wall time of each stage of ``sniffsync fairness`` in this process."""
    import io

    from sniffsync.io.capture import read_records
    from sniffsync.cli.fairness import COLUMNS
    from sniffsync.fairness.core import Capture, fairness_tables
    from sniffsync.fairness.report import write_json
    best: dict = {}

    def tick(name, t0):
        best[name] = min(best.get(name, float("inf")), time.perf_counter() - t0)
        return time.perf_counter()

    from sniffsync.cli.fairness import _captures
    from sniffsync.decode.frames import decode_columns
    for _ in range(repeat):
        t, gen = time.perf_counter(), None
        if wifi:                     # as the command reads it: narrow, walk and decode overlapped
            gen = _captures([path])  # (closing it deletes the parked columns: after the analysis)
            caps = [next(gen)]
            t = tick("read (walk + decode, narrow)", t)
        else:
            rec = read_records(path)
            t = tick("read_records (record walk)", t)
            cols = decode_columns(rec, 0, COLUMNS)
            t = tick("decode_columns", t)
            caps = [Capture.from_columns(*cols, COLUMNS)]
        runs, summary = fairness_tables(caps)
        t = tick("analysis (fairness_tables)", t)
        if gen is not None:
            gen.close()
        write_json(io.StringIO(), runs, summary)
        tick("JSON report", t)
    return list(best.items())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--packets", type=int, default=1_000_000)
    ap.add_argument("--wifi", action="store_true", help="an 802.11 capture (bench/make_capture.py)")
    ap.add_argument("--peer", metavar="TREE", help="also time the sniffsync of this checkout")
    ap.add_argument("--repeat", type=int, default=3, help="runs of sniffsync (median reported)")
    ap.add_argument("--tshark-repeat", type=int, default=1, help="runs of tshark (median reported)")
    ap.add_argument("--keep", help="write the capture here and keep it (an existing file is reused, not rewritten)")
    ap.add_argument("--phases", action="store_true", help="also time the stages in this process")
    ap.add_argument("--no-compile", action="store_true",
                    help="do not byte-compile sniffsync first (each run then compiles its modules "
                         "when PYTHONDONTWRITEBYTECODE is set)")
    args = ap.parse_args(argv)
    if not args.no_compile:
        compile_package()
        if args.peer:
            import compileall
            for name in ("sniffsync", "airtime"):
                compileall.compile_dir(os.path.join(args.peer, name), quiet=1)
    tshark = shutil.which("tshark")
    tmp = tempfile.mkdtemp()
    path = args.keep or os.path.join(tmp, "busy.pcap" if args.wifi else "tiled_tcp.pcap")
    if args.keep and os.path.exists(path):       # reused as it is (it may be read-only)
        n = _count_records(path)
    else:
        n = (build_wifi_capture if args.wifi else build_capture)(path, args.packets)
    print(f"capture: {n} {'802.11 frames' if args.wifi else 'packets'}, {os.path.getsize(path) / 1e6:.0f} MB "
          f"({path}); {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    ours_cmd = [sys.executable, "-m", "sniffsync", "fairness", path, "-o", os.path.join(tmp, "r.json")]
    peer_cmd = ours_cmd[:-1] + [os.path.join(tmp, "peer.json")]
    tshark_cmd = [tshark, "-r", path, "-T", "fields", "-e", "frame.number",
                  "-e", "tcp.analysis.retransmission", "-e", "tcp.analysis.fast_retransmission",
                  "-e", "tcp.analysis.ack_rtt", "-e", "tcp.analysis.bytes_in_flight"]
    # interleaved (ours, tshark, ours, tshark, ...): both medians see the same machine
    ours, theirs, peer = [], [], []
    for i in range(max(args.repeat, args.tshark_repeat if tshark else 0)):
        if i < args.repeat:
            ours.append(timed(ours_cmd, _tree_env(os.path.join(HERE, "..")), label="ours"))
            if args.peer:
                peer.append(timed(peer_cmd, _tree_env(args.peer), label="peer"))
        if tshark and i < args.tshark_repeat:
            theirs.append(timed(tshark_cmd, label="tshark"))
    t_ours = statistics.median(ours)
    print(f"sniffsync fairness: {t_ours:.2f} s  ({n / t_ours:,.0f} packets/s, median of {len(ours)}: "
          + ", ".join(f"{t:.2f}" for t in ours) + ")")
    if theirs:
        t_ts = statistics.median(theirs)
        print(f"tshark tcp.analysis: {t_ts:.2f} s  ({n / t_ts:,.0f} packets/s, median of {len(theirs)}: "
              + ", ".join(f"{t:.2f}" for t in theirs) + ")")
        print(f"speed-up: {t_ts / t_ours:.1f}x")
    if peer:
        t_peer = statistics.median(peer)
        with open(os.path.join(tmp, "r.json"), "rb") as a, open(os.path.join(tmp, "peer.json"), "rb") as b:
            same = a.read() == b.read()
        print(f"peer {args.peer}: {t_peer:.2f} s (median of {len(peer)}: " + ", ".join(f"{t:.2f}" for t in peer)
              + f"){f'; tshark / peer: {t_ts / t_peer:.1f}x' if theirs else ''}; same report bytes: {same}")
    cpu = {k: statistics.median(v) for k, v in CPU.items()}
    print("CPU s (user + sys, medians): " + ", ".join(f"{k} {v:.2f}" for k, v in cpu.items())
          + (f"; tshark / ours: {cpu['tshark'] / cpu['ours']:.1f}x" if "tshark" in cpu else "")
          + (f"; tshark / peer: {cpu['tshark'] / cpu['peer']:.1f}x" if "tshark" in cpu and "peer" in cpu else ""))
    print(f"load after: {os.getloadavg()[0]:.1f}")
    if args.phases:
        for name, sec in phases(path, args.repeat, args.wifi):
            print(f"  {name:28s} {sec * 1e3:7.0f} ms")
    if not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
