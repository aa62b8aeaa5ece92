"""Build a busy N-frame radiotap pcap for the reader benchmark (bench/bench_frames.py).

    python bench/make_capture.py bench/out/busy-1M.pcap --frames 1000000

The records of every capture in tests/data/captures (the three ns-3 11n hidden-node
sniffers, ns-3 VHT80 and HE80, and the real-driver captures with extended present
bitmaps, pcapng, HE + HTC) are pooled, interleaved by their time since their own
simulation's (ns-3: time 0) or own file's start (real captures), so radiotap layouts
alternate like on a busy channel, and tiled until N frames. Each tile is shifted by the
pool's span, so pcap timestamps never go back; radiotap TSFT moves by the same amount,
so ns-3 records keep TSFT == pcap time (the capture starts at the Unix epoch, as ns-3's).
Only the small sources are walked record by record; the tiles are built and patched
with numpy, one tile (~32k records) per step. Output: classic pcap, microseconds,
LINKTYPE_IEEE802_11_RADIOTAP (127).
"""
from __future__ import annotations

import argparse
import struct
import sys
import time
from pathlib import Path

import numpy as np

SOURCES = Path(__file__).resolve().parent.parent / "tests" / "data" / "captures"
LINKTYPE_RADIOTAP = 127
GAP_US = 1_000                           # idle time between two tiles
EPOCH_LIKE_US = 10 ** 12                 # a first timestamp past this is wall-clock time


def read_source(path: Path) -> tuple[list[bytes], list[int], list[int]]:
    """``(record bytes, wire lengths, timestamps in us)`` of a little pcap / pcapng file."""
    data = path.read_bytes()
    recs, wire, ts = [], [], []
    if data[:4] == b"\n\r\r\n":
        bo = "<" if struct.unpack_from("<I", data, 8)[0] == 0x1A2B3C4D else ">"
        links, tick_s, pos = [], [], 0
        while pos + 12 <= len(data):
            btype, blen = struct.unpack_from(bo + "II", data, pos)
            if btype == 1:
                links.append(struct.unpack_from(bo + "H", data, pos + 8)[0])
                tick_s.append(1_000_000)
                o = pos + 16
                while o + 4 <= pos + blen - 4:           # options: if_tsresol (9)
                    code, olen = struct.unpack_from(bo + "HH", data, o)
                    if code == 0:
                        break
                    if code == 9:
                        v = data[o + 4]
                        tick_s[-1] = 2 ** (v & 0x7F) if v & 0x80 else 10 ** v
                    o += 4 + (olen + 3) // 4 * 4
            elif btype == 6:
                iface, hi, lo, caplen, orig = struct.unpack_from(bo + "IIIII", data, pos + 8)
                if links[iface] == LINKTYPE_RADIOTAP:
                    recs.append(data[pos + 28: pos + 28 + caplen])
                    wire.append(orig)
                    ts.append(((hi << 32) | lo) * 1_000_000 // tick_s[iface])
            pos += blen
        return recs, wire, ts
    magic = struct.unpack_from("<I", data)[0]
    bo = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
    per_s = 1_000_000_000 if magic in (0xA1B23C4D, 0x4D3CB2A1) else 1_000_000
    if struct.unpack_from(bo + "I", data, 20)[0] & 0x03FFFFFF != LINKTYPE_RADIOTAP:
        return recs, wire, ts
    pos = 24
    while pos + 16 <= len(data):
        sec, frac, caplen, orig = struct.unpack_from(bo + "IIII", data, pos)
        recs.append(data[pos + 16: pos + 16 + caplen])
        wire.append(orig)
        ts.append(sec * 1_000_000 + frac * 1_000_000 // per_s)
        pos += 16 + caplen
    return recs, wire, ts


def u32_at(buf: np.ndarray, off: np.ndarray) -> np.ndarray:
    idx = off[:, None] + np.arange(4)
    return np.ascontiguousarray(buf[idx]).view("<u4")[:, 0]


def tsft_offsets(buf: np.ndarray, rt_off: np.ndarray) -> np.ndarray:
    """Offset of the radiotap TSFT field of each record, -1 where TSFT is absent.

    TSFT is bit 0 of the first present word, the first field, 8-aligned from the
    header start right after the last chained present word (radiotap.org).
    """
    first = u32_at(buf, rt_off + 4)
    n_words = np.ones(len(rt_off), np.int64)
    more = (first >> 31) & 1 == 1
    while more.any():                      # one step per chained word, not per record
        word = u32_at(buf, rt_off[more] + 4 + 4 * n_words[more])
        n_words[more] += 1
        more[more] = (word >> 31) & 1 == 1
    fields_at = (4 + 4 * n_words + 7) // 8 * 8
    return np.where(first & 1 == 1, rt_off + fields_at, -1)


def build_pool(sources: list[Path]):
    """One tile: pcap records (16-byte headers + data) of all sources, interleaved by relative time."""
    recs, wire, rel = [], [], []
    for path in sources:
        r, w, t = read_source(path)
        if not r:
            continue
        t = np.asarray(t, np.int64)
        recs += r
        wire += w
        # ns-3 traces start at time 0 (TSFT == pcap time): keep their times as they are;
        # real captures (wall-clock epoch) start at 0 too
        rel.append(t - t.min() if t.min() > EPOCH_LIKE_US else t)
    rel = np.concatenate(rel)
    order = np.argsort(rel, kind="stable")
    caplen = np.array([len(r) for r in recs], np.int64)[order]
    wire = np.asarray(wire, np.int64)[order]
    rel = rel[order]
    hdr_off = np.concatenate([[0], np.cumsum(16 + caplen)[:-1]])
    tile = np.zeros(int((16 + caplen).sum()), np.uint8)
    tile[hdr_off[:, None] + np.arange(8, 16)] = np.stack(
        [caplen, np.minimum(np.maximum(wire, caplen), 0xFFFFFFFF)], 1).astype("<u4").view(np.uint8)
    data = np.frombuffer(b"".join(recs[i] for i in order), np.uint8)
    # data bytes of record i go to hdr_off[i] + 16 ...: one boolean mask places them all
    is_data = np.ones(len(tile), bool)
    is_data[hdr_off[:, None] + np.arange(16)] = False
    tile[is_data] = data
    old_tsft_off = tsft_offsets(tile, hdr_off + 16)
    has = old_tsft_off >= 0
    old_tsft = np.zeros(len(rel), np.int64)
    old_tsft[has] = np.ascontiguousarray(
        tile[old_tsft_off[has][:, None] + np.arange(8)]).view("<u8")[:, 0].astype(np.int64)
    # TSFT keeps its offset from the record's (relative) time: new = new_time + (tsft - rel)
    return tile, hdr_off, rel, old_tsft_off, old_tsft - rel


def write_capture(out: Path, n_frames: int, sources: list[Path]) -> dict:
    tile, hdr_off, rel, tsft_off, tsft_minus_rel = build_pool(sources)
    n_pool = len(rel)
    span = int(rel.max()) + GAP_US
    has = tsft_off >= 0
    ts_idx = hdr_off[:, None] + np.arange(8)
    tsft_idx = tsft_off[has][:, None] + np.arange(8)
    out.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    with open(out, "wb") as fh:
        fh.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, LINKTYPE_RADIOTAP))
        k = 0
        while written < n_frames:
            m = min(n_pool, n_frames - written)
            t_us = k * span + rel
            buf = tile.copy()
            buf[ts_idx] = np.stack([t_us // 1_000_000, t_us % 1_000_000], 1).astype("<u4").view(np.uint8)
            buf[tsft_idx] = (t_us[has] + tsft_minus_rel[has]).astype("<u8").view(
                np.uint8).reshape(-1, 8)
            end = int(hdr_off[m]) if m < n_pool else len(buf)
            fh.write(buf[:end].tobytes())
            written += m
            k += 1
    return {"frames": written, "bytes": out.stat().st_size, "pool_records": n_pool, "tiles": k}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path, help="output .pcap (keep it out of the repo: bench/out/)")
    p.add_argument("--frames", type=int, default=1_000_000, help="number of frames (default 1M)")
    args = p.parse_args(argv)
    sources = sorted(q for q in SOURCES.iterdir() if q.suffix in (".pcap", ".pcapng"))
    t0 = time.perf_counter()
    info = write_capture(args.out, args.frames, sources)
    info["seconds"] = round(time.perf_counter() - t0, 2)
    print(f"{args.out}: {info['frames']} frames, {info['bytes'] / 1e6:.1f} MB, "
          f"{info['tiles']} tiles of {info['pool_records']} records, {info['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
