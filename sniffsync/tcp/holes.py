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
(a missed FIN would otherwise make an ACK-only direction a flow). Columnar: one sort of the rows by (fd, seq)
(none when already in that order). ``U`` changes only at ACKs that end inside a hole or move past one, so
``U`` is evaluated there only: each hole's ACK rows are one ``searchsorted`` of its bounds over the ACKs'
sorted (fd, highest ACK) keys.
"""
from __future__ import annotations

import numpy as np

from sniffsync.tcp.columns import (SEQ_SPAN, fd_slices, group_starts, grouped_cummax, is_sorted, lex_order,
                                   restart_cumsum)

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
    o = _seq_order(fd, start)
    if o is None:
        f, s, e = fd, start, np.maximum(end, start)          # already in order: no gathers
    else:
        f, s, e = fd[o], start[o], np.maximum(end[o], start[o])
    first = group_starts(f)
    cm = grouped_cummax(f, e, copy=False)        # (read only)
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


def _seq_order(fd: np.ndarray, start: np.ndarray):
    """Stable order by (fd, start), None when already in it. Rows come in (fd, time) order,
    where sequence numbers mostly rise: one stable sort of the (fd, start) key (timsort:
    it merges the rising runs) instead of a lexicographic sort."""
    if int(fd.min()) >= 0 and int(fd.max()) < 1 << 22 and -_HALF < int(start.min()) and int(start.max()) < _HALF:
        key = fd * SEQ_SPAN + start
        return None if is_sorted(key) else np.argsort(key, kind="stable")
    o = lex_order(fd, start)
    return None if (o[1:] > o[:-1]).all() else o


def hole_bytes_below(holes: dict, fd: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``U(x)``: hole bytes of ``fd`` below sequence number ``x`` (0 for an fd without holes)."""
    if not len(holes["fd"]) or not len(fd):
        return np.zeros(len(fd), np.int64)
    j = np.searchsorted(_key(holes["fd"], holes["lo"]), _key(fd, x), side="left") - 1
    jj = np.maximum(j, 0)
    ok = (j >= 0) & (holes["fd"][jj] == fd)
    part = np.minimum(x, holes["hi"][jj]) - holes["lo"][jj]
    return np.where(ok, holes["before"][jj] + part, 0)


def _touching(holes: dict, afd: np.ndarray, acm: np.ndarray) -> np.ndarray:
    """Positions (ascending) of the ACK rows whose ``U`` may differ from their
    predecessor's: an ACK of hole ``[lo, hi)``'s receiver whose highest ACK passed ``lo``,
    up to the first that reached ``hi`` (rows sorted by (fd, time): ``acm`` rises within
    each fd, so the (fd, acm) keys are sorted). Elsewhere both sides of ``U(acm_i) -
    U(acm_{i-1})`` hold the same bytes of every hole."""
    m = len(afd)
    comp = _key(afd, acm)
    g = holes["fd"] ^ 1                            # the ACK direction of each hole
    a = np.searchsorted(comp, _key(g, holes["lo"]), side="right")
    b = np.searchsorted(comp, _key(g, holes["hi"]), side="left")
    b = np.minimum(b, np.searchsorted(comp, _key(g + 1, np.full(len(g), -_HALF)), side="left") - 1)
    ok = a <= b
    a, b = a[ok], b[ok]
    if not len(a):
        return a
    mark = np.bincount(a, minlength=m + 1) - np.bincount(b + 1, minlength=m + 1)
    return np.flatnonzero(np.cumsum(mark[:m]) > 0)


def _live_holes(seg, live: np.ndarray) -> dict:
    """:func:`hole_table` of the live TCP rows, one group of whole flow directions at a
    time (:func:`fd_slices`: holes are per fd; its temporaries for one group at a time),
    only of directions that carried captured payload (the rows of the others, often half
    the table, are not gathered): a missed SYN or FIN of an ACK-only direction would make
    it a 1-byte "flow" (and halve Jain's index)."""
    fd_all = seg["fd"]
    plen = seg["payload_len"]
    parts = []
    for sl in fd_slices(fd_all):
        lv = live[sl]
        fd = fd_all[sl]
        if not lv.any():
            continue
        pay = np.bincount(fd[lv & (plen[sl] > 0)], minlength=int(fd.max()) + 1) > 0
        if _whole_fds(seg, sl, lv, fd, pay, parts):
            continue
        lv = lv & pay[fd]                          # whole fds: their holes and ``before`` stand
        li = sl if lv.all() else np.flatnonzero(lv) + sl.start
        del fd, pay
        if not lv.any():
            continue

        def col(name):
            return seg[name][li]
        parts.append(hole_table(col("fd"), col("rel_seq"), col("seg_end")))
        del lv, li
    if not parts:
        return hole_table(fd_all[:0], fd_all[:0], fd_all[:0])
    return {k: np.concatenate([h[k] for h in parts]) for k in parts[0]}


def _whole_fds(seg, sl: slice, lv, fd, pay, parts: list, most: int = 64) -> bool:
    """:func:`_live_holes` of one group of rows when every row is live and the group holds
    at most ``most`` fds: each payload fd's rows are a contiguous block (rows sorted by fd),
    whose hole table is built on views of the columns (no gathers). False otherwise."""
    if not lv.all():
        return False
    head = np.flatnonzero(group_starts(fd))
    if len(head) > most:
        return False
    end = np.append(head[1:], len(fd))
    cols = [seg[c][sl] for c in ("fd", "rel_seq", "seg_end")]
    for a, b in zip(head, end):
        if pay[fd[a]]:
            parts.append(hole_table(*(c[a:b] for c in cols)))
    return True


def inferred_arrays(seg, live: np.ndarray, ai: np.ndarray, afd: np.ndarray, acm: np.ndarray) -> dict:
    """Bytes inferred at each advancing ACK: ``row`` (the ACK), ``fd`` (the data
    direction, ``afd ^ 1``) and ``bytes`` (> 0 only).

    ``ai``: the live ACK rows sorted by (fd, time), ``afd`` their fds, ``acm`` the highest
    ACK so far in the other direction's relative sequence space (``_AckRows``).
    """
    empty = {"row": np.zeros(0, np.int64), "fd": np.zeros(0, np.int64), "bytes": np.zeros(0, np.int64)}
    if not len(ai):
        return empty
    holes = _live_holes(seg, live)
    c = _touching(holes, afd, acm)
    if not len(c):
        return empty
    df = afd[c] ^ 1
    got = hole_bytes_below(holes, df, acm[c])
    p = np.maximum(c - 1, 0)
    same = (c > 0) & (afd[p] == afd[c])            # the predecessor is of the same ACK fd
    got = got - np.where(same, hole_bytes_below(holes, df, acm[p]), 0)
    k = np.flatnonzero(got > 0)
    return {"row": ai[c[k]], "fd": df[k], "bytes": got[k]}
