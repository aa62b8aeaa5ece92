"""Degrade a capture file the way imperfect sniffers do: no TSFT, jittered and skewed clocks.

Test helper (issue 18). Works on capture *bytes*, so the CLI path is exercised, not
only frame tables. A capture (pcap of any resolution/endianness, or pcapng; gzip ok) is
read into a :class:`Records` (link type, per record the capture time in ns, the
original length and the bytes); functions return a new :class:`Records`; record ``i``
of the result is record ``i`` of the input (nothing is dropped or reordered), so the
original file is the oracle for every record. :func:`write_pcap` writes a
nanosecond-resolution pcap.

- :func:`strip_tsft`: clear radiotap present bit 0 and remove its 8 bytes, on all
  records or on a seeded fraction. Only headers whose TSFT directly follows the present
  words (no padding before it: 1 or 3 present words, every ns-3 and most driver
  captures) are handled; the fields after it move by 8 bytes, so each keeps its
  alignment (radiotap aligns to <= 8 bytes from the header start). Others raise.
- :func:`skew_clock`: the sniffer's clocks run ``ppm`` fast and start ``offset`` off:
  the host clock (record stamps) and/or the TSFT field.
- :func:`jitter`: seeded Gaussian noise on the record stamps (a host clock that stamps
  frames when the driver hands them over).

:func:`degrade` chains them file to file.
"""
from __future__ import annotations

import gzip
import struct
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

__all__ = ["Records", "read_records", "write_pcap", "strip_tsft", "skew_clock", "jitter", "degrade",
           "tsft_us"]


@dataclass
class Records:
    linktype: int
    ts_ns: np.ndarray                    # int64 per record
    wirelen: np.ndarray                  # int64 per record
    data: list                           # bytes per record

    def __len__(self):
        return len(self.data)


def _open(path) -> bytes:
    b = Path(path).read_bytes()
    return gzip.decompress(b) if b[:2] == b"\x1f\x8b" else b


def _read_pcap(b: bytes) -> Records:
    magic = b[:4]
    end = "<" if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    scale = 1 if magic in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d") else 1000
    linktype = struct.unpack(end + "I", b[20:24])[0] & 0x0FFFFFFF
    ts, wl, data, off = [], [], [], 24
    while off + 16 <= len(b):           # per record: a test helper on small files
        s, frac, cl, ol = struct.unpack(end + "IIII", b[off:off + 16])
        ts.append(s * 1_000_000_000 + frac * scale)
        wl.append(ol)
        data.append(b[off + 16:off + 16 + cl])
        off += 16 + cl
    return Records(linktype, np.array(ts, np.int64), np.array(wl, np.int64), data)


def _read_pcapng(b: bytes) -> Records:
    end = "<" if b[8:12] == b"\x4d\x3c\x2b\x1a" else ">"
    off, links, res = 0, [], []
    ts, wl, data = [], [], []
    while off + 12 <= len(b):
        btype, blen = struct.unpack(end + "II", b[off:off + 8])
        body = b[off + 8:off + blen - 4]
        if btype == 1:                   # IDB: link type, if_tsresol
            links.append(struct.unpack(end + "H", body[:2])[0])
            r, o = 1000, 8
            while o + 4 <= len(body):
                code, ln = struct.unpack(end + "HH", body[o:o + 4])
                if code == 0:
                    break
                if code == 9:
                    v = body[o + 4]
                    r = 1e9 / (2 ** (v & 0x7F) if v & 0x80 else 10 ** v)
                o += 4 + (ln + 3) // 4 * 4
            res.append(r)
        elif btype == 6:                 # EPB
            iface, hi, lo, cl, ol = struct.unpack(end + "IIIII", body[:20])
            ts.append(int(((hi << 32) | lo) * res[iface]))
            wl.append(ol)
            data.append(body[20:20 + cl])
        off += blen
    return Records(links[0], np.array(ts, np.int64), np.array(wl, np.int64), data)


def read_records(path) -> Records:
    """Every record of a pcap/pcapng file (gzip ok)."""
    b = _open(path)
    return _read_pcapng(b) if b[:4] == b"\x0a\x0d\x0d\x0a" else _read_pcap(b)


def write_pcap(path, rec: Records) -> Path:
    """A nanosecond pcap of ``rec``."""
    out = [struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, rec.linktype)]
    for t, w, d in zip(rec.ts_ns.tolist(), rec.wirelen.tolist(), rec.data):
        out.append(struct.pack("<IIII", t // 1_000_000_000, t % 1_000_000_000, len(d), w))
        out.append(d)
    Path(path).write_bytes(b"".join(out))
    return Path(path)


def _present_end(d: bytes) -> int:
    """Offset just past the radiotap present-word chain."""
    q = 4
    while struct.unpack("<I", d[q:q + 4])[0] >> 31:
        q += 4
    return q + 4


def tsft_us(rec: Records) -> np.ndarray:
    """Radiotap TSFT per record (µs), -1 where absent."""
    out = np.full(len(rec), -1, np.int64)
    for i, d in enumerate(rec.data):
        if struct.unpack("<I", d[4:8])[0] & 1:
            p = _present_end(d)
            out[i] = struct.unpack("<Q", d[p + (-p) % 8:p + (-p) % 8 + 8])[0]
    return out


def _strip_one(d: bytes) -> bytes:
    word0, = struct.unpack("<I", d[4:8])
    if not word0 & 1:
        return d
    p = _present_end(d)
    if p % 8:
        raise ValueError(f"TSFT after padding (present words end at {p}): not handled")
    ln = struct.unpack("<H", d[2:4])[0] - 8
    return d[:2] + struct.pack("<HI", ln, word0 & ~1) + d[8:p] + d[p + 8:]


def strip_tsft(rec: Records, fraction: float = 1.0, seed: int = 0) -> Records:
    """Remove the radiotap TSFT field from every record, or from a seeded ``fraction``."""
    pick = np.random.default_rng(seed).random(len(rec)) < fraction
    data = [_strip_one(d) if p else d for d, p in zip(rec.data, pick)]
    shorter = np.array([len(a) - len(b) for a, b in zip(rec.data, data)], np.int64)
    return replace(rec, data=data, wirelen=rec.wirelen - shorter)   # the header is shorter on the wire too


def skew_clock(rec: Records, ppm: float = 0.0, offset_ns: int = 0, host: bool = True,
               tsft: bool = True) -> Records:
    """The sniffer's clock runs ``ppm`` fast from the first record and starts ``offset_ns``
    off: applied to the record stamps (``host``) and/or the TSFT field (``tsft``, µs)."""
    t0 = int(rec.ts_ns[0]) if len(rec) else 0
    ts = rec.ts_ns
    if host:
        ts = ts + np.rint((ts - t0) * ppm * 1e-6).astype(np.int64) + offset_ns
    data = rec.data
    if tsft:
        old = tsft_us(rec)
        base = int(old[old >= 0].min()) if (old >= 0).any() else 0
        new = old + np.rint((old - base) * ppm * 1e-6 + offset_ns / 1000).astype(np.int64)
        data = []
        for d, o, n in zip(rec.data, old.tolist(), new.tolist()):
            if o < 0:
                data.append(d)
                continue
            p = _present_end(d)
            p += (-p) % 8
            data.append(d[:p] + struct.pack("<Q", n % 2**64) + d[p + 8:])
    return replace(rec, ts_ns=ts, data=data)


def jitter(rec: Records, sd_us: float, seed: int = 0) -> Records:
    """Seeded Gaussian noise (sd ``sd_us``) on every record's capture stamp."""
    noise = np.random.default_rng(seed).normal(0.0, sd_us * 1000, len(rec))
    return replace(rec, ts_ns=rec.ts_ns + np.rint(noise).astype(np.int64))


def degrade(src, dst, *, ppm: float = 0.0, offset_ns: int = 0, strip: float = 0.0,
            jitter_us: float = 0.0, seed: int = 0) -> Path:
    """``src`` as a sniffer with a skewed clock (host and TSFT), TSFT stripped from a
    fraction ``strip`` of its records and host stamps jittered, written to ``dst``."""
    rec = skew_clock(read_records(src), ppm, offset_ns)
    if strip:
        rec = strip_tsft(rec, strip, seed)
    if jitter_us:
        rec = jitter(rec, jitter_us, seed + 1)
    return write_pcap(dst, rec)
