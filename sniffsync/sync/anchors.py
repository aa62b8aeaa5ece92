"""Anchor candidates and their clusters: frames heard by several sniffers, found by content.

Every frame usable as an anchor gets a 64-bit hash key of its content (per kind,
:data:`ANCHOR_KEYS`); rows are sorted by (key, estimated common time) and cut into
clusters where the key changes or the time gap exceeds a gate. A cluster never holds two
frames of one clock: the k-th copy of a clock goes to the k-th sub-cluster (this is the
"unique in a short window" rule). :mod:`sniffsync.sync.clock` fits the clocks on the
pairs of these clusters; :mod:`sniffsync.sync.copies` clusters whole frames the same way.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from sniffsync.errors import SyncError
from sniffsync.sync.order import order_by, rank_bits

__all__ = ["ANCHOR_KEYS", "PAYLOAD_MARKS", "hash_key", "key_order", "cluster", "anchor_candidates", "anchor_pairs",
           "kind_cuts", "kind_blocks", "join_candidates"]

from sniffsync.decode.table import GOLDEN64 as _M  # noqa: E402  (the one hash multiplier)
_NULL = np.uint64(0xA5A5_5A5A_DEAD_BEEF)
# marks of the LLC/IP/TCP stages (sniffsync/decode/payload.py): not a reason to drop an
# anchor, and not decoded by merge(columns=[...]) (tests/sync/test_anchor_marks.py)
PAYLOAD_MARKS = ("IP: header truncated", "TCP/UDP: header truncated")

# kind -> (frame filter on type_subtype (None = any frame with a TA), key columns)
ANCHOR_KEYS: dict[str, tuple[tuple[int, ...] | None, tuple[str, ...]]] = {
    "beacon": ((0x08,), ("type_subtype", "bssid", "beacon_tsf_us")),
    "ba": ((0x19,), ("type_subtype", "ta", "ra", "ba_ssn", "ba_bitmap_lo")),
    "unique": (None, ("type_subtype", "ta", "ra", "seq", "frag", "retry", "mpdu_len",
                      "duration_us", "fcs")),
}


def _u64(col: pd.Series, rows=None) -> np.ndarray:
    """uint64 values of a (nullable) column (at ``rows``); nulls become a fixed sentinel."""
    arr = col.array
    if hasattr(arr, "_mask"):
        vals, mask = np.asarray(arr._data), arr._mask
        if rows is not None:
            vals, mask = vals[rows], mask[rows]
        out = vals.astype(np.uint64)
        out[mask] = _NULL
        return out
    vals = np.asarray(col)
    return (vals if rows is None else vals[rows]).astype(np.uint64)


def hash_key(df: pd.DataFrame, columns, rows=None) -> np.ndarray:
    """A 64-bit mix of ``columns`` per row (of ``rows``: all by default; splitmix-style);
    nulls hash to a sentinel."""
    h = np.full(len(df) if rows is None else len(rows), np.uint64(0x243F6A8885A308D3))
    with np.errstate(over="ignore"):
        for name in columns:             # in place: a handful of passes per column
            h ^= _u64(df[name], rows)
            h *= _M
            h ^= h >> np.uint64(31)
    return h


def _small(ids: np.ndarray) -> np.ndarray:
    """Ids as int16 when they fit: a stable argsort of int16 is a radix sort."""
    return ids.astype(np.int16) if len(ids) and 0 <= ids.min() and ids.max() < 2**15 else ids


def key_order(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows sorted by ``key`` (ties by row) and the dense key rank along that order.

    Sorting many keys is the costly step; :func:`cluster` and :func:`_key_only_clusters`
    reuse this order and only re-sort inside runs of one key (an almost sorted pass).
    """
    order = order_by(key)
    k = key[order]
    return order, np.cumsum(np.r_[False, k[1:] != k[:-1]])


def _then_by(by_key, minor: np.ndarray, minor_bits: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows sorted by (key, ``minor``), ties by row, from ``key_order``; and the key rank
    along it. ``minor`` is a non-negative int below ``2**minor_bits``."""
    order, run = by_key
    packed = run << minor_bits
    packed |= minor[order]
    p = np.argsort(packed, kind="stable")     # sorted but inside key runs: timsort's best case
    del packed
    return order[p], run[p]


def cluster(key: np.ndarray, t_ns: np.ndarray, clock: np.ndarray, gate_ns, by_key=None) -> np.ndarray:
    """Cluster ids (0..m-1) of rows with equal ``key`` and time gaps <= ``gate_ns``.

    The k-th copy from one ``clock`` inside a cluster goes to its own sub-cluster, so
    a cluster never holds two frames of one clock. ``gate_ns=None`` clusters by key only;
    an array gives each row its own gate (a gap is cut beyond the wider of its two ends).
    ``by_key``: :func:`key_order` of ``key``, when already known.
    """
    return _cluster(key, t_ns, clock, gate_ns, by_key)[0]


def _cluster(key, t_ns, clock, gate_ns, by_key=None, pairs=False):
    """:func:`cluster`, and with ``pairs`` also the rows sorted by (cluster id, row).

    Temporaries are dropped as soon as possible: a fresh page costs more than the
    work done on it, so the peak of this function sets much of its time.
    """
    n = len(key)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    b = rank_bits(n)
    new = np.empty(n, bool)
    new[0] = True
    if by_key is not None and 2 * b <= 62:
        # time rank of each row (ties by row): times come in a few sorted runs
        rank = np.empty(n, np.int64)
        rank[np.argsort(t_ns, kind="stable")] = np.arange(n)
        order, run = _then_by(by_key, rank, b)          # = lexsort((t_ns, key))
        del rank
        np.not_equal(run[1:], run[:-1], out=new[1:])
        del run
    else:
        order = np.lexsort((t_ns, key))
        k = key[order]
        np.not_equal(k[1:], k[:-1], out=new[1:])
        del k
    if gate_ns is not None:
        t = t_ns[order]
        if np.ndim(gate_ns):             # per row: a gap is cut beyond the wider of its ends
            g = np.asarray(gate_ns)[order]
            gate_ns = np.maximum(g[1:], g[:-1])
            del g
        new[1:] |= np.diff(t) > gate_ns
        del t
    cid = np.cumsum(new) - 1
    rank = _rank_in_cluster(np.asarray(clock, np.int64)[order], cid)
    # sub-cluster ids in (cid, rank) order: a cluster whose busiest clock has R copies
    # owns R consecutive ids (ranks 0..R-1 all occur)
    first = np.flatnonzero(new)
    del new
    width = np.maximum.reduceat(rank, first) + 1
    sub = (np.cumsum(width) - width)[cid]
    del cid
    sub += rank
    del rank
    out = np.empty(n, np.int64)
    out[order] = sub
    if not pairs:
        return out, None
    # sub ascends along `order` except inside a cluster: an almost sorted pass again
    sub <<= b
    sub |= order
    return out, order[np.argsort(sub, kind="stable")]


def _rank_in_cluster(c: np.ndarray, cid: np.ndarray) -> np.ndarray:
    """Rank of each row among the rows of its clock ``c`` in its cluster ``cid`` (rows in
    cluster order): rows grouped by clock (a radix sort of small ints) keep their sorted
    order, so ``cid`` ascends in each group."""
    n = len(c)
    oc = np.argsort(_small(c), kind="stable")
    cc, ci = c[oc], cid[oc]
    del c
    g = np.empty(n, bool)
    g[0] = True
    g[1:] = (cc[1:] != cc[:-1]) | (ci[1:] != ci[:-1])
    del cc, ci
    start = np.maximum.accumulate(np.where(g, np.arange(n), 0))
    del g
    rank = np.empty(n, np.int64)
    rank[oc] = np.arange(n) - start
    del oc, start
    return rank


def _key_only_clusters(key, clock, by_key=None):
    """Cluster ids by key alone, keeping only keys seen at most once per clock (else -1)."""
    clock = np.asarray(clock, np.int64)
    if len(key) == 0:
        return np.zeros(0, np.int64)
    by_key = key_order(key) if by_key is None else by_key
    order, kid = _then_by(by_key, clock, rank_bits(int(clock.max()) + 1))  # by (key, clock)
    c = clock[order]
    dup = np.r_[False, (kid[1:] == kid[:-1]) & (c[1:] == c[:-1])]
    bad = np.zeros(kid[-1] + 1, bool)
    bad[kid[dup]] = True
    out = np.empty(len(key), np.int64)
    out[order] = np.where(bad[kid], -1, kid)
    return out


def anchor_candidates(df: pd.DataFrame, kinds) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows usable as anchors, their kind index (into ``kinds``) and 64-bit content key."""
    tsub = df["type_subtype"].to_numpy(np.int64, na_value=-1)
    bad = df["bad"]
    # a damaged IP/TCP header leaves the 802.11 fields of the key intact; the first reason
    # of a frame with any other mark is that one (stages mark in layer order)
    bad = ~bad.isna().to_numpy() & ~bad.isin(PAYLOAD_MARKS).to_numpy()
    bad |= df["fcs_bad"].fillna(False).to_numpy(bool)
    taken = np.zeros(len(df), bool)
    rows, kind, keys = [], [], []
    for k, name in enumerate(kinds):
        if name not in ANCHOR_KEYS:
            raise SyncError(f"unknown anchor kind {name!r} (known: {', '.join(ANCHOR_KEYS)})")
        types, cols = ANCHOR_KEYS[name]
        ok = ~bad & ~taken
        ok &= np.isin(tsub, types) if types else ~df["ta"].isna().to_numpy()
        if name == "beacon":
            ok &= ~df["beacon_tsf_us"].isna().to_numpy()
        r = np.flatnonzero(ok)
        taken[r] = True                  # a frame is an anchor of its first kind only
        rows.append(r)
        kind.append(np.full(len(r), k, np.int8))
        keys.append(hash_key(df, cols, r) ^ np.uint64(k))   # key columns at r only
    return np.concatenate(rows), np.concatenate(kind), np.concatenate(keys)


def anchor_pairs(cid: np.ndarray, clock: np.ndarray, by_cid=None) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs (i, j) of rows in one cluster from different clocks: star to the first.

    ``by_cid``: the rows sorted by (cid, row) when already known.
    """
    order = order_by(cid) if by_cid is None else by_cid    # = argsort(cid, kind="stable")
    c = cid[order]
    if len(c) == 0:
        return order, order
    first = np.r_[True, c[1:] != c[:-1]]
    head = order[np.maximum.accumulate(np.where(first, np.arange(len(c)), 0))]
    i, j = head[~first], order[~first]
    keep = clock[i] != clock[j]
    return i[keep], j[keep]


def kind_cuts(kind: np.ndarray) -> np.ndarray:
    """Where each kind's candidates start in one table's (they come kind by kind), and the
    end: kind ``k`` is rows ``cuts[k]:cuts[k + 1]``."""
    return np.searchsorted(kind, np.arange(int(kind.max()) + 2 if len(kind) else 1))


def kind_blocks(cuts) -> list:
    """``(table, kind, lo, hi)`` per kind, per table (``cuts``: each table's
    :func:`kind_cuts`): the blocks the joined candidates are made of, in their order."""
    n_kinds = max((len(c) - 1 for c in cuts), default=0)
    return [(i, k, c[k], c[k + 1]) for k in range(n_kinds) for i, c in enumerate(cuts) if k + 1 < len(c)]


def join_candidates(parts, sizes, blocks=None) -> tuple:
    """The anchor candidates of the concatenated tables from each table's (``sizes``: their
    rows): the rows of a kind, then of the next, each kind in row order -- what
    :func:`sniffsync.sync.anchors.anchor_candidates` gives on the concatenated table.
    ``blocks``: :func:`kind_blocks` of the tables when the caller has them."""
    base = np.cumsum([0, *sizes[:-1]])
    blocks = kind_blocks([kind_cuts(kind) for _, kind, _ in parts]) if blocks is None else blocks
    if not blocks:
        return np.zeros(0, np.int64), np.zeros(0, np.int8), np.zeros(0, np.uint64)
    return (np.concatenate([parts[i][0][lo:hi] + base[i] for i, _, lo, hi in blocks]),
            *(np.concatenate([parts[i][c][lo:hi] for i, _, lo, hi in blocks]) for c in (1, 2)))
