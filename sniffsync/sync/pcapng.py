"""The merged table as pcapng: one IDB per sniffer, per packet the merge's columns and a
"heard by" comment (the format: :mod:`sniffsync.sync.mergedfile`).

Each packet's bytes are copied from its input's memory map, a chunk of blocks (~32 MiB
of output) at a time, so the output never exists in memory. pcapng blocks are 4-byte
aligned, so every block's header and trailer are written as ``uint32`` words; packet
bytes and padding + comment option are copied one run of equal-length pieces at a time
(a few hundred distinct lengths per chunk) through sliding-window views. After each
chunk the input pages no later chunk needs are released. Into a regular file opened for
reading and writing (:func:`sniffsync.io.atomic.atomic_output`'s), the blocks are built
straight in the file's pages: its space is reserved first (``posix_fallocate``: a full
disk fails there, not in the middle of a mapped write) and each chunk's range is mapped
while it is built, so the kernel's copy of every output byte (a ``write``) is gone;
elsewhere a chunk is written by a helper thread while the next is assembled. The "heard
by" texts are built once per distinct (bitmask, signals) combination, their option bytes
once per text.
"""
from __future__ import annotations

import errno
import mmap
import os
import stat
import struct
from collections import deque
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from numpy.lib.stride_tricks import sliding_window_view

from sniffsync.errors import UsageError
from sniffsync.io.walk import copy_pieces

if TYPE_CHECKING:
    from sniffsync.sync.merge import Merged

__all__ = ["heard_by", "comment_blob", "write_epbs", "write_merged", "merged_head", "write_rows",
           "CHUNK_BYTES"]

CHUNK_BYTES = 32 << 20      # pcapng bytes assembled per step: memory stays bounded
MAP_MIN_BYTES = 1 << 20     # smaller outputs are written (a map's set-up costs more than the copy)


def heard_by(mask, signals: dict, names: list[str]):
    """``(inv, texts)``: row ``i``'s "heard by" text (``"A(-41 dBm) B(-67 dBm)"``, from the
    bitmask of sniffers that heard it and their signal columns) is ``texts[inv[i]]``.

    Texts depend only on (mask, signal of each sniffer that heard): built once per
    distinct combination (a few thousand), not per frame.
    """
    mask = np.asarray(mask, np.int64)
    cols = [mask]
    for s in range(len(names)):        # per sniffer: 0..255 = signal + 128, 256 = null
        sig = signals.get(s)
        v = np.zeros(len(mask), np.int64) if sig is None else \
            pd.array(sig, dtype="Int16").to_numpy(np.int64, na_value=128) + 128
        cols.append(np.where((mask >> s) & 1 == 1, v, 0))
    m = np.stack(cols, 1)
    if len(names) <= 7:                # mixed radix fits in uint64: a 1-D unique is fast
        code = m[:, 0].astype(np.uint64)
        for c in range(1, m.shape[1]):
            code = code * np.uint64(257) + m[:, c].astype(np.uint64)
        _, first, inv = np.unique(code, return_index=True, return_inverse=True)
        uniq = m[first]
    else:
        uniq, inv = np.unique(m, axis=0, return_inverse=True)
    texts = []
    for row in uniq.tolist():          # per distinct combination: a lookup table
        parts = [names[s] if signals.get(s) is None else
                 f"{names[s]}({'?' if row[s + 1] == 256 else row[s + 1] - 128} dBm)"
                 for s in range(len(names)) if (row[0] >> s) & 1]
        texts.append(" ".join(parts))
    return np.asarray(inv).ravel(), texts


def comment_blob(texts) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(blob, off, olen)``: EPB option bytes of every text (opt_comment padded to 4, then
    opt_endofopt; nothing for ""), each after 3 zero bytes so that ``blob[off - pad:
    off + olen]`` is a block's padding plus options."""
    parts, off, olen, pos = [], [], [], 0
    for t in (x.encode() for x in texts):
        opt = struct.pack("<HH", 1, len(t)) + t + b"\0" * (-len(t) % 4) + b"\0\0\0\0" if t else b""
        parts.append(b"\0\0\0" + opt)
        off.append(pos + 3)
        olen.append(len(opt))
        pos += 3 + len(opt)
    return (np.frombuffer(b"".join(parts) + b"\0", np.uint8).copy(), np.array(off, np.int64),
            np.array(olen, np.int64))


def _items(a: np.ndarray, w: int) -> np.ndarray:
    """Every ``w``-byte piece of the contiguous bytes ``a``, one per start offset, each one
    item of a ``w``-byte void dtype (a view): fancy indexing then copies whole items, ~2x
    faster than a ``(k, w)`` gather of :func:`sliding_window_view`."""
    return np.ndarray((len(a) - w + 1,), np.dtype((np.void, w)), buffer=a, strides=(1,))


def _gather(src, w: int, at: np.ndarray) -> np.ndarray:
    """``src[at[i]:at[i] + w]`` for every ``i``, as ``w``-byte void items."""
    a = np.asarray(src)
    if a.dtype == np.uint8 and a.ndim == 1 and a.flags.c_contiguous and len(a) >= w:
        return _items(a, w)[at]
    return np.ascontiguousarray(sliding_window_view(a, w)[at]).view(np.dtype((np.void, w))).ravel()


def _copy_pieces(out: np.ndarray, dst, src: np.ndarray, src_off, ln) -> None:
    """``out[dst[i]:dst[i] + ln[i]] = src[src_off[i]:src_off[i] + ln[i]]`` for every ``i``:
    one ``memmove`` each in C (:func:`sniffsync.io.walk.copy_pieces`); on the Python backend
    one copy of equal-length rows per distinct length (:func:`_items` views of both
    arrays), not a per-byte index."""
    if len(ln) == 0:
        return
    src = np.asarray(src)
    if src.dtype == out.dtype == np.uint8 and src.flags.c_contiguous and out.flags.c_contiguous:
        i64 = [np.ascontiguousarray(a, np.int64) for a in (dst, src_off, ln)]
        if copy_pieces(out, i64[0], src, i64[1], i64[2]):     # the C pass: no temporaries
            return
    order = np.argsort(ln, kind="stable")
    ln_o = ln[order]
    cut = np.flatnonzero(np.r_[True, ln_o[1:] != ln_o[:-1], True])
    for a, b in zip(cut[:-1], cut[1:]):  # per distinct length
        w = int(ln_o[a])
        if w:
            r = order[a:b]
            _items(out, w)[dst[r]] = _gather(src, w, src_off[r])


def _blocks(records, sn, start, caplen, wirelen, ts_ns, blen, tail, blob, fixed=None, into=None) -> np.ndarray:
    """The EPBs of rows (the arrays of one chunk) back to back, as one ``uint8`` array
    (the start of ``into`` when it is large enough: every byte is written); ``tail``:
    (offset, length) in ``blob`` of each row's padding + options; ``fixed``: ``(rows,
    size)`` option bytes written between the padding and those options."""
    pos = np.cumsum(blen) - blen
    size = int(pos[-1] + blen[-1])
    out = into[:size] if into is not None and len(into) >= size else np.empty(size, np.uint8)
    words = out.view("<u4")              # every block starts and ends 4-byte aligned
    head = np.empty((len(sn), 7), "<u4")
    head[:, 0], head[:, 1], head[:, 2] = 6, blen, sn      # EPB, length, interface
    head[:, 3], head[:, 4] = ts_ns >> 32, ts_ns & 0xFFFFFFFF  # if_tsresol 9: ns ticks
    head[:, 5], head[:, 6] = caplen, wirelen
    words[pos[:, None] // 4 + np.arange(7)] = head
    words[(pos + blen) // 4 - 1] = blen                    # trailer
    data = pos + 28
    for s, rec in enumerate(records):    # per sniffer
        m = sn == s
        _copy_pieces(out, data[m], rec.buf, start[m], caplen[m])
    if fixed is None:
        _copy_pieces(out, data + caplen, blob, *tail)
        return out
    pad = -caplen % 4                    # the zero bytes before each text are its padding
    _copy_pieces(out, data + caplen, blob, tail[0], pad)
    at = data + caplen + pad
    _items(out, fixed.shape[1])[at] = np.ascontiguousarray(fixed).view(np.dtype((np.void, fixed.shape[1]))).ravel()
    _copy_pieces(out, at + fixed.shape[1], blob, tail[0] + pad, tail[1] - pad)
    return out


def write_epbs(fh, records, sn, start, caplen, wirelen, ts_ns, opt, chunk_bytes: int = CHUNK_BYTES,
               fixed=None) -> None:
    """Write one EPB per row (the layout of :func:`sniffsync.io.writers.write_pcapng`).

    Parameters
    ----------
    fh : binary file
    records : list of :class:`sniffsync.io.capture.Records`
        Per sniffer: ``buf`` holds the packet bytes; pages are released behind the writer.
    sn, start, caplen, wirelen, ts_ns : int64 arrays, shape (n,)
        Interface (= sniffer), offset of the packet bytes in its ``buf``, lengths, time (ns).
    opt : (blob, off, olen, inv)
        :func:`comment_blob` of the distinct texts and the text index of every row.
    chunk_bytes : int
        Output bytes assembled per step (at least one block).
    fixed : uint8 array, shape (n, size), optional
        One more option per row (``size`` a multiple of 4), first after the packet bytes.
    """
    blob, off, olen, inv = opt
    n = len(sn)
    if n == 0:
        return
    pad = -caplen % 4
    tail_len = pad + olen[inv]
    tail_off = off[inv] - pad            # the zero bytes before each text are its padding
    blen = 32 + caplen + tail_len + (0 if fixed is None else fixed.shape[1])
    first = np.cumsum(blen) - blen
    k = first // chunk_bytes
    cuts = np.r_[np.flatnonzero(np.r_[True, k[1:] != k[:-1]]), n]
    # per sniffer, the lowest input offset still needed from each row on (suffix minimum)
    big = np.iinfo(np.int64).max
    low = [np.minimum.accumulate(np.r_[np.where(sn == s, start, big), big][::-1])[::-1]
           for s in range(len(records))]
    from sniffsync import runtime
    nb = runtime.workers()               # chunks built at once (numpy copies release the GIL)
    free = []                            # chunk buffers, reused: fresh pages cost more than the copy

    def build(a, b, into):
        r = slice(a, b)
        return _blocks(records, sn[r], start[r], caplen[r], wirelen[r], ts_ns[r], blen[r],
                       (tail_off[r], tail_len[r]), blob, None if fixed is None else fixed[r], into)

    spans = list(zip(cuts[:-1], cuts[1:]))
    at = _reserve(fh, int(first[-1] + blen[-1]))
    if at is not None:                   # built in the file's own pages: no write() copy
        _build_mapped(fh, at, spans, first, blen, build, records, low, big, nb)
        return
    with runtime.pool(nb) as bx, runtime.pool(limit=1) as wx:   # the kernel copies one chunk
        builds, written = deque(), deque()                       # while the next ones are built
        for j, (a, b) in enumerate(spans):
            builds.append((b, bx.submit(build, a, b, free.pop() if free else None)))
            if len(builds) < nb and j + 1 < len(spans):
                continue
            _write_next(fh, records, low, big, builds, written, wx, free)
        while builds:
            _write_next(fh, records, low, big, builds, written, wx, free)
        while written:
            written.popleft()[1].result()


def _reserve(fh, size: int):
    """``(fd, offset)``: where the next ``size`` bytes of ``fh``'s file go, that space
    allocated; None when they are to be written instead (small, not a regular file open
    for reading and writing, or a system or file system without ``posix_fallocate``)."""
    if size < MAP_MIN_BYTES or not hasattr(os, "posix_fallocate"):
        return None
    import fcntl                         # POSIX, as posix_fallocate
    try:
        fd = fh.fileno()
        if not stat.S_ISREG(os.fstat(fd).st_mode) or fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE != os.O_RDWR:
            return None
        fh.flush()
        start = fh.tell()
    except (AttributeError, OSError, ValueError):   # io.UnsupportedOperation is both of the last
        return None
    try:
        os.posix_fallocate(fd, start, size)
    except OSError as exc:               # ENOSPC and the like: the caller's error
        if exc.errno in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL, errno.ENODEV):
            return None
        raise
    try:                                 # a file system that cannot map it shared: written
        o0 = start - start % mmap.ALLOCATIONGRANULARITY
        mmap.mmap(fd, start + size - o0, offset=o0).close()
    except (OSError, ValueError):        # (the write fills the reserved bytes exactly)
        return None
    return fd, start


def _build_mapped(fh, at, spans, first, blen, build, records, low, big, nb) -> None:
    """Each chunk of :func:`write_epbs` built in a map of its range of the file (``at``:
    :func:`_reserve`), ``nb`` at once; input pages released behind them in order, and
    ``fh`` left at the end of what was written."""
    from sniffsync import runtime
    from sniffsync.io.capture import release
    fd, base = at

    def one(a, b):
        lo, hi = base + int(first[a]), base + int(first[b - 1] + blen[b - 1])
        o0 = lo - lo % mmap.ALLOCATIONGRANULARITY
        m = mmap.mmap(fd, hi - o0, offset=o0)            # shared: the bytes are the file's
        try:
            build(a, b, np.frombuffer(m, np.uint8, offset=lo - o0))
        finally:
            try:
                m.close()
            except BufferError:          # a failed build's traceback still holds a view:
                pass                     # its own error is the one to raise; the map goes with it
    with runtime.pool(nb) as bx:
        pending = deque()
        for j, (a, b) in enumerate(spans):
            pending.append((b, bx.submit(one, a, b)))
            while pending and (len(pending) >= nb or j + 1 == len(spans)):
                done, fut = pending.popleft()
                fut.result()
                for s, rec in enumerate(records):    # later chunks need offsets >= low[s][done]
                    if low[s][done] < big:
                        release(rec, int(low[s][done]))
    fh.seek(base + int(first[-1] + blen[-1]))


def _write_next(fh, records, low, big, builds, written, wx, free) -> None:
    """The oldest chunk built: release the input pages no later chunk needs, write it on
    ``wx`` (in order), and put the buffer of the chunk written before back on ``free``."""
    from sniffsync.io.capture import release
    b, fut = builds.popleft()
    chunk = fut.result()
    for s, rec in enumerate(records):    # chunks after this one need offsets >= low[s][b]
        if low[s][b] < big:
            release(rec, int(low[s][b]))
    while written:                       # at most one write queued behind the running one
        if len(written) < 2 and not written[0][1].done():
            break
        buf, w = written.popleft()
        w.result()
        free.append(buf)
    written.append((chunk if chunk.base is None else chunk.base, wx.submit(fh.write, chunk)))


def write_merged(path, merged: Merged, *, chunk_bytes: int = CHUNK_BYTES) -> int:
    """Write a merge's table as pcapng (the format: :mod:`sniffsync.sync.mergedfile`).

    Each row of ``merged.frames`` is written on the interface of its ``sniffer`` column
    (the strongest copy, or every copy when the table kept duplicates), at its common
    ``ts_ns``, with the merge's columns in a custom option and the comment
    ``"heard by: A(-41 dBm) B(-67 dBm)"``; the section header holds the sniffer names,
    stamp convention and report. The bytes come from ``merged.records`` (row ``frame``
    of input ``sniffer``), so the caller may filter or reorder the rows first. Streamed
    (bounded memory) through :func:`sniffsync.io.atomic.atomic_output`. Returns the
    number of packets. :func:`sniffsync.sync.mergedfile.read_merged` reads it back.
    """
    from sniffsync.io.atomic import atomic_output
    frames, records, names = merged.frames, merged.records, merged.sniffers
    if records is None:
        raise UsageError("writing a pcapng needs the capture records (merge from file paths)")
    idx = frames.index.to_numpy(np.int64) if merged.by_index else frames["frame"].to_numpy(np.int64) - 1
    head = merged_head(names, [int(np.asarray(r.linktype)[0]) if len(r.linktype) else 127 for r in records],
                       merged.stamps, merged.report, len(frames))
    sn = frames["sniffer"].to_numpy(np.int64)
    start, caplen = np.zeros(len(frames), np.int64), np.zeros(len(frames), np.int64)
    for s, rec in enumerate(records):    # per sniffer: where its packets' bytes are
        m = sn == s
        start[m] = np.asarray(rec.data_off, np.int64)[idx[m]]
        caplen[m] = np.asarray(rec.caplen, np.int64)[idx[m]]
    with atomic_output(path) as fh:
        fh.write(head)
        write_rows(fh, frames, records, start, caplen, names, chunk_bytes)
    return len(frames)


def merged_head(names, linktypes, stamps: str, report, n_packets: int) -> bytes:
    """The section header (format, names, stamps, report, a summary comment) and one IDB
    per sniffer of a merged file."""
    from sniffsync.io.writers import _idb
    from sniffsync.sync.mergedfile import shb_block
    meta = {"sniffers": list(names), "stamps": stamps, "report": report}
    tot = (report or {}).get("totals", {})
    comment = (f"sniffsync merge of {len(names)} sniffers ({', '.join(names)}): {n_packets} packets, "
               f"stamps mark {'PPDU ends' if stamps == 'end' else 'capture times'}"
               + (f", {tot.get('duplicates_removed')} duplicate copies removed" if tot else ""))
    return shb_block(meta, comment) + b"".join(
        _idb({"name": n, "linktype": lt}) for n, lt in zip(names, linktypes))


def write_rows(fh, frames, records, start, caplen, names, chunk_bytes: int = CHUNK_BYTES) -> None:
    """The EPBs of the rows of a merged table, as :func:`write_merged` writes them after
    the head (``start``, ``caplen``: where each row's packet is in its sniffer's
    ``records[s].buf``)."""
    from sniffsync.sync.mergedfile import epb_options
    sn = frames["sniffer"].to_numpy(np.int64)
    ts_ns = frames["ts_ns"].to_numpy(np.int64)
    if len(ts_ns) and ts_ns.min() < 0:
        raise UsageError("ts_ns must be >= 0 (ns since the Unix epoch)")
    signals = {s: frames[f"signal_dbm_s{s}"] for s in range(len(names)) if f"signal_dbm_s{s}" in frames}
    inv, texts = heard_by(frames["sniffers_heard"].to_numpy(), signals, names)
    opt = comment_blob(["heard by: " + t for t in texts]) + (inv,)
    write_epbs(fh, records, sn, start, caplen, frames["wirelen"].to_numpy(np.int64), ts_ns, opt,
               chunk_bytes, fixed=epb_options(frames, len(names)))
