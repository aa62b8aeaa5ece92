"""Capture containers: walk pcap / pcapng (optionally gzip-compressed) record headers.

:func:`read_records` maps the whole file as one ``uint8`` buffer (``mmap``: pages
come from the page cache and can be dropped again with :func:`release` once decoded,
so memory stays near the size of the decoded columns), walks the record
headers window by window (:mod:`sniffsync.io.walk`: the only per-record loop of the
reader, in C when built, as a record's position depends on the previous record's length), and
reads every header field afterwards with numpy; lengths are checked vectorised per
window. :func:`iter_records` hands out each window's records as soon as it is walked,
so decoding overlaps the walk. pcapng is walked the same way in :mod:`sniffsync.io.pcapng`.
Bad records are kept and marked; corruption stops the walk but keeps everything read
so far and reports the byte offset.
"""
from __future__ import annotations

import logging
import mmap
import os
import struct
import zlib
from typing import NamedTuple

import numpy as np

from sniffsync.io.bytecols import field, gather
from sniffsync.io.inflate import inflate
from sniffsync.io.limits import limits, take_frames
from sniffsync.io.stamps import flag_ts_outliers
from sniffsync.io.walk import pcap_window_heads
from sniffsync.errors import CaptureError

__all__ = ["Records", "read_records", "iter_records", "concat_records", "release", "head_linktypes",
           "MAX_RECORD", "PCAP_MAGICS", "PCAPNG_SHB", "WINDOW_BYTES"]

MAX_RECORD = 16 << 20          # a record longer than 16 MiB is corruption, not a frame
PCAPNG_SHB = 0x0A0D0D0A        # palindromic: reads the same in both byte orders
_BOM = 0x1A2B3C4D              # pcapng byte-order magic
_GZIP = b"\x1f\x8b"

# classic pcap magic as read little-endian -> (byte order, ticks per second)
PCAP_MAGICS = {
    0xA1B2C3D4: ("<", 1_000_000), 0xD4C3B2A1: (">", 1_000_000),
    0xA1B23C4D: ("<", 1_000_000_000), 0x4D3CB2A1: (">", 1_000_000_000),
}
# pcapng packet block type -> kind code (EPB, obsolete PB, SPB)
_EPB, _PB, _SPB = 0, 1, 2
_PACKET_BLOCKS = {6: _EPB, 2: _PB, 3: _SPB}
_IDB = 1
_LINKTYPE_MASK = 0x03FFFFFF    # pcap "network" field: upper bits carry FCS info
WINDOW_BYTES = 32 << 20        # default bytes of a capture walked (and then released) at a time


class Records(NamedTuple):
    """Record index of one capture: where each packet's bytes are in ``buf``, and its header."""
    buf: np.ndarray        # uint8, whole (inflated) file
    data_off: np.ndarray   # int64, offset of each packet's first byte in buf
    caplen: np.ndarray     # int32, bytes really present (clipped to block and file)
    wirelen: np.ndarray    # int32, original length
    ts_ns: np.ndarray      # int64, ns since the Unix epoch
    linktype: np.ndarray   # int32
    iface: np.ndarray      # int16, global interface index (-1 unknown)
    marks: list            # [(row indices, reason)]
    problems: list         # ["FILE: offset N: what is wrong"]
    interfaces: list       # [{linktype, snaplen, tsresol (ticks/s), tsresol_base, tsresol_exp,
                           #   tsoffset_s, name, description}]
    mapping: object = None  # the mmap behind buf (of the file, or of its inflated copy)
    row0: int = 0           # index of the first record in its file (batches of iter_records)


def release(rec: Records, upto: int, start: int = 0) -> None:
    """Drop the mapped pages of ``rec.buf[start:upto]`` from this process's memory (whole
    pages inside the range only, so a neighbouring batch decoded at the same time keeps
    its pages).

    Only for a file mapping (``rec.mapping``): the bytes stay readable (a later access
    maps them again from the page cache), so this never changes results.
    """
    _release(rec.mapping, upto, start)


def _release(mapping, upto: int, start: int = 0) -> None:
    if mapping is None:
        return
    start = -(-max(start, 0) // mmap.PAGESIZE) * mmap.PAGESIZE
    upto = min(upto, len(mapping))
    upto -= upto % mmap.PAGESIZE
    if upto > start:
        mapping.madvise(mmap.MADV_DONTNEED, start, upto - start)


def _load(path, max_bytes: int | None = None) -> tuple[np.ndarray, list, object]:
    """The file's bytes (gunzipped as a stream when it starts with the gzip magic: see
    :mod:`sniffsync.io.inflate`), problem lines and the mmap behind the bytes.
    ``max_bytes``: only the first so many (inflated) bytes are read."""
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size == 0:
                return np.zeros(0, np.uint8), [], None
            mapping = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError) as exc:
        raise CaptureError(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    problems = []
    if mapping[:2] == _GZIP:
        try:
            inflated, size, problems, limited = inflate(path, mapping, max_bytes)
        except OSError as exc:
            raise CaptureError(f"{path}: cannot inflate: {exc.strerror or exc}") from None
        finally:
            mapping.close()
        if inflated is None:
            raise CaptureError(f"{path}: not a pcap or pcapng capture (gzip data does not inflate)")
        mapping = inflated
    else:
        limited = max_bytes is not None and size > max_bytes
    buf = np.frombuffer(mapping, dtype=np.uint8)
    if limited:
        buf = buf[:max_bytes]
        problems.append(f"{path}: read only the first {max_bytes} bytes (--max-bytes); the rest is ignored")
    return buf, problems, mapping


def head_linktypes(path, head: int = 1 << 16):
    """Link types a capture declares before its first packet, from its first ``head``
    bytes (gunzipped when compressed): the pcap header's, or the pcapng interfaces
    described before the first packet block. None when they cannot be told (not a
    capture, cut short): callers then assume any link type.

    A pcapng may describe more interfaces later; callers that choose work by this
    answer check the decoded ``linktype`` column afterwards.
    """
    try:
        with open(path, "rb") as fh:
            data = fh.read(head)
        if data[:2] == _GZIP:
            data = zlib.decompressobj(31).decompress(data, head)
    except (OSError, zlib.error):
        return None
    if len(data) < 24:
        return None
    magic = struct.unpack("<I", data[:4])[0]
    if magic in PCAP_MAGICS:
        order = PCAP_MAGICS[magic][0]
        return frozenset({struct.unpack(order + "I", data[20:24])[0] & _LINKTYPE_MASK})
    if magic != PCAPNG_SHB:
        return None
    order = "<" if struct.unpack("<I", data[8:12])[0] == _BOM else ">"
    found, pos = set(), 0
    while pos + 12 <= len(data):
        btype, blen = struct.unpack(order + "II", data[pos:pos + 8])
        if btype in _PACKET_BLOCKS:
            return frozenset(found)
        if btype == _IDB:
            found.add(struct.unpack(order + "H", data[pos + 8:pos + 10])[0])
        if blen < 12 or blen % 4:
            return None
        pos += blen
    return None


def next_window(walked_bytes: int, walked: int, rows: int | None, window: int) -> int:
    """Bytes to walk next: ``window``, or about ``rows`` records at the size seen so far
    (a small first window), so a stream's batches are even and the first comes early."""
    if rows is None:
        return window
    if not walked:
        return min(window, 1 << 20)
    return int(min(window, max(walked_bytes / walked * rows, 1 << 16)))


def _pcap_batches(buf, n: int, order: str, mapping, drop: bool, rows: int | None, window: int):
    """Walk a classic pcap in windows of ``window`` bytes (or of about ``rows`` records):
    yields ``(offsets, headers)`` per window, then returns where the walk stopped (a
    corrupt length stops it at that record, so ``pos <= n - 16`` tells it).

    Each window is walked, its headers copied, then (with ``drop``) its pages released, so
    memory holds one window of the file (only the window's own pages: a consumer decoding
    an earlier batch keeps the pages it mapped again). Lengths are checked after each window, vectorised: the
    first record longer than ``MAX_RECORD`` ends the walk there (what follows it was
    walked with a garbage length and is dropped).
    """
    mv = memoryview(buf)
    pos, last, walked = 24, n - 16, 0
    while pos <= last:
        start = pos
        size = next_window(pos - 24, walked, rows, window)
        offs, pos, heads = pcap_window_heads(mv, pos, min(pos + size, last), order)
        walked += len(offs)
        if len(offs) and offs[-1] > last:      # a header cut by the end of the file
            pos = offs.pop()
        hdr_off = np.frombuffer(offs, np.int64) if len(offs) else np.zeros(0, np.int64)
        # the headers the C walk copied as it went, else gathered
        head = gather(buf, hdr_off, 16) if heads is None else \
            np.frombuffer(heads, np.uint8, 16 * hdr_off.size).reshape(-1, 16)
        over = np.flatnonzero(field(head, 8, order + "u4") > MAX_RECORD)
        if over.size:
            pos = int(hdr_off[over[0]])
            hdr_off, head = hdr_off[:over[0]], head[:over[0]]
        if drop:
            _release(mapping, min(pos, n) - 16, start)
        if hdr_off.size:
            yield hdr_off, head
        if over.size:
            return pos
    return pos


def _pcap_records(buf, path, mapping, drop, rows, window):
    """Records of a classic pcap, one batch per walked window (see :func:`iter_records`)."""
    n = buf.size
    if n < 24:
        raise CaptureError(f"{path}: not a pcap or pcapng capture (header cut at {n} bytes)")
    order, tsresol = PCAP_MAGICS[int(buf[:4].view("<u4")[0])]
    snaplen, network = struct.unpack_from(order + "II", buf, 16)
    iface = {"linktype": int(network & _LINKTYPE_MASK), "snaplen": int(snaplen), "tsresol": tsresol,
             "tsresol_base": 10, "tsresol_exp": 6 if tsresol == 1_000_000 else 9, "tsoffset_s": 0,
             "name": "", "description": ""}
    walk = _pcap_batches(buf, n, order, mapping, drop, rows, window)
    pending, row0, over = None, 0, [None, 0]     # over: first offset, count of caplen > snaplen
    while True:
        try:
            batch = next(walk)
        except StopIteration as stop:
            pos = stop.value
            break
        if pending is not None:          # held back one window: the last one gets the tail checks
            yield _pcap_batch(buf, path, *pending, order, tsresol, iface, row0, over, [])
            row0 += pending[0].size
        pending = batch
    hdr_off, head = pending if pending is not None else (np.zeros(0, np.int64), np.zeros((0, 16), np.uint8))
    count = row0 + hdr_off.size
    problems = []
    if pos <= n - 16:
        incl = struct.unpack_from(order + "I", buf, pos + 8)[0]
        problems.append(f"{path}: offset {pos}: corrupt record length {incl}; "
                        f"stopped after {count} records")
    elif n - 16 < pos < n:
        problems.append(f"{path}: offset {pos}: record header cut short "
                        f"({n - pos} of 16 bytes); stopped after {count} records")
    if pos > n and hdr_off.size and snaplen:
        incl = int(field(head[-1:], 8, order + "u4")[0])
        if incl > snaplen:
            # runs past the end AND is longer than the snaplen: a corrupt length, not a cut frame
            problems.append(f"{path}: offset {int(hdr_off[-1])}: corrupt record length "
                            f"{incl} (snaplen {snaplen}, beyond end of file); dropped")
            hdr_off, head = hdr_off[:-1], head[:-1]
    yield _pcap_batch(buf, path, hdr_off, head, order, tsresol, iface, row0, over, problems, last=True)


def tally(counter: list, offsets, rows) -> None:
    """Add ``rows`` to a per-file ``[first offset, count]`` of one problem (batches come in order)."""
    if len(rows):
        counter[0] = int(offsets[rows[0]]) if counter[0] is None else counter[0]
        counter[1] += len(rows)


def _pcap_batch(buf, path, hdr_off, head, order, tsresol, iface, row0, over, problems, last=False):
    """:class:`Records` of one walked window of a classic pcap."""
    h = head.view(np.dtype(order + "u4")).reshape(-1, 4)
    incl, orig = h[:, 2], h[:, 3]            # uint32 views: no int64 copies of the index
    ts_ns = h[:, 0].astype(np.int64) * 1_000_000_000
    ts_ns += h[:, 1] * np.int64(1_000_000_000 // tsresol)
    marks, snaplen = [], iface["snaplen"]
    rows = np.flatnonzero(incl > snaplen) if snaplen else np.zeros(0, np.int64)
    if rows.size:
        marks.append((rows, "caplen > snaplen"))
        tally(over, hdr_off, rows)
    if last and over[1]:
        problems.append(f"{path}: offset {over[0]}: {over[1]} record(s) "
                        f"with caplen > snaplen {snaplen}")
    rec = _finish(buf, path, hdr_off + 16, incl, orig, ts_ns,
                  np.zeros(hdr_off.size, np.int16), [iface], marks, problems)
    return rec._replace(row0=row0)


def _finish(buf, path, data_off, caplen, wirelen, ts_ns, iface, interfaces, marks, problems):
    """Clip lengths to the file, mark cut records and assemble :class:`Records`."""
    present = np.maximum(buf.size - data_off, 0)
    cut = np.flatnonzero(caplen > present)
    if cut.size:
        marks.append((cut, "truncated record"))
        problems.append(f"{path}: offset {int(data_off[cut[0]])}: record cut at end of file "
                        f"({int(present[cut[0]])} of {int(caplen[cut[0]])} bytes)")
    caplen = np.minimum(caplen, present)
    lt_table = np.array([i["linktype"] for i in interfaces] + [-1], np.int32)
    # one interface (plain pcap): no per-record table lookup
    linktype = np.full(len(iface), lt_table[0], np.int32) if len(interfaces) == 1 and \
        not (iface != 0).any() else lt_table[iface]
    return Records(buf, data_off.astype(np.int64, copy=False), caplen.astype(np.int32),
                   np.minimum(wirelen, 2**31 - 1).astype(np.int32),
                   ts_ns.astype(np.int64, copy=False), linktype,
                   iface.astype(np.int16, copy=False), marks, problems, interfaces)


_log = logging.getLogger("sniffsync")
_log.addHandler(logging.NullHandler())   # a library prints nothing; the CLI adds its handler


def iter_records(path, drop_walked: bool = True, batch_rows: int | None = None, *,
                 window_bytes: int = WINDOW_BYTES, max_frames: int | None = None,
                 max_bytes: int | None = None):
    """Index the records of a capture batch by batch, as the walk goes.

    A plain pcap yields one :class:`Records` per walked window (``row0`` numbers its first
    record in the file; ``marks`` rows are relative to the batch; the problems found at
    the end of the file come with the last batch), so decoding can start while the rest
    of the file is walked. pcapng and gzip inputs yield one batch. Every batch shares
    ``buf`` and ``mapping``. With ``drop_walked`` the walk drops the file pages of each
    window once walked (memory holds one window: a consumer maps again, from the page
    cache, what it reads of a batch later); False keeps them mapped until the consumer
    drops them.
    ``window_bytes`` bounds the bytes walked at a time (smaller with ``batch_rows``).
    ``max_frames`` / ``max_bytes`` (default: :func:`sniffsync.io.limits.read_limits`) stop the read early,
    keeping what came before, with a problem line. Frames stamped far from their
    neighbours are marked ``ts_outlier`` (:mod:`sniffsync.io.stamps`). Every problem line
    is also logged (logger ``sniffsync``, level WARNING) as its batch is handed out.

    Raises
    ------
    CaptureError
        As :func:`read_records`, before the first batch.
    """
    max_frames, max_bytes = limits(max_frames, max_bytes)
    buf, load_problems, mapping = _load(path, max_bytes)
    if buf.size < 4:
        raise CaptureError(f"{path}: not a pcap or pcapng capture "
                           f"({'empty file' if buf.size == 0 else f'only {buf.size} bytes'})")
    magic = int(buf[:4].view("<u4")[0])
    if magic in PCAP_MAGICS:
        batches = _pcap_records(buf, path, mapping, drop_walked, batch_rows, window_bytes)
    elif magic == PCAPNG_SHB:
        from sniffsync.io.pcapng import pcapng_records
        batches = pcapng_records(buf, path, mapping, drop_walked, batch_rows, window_bytes)
    else:
        raise CaptureError(f"{path}: not a pcap or pcapng capture (starts with 0x{bytes(buf[:4]).hex()})")
    first = next(batches)              # header errors raise here, before anything is yielded
    first.problems[:0] = load_problems

    def chain():
        yield first
        yield from batches
    out = chain() if max_frames is None else take_frames(chain(), max_frames, path)
    for rec in flag_ts_outliers(out, path):
        for line in rec.problems:
            _log.warning(line)
        yield rec._replace(mapping=mapping)


def concat_records(batches) -> Records:
    """One :class:`Records` of consecutive batches of one file (as :func:`iter_records` yields)."""
    batches = list(batches)
    if len(batches) == 1:
        return batches[0]
    first = batches[0]
    marks = [(np.asarray(rows, np.int64) + b.row0 - first.row0, why) for b in batches for rows, why in b.marks]
    cat = {f: np.concatenate([getattr(b, f) for b in batches])
           for f in ("data_off", "caplen", "wirelen", "ts_ns", "linktype", "iface")}
    return first._replace(marks=marks, problems=[p for b in batches for p in b.problems], **cat)


def read_records(path, *, window_bytes: int = WINDOW_BYTES) -> Records:
    """Index every record of a pcap or pcapng capture (gzip-compressed or not).

    Parameters
    ----------
    path : str or os.PathLike
        The capture. Its format is detected by magic number, never by name.
    window_bytes : int
        Bytes walked at a time (results never depend on it).

    Returns
    -------
    Records
        ``buf`` plus one entry per record in ``data_off``, ``caplen``, ``wirelen``,
        ``ts_ns``, ``linktype``, ``iface``; ``marks`` and ``problems`` describe bad
        records (kept) and where a corrupt file stopped being read.

    Raises
    ------
    CaptureError
        The file cannot be read, is empty, is not pcap/pcapng/gzip, or does not inflate.
    """
    return concat_records(iter_records(path, window_bytes=window_bytes))
