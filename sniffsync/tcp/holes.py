"""Bytes the sniffer never captured but the receiver acknowledged: goodput across holes.

A sniffer misses segments (collisions, fading) that the receiver got: its cumulative ACK
then covers sequence numbers no captured segment carried. Those bytes were delivered;
they are counted as goodput of the data direction, dated at the first ACK that covers
them, and reported apart (``inferred_bytes``).

Per flow direction the captured sequence space is the union of ``[rel_seq, seg_end)``
of its live TCP rows (pure ACKs mark a point: their sequence number was sent). A hole is
a gap of that union after its first row, plus the tail above the highest end (segments
missed at the end, at most :data:`TAIL_MAX` bytes: an ACK further above is not
plausible). ``U(x)`` = hole bytes below ``x``; an advancing ACK from ``a`` to ``b``
infers ``U(b) - U(a)`` bytes, counted only for a direction with captured payload
(a missed FIN would otherwise make an ACK-only direction a flow). Columnar: one sort of the rows by (fd, seq), one
``searchsorted`` per ACK.
"""
from __future__ import annotations

import numpy as np

from sniffsync.tcp.columns import SEQ_SPAN, group_starts, grouped_cummax, lex_order, restart_cumsum

__all__ = ["TAIL_MAX", "hole_table", "inferred_arrays"]

TAIL_MAX = 1 << 30          # RFC 7323's largest window: no more can be in flight past the last seen
_HALF = int(SEQ_SPAN) // 2 - 1


def _key(fd: np.ndarray, v: np.ndarray) -> np.ndarray:
    """(fd, sequence) in one sortable int64 (each fd its own band)."""
    return fd * SEQ_SPAN + np.clip(v, -_HALF, _HALF)


def hole_table(fd: np.ndarray, start: np.ndarray, end: np.ndarray) -> dict:
    """Holes of each fd's captured sequence space (rows: intervals ``[start, end)``).

    Returns ``fd``, ``lo``, ``hi`` (the hole) and ``before`` (hole bytes of the fd below
    ``lo``), sorted by (fd, lo).
    """
    if not len(fd):
        z = np.zeros(0, np.int64)
        return {"fd": z, "lo": z, "hi": z, "before": z}
    o = lex_order(fd, start)
    f, s, e = fd[o], start[o], np.maximum(end[o], start[o])
    first = group_starts(f)
    cm = grouped_cummax(f, e)
    prev = np.empty_like(cm)
    prev[1:] = cm[:-1]
    prev[first] = s[first]                       # nothing below the first row is a hole
    gap = np.flatnonzero(s > prev)
    last = np.append(np.flatnonzero(first)[1:] - 1, len(f) - 1)
    hf = np.concatenate([f[gap], f[last]])
    lo = np.concatenate([prev[gap], cm[last]])
    hi = np.concatenate([s[gap], cm[last] + TAIL_MAX])
    o = np.lexsort((lo, hf))
    hf, lo, hi = hf[o], lo[o], hi[o]
    size = hi - lo
    before = restart_cumsum(size, group_starts(hf)) - size
    return {"fd": hf, "lo": lo, "hi": hi, "before": before}


def hole_bytes_below(holes: dict, fd: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``U(x)``: hole bytes of ``fd`` below sequence number ``x`` (0 for an fd without holes)."""
    if not len(holes["fd"]) or not len(fd):
        return np.zeros(len(fd), np.int64)
    j = np.searchsorted(_key(holes["fd"], holes["lo"]), _key(fd, x), side="left") - 1
    jj = np.maximum(j, 0)
    ok = (j >= 0) & (holes["fd"][jj] == fd)
    part = np.minimum(x, holes["hi"][jj]) - holes["lo"][jj]
    return np.where(ok, holes["before"][jj] + part, 0)


def inferred_arrays(seg, live: np.ndarray, ai: np.ndarray, afd: np.ndarray, acm: np.ndarray) -> dict:
    """Bytes inferred at each advancing ACK: ``row`` (the ACK), ``fd`` (the data
    direction, ``afd ^ 1``) and ``bytes`` (> 0 only).

    ``ai``: the live ACK rows sorted by (fd, time), ``afd`` their fds, ``acm`` the highest
    ACK so far in the other direction's relative sequence space (``_AckRows``).
    """
    empty = {"row": np.zeros(0, np.int64), "fd": np.zeros(0, np.int64), "bytes": np.zeros(0, np.int64)}
    if not len(ai):
        return empty
    li = np.flatnonzero(live)
    holes = hole_table(seg["fd"][li], seg["rel_seq"][li], seg["seg_end"][li])
    df = afd ^ 1
    u = hole_bytes_below(holes, df, acm)
    first = group_starts(afd)
    got = np.diff(u, prepend=0)
    got[first] = u[first]
    # only into directions that carried captured payload: a missed SYN or FIN of an
    # ACK-only direction would make it a 1-byte "flow" (and halve Jain's index)
    fd = seg["fd"][li]
    pay = np.unique(fd[seg["payload_len"][li] > 0])
    p = np.minimum(np.searchsorted(pay, df), max(len(pay) - 1, 0))
    k = np.flatnonzero((got > 0) & (pay[p] == df if len(pay) else False))
    return {"row": ai[k], "fd": df[k], "bytes": got[k]}
