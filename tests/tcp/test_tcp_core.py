"""The numpy core of the TCP analysis (sniffsync.tcp) against slow, obviously correct
oracles: Python loops, and the pandas operations the core replaces (groupby cummax /
median, lexsort, DataFrame.duplicated-style flow numbering).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sniffsync.tcp.columns import group_median, grouped_cummax, lex_order, pair_order, restart_cumsum
from sniffsync.tcp.frames import classify_segments, flow_table, segments
from sniffsync.tcp.rtt import rto_arrays
from frame_rows import ACK, MS, SYN, make_frames

RNG = np.random.default_rng(20261122)
EPOCH_NS = 1_700_000_000_123_456_789     # beyond float64's exact integers


def _groups(n, k, rng=RNG):
    return np.sort(rng.integers(0, k, n))


@pytest.mark.parametrize("k", [1, 3, 40])
@pytest.mark.parametrize("sentinel", [False, True])
def test_grouped_cummax_matches_loop(k, sentinel):
    key = _groups(500, k)
    values = RNG.integers(-1000, 1000, 500)
    if sentinel:    # "nothing sent yet" markers: the bands of 40 groups overflowed int64 before
        values[RNG.random(500) < 0.3] = np.iinfo(np.int64).min // 4
    expect = values.copy()
    for i in range(1, len(values)):
        if key[i] == key[i - 1]:
            expect[i] = max(expect[i - 1], values[i])
    assert np.array_equal(grouped_cummax(key, values), expect)
    assert len(grouped_cummax(key[:0], values[:0])) == 0


def test_restart_cumsum_matches_loop():
    for n in (0, 1, 7, 300):
        x, starts = RNG.integers(-5, 5, n), RNG.random(n) < 0.2
        expect, acc = np.zeros(n, np.int64), 0
        for i in range(n):
            acc = x[i] if starts[i] else acc + x[i]
            expect[i] = acc
        assert np.array_equal(restart_cumsum(x, starts), expect)


@pytest.mark.parametrize("case", ["random", "sorted", "small_first", "big_first", "ties"])
def test_lex_order_is_lexsort(case):
    n = 2000
    a, b = RNG.integers(0, 5, n), RNG.integers(0, 50, n)
    if case == "sorted":
        a, b = np.sort(a), np.arange(n)
    elif case == "big_first":
        a = a * (1 << 40)
    elif case == "ties":
        b = np.zeros(n, np.int64)
    elif case == "small_first":
        b = np.where(a % 2 == 0, np.arange(n), b)
    assert np.array_equal(lex_order(a, b), np.lexsort((b, a)))
    assert np.array_equal(lex_order(a), np.argsort(a, kind="stable"))
    assert np.array_equal(pair_order(a, b), np.lexsort((b, a)))
    assert np.array_equal(pair_order(a, b - (1 << 45)), np.lexsort((b, a)))      # negative, wide minor


def test_group_median_and_rto_match_pandas():
    key = RNG.integers(0, 7, 3000)
    values = RNG.integers(0, 10**9, 3000)
    k, med = group_median(key, values)
    s = pd.Series(values).groupby(key)
    assert np.array_equal(k, s.median().index.to_numpy())
    assert np.array_equal(med, s.median().to_numpy())
    o = np.argsort(key, kind="stable")               # grouped keys: the no-sort path
    k2, med2 = group_median(key[o], values[o])
    assert np.array_equal(k2, k) and np.array_equal(med2, med)
    # small integers (an MCS): the histogram path; keys of MAC width, unsorted
    mac = RNG.integers(1 << 40, 1 << 47, 9)[key]
    mcs = RNG.integers(-3, 12, 3000).astype(np.int16)
    k3, med3 = group_median(mac, mcs)
    s3 = pd.Series(mcs.astype(np.int64)).groupby(mac).median()
    assert np.array_equal(k3, s3.index.to_numpy()) and np.array_equal(med3, s3.to_numpy())
    # RFC 6298 stand-in, as the pandas implementation computed it
    est = s.median() + 4 * (pd.Series(values) - s.transform("median")).abs().groupby(key).mean()
    fds, rto = rto_arrays(key, values, 200_000_000)
    assert np.array_equal(fds, est.index.to_numpy())
    assert np.array_equal(rto, np.maximum(est, 200_000_000).astype(np.int64).to_numpy())


def _delivery_oracle(seg):
    """deliver_ns by definition: last transmission of each (fd, raw first byte), then the
    running maximum of those arrival times in sequence order within the fd."""
    out = seg["ts_ns"].to_numpy().copy()
    data = (seg["proto"] == 6) & (seg["payload_len"] > 0)
    last = seg[data].groupby(["fd", "seq_raw"])["ts_ns"].max()
    rows = seg[data & ~seg["mac_dup"]]
    for _, g in rows.groupby("fd"):
        g = g.assign(pos=np.arange(len(g))).sort_values(["rel_seq", "pos"])
        arr = [last[(f, s)] for f, s in zip(g["fd"], g["seq_raw"])]
        out[g.index.to_numpy()] = np.maximum.accumulate(arr)
    return out


@pytest.mark.parametrize("pattern", ["in_order", "retransmitted", "reordered", "wrapping"])
def test_in_order_delivery_paths(pattern):
    base = (1 << 32) - 3000 if pattern == "wrapping" else 1000
    order = np.arange(12)
    if pattern == "reordered":
        order = np.array([0, 1, 3, 2, 4, 6, 5, 7, 8, 10, 9, 11])
    rows = [{"t_ms": 0, "flags": SYN, "seq": base - 1, "len": 0}]
    for i, k in enumerate(order):
        rows.append({"t_ms": 1 + i, "seq": (base + 1000 * int(k)) % (1 << 32), "len": 1000})
    if pattern == "retransmitted":
        rows.append({"t_ms": 20, "seq": base + 3000, "len": 1000})     # segment 3 again
        rows.append({"t_ms": 21, "seq": base + 12000, "len": 1000})
    rows += [{"t_ms": 30 + i, "src": "10.0.0.2", "dst": "10.0.0.1", "sport": 5001, "dport": 40000,
              "flags": ACK, "ack": base + 1000 * i} for i in range(3)]
    seg = classify_segments(segments(make_frames(rows)))
    assert np.array_equal(seg["deliver_ns"].to_numpy(), _delivery_oracle(seg))


def test_flow_times_keep_every_nanosecond():
    # an ACK-only direction has no data: its first_ns/last_ns are -1 and must not turn the
    # other directions' epoch-ns times into float64 (which rounded them to 256 ns)
    rows = [{"ts_ns": EPOCH_NS + 7 * i, "seq": 1 + 100 * i, "len": 100} for i in range(3)]
    rows.append({"ts_ns": EPOCH_NS + 50, "src": "10.0.0.2", "dst": "10.0.0.1", "sport": 5001,
                 "dport": 40000, "flags": ACK, "ack": 301})
    ft = flow_table(classify_segments(segments(make_frames(rows)))).set_index("dir")
    assert ft.loc[0, "first_ns"] == EPOCH_NS and ft.loc[0, "last_ns"] == EPOCH_NS + 14
    assert ft.loc[1, "first_ns"] == -1 and ft["first_ns"].dtype == np.int64


@pytest.mark.parametrize("n_addr, shuffled", [(3, False), (40_000, False), (3, True), (40_000, True)])
def test_flow_ids_and_directions_match_pandas(n_addr, shuffled):
    # many addresses take the two-step endpoint coding; flows numbered by first appearance
    # in time (input order among equal times); shuffled: rows out of time order, with ties,
    # and rows that are neither TCP nor UDP
    from sniffsync.tcp.segments import segment_arrays
    n = 5000
    src, dst = RNG.integers(-1, n_addr, n), RNG.integers(-1, n_addr, n)
    sport, dport = RNG.integers(0, 4, n), RNG.integers(0, 4, n)
    proto = RNG.choice([6, 17, 1] if shuffled else [6, 17], n)
    flags = RNG.choice([ACK, SYN, SYN | ACK], n)
    ts = RNG.integers(0, 3000, n) if shuffled else np.sort(RNG.integers(0, 10**6, n))
    cols = {"ip_proto": proto, "sport": sport, "dport": dport, "ts_ns": ts, "tcp_flags": flags}

    def get(name, fill, dtype, rows=None):
        v = cols[name] if name in cols else np.full(n, fill, dtype)
        return v.astype(dtype) if rows is None else v[rows].astype(dtype)
    seg, _ = segment_arrays(get, lambda rows: (src[rows], dst[rows], []), dedup=False)

    keep = np.flatnonzero(proto != 1)
    t = keep[np.lexsort((keep, ts[keep]))]            # the TCP/UDP rows in time order
    ep_s, ep_d = (src[t] << 16) | sport[t], (dst[t] << 16) | dport[t]
    key = pd.DataFrame({"lo": np.minimum(ep_s, ep_d), "hi": np.maximum(ep_s, ep_d), "p": proto[t]})
    flow = key.groupby(["lo", "hi", "p"], sort=False).ngroup().to_numpy()
    syn = (proto[t] == 6) & ((flags[t] & (SYN | ACK)) == SYN)
    init = pd.Series(ep_s).groupby(flow).first()
    init.update(pd.Series(ep_s[syn]).groupby(flow[syn]).first())
    fd = flow * 2 + (ep_s != init.to_numpy()[flow])
    o = np.lexsort((t, ts[t], fd))
    assert np.array_equal(seg["fd"], fd[o]) and np.array_equal(seg["row"], t[o])
    assert np.array_equal(seg["src"], src[t[o]]) and np.array_equal(seg["dport"], dport[t[o]])
    assert np.array_equal(seg["proto"], proto[t[o]]) and np.array_equal(seg["flow"], fd[o] >> 1)
    # every frame a segment, in time order: the time rank is given at once, and is right
    assert ("tr" in seg) == (not shuffled)
    if "tr" in seg:                # rank of each row in (ts_ns, input row) order, by definition
        rank = np.empty(len(o), np.int64)
        rank[np.lexsort((seg["row"], seg["ts_ns"]))] = np.arange(len(o))
        assert np.array_equal(seg["tr"], rank)


@pytest.mark.parametrize("few", [64, 0], ids=["per-flow", "one-search"])
@pytest.mark.parametrize("seed", range(4))
def test_handshake_matches_loop(seed, few, monkeypatch):
    # SYN -> SYN/ACK -> ACK per flow: the last SYN before the first SYN/ACK, the first ACK after it
    # (a few SYN/ACKs are looked up one by one in their flow's rows, more by one search)
    from sniffsync.tcp import rtt
    from sniffsync.tcp.columns import Lazy
    from sniffsync.tcp.rtt import handshake_arrays
    monkeypatch.setattr(rtt, "_FEW_HANDSHAKES", few)
    rng = np.random.default_rng(seed)
    for _ in range(50):
        n, k = int(rng.integers(1, 300)), int(rng.integers(1, 6))
        fd = np.sort(rng.integers(0, 2 * k, n))
        t = rng.random(n)
        for f in np.unique(fd):
            t[fd == f] = np.sort(t[fd == f])          # time order within each direction
        tr = np.argsort(np.argsort(t, kind="stable"), kind="stable").astype(np.int64)
        flags = rng.choice([SYN, SYN | ACK, ACK, ACK | 0x08, ACK | 0x01], n)
        dup, proto = rng.random(n) < 0.05, np.where(rng.random(n) < 0.9, 6, 17)
        seg = Lazy({"fd": fd, "tr": tr, "ts_ns": (t * 1e9).astype(np.int64), "flags": flags,
                    "mac_dup": dup, "proto": proto})
        got = handshake_arrays(seg)
        want = []
        live = (proto == 6) & ~dup
        fl = flags & (SYN | ACK)
        for f in range(k):
            sa = [i for i in range(n) if fd[i] == 2 * f + 1 and live[i] and fl[i] == SYN | ACK]
            if not sa:
                continue
            s0 = min(sa, key=lambda i: tr[i])
            syn = [i for i in range(n) if fd[i] == 2 * f and live[i] and fl[i] == SYN and tr[i] < tr[s0]]
            ack = [i for i in range(n) if fd[i] == 2 * f and live[i] and fl[i] == ACK and tr[i] > tr[s0]]
            if syn and ack:
                a, b = max(syn, key=lambda i: tr[i]), min(ack, key=lambda i: tr[i])
                want.append((f, seg["ts_ns"][b] - seg["ts_ns"][a]))
        assert list(zip(got["flow"].tolist(), got["hs_rtt_ns"].tolist())) == want


def test_consuming_getter_frees_each_column_once_and_refuses_a_second_read():
    from sniffsync.tcp.columns import cat_codes, frame_getter
    from sniffsync.decode.table import Cat
    n = 4
    cols = {"tcp_seq": (np.array([1, 2, 3, 4], np.uint32), None),
            "ip_src": (Cat(np.array([0, 1, 0, -1], np.int32), ["a", "b"]), None)}
    get = frame_getter(n, cols, consume=True)
    assert get("tcp_seq", -1, np.int64).tolist() == [1, 2, 3, 4]
    assert "tcp_seq" not in cols
    with pytest.raises(KeyError):
        get("tcp_seq", -1, np.int64)              # never a silent column of fill values
    assert get("ta", -1, np.int64).tolist() == [-1] * 4      # absent columns still fill
    s, d, names = cat_codes(n, cols, np.arange(n), consume=True)
    assert [names[c] if c >= 0 else None for c in s] == ["a", "b", "a", None] and "ip_src" not in cols


def test_direction_codes_by_hash_partition_rows_as_unique():
    from sniffsync.tcp.columns import dense_codes as _dense_codes
    rng = np.random.default_rng(9)
    few = rng.integers(0, 1 << 62, 7)
    key = few[rng.integers(0, 7, 5000)]
    codes, k = _dense_codes(key)
    _, inv = np.unique(key, return_inverse=True)
    assert k == 7 and sorted(set(codes.tolist())) == list(range(7))
    assert len(set(zip(codes.tolist(), inv.tolist()))) == 7        # the same partition of the rows
    assert _dense_codes(rng.integers(0, 1 << 62, 2000)) is None      # a shared bucket: not by hash
