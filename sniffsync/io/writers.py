"""Capture writers: classic pcap and pcapng from columnar packet arrays.

All packets arrive as one ``uint8`` array plus offsets. Every record header is built
as one numpy array, then headers and packet bytes are copied into the output, all
parts of one length at once (sliding-window views: a memcpy per part), a chunk of records
at a time so memory stays bounded for captures of millions of frames. Output goes
through :func:`sniffsync.io.atomic.atomic_output`, so a failed write never leaves a
partial capture behind.
"""
from __future__ import annotations

import struct

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from sniffsync.errors import UsageError
from sniffsync.io.atomic import atomic_output

__all__ = ["write_pcap", "write_pcapng"]

_CHUNK_BYTES = 64 << 20        # output assembled this many bytes at a time
_NS = 1_000_000_000
_PCAP_MAGIC = {True: 0xA1B23C4D, False: 0xA1B2C3D4}   # nanosecond? -> magic
_OPT_COMMENT, _OPT_NAME, _OPT_DESC, _OPT_TSRESOL, _OPT_USERAPPL = 1, 2, 3, 9, 4


def _pad4(n):
    return (-np.asarray(n, np.int64)) % 4


def _option(code: int, value: bytes) -> bytes:
    return struct.pack("<HH", code, len(value)) + value + b"\0" * (-len(value) % 4)


def _check(ts_ns, data, off, wirelen, n_name="ts_ns"):
    """Validated (ts_ns, data, off, caplen, wirelen) as numpy arrays."""
    ts_ns = np.asarray(ts_ns, np.int64)
    data = np.asarray(data)
    if data.dtype != np.uint8 or data.ndim != 1:
        raise UsageError("data must be a 1-D uint8 array of packets back to back")
    off = np.asarray(off, np.int64)
    n = ts_ns.size
    if off.shape != (n + 1,):
        raise UsageError(f"off must have len({n_name}) + 1 = {n + 1} entries, not {off.size}")
    caplen = np.diff(off)
    if n and (caplen.min() < 0 or off[0] < 0 or off[-1] > data.size):
        raise UsageError("off must be non-decreasing and inside data")
    if n and ts_ns.min() < 0:
        raise UsageError("ts_ns must be >= 0 (ns since the Unix epoch)")
    wirelen = caplen if wirelen is None else np.asarray(wirelen, np.int64)
    if wirelen.shape != (n,):
        raise UsageError(f"wirelen must have {n} entries")
    return ts_ns, data, off, caplen, wirelen


def _assemble(fh, n: int, pieces) -> None:
    """Write record ``i`` as the concatenation of every piece's part ``i``, for all ``i``.

    ``pieces`` is a list of ``(src, lens)``: ``lens`` int64[n] bytes per record and
    ``src`` either ``None`` (zeros: padding), a ``(n, w)`` uint8 array (fixed-width
    headers) or ``(bytes_u8, off)`` with part ``i`` at ``bytes_u8[off[i]:off[i+1]]``.
    """
    lens = np.stack([np.broadcast_to(np.asarray(ln, np.int64), (n,)) for _, ln in pieces], axis=1)
    rec_end = np.cumsum(lens.sum(axis=1))
    # chunk boundaries in records: each chunk ~ _CHUNK_BYTES of output (at least 1 record)
    cuts = np.searchsorted(rec_end, np.arange(_CHUNK_BYTES, rec_end[-1] if n else 0, _CHUNK_BYTES),
                           side="right") if n else np.zeros(0, np.int64)
    bounds = np.unique(np.concatenate([[0], cuts, [n]]))
    zeros = any(src is None for src, _ in pieces)
    room = np.empty(0, np.uint8)          # one output buffer reused by every chunk: pages are
    for a, b in zip(bounds[:-1], bounds[1:]):      # touched once (first touches are costly)
        ln = lens[a:b]
        flat = ln.ravel()
        at = (np.cumsum(flat) - flat).reshape(ln.shape)      # chunk offset of every part
        size = int(flat.sum())
        if room.size < size:
            room = np.empty(size, np.uint8)
        out = room[:size]
        if zeros:
            out[:] = 0                    # padding parts
        for code, (src, _) in enumerate(pieces):
            if src is None:
                continue
            # parts of one length in one fancy-indexed copy between sliding-window views
            # (a memcpy per part, no per-byte index or code arrays), a few MB at a time
            for width, rows in _runs(ln[:, code]):
                dst = sliding_window_view(out, width, writeable=True)
                if isinstance(src, tuple):
                    view, first = sliding_window_view(src[0], width), src[1][a:b]
                    for blk in _blocks(rows, width):
                        dst[at[blk, code]] = view[first[blk]]
                else:
                    for blk in _blocks(rows, width):
                        dst[at[blk, code]] = src[a + blk, :width]
        fh.write(out.data)


def _blocks(rows: np.ndarray, width: int, limit: int = 4 << 20):
    """``rows`` in pieces of at most ``limit`` bytes of ``width``-byte parts (bounded,
    reusable temporaries)."""
    step = max(1, limit // width)
    return [rows[i:i + step] for i in range(0, rows.size, step)]


def _runs(lens: np.ndarray):
    """``(length, rows)`` for every distinct positive length in ``lens``."""
    order = np.argsort(lens, kind="stable")
    uniq, first = np.unique(lens[order], return_index=True)
    return [(int(w), rows) for w, rows in zip(uniq, np.split(order, first[1:])) if w > 0]


def write_pcap(path, linktype, ts_ns, data, off, wirelen=None, nanosecond=True, snaplen=262144):
    """Write a classic pcap (little-endian) of ``n`` packets.

    Parameters
    ----------
    path : str or os.PathLike
        Output file; replaced atomically.
    linktype : int
        LINKTYPE of every packet (e.g. 127 for radiotap).
    ts_ns : array of int64, shape (n,)
        Capture times, ns since the Unix epoch.
    data : uint8 array
        All packets back to back.
    off : array of int64, shape (n + 1,)
        Packet ``i`` is ``data[off[i]:off[i + 1]]``.
    wirelen : array of int, shape (n,), optional
        Original lengths; the captured length when omitted.
    nanosecond : bool
        Nanosecond magic (0xa1b23c4d) when True, else microseconds (ts truncated).
    snaplen : int
        Header snaplen; raised to the longest packet so the file stays valid.

    Raises
    ------
    UsageError
        Inconsistent arrays, or times outside the 32-bit seconds of pcap.
    CaptureError
        The file cannot be written.
    """
    ts_ns, data, off, caplen, wirelen = _check(ts_ns, data, off, wirelen)
    n = ts_ns.size
    sec, frac = np.divmod(ts_ns, _NS)
    if n and sec.max() >= 2**32:
        raise UsageError("ts_ns beyond the 32-bit seconds of classic pcap")
    hdr = np.empty((n, 4), "<u4")
    hdr[:, 0] = sec
    hdr[:, 1] = frac if nanosecond else frac // 1000
    hdr[:, 2] = caplen
    hdr[:, 3] = wirelen
    snaplen = max(int(snaplen), int(caplen.max()) if n else 0)
    head = struct.pack("<IHHiIII", _PCAP_MAGIC[bool(nanosecond)], 2, 4, 0, 0, snaplen, int(linktype))
    with atomic_output(path) as fh:
        fh.write(head)
        if n:
            _assemble(fh, n, [(hdr.view(np.uint8).reshape(n, 16), 16), ((data, off), caplen)])


def _shb() -> bytes:
    opts = _option(_OPT_USERAPPL, b"sniffsync") + b"\0\0\0\0"
    blen = 28 + len(opts)
    return struct.pack("<IIIHHq", 0x0A0D0D0A, blen, 0x1A2B3C4D, 1, 0, -1) + opts + struct.pack("<I", blen)


def _idb(iface: dict) -> bytes:
    opts = _option(_OPT_NAME, str(iface.get("name", "")).encode())
    if iface.get("description"):
        opts += _option(_OPT_DESC, str(iface["description"]).encode())
    opts += _option(_OPT_TSRESOL, b"\x09") + b"\0\0\0\0"     # 10^-9 s: ns timestamps
    blen = 20 + len(opts)
    return (struct.pack("<IIHHI", 1, blen, int(iface["linktype"]), 0, int(iface.get("snaplen", 0)))
            + opts + struct.pack("<I", blen))


def _comment_options(comments, n: int):
    """EPB option bytes (opt_comment + opt_endofopt) and their offsets; empty where no comment."""
    lens = np.zeros(n, np.int64)
    if comments is None:
        return np.zeros(0, np.uint8), np.zeros(n + 1, np.int64), lens
    if len(comments) != n:
        raise UsageError(f"comments must have {n} entries")
    rows = [i for i, c in enumerate(comments) if isinstance(c, str) and c]   # the few commented
    blobs = [_option(_OPT_COMMENT, comments[i].encode()) + b"\0\0\0\0" for i in rows]
    lens[rows] = [len(b) for b in blobs]
    opt_off = np.concatenate([[0], np.cumsum(lens)])
    return np.frombuffer(b"".join(blobs), np.uint8), opt_off, lens


def write_pcapng(path, interfaces, iface, ts_ns, data, off, wirelen=None, comments=None):
    """Write a pcapng: one section, one IDB per interface, one EPB per packet.

    Parameters
    ----------
    path : str or os.PathLike
        Output file; replaced atomically.
    interfaces : list of dict
        ``{name, linktype, snaplen?, description?}`` per interface; each IDB gets
        ``if_name`` and ``if_tsresol`` = 9 (ns timestamps).
    iface : array of int, shape (n,)
        Interface index of every packet.
    ts_ns : array of int64, shape (n,)
        Capture times, ns since the Unix epoch.
    data : uint8 array
        All packets back to back.
    off : array of int64, shape (n + 1,)
        Packet ``i`` is ``data[off[i]:off[i + 1]]``.
    wirelen : array of int, shape (n,), optional
        Original lengths; the captured length when omitted.
    comments : sequence of str or None, optional
        Per-packet ``opt_comment``; None or ``""`` writes none.

    Raises
    ------
    UsageError
        Inconsistent arrays or an interface index with no interface.
    CaptureError
        The file cannot be written.
    """
    ts_ns, data, off, caplen, wirelen = _check(ts_ns, data, off, wirelen)
    n = ts_ns.size
    iface = np.broadcast_to(np.asarray(iface, np.int64), (n,))
    if not interfaces:
        raise UsageError("write_pcapng needs at least one interface")
    if n and (iface.min() < 0 or iface.max() >= len(interfaces)):
        raise UsageError(f"iface values must be in 0..{len(interfaces) - 1}")
    opt_bytes, opt_off, opt_lens = _comment_options(comments, n)
    pad = _pad4(caplen)
    blen = 32 + caplen + pad + opt_lens
    hdr = np.empty((n, 7), "<u4")
    hdr[:, 0] = 6                                    # Enhanced Packet Block
    hdr[:, 1] = blen
    hdr[:, 2] = iface
    ticks = ts_ns.astype(np.uint64)                  # if_tsresol 9: one tick per ns
    hdr[:, 3] = ticks >> np.uint64(32)
    hdr[:, 4] = ticks & np.uint64(0xFFFFFFFF)
    hdr[:, 5] = caplen
    hdr[:, 6] = wirelen
    trailer = blen.astype("<u4").view(np.uint8).reshape(n, 4)
    head = _shb() + b"".join(_idb(i) for i in interfaces)
    with atomic_output(path) as fh:
        fh.write(head)
        if n:
            _assemble(fh, n, [(hdr.view(np.uint8).reshape(n, 28), 28), ((data, off), caplen),
                              (None, pad), ((opt_bytes, opt_off), opt_lens), (trailer, 4)])
