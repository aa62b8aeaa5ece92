"""Streamed pcapng writer of a merged table: the packet bytes come straight from the inputs.

A chunk of rows (about ``chunk_bytes`` of output) is assembled at a time: the 28-byte block
headers, the packet bytes gathered from each sniffer's memory-mapped input (one ragged
index per chunk), the padding plus the "heard by" comment option (a few distinct texts),
and the trailers, interleaved by :func:`sniffsync.io.writers.assemble`. Input pages below
every sniffer's lowest pending record are released behind the writer, so memory stays
bounded by the chunk, not by the capture.
"""
from __future__ import annotations

import struct

import numpy as np

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


def ragged_index(starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(starts[i], starts[i] + lens[i])`` over ``i``."""
    lens = np.asarray(lens, np.int64)
    total = int(lens.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    first = np.cumsum(lens) - lens
    return np.repeat(np.asarray(starts, np.int64) - first, lens) + np.arange(total, dtype=np.int64)


def _packets(records, sn, start, caplen) -> np.ndarray:
    """The packet bytes of rows (``start``/``caplen`` in sniffer ``sn``'s buffer), back to back."""
    out = np.empty(int(caplen.sum()), np.uint8)
    src = ragged_index(start, caplen)
    owner = np.repeat(sn, caplen)
    for s, rec in enumerate(records):        # per sniffer
        m = owner == s
        if m.any():
            out[m] = np.asarray(rec.buf)[src[m]]
    return out


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
    from sniffsync.io.writers import assemble
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
        head = np.empty((b - a, 7), "<u4")
        head[:, 0], head[:, 1], head[:, 2] = 6, blen[r], sn[r]
        head[:, 3], head[:, 4] = ts_ns[r] >> 32, ts_ns[r] & 0xFFFFFFFF     # ns ticks
        head[:, 5], head[:, 6] = caplen[r], wirelen[r]
        packets = _packets(records, sn[r], start[r], caplen[r])
        t_len = pad[r] + olen[r]
        tails = blob[ragged_index(oo[inv[r]] - pad[r], t_len)]
        assemble(fh, b - a, [(head.view(np.uint8).reshape(-1, 28), 28),
                             ((packets, np.r_[0, np.cumsum(caplen[r])]), caplen[r]),
                             ((tails, np.r_[0, np.cumsum(t_len)]), t_len),
                             (blen[r].astype("<u4").view(np.uint8).reshape(-1, 4), 4)])
        for s, rec in enumerate(records):   # input pages no later chunk needs
            if low[s, b] < big:
                release(rec, int(low[s, b]))
