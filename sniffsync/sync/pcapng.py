"""Streamed pcapng writer of a merged table: packet bytes gathered by Arrow from the inputs.

Every Enhanced Packet Block is written as three pieces: the previous block's trailer
plus this block's 28-byte header, the packet bytes (in the input's memory map), and
the padding plus the comment option (a few distinct texts). A chunk of blocks (~32
MiB) is described as an Arrow ``binary_view`` array -- per piece its length, first
bytes, buffer and offset, pieces of <= 12 bytes inline -- and one cast to
``large_binary`` concatenates all pieces in C++, a memcpy per piece with the GIL
released, into exactly the bytes to write. Three threads overlap: the main thread
describes chunk ``k + 2``, a worker maps the input pages of chunk ``k + 1`` and casts
it, another writes chunk ``k`` (:class:`DirectSink`). Input pages below every
sniffer's lowest pending record are then released, so memory stays bounded. Without
the ``binary_view`` cast (pyarrow < 16) numpy copies the same pieces.
"""
from __future__ import annotations

import errno
import mmap
import os
import struct
from concurrent.futures import ThreadPoolExecutor

import numpy as np

__all__ = ["DirectSink", "comment_blob", "write_epbs"]

_WIN = 1 << 30              # input windows: view offsets are int32, records < 16 MiB
_INLINE = 12                # binary_view: values this short live in the view itself


class DirectSink:
    """Write a byte stream to a new file with ``O_DIRECT``, in aligned blocks.

    A big output written through the page cache costs a fresh page per 4 KiB of file
    (on this VM class ~2 s per GiB, more than the copy itself); direct writes go from
    one reused, aligned staging buffer to the disk. Where the file system refuses
    ``O_DIRECT`` (tmpfs, some network file systems), or the file is not at offset 0,
    it writes normally. :meth:`close` writes the unaligned tail without ``O_DIRECT``.
    """

    ALIGN = 4096

    def __init__(self, fh, stage_bytes: int = 8 << 20):
        fh.flush()
        self.fd, self.fill = fh.fileno(), 0
        self.stage = np.frombuffer(mmap.mmap(-1, stage_bytes), np.uint8)   # page-aligned
        self.direct = False
        if hasattr(os, "O_DIRECT") and os.lseek(self.fd, 0, os.SEEK_CUR) == 0:
            self.direct = self._set_direct(True)

    def _set_direct(self, on: bool) -> bool:
        import fcntl
        try:
            fl = fcntl.fcntl(self.fd, fcntl.F_GETFL)
            fcntl.fcntl(self.fd, fcntl.F_SETFL, fl | os.O_DIRECT if on else fl & ~os.O_DIRECT)
            return on
        except OSError:
            return False

    def _put(self, view) -> None:
        while len(view):                 # os.write may write less than asked
            view = view[os.write(self.fd, view):]

    def write(self, data) -> None:
        src = np.frombuffer(data, np.uint8)
        while len(src):
            k = min(len(src), len(self.stage) - self.fill)
            self.stage[self.fill:self.fill + k] = src[:k]
            self.fill, src = self.fill + k, src[k:]
            if self.fill == len(self.stage):
                self._flush()

    def _flush(self) -> None:
        n = self.fill - self.fill % self.ALIGN if self.direct else self.fill
        try:
            self._put(memoryview(self.stage)[:n])
        except OSError as exc:           # O_DIRECT refused after all: write normally
            if not self.direct or exc.errno != errno.EINVAL:
                raise
            self.direct = self._set_direct(False)
            n = self.fill
            self._put(memoryview(self.stage)[:n])
        self.stage[:self.fill - n] = self.stage[n:self.fill].copy()
        self.fill -= n

    def close(self) -> None:
        """Write what is left (the last partial block without ``O_DIRECT``)."""
        self._flush()
        if self.fill:
            self.direct = self._set_direct(False)
            self._flush()


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


def _head_bytes(src: np.ndarray, off: np.ndarray, ln: np.ndarray) -> np.ndarray:
    """(m, 12) uint8: the first ``min(ln, 12)`` bytes at ``src[off:]``, zero beyond."""
    k = np.arange(_INLINE)
    valid = k < np.minimum(ln, _INLINE)[:, None]
    idx = np.where(valid, off[:, None] + k, 0)
    return np.where(valid, src[idx], 0).astype(np.uint8)


def _u32_at(src: np.ndarray) -> np.ndarray:
    """``out[i]`` = the little-endian uint32 at byte ``i`` of ``src`` (a strided view, no copy)."""
    return np.ndarray((max(len(src) - 3, 0),), "<u4", src, 0, (1,))


def _views(src: np.ndarray, off: np.ndarray, ln: np.ndarray, buf_id, buf_off, u32=None) -> np.ndarray:
    """Binary-view rows (m, 16 bytes) of the pieces ``src[off:off + ln]``: length, then the
    bytes inline (<= 12 bytes) or the first 4 bytes, Arrow buffer ``buf_id`` and ``buf_off``."""
    view = np.zeros((len(off), 4), "<i4")
    view[:, 0] = ln
    small = ln <= _INLINE
    big = ~small
    if big.any():
        u32 = _u32_at(src) if u32 is None else u32
        view[big, 1] = u32[off[big]].view("<i4")
        view[big, 2] = buf_id[big] if np.ndim(buf_id) else buf_id
        view[big, 3] = buf_off[big]
    if small.any():
        s = np.flatnonzero(small)
        view.view(np.uint8).reshape(-1, 16)[s, 4:] = _head_bytes(src, off[s], ln[s])
    return view


def _arrow_views() -> bool:
    """Whether this pyarrow casts ``binary_view`` to ``large_binary`` (pyarrow >= 16)."""
    try:
        import pyarrow as pa
        v = np.zeros(4, "<i4")
        v[:2] = 2, 0x6968                # one inline value: b"hi"
        arr = pa.Array.from_buffers(pa.binary_view(), 1, [None, pa.py_buffer(v)])
        return arr.cast(pa.large_binary()).to_pylist() == [b"hi"]
    except (AttributeError, NotImplementedError, TypeError, ValueError, ImportError):
        return False


def _concat_views(views: np.ndarray, bufs: list) -> np.ndarray:
    """The bytes of binary-view rows ``views`` (n, 4 int32) over numpy ``bufs``, back to back:
    the same as Arrow's cast, with one row copy per (buffer, length) through sliding
    windows (a memcpy per piece inside numpy) -- the path for older pyarrow."""
    from numpy.lib.stride_tricks import sliding_window_view as windows
    ln = views[:, 0].astype(np.int64)
    dst = np.r_[0, np.cumsum(ln)[:-1]]
    out = np.empty(int(ln.sum()), np.uint8)
    small = np.flatnonzero(ln <= _INLINE)
    raw = views.view(np.uint8).reshape(-1, 16)
    k = np.arange(_INLINE)
    keep = k < ln[small, None]
    out[(dst[small, None] + k)[keep]] = raw[small, 4:][keep]
    big = np.flatnonzero(ln > _INLINE)
    key = views[big, 2].astype(np.int64) << 32 | ln[big]
    order = np.argsort(key, kind="stable")
    big, key = big[order], key[order]
    cut = np.flatnonzero(np.r_[True, key[1:] != key[:-1], True])
    for a, b in zip(cut[:-1], cut[1:]):  # per (buffer, length): a few thousand
        r, w = big[a:b], int(ln[big[a]])
        src = bufs[views[r[0], 2]]
        windows(out, w, writeable=True)[dst[r]] = windows(src, w)[views[r, 3].astype(np.int64)]
    return out


def write_epbs(fh, records, sn, start, caplen, wirelen, ts_ns, opt, chunk_bytes) -> None:
    """Write one EPB per row (the layout of :func:`sniffsync.writers.write_pcapng`).

    Parameters
    ----------
    fh : binary file
    records : list of :class:`sniffsync.capture.Records`
        Per sniffer: ``buf`` holds the packet bytes; pages are released behind the writer.
    sn, start, caplen, wirelen, ts_ns : int arrays, shape (n,)
        Interface (= sniffer), offset of the packet bytes in its ``buf``, lengths, time (ns).
    opt : (blob, off, olen, inv)
        :func:`comment_blob` of the distinct texts and the text index of every row.
    chunk_bytes : int
        Output bytes described per step.
    """
    import pyarrow as pa
    from sniffsync.io.capture import release
    blob, oo, ol, inv = opt
    n, big = len(sn), np.iinfo(np.int64).max
    if n == 0:
        return
    olen, pad = ol[inv], -caplen % 4
    blen = 32 + caplen + pad + olen
    end = np.cumsum(blen)
    cuts = np.unique(np.r_[0, np.searchsorted(end, np.arange(chunk_bytes, end[-1], chunk_bytes)), n])
    # per sniffer, the lowest input offset still needed from each row on (suffix minimum)
    low = np.full((len(records), n + 1), big)
    for s in range(len(records)):        # per sniffer
        low[s] = np.minimum.accumulate(np.r_[np.where(sn == s, start, big), big][::-1])[::-1]
    # view buffers: [headers of the chunk, comment blob, 1 GiB windows of every input]
    wins, wbase = [], []
    for rec in records:                  # per sniffer
        wbase.append(2 + len(wins))
        size = len(rec.buf)
        wins += [rec.buf[k:min(size, k + 2 * _WIN - 1)] for k in range(0, max(size, 1), _WIN)]
    wbase = np.asarray(wbase, np.int64)
    arrow = _arrow_views()
    pa_bufs = [pa.py_buffer(blob), *map(pa.py_buffer, wins)] if arrow else None
    u32s = [_u32_at(rec.buf) for rec in records]
    # padding + comment pieces depend on (text, padding) only: their views, once
    k = np.arange(4 * len(oo))
    t_off = oo[k // 4] - k % 4
    tail = _views(blob, t_off, k % 4 + ol[k // 4], 1, t_off)

    def cast(views, packets, lead_u8, nbytes):
        # cast thread: the packets' views (a gather that faults their pages in) and the
        # concatenation release the GIL, so they overlap the main thread's next chunk
        for s, i, st, cl in packets:
            views[i, 1] = _views(records[s].buf, st, cl, wbase[s] + st // _WIN, st % _WIN, u32s[s])
        if not arrow:
            return memoryview(_concat_views(views.reshape(-1, 4), [lead_u8, blob, *wins]))
        arr = pa.Array.from_buffers(pa.binary_view(), 3 * len(views),
                                    [None, pa.py_buffer(views), pa.py_buffer(lead_u8), *pa_bufs])
        return memoryview(arr.cast(pa.large_binary()).buffers()[2])[:nbytes]

    casts, writes = [], []
    # main thread describes chunk k + 2 while chunk k + 1 is cast and chunk k written
    with ThreadPoolExecutor(1) as cast_pool, ThreadPoolExecutor(1) as write_pool:
        for a, b in zip(cuts[:-1], cuts[1:]):
            m, r = b - a, np.arange(a, b)
            lead = np.empty((m, 8), "<u4")      # previous trailer + this header
            lead[:, 0] = blen[r - 1]
            lead[:, 1], lead[:, 2], lead[:, 3] = 6, blen[a:b], sn[a:b]
            lead[:, 4], lead[:, 5] = ts_ns[a:b] >> 32, ts_ns[a:b] & 0xFFFFFFFF  # ns ticks
            lead[:, 6], lead[:, 7] = caplen[a:b], wirelen[a:b]
            lead_u8 = lead.view(np.uint8).ravel()
            views = np.empty((m, 3, 4), "<i4")
            l_off, l_len = np.arange(m, dtype=np.int64) * 32, np.full(m, 32, np.int64)
            if a == 0:                   # the first block has no trailer before it
                l_off[0], l_len[0] = 4, 28
            views[:, 0] = _views(lead_u8, l_off, l_len, 0, l_off)
            st, cl, s_ = start[a:b], caplen[a:b], sn[a:b]
            packets = [(s, i, st[i], cl[i]) for s, i in
                       ((s, np.flatnonzero(s_ == s)) for s in range(len(records))) if len(i)]
            views[:, 2] = tail[inv[a:b] * 4 + pad[a:b]]
            nbytes = int(end[b - 1] - (end[a - 1] if a else 4))    # blocks a..b-1 less a trailer
            casts.append((cast_pool.submit(cast, views, packets, lead_u8, nbytes), b))
            while len(casts) > 1:
                _hand_over(casts.pop(0), records, low, big, release, write_pool, fh, writes)
        while casts:
            _hand_over(casts.pop(0), records, low, big, release, write_pool, fh, writes)
        for w in writes:
            w.result()
    fh.write(blen[-1:].astype("<u4").tobytes())      # the last block's trailer


def _hand_over(job, records, low, big, release, write_pool, fh, writes) -> None:
    """A chunk is cast: queue its write (at most two in flight), and drop the input
    pages no later chunk needs."""
    fut, b = job
    data = fut.result()
    while len(writes) > 1:
        writes.pop(0).result()
    writes.append(write_pool.submit(fh.write, data))
    for s, rec in enumerate(records):
        if low[s, b] < big:
            release(rec, int(low[s, b]))
