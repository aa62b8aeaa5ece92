"""Streamed pcapng writer of a merged table: the packet bytes come straight from the inputs.

A chunk of rows (about ``chunk_bytes`` of output) is assembled at a time in one buffer: the
28-byte block headers, the packet bytes copied from each sniffer's memory-mapped input
(rows of one length at a time, :func:`copy_runs`), the padding plus the "heard by" comment
option (a few distinct texts) and the trailers. Input pages below
every sniffer's lowest pending record are released behind the writer, so memory stays
bounded by the chunk, not by the capture.
"""
from __future__ import annotations

import struct

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view as windows

__all__ = ["comment_blob", "write_epbs"]


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


def copy_runs(dst: np.ndarray, dst_off: np.ndarray, src: np.ndarray, src_off: np.ndarray,
              lens: np.ndarray) -> None:
    """``dst[dst_off[i]:dst_off[i] + lens[i]] = src[src_off[i]:src_off[i] + lens[i]]`` for all ``i``.

    Rows of one length are copied together as rows of two sliding-window views (a memcpy
    per row inside numpy), so the Python loop runs once per distinct length, not per row.
    """
    lens = np.asarray(lens, np.int64)
    order = np.argsort(lens, kind="stable")
    ln = lens[order]
    cut = np.flatnonzero(np.r_[True, ln[1:] != ln[:-1], True])
    for a, b in zip(cut[:-1], cut[1:]):      # per distinct length
        w = int(ln[a])
        if w == 0:
            continue
        rows = order[a:b]
        windows(dst, w, writeable=True)[dst_off[rows]] = windows(src, w)[src_off[rows]]


def write_epbs(fh, records, sn, start, caplen, wirelen, ts_ns, opt, chunk_bytes) -> None:
    """Write one EPB per row (the layout of :func:`sniffsync.io.writers.write_pcapng`).

    Parameters
    ----------
    fh : binary file
    records : list of :class:`sniffsync.io.capture.Records`
        Per sniffer: ``buf`` holds the packet bytes; pages are released behind the writer.
    sn, start, caplen, wirelen, ts_ns : int arrays, shape (n,)
        Interface (= sniffer), offset of the packet bytes in its ``buf``, lengths, time (ns).
    opt : (blob, off, olen, inv)
        :func:`comment_blob` of the distinct texts and the text index of every row.
    chunk_bytes : int
        Output bytes assembled per step.
    """
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
    for s in range(len(records)):            # per sniffer
        low[s] = np.minimum.accumulate(np.r_[np.where(sn == s, start, big), big][::-1])[::-1]
    for a, b in zip(cuts[:-1], cuts[1:]):
        r = slice(a, b)
        bo = end[r] - blen[r] - (end[a - 1] if a else 0)       # block offsets in the chunk
        out = np.empty(int(bo[-1] + blen[b - 1]), np.uint8)
        head = np.empty((b - a, 7), "<u4")
        head[:, 0], head[:, 1], head[:, 2] = 6, blen[r], sn[r]
        head[:, 3], head[:, 4] = ts_ns[r] >> 32, ts_ns[r] & 0xFFFFFFFF     # ns ticks
        head[:, 5], head[:, 6] = caplen[r], wirelen[r]
        windows(out, 28, writeable=True)[bo] = head.view(np.uint8).reshape(-1, 28)
        for s, rec in enumerate(records):    # per sniffer: its packets' bytes
            m = np.flatnonzero(sn[r] == s)
            if len(m):
                copy_runs(out, bo[m] + 28, np.asarray(rec.buf), start[r][m], caplen[r][m])
        copy_runs(out, bo + 28 + caplen[r], blob, oo[inv[r]] - pad[r], pad[r] + olen[r])
        trailer = blen[r].astype("<u4").view(np.uint8).reshape(-1, 4)
        windows(out, 4, writeable=True)[bo + blen[r] - 4] = trailer
        fh.write(out.data)
        for s, rec in enumerate(records):   # input pages no later chunk needs
            if low[s, b] < big:
                release(rec, int(low[s, b]))
