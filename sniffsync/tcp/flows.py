"""Per flow direction totals of the analysed segment table: segments, bytes, goodput,
retransmissions, MAC retries and duplicates, first/last data time, main transmitter.

Rows are grouped by fd with one ``reduceat`` per column (no sort when the table is
already in fd order, as :func:`sniffsync.tcp.segments.segment_arrays` leaves it).
"""
from __future__ import annotations

import numpy as np

from sniffsync.tcp.columns import fd_slices, group_starts, is_sorted, pair_order
from sniffsync.tcp.segments import TH_FIN, TH_RST, TH_SYN, is_proto
from sniffsync.tcp.sequence import KIND

__all__ = ["flow_arrays", "outstanding_arrays", "capture_end_ns"]


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
        # (summed in int64 as read: no widened copy of the rows)
        return np.add.reduceat(x, st, dtype=np.int64) if len(st) else np.zeros(0, np.int64)

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
    inf = _inferred(seg, fds)
    out["goodput_bytes"] = gsum(col("new_bytes")) + inf["bytes"]
    out["inferred_bytes"] = inf["bytes"]
    out["retransmissions"] = gsum(kind == KIND["retransmission"])
    out["out_of_order"] = gsum(kind == KIND["out_of_order"])
    out["zero_windows"] = gsum(keep & (tcp if o is None else tcp[o]) & (col("win") == 0) &
                               ((col("flags") & (TH_RST | TH_SYN)) == 0))
    out["mac_retries"] = gsum(col("retry"))
    out["mac_duplicates"] = gsum(dup)
    # activity: first to last transmission of payload (retransmissions and MAC retries
    # included: the flow is still trying), or an ACK that delivered bytes of a hole
    big = np.iinfo(np.int64).max
    pay = (col("payload_len") > 0) & (ts >= 0)
    if len(st):
        first = np.minimum(np.minimum.reduceat(np.where(pay, ts, big), st), inf["first_ns"])
        last = np.maximum(np.maximum.reduceat(np.where(pay, ts, -1), st), inf["last_ns"])
    else:
        first = last = np.zeros(0, np.int64)
    out["first_ns"] = np.where(first == big, -1, first)
    out["last_ns"] = last
    out["ta"] = _main_ta(fd, seg["ta"], fds)
    return out


def _inferred(seg, fds: np.ndarray) -> dict:
    """Per fd of ``fds``: bytes inferred from ACKs (``seg.inferred``, set by the ACK
    analysis; none without it) and the first/last ACK that inferred any."""
    big = np.iinfo(np.int64).max
    out = {"bytes": np.zeros(len(fds), np.int64), "first_ns": np.full(len(fds), big, np.int64),
           "last_ns": np.full(len(fds), -1, np.int64)}
    inf = getattr(seg, "inferred", None)
    if inf is None or not len(inf["fd"]) or not len(fds):
        return out
    k = np.searchsorted(fds, inf["fd"])
    ok = (k < len(fds)) & (fds[np.minimum(k, len(fds) - 1)] == inf["fd"])
    k, ts = k[ok], seg["ts_ns"][inf["row"][ok]]
    np.add.at(out["bytes"], k, inf["bytes"][ok])
    np.minimum.at(out["first_ns"], k, ts)
    np.maximum.at(out["last_ns"], k, ts)
    return out


def _main_ta(fd: np.ndarray, ta: np.ndarray, fds: np.ndarray) -> np.ndarray:
    """Most frequent transmitter of each fd in ``fds`` (ties: the larger address; -1 none)."""
    out = np.full(len(fds), -1, np.int64)
    for sl in fd_slices(fd):              # per fd: one group of whole fds at a time
        _main_ta_into(out, fd[sl], ta[sl], fds)
    return out


def _main_ta_into(out: np.ndarray, fd: np.ndarray, ta: np.ndarray, fds: np.ndarray) -> None:
    w = np.flatnonzero(ta >= 0)
    if not len(w):
        return
    f, t = fd[w], ta[w]
    del w
    o = pair_order(f, t)
    f, t = f[o], t[o]
    head = np.flatnonzero(group_starts(f) | group_starts(t))
    cnt = np.diff(np.append(head, len(f)))
    rf, rt = f[head], t[head]
    best = np.lexsort((cnt, rf))                   # stable: ties keep address order
    last = best[np.append(rf[best][1:] != rf[best][:-1], True)]
    out[np.searchsorted(fds, rf[last])] = rt[last]


def outstanding_arrays(seg, ft: dict, end_ns: int | None = None) -> dict:
    """Per fd of ``ft`` (after the ACK analysis): ``completed_ns``, the first ACK of the
    receiver covering the direction's highest payload byte (-1: none captured);
    ``fct_ns`` = that ACK - the flow's first captured frame (its SYN), -1 when not
    completed; ``active_until_ns``: until when the direction has data outstanding: its
    ``completed_ns``, or the end of the capture when the receiver's ACKs were captured
    but none covers it (a starved or stalled flow), at least its ``last_ns``. ``end_ns``:
    that end when ``seg`` holds some flows of a capture (its latest stamp, -1: none)."""
    fd, ts, fds = seg["fd"], seg["ts_ns"], ft["fd"]
    size = int(max(fd.max() if len(fd) else 0, fds.max() if len(fds) else 0)) + 2
    big = np.iinfo(np.int64).max
    if not is_sorted(fd):                              # (segment_arrays sorts by fd, time)
        return _outstanding_unsorted(seg, ft, size, end_ns)
    # rows are sorted by (fd, time): per-fd maxima by reduceat, first rows by group starts,
    # one group of whole fds at a time (fd_slices: their temporaries only)
    slices = fd_slices(fd)
    top = np.full(size, -1, np.int64)
    flow_first = np.full(size + (size & 1), big, np.int64)
    for sl in slices:
        f, t = fd[sl], ts[sl]
        head = np.flatnonzero(group_starts(f))
        if not len(head):
            continue
        v = np.where(seg["payload_len"][sl] > 0, seg["seg_end"][sl] - ((seg["flags"][sl] & TH_FIN) > 0), -1)
        top[f[head]] = np.maximum(np.maximum.reduceat(v, head), -1)
        del v
        if int(t.min()) >= 0:                          # every row stamped: the first rows
            first = head
        else:
            o = np.flatnonzero(t >= 0)
            first = o[group_starts(f[o])]              # each fd's first stamped row
        flow_first[f[first]] = t[first]
    has_ack = np.zeros(size, bool)
    done = np.full(size, big, np.int64)
    ack = seg["ack_rel"]
    for sl in slices:
        f, t, ak = fd[sl], ts[sl], ack[sl]
        if _covering_few(f, t, ak, top, has_ack, done):
            continue
        a = np.flatnonzero((ak >= 0) & (t >= 0))
        dfd = f[a] ^ 1                                 # the data direction an ACK row acknowledges
        has_ack[dfd] = True
        c = a[(top[dfd] >= 0) & (ak[a] >= top[dfd])]   # covering ACK rows, in (fd, time) order
        del a, dfd
        first = c[group_starts(f[c])]                  # the earliest of each fd
        done[f[first] ^ 1] = t[first]
    has_ack &= top >= 0                                # ACK-only directions have nothing outstanding
    start = np.minimum(flow_first[0::2], flow_first[1::2])        # fd = 2 * flow + dir
    end = end_ns if end_ns is not None else capture_end_ns(ts)
    return _outstanding_table(ft, fds, done, has_ack, start, end, big)


def _covering_few(f, t, ak, top, has_ack, done, most: int = 64) -> bool:
    """The ACK loop of :func:`outstanding_arrays` over one group of rows sorted by (fd, time)
    holding at most ``most`` fds: per fd, its stamped ACK rows and the first of them that
    covers the data direction's ``top`` (no row gathers). False (nothing done) otherwise."""
    head = np.flatnonzero(group_starts(f))
    if len(head) > most:
        return False
    if not len(head):
        return True
    stamped = int(t.min()) >= 0
    for a, b in zip(head, np.append(head[1:], len(f))):
        d = int(f[a]) ^ 1                              # the data direction these rows acknowledge
        valid = ak[a:b] >= 0
        if not stamped:
            valid &= t[a:b] >= 0
        if not valid.any():
            continue
        has_ack[d] = True
        if top[d] < 0:
            continue
        valid &= ak[a:b] >= top[d]
        i = int(np.argmax(valid))
        if valid[i]:
            done[d] = t[a + i]
    return True


def capture_end_ns(ts: np.ndarray) -> int:
    """The latest stamp of ``ts`` (-1: none), the end :func:`outstanding_arrays` reads."""
    t_max = int(ts.max()) if len(ts) else -1
    return t_max if t_max >= 0 else -1


def _outstanding_table(ft, fds, done, has_ack, start, end, big) -> dict:
    d = done[fds]
    completed = np.where(d < big, d, -1)
    until = np.where(completed >= 0, completed, np.where(has_ack[fds], end, -1))
    return {"completed_ns": completed,
            "fct_ns": np.where(completed >= 0, completed - start[ft["flow"]], -1),
            "active_until_ns": np.maximum(ft["last_ns"], until)}


def _outstanding_unsorted(seg, ft: dict, size: int, end_ns: int | None) -> dict:
    """:func:`outstanding_arrays` of a table not sorted by fd (scatter reductions)."""
    fd, ts, fds = seg["fd"], seg["ts_ns"], ft["fd"]
    big = np.iinfo(np.int64).max
    pay = np.flatnonzero(seg["payload_len"] > 0)
    top = np.full(size, -1, np.int64)
    np.maximum.at(top, fd[pay], seg["seg_end"][pay] - ((seg["flags"][pay] & TH_FIN) > 0))
    ack = seg["ack_rel"]
    a = np.flatnonzero((ack >= 0) & (ts >= 0))
    dfd = fd[a] ^ 1
    has_ack = np.zeros(size, bool)
    has_ack[dfd] = True
    has_ack &= top >= 0
    cov = (top[dfd] >= 0) & (ack[a] >= top[dfd])
    done = np.full(size, big, np.int64)
    np.minimum.at(done, dfd[cov], ts[a[cov]])
    start = np.full(size // 2 + 1, big, np.int64)
    ok = ts >= 0
    np.minimum.at(start, fd[ok] >> 1, ts[ok])
    end = end_ns if end_ns is not None else capture_end_ns(ts)
    return _outstanding_table(ft, fds, done, has_ack, start, end, big)
