"""Benchmark ``sniffsync merge`` against ``mergecap -w`` on the same three captures.

    python bench/bench_merge.py --frames 1000000 --repeat 3

Builds three captures by tiling the ns-3 hidden-node sniffers A, B and C (one source
each, the same number of tiles, so together they hold 3 x ``--frames`` frames over one
shared span) and gives B and C their own clocks, like real sniffers: an offset of hours,
a drift of +40 / -35 ppm, 0.3 µs Gaussian jitter per PPDU, and 2 % missed frames in every
file. Each tile's beacons get their true Timestamp field (shifted like the tile), so the
beacon keys stay unique as in a real capture. Then it runs, each in its own process and
alternately, ``mergecap -w`` (time-order merge, no sync, no de-duplication) and
``sniffsync merge -o ... --report ...`` (sync + match + pcapng), timed by wall clock
with peak RSS from ``wait4``, each run after an untimed ``sync`` (no write-back of the
run before shares its cores), and reports medians, then the md5 of the merged file
(``--expect-md5``: fail when the bytes differ from a golden run's).
"""
from __future__ import annotations

import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from make_capture import GAP_US, LINKTYPE_RADIOTAP, SOURCES, build_pool  # noqa: E402

NAMES = ["ns3-11n-ht20-hidden-snifferA-nearAP", "ns3-11n-ht20-hidden-snifferB-nearSTA1",
         "ns3-11n-ht20-hidden-snifferC-nearSTA2"]
# per sniffer: clock offset (µs), drift (ppm), jitter sd (µs), fraction of frames missed
CLOCKS = [dict(offset_us=0, ppm=0.0, jitter_us=0.0, drop=0.02),
          dict(offset_us=3_600_000_123, ppm=40.0, jitter_us=0.3, drop=0.02),
          dict(offset_us=7_200_000_777, ppm=-35.0, jitter_us=0.3, drop=0.02)]


def _beacon_tsf_at(tile: np.ndarray, hdr_off: np.ndarray) -> np.ndarray:
    """Offset of the beacon Timestamp field of each record (-1: not a beacon).

    802.11 header right after the radiotap header (it_len, u16 at +2); frame control
    byte 0 == 0x80 is a beacon; its fixed Timestamp (u64 µs) follows the 24-byte header.
    """
    rt = hdr_off + 16
    rt_len = tile[rt + 2].astype(np.int64) | tile[rt + 3].astype(np.int64) << 8
    fc = rt + rt_len
    ok = fc < len(tile)
    beacon = np.zeros(len(hdr_off), bool)
    beacon[ok] = tile[fc[ok]] == 0x80
    return np.where(beacon, fc + 24, -1)


def write_skewed(out: Path, source: Path, n_tiles: int, span_us: int, clock: dict, seed: int) -> int:
    """Tile ``source`` ``n_tiles`` times on the true clock, then skew it; returns frames written."""
    tile, hdr_off, rel, tsft_off, tsft_minus_rel = build_pool([source])
    n = len(rel)
    rec_len = np.diff(np.r_[hdr_off, len(tile)])
    has = tsft_off >= 0
    bcn = _beacon_tsf_at(tile, hdr_off)
    is_b = bcn >= 0
    b_idx = bcn[is_b][:, None] + np.arange(8)
    b_tsf = np.ascontiguousarray(tile[b_idx]).view("<u8")[:, 0].astype(np.int64)
    ts_idx = hdr_off[:, None] + np.arange(8)
    tsft_idx = tsft_off[has][:, None] + np.arange(8)
    rng = np.random.default_rng(seed)
    written = 0
    with open(out, "wb") as fh:
        fh.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, LINKTYPE_RADIOTAP))
        for k in range(n_tiles):            # one numpy copy-and-patch per tile (~3k records)
            true_us = k * span_us + rel + tsft_minus_rel          # ns-3: TSFT == PPDU end
            uniq, inv = np.unique(true_us, return_inverse=True)   # jitter per PPDU
            jit = rng.normal(0.0, clock["jitter_us"], len(uniq))[inv] if clock["jitter_us"] else 0.0
            local = np.rint(true_us + clock["offset_us"] + clock["ppm"] * 1e-6 * true_us + jit)
            local = np.maximum.accumulate(local.astype(np.int64))  # records stay in time order
            buf = tile.copy()
            buf[ts_idx] = np.stack([local // 1_000_000, local % 1_000_000], 1).astype("<u4").view(np.uint8)
            buf[tsft_idx] = local[has].astype("<u8").view(np.uint8).reshape(-1, 8)
            buf[b_idx] = (b_tsf + k * span_us).astype("<u8").view(np.uint8).reshape(-1, 8)
            keep = rng.random(n) >= clock["drop"]
            fh.write(buf[np.repeat(keep, rec_len)].tobytes())
            written += int(keep.sum())
    return written


def build_inputs(out_dir: Path, frames: int) -> list[str]:
    """The three skewed captures (reused when present); 3 x ``frames`` frames before drops."""
    pools = [build_pool([SOURCES / f"{name}.pcap"]) for name in NAMES]
    sizes = [len(p[2]) for p in pools]
    span_us = max(int(p[2].max()) for p in pools) + GAP_US        # one span: tiles line up
    n_tiles = max(1, round(3 * frames / sum(sizes)))
    paths = []
    for s, name in enumerate(NAMES):
        f = out_dir / f"merge-{frames}-{'ABC'[s]}-skew.pcap"
        if not f.exists():
            out_dir.mkdir(parents=True, exist_ok=True)
            tmp = f.with_suffix(".part")
            write_skewed(tmp, SOURCES / f"{name}.pcap", n_tiles, span_us, CLOCKS[s], seed=s + 1)
            os.replace(tmp, f)
        paths.append(str(f))
    return paths


CPU_S: dict = {}            # per command (tuple): CPU seconds (user + system) of its runs


def timed(cmd, env=None, name=None, flush: bool = True) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of one child process (its CPU seconds: CPU_S[name]).
    Every run starts with no dirty pages (``os.sync()``, not timed): else the kernel's
    write-back of the run before (mergecap's 2.8 GB output) shares the cores with this one."""
    if flush:
        os.sync()
    t = time.perf_counter()
    # from a neutral directory with this tree first (`python -m` puts the working directory
    # first on sys.path: run from a checkout it would time that checkout, not --before's)
    env = env or dict(os.environ, PYTHONPATH=str(HERE.parent))
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=tempfile.gettempdir())
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{cmd[0]} failed: {proc.stderr.read().decode()[-500:]}")
    CPU_S.setdefault(name, []).append(usage.ru_utime + usage.ru_stime)
    return wall, usage.ru_maxrss / 1024


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--frames", type=int, default=1_000_000,
                   help="frames per sniffer on average before drops (default 1M: 3M in all)")
    p.add_argument("--out", type=Path, default=HERE / "out", help="work directory")
    p.add_argument("--repeat", type=int, default=3, help="runs of each tool (median reported)")
    p.add_argument("--json", type=Path, help="also write the numbers here")
    p.add_argument("--overwrite", action="store_true",
                   help="write over the previous run's outputs (the old method; truncating a "
                        "2.8 GB file is then part of mergecap's time)")
    p.add_argument("--no-flush", action="store_true",
                   help="do not flush dirty pages before each run (the old method: a run then "
                        "shares the cores with the write-back of the run before it)")
    p.add_argument("--window-s", type=float, default=None,
                   help="also time `sniffsync merge --window-s S` (streamed, bounded memory)")
    p.add_argument("--scale", type=int, nargs="+", metavar="FRAMES",
                   help="instead: peak RSS of the one-pass and the streamed merge (--window-s, "
                        "default 10) at each of these --frames sizes")
    p.add_argument("--expect-md5", metavar="HEX",
                   help="golden md5 of the merged pcapng (a run that writes other bytes fails)")
    p.add_argument("--before", type=Path, metavar="TREE",
                   help="also time the one-pass merge of another source tree (PYTHONPATH=TREE, e.g. "
                        "`git worktree add` of the commit before a change) in the same loop")
    a = p.parse_args(argv)
    if a.scale:
        return scale(a)
    inputs = build_inputs(a.out, a.frames)
    size_mib = sum(os.path.getsize(f) for f in inputs) / 2**20
    runs = ({"mergecap": [], "sniffsync": []} | ({"windowed": []} if a.window_s else {})
            | ({"before": []} if a.before else {}))
    flush = not a.no_flush
    for _ in range(a.repeat):                # alternate, so load changes hit both alike
        for old in ("mergecap.pcapng", "merged.pcapng", "windowed.pcapng", "before.pcapng"):   # new files
            if not a.overwrite:
                (a.out / old).unlink(missing_ok=True)
        runs["mergecap"].append(timed(["mergecap", "-w", str(a.out / "mergecap.pcapng"), *inputs],
                                      name="mergecap", flush=flush))
        runs["sniffsync"].append(timed(_merge_cmd(inputs, a.out / "merged.pcapng", a.out / "merge-report.json"),
                                       name="sniffsync", flush=flush))
        if a.window_s:
            runs["windowed"].append(timed(_merge_cmd(inputs, a.out / "windowed.pcapng", None, a.window_s),
                                          name="windowed", flush=flush))
        if a.before:
            env = dict(os.environ, PYTHONPATH=str(a.before.resolve()))
            runs["before"].append(timed(_merge_cmd(inputs, a.out / "before.pcapng", a.out / "before.json"), env,
                                        name="before", flush=flush))
    med = {k: (sorted(w for w, _ in v)[len(v) // 2], max(r for _, r in v)) for k, v in runs.items()}
    rep = json.loads((a.out / "merge-report.json").read_text())
    tot = rep["totals"]
    n_in = tot["frames_in"]
    print(f"inputs: {len(inputs)} files, {n_in:,} frames, {size_mib:,.0f} MiB; load {os.getloadavg()[0]:.1f}")
    cpu = {k: sorted(v)[len(v) // 2] for k, v in CPU_S.items()}       # medians
    for k, (wall, rss) in med.items():
        print(f"{k:10s} {wall:7.2f} s  {n_in / wall / 1e6:5.2f} M frames/s  peak RSS {rss:,.0f} MiB"
              f" ({rss / size_mib:.2f} x input)  CPU {cpu[k]:.1f} s   runs: "
              + " ".join(f"{w:.1f}" for w, _ in runs[k]))
    ratio = med["sniffsync"][0] / med["mergecap"][0]
    print(f"sniffsync / mergecap time: {ratio:.2f}x (CPU {cpu['sniffsync'] / cpu['mergecap']:.2f}x); "
          f"cores {os.cpu_count()}, load {os.getloadavg()[0]:.1f}")
    if a.before:
        same = (a.out / "before.pcapng").read_bytes() == (a.out / "merged.pcapng").read_bytes()
        print(f"before / mergecap time: {med['before'][0] / med['mergecap'][0]:.2f}x (CPU "
              f"{cpu['before'] / cpu['mergecap']:.2f}x); same file as this tree's: {same}")
    if a.window_s:
        same = (a.out / "windowed.pcapng").read_bytes() == (a.out / "merged.pcapng").read_bytes()
        print(f"windowed / mergecap time: {med['windowed'][0] / med['mergecap'][0]:.2f}x; "
              f"same file as the one-pass merge: {same}")
    print(f"frames in {n_in:,} = out {tot['frames_out']:,} + duplicates {tot['duplicates_removed']:,}")
    md5 = _md5(a.out / "merged.pcapng")
    print(f"merged.pcapng md5 {md5}" + (f" (expected {a.expect_md5}: "
                                        f"{'same' if md5 == a.expect_md5 else 'DIFFERENT'})"
                                        if a.expect_md5 else ""))
    for s in rep["sniffers"]:
        print(f"  {s['name']}: anchors {s['anchors']}, held-out |res| p50/p95/p99 µs "
              f"{s['heldout']['abs_residual_us_p50_p95_p99']}")
    if a.json:
        a.json.write_text(json.dumps({"inputs_mib": size_mib, "frames_in": n_in, "runs": runs,
                                      "median": med, "ratio": ratio, "totals": tot, "md5": md5}, indent=1))
    return 1 if a.expect_md5 and md5 != a.expect_md5 else 0


def _md5(path: Path) -> str:
    """md5 of a file, read 16 MiB at a time."""
    import hashlib
    h = hashlib.md5()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 24):
            h.update(block)
    return h.hexdigest()


def _merge_cmd(inputs, out, report=None, window_s=None) -> list:
    return [sys.executable, "-m", "sniffsync", "merge", *inputs, "-q", "-o", str(out),
            *(["--report", str(report)] if report else []),
            *(["--window-s", str(window_s)] if window_s else [])]


def scale(a) -> int:
    """Peak RSS of both merges as the capture grows (each size: one run of each)."""
    w = a.window_s or 10.0
    print(f"cores {os.cpu_count()}, load {os.getloadavg()[0]:.1f}; streamed window {w} s")
    print("frames in | input MiB | one-pass: s, peak RSS MiB | streamed: s, peak RSS MiB | same file")
    rows = []
    for frames in a.scale:
        inputs = build_inputs(a.out, frames)
        size = sum(os.path.getsize(f) for f in inputs) / 2**20
        one = timed(_merge_cmd(inputs, a.out / "merged.pcapng"))
        win = timed(_merge_cmd(inputs, a.out / "windowed.pcapng", None, w))
        same = (a.out / "windowed.pcapng").read_bytes() == (a.out / "merged.pcapng").read_bytes()
        rows.append((frames, size, one, win, same))
        print(f"~{3 * frames:,} | {size:,.0f} | {one[0]:.1f}, {one[1]:,.0f} | {win[0]:.1f}, {win[1]:,.0f} | {same}",
              flush=True)
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
