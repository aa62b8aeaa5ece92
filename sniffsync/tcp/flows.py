"""Per flow direction totals of the analysed segment table: segments, bytes, goodput,
retransmissions, MAC retries and duplicates, first/last data time, main transmitter.

Rows are grouped by fd with one ``reduceat`` per column (no sort when the table is
already in fd order, as :func:`sniffsync.tcp.segments.segment_arrays` leaves it).
"""
from __future__ import annotations

import numpy as np

from sniffsync.tcp.columns import group_starts, is_sorted
from sniffsync.tcp.segments import TH_RST, TH_SYN, is_proto
from sniffsync.tcp.sequence import KIND

__all__ = ["flow_arrays"]


def _groups(fd: np.ndarray):
    """(order or None, group start positions, fd of each group) of a table sorted by fd."""
    o = None if is_sorted(fd) else np.argsort(fd, kind="stable")
    f = fd if o is None else fd[o]
    st = np.flatnonzero(group_starts(f))
    return o, st, f[st]


def flow_arrays(seg) -> dict:
    """Per flow direction totals (see :func:`sniffsync.tcp.frames.flow_table`); ``proto`` stays
    6/17, ``src``/``dst`` are codes."""
    fd = seg["fd"]
    o, st, fds = _groups(fd)

    def col(name):
        v = seg[name]
        return v if o is None else v[o]

    def gsum(x):
        return np.add.reduceat(x.astype(np.int64), st) if len(st) else np.zeros(0, np.int64)

    out = {"fd": fds}
    per = getattr(seg, "per_fd", None)
    for name in ("flow", "dir", "proto", "src", "sport", "dst", "dport"):
        out[name] = per[name][fds] if per is not None and name not in seg else col(name)[st]
    tcp = is_proto(seg, 6)
    dup = col("mac_dup")
    keep = ~dup
    data = col("is_data") & keep
    kind = col("kind")
    ts = col("ts_ns")
    out["segments"] = gsum(keep)
    out["data_segments"] = gsum(data)
    out["bytes"] = gsum(np.where(keep, col("payload_len"), 0))
    out["goodput_bytes"] = gsum(col("new_bytes"))
    out["retransmissions"] = gsum(kind == KIND["retransmission"])
    out["out_of_order"] = gsum(kind == KIND["out_of_order"])
    out["zero_windows"] = gsum(keep & (tcp if o is None else tcp[o]) & (col("win") == 0) &
                               ((col("flags") & (TH_RST | TH_SYN)) == 0))
    out["mac_retries"] = gsum(col("retry"))
    out["mac_duplicates"] = gsum(dup)
    big = np.iinfo(np.int64).max
    data &= ts >= 0
    if len(st):
        first = np.minimum.reduceat(np.where(data, ts, big), st)
        last = np.maximum.reduceat(np.where(data, ts, -1), st)
    else:
        first = last = np.zeros(0, np.int64)
    out["first_ns"] = np.where(first == big, -1, first)
    out["last_ns"] = last
    out["ta"] = _main_ta(fd, seg["ta"], fds)
    return out


def _main_ta(fd: np.ndarray, ta: np.ndarray, fds: np.ndarray) -> np.ndarray:
    """Most frequent transmitter of each fd in ``fds`` (ties: the larger address; -1 none)."""
    out = np.full(len(fds), -1, np.int64)
    w = np.flatnonzero(ta >= 0)
    if not len(w):
        return out
    f, t = fd[w], ta[w]
    o = np.lexsort((t, f))
    f, t = f[o], t[o]
    head = np.flatnonzero(group_starts(f) | group_starts(t))
    cnt = np.diff(np.append(head, len(f)))
    rf, rt = f[head], t[head]
    best = np.lexsort((cnt, rf))                   # stable: ties keep address order
    last = best[np.append(rf[best][1:] != rf[best][:-1], True)]
    out[np.searchsorted(fds, rf[last])] = rt[last]
    return out
