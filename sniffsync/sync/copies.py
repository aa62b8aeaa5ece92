"""Copies of one transmission heard by several sniffers: found, ranked, merged into one row.

On the common clock (:func:`sniffsync.sync.clock.sync`), copies share their content --
a 64-bit key of :data:`MERGE_KEY`, so a retransmission (retry bit set) is another frame
and ACK/CTS, which carry only RA, match by RA + length + duration -- and fall within a
gate of a few µs: rows are clustered by (key, common time) like anchors
(:func:`sniffsync.sync.anchors.cluster`). The merged table keeps the copy with the
strongest signal.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from sniffsync.sync.ampdu import ppdu_clusters
from sniffsync.sync.anchors import cluster, hash_key
from sniffsync.sync.order import order_by

__all__ = ["MERGE_KEY", "match_copies", "best_copy", "merged_table"]

# content of a transmission that every receiver decodes identically
MERGE_KEY = ("type_subtype", "wirelen", "ta", "ra", "seq", "frag", "retry", "duration_us",
             "fcs", "ba_ssn", "ba_bitmap_lo", "beacon_tsf_us")


def match_copies(df: pd.DataFrame, common_ns: np.ndarray, synced: np.ndarray,
                 gate_ns: float, key=None) -> np.ndarray:
    """Group id per frame: frames with one content key, within ``gate_ns``, one per sniffer.

    Frames of unsynced clocks (``synced`` False) are never grouped with others.
    ``key``: ``hash_key(df, MERGE_KEY)`` when already computed.
    """
    key = hash_key(df, MERGE_KEY) if key is None else key
    sniffer = df["sniffer"].to_numpy(np.int64)
    # unsynced frames get a unique key each so they stay alone
    key = np.where(synced, key, np.arange(len(df), dtype=np.uint64) * np.uint64(0x9E3779B1) + np.uint64(1))
    return cluster(key, np.asarray(common_ns, np.int64), sniffer, gate_ns)


def best_copy(group, sniffer, sig) -> np.ndarray:
    """Row of the strongest copy of every group (ties -> lowest sniffer index, then row)."""
    group, sniffer = np.asarray(group, np.int64), np.asarray(sniffer, np.int64)
    sig = np.asarray(sig, np.float64)
    n = len(group)
    best = np.zeros(int(group.max()) + 1 if n else 0, np.int64)
    valid = sig > -1e8                   # nulls come as -1e9: weaker than any signal
    if n and n < 2**32 and sniffer.min() >= 0 and sniffer.max() < 256 and (
            np.abs(sig[valid]) < 2**20).all() and (sig[valid] == np.rint(sig[valid])).all():
        # one packed score per row, the group's maximum is its first row of
        # lexsort((sniffer, -sig, group)): (signal, -sniffer, -row)
        code = np.where(valid, sig + 2**20 + 1, 0).astype(np.int64)
        score = (code << 40) | ((255 - sniffer) << 32) | (2**32 - 1 - np.arange(n))
        top = np.full(len(best), -1, np.int64)
        np.maximum.at(top, group, score)
        best[:] = 2**32 - 1 - (top & (2**32 - 1))
        return best
    order = np.lexsort((sniffer, -sig, group))
    g = group[order]
    first = np.r_[True, g[1:] != g[:-1]] if len(g) else np.zeros(0, bool)
    best[g[first]] = order[first]
    return best


def merged_table(df: pd.DataFrame, common_ns: np.ndarray, tsft_common: np.ndarray | None,
                 group: np.ndarray, synced: np.ndarray, n_sniffers: int,
                 keep_duplicates: bool = False, best=None, consume: bool = False) -> pd.DataFrame:
    """One row per group (the strongest copy), or every copy with ``keep_duplicates``.

    Adds ``sniffers_heard`` (bitmask), ``n_heard``, ``best_sniffer``, ``merged_id``,
    ``unsynced`` and ``signal_dbm_s<k>`` per sniffer; ``ts_ns`` is the mean common time of
    the copies and ``tsft_us`` its value on the reference TSF (null when not derived).
    ``consume``: drop each column from ``df`` once taken (``df`` is emptied), so the
    peak memory is about one table, not the input table plus the merged one.
    """
    n = len(df)
    sniffer = df["sniffer"].to_numpy(np.int64)
    sig = df["signal_dbm"].to_numpy(np.float64, na_value=-1e9)
    ng = int(group.max()) + 1 if n else 0
    mask = np.zeros(ng, np.int64)
    np.bitwise_or.at(mask, group, np.int64(1) << sniffer)
    nh = np.bincount(group, minlength=ng)
    t_mean = (np.bincount(group, weights=(common_ns - common_ns.min(initial=0)).astype(np.float64),
                          minlength=ng) / np.maximum(nh, 1))
    t_mean = np.rint(t_mean).astype(np.int64) + (common_ns.min(initial=0))
    # subframes of one A-MPDU: one time (the mean of all their copies), the air's order
    _, rank, t_cl = ppdu_clusters(sniffer, common_ns, group, ng)
    t_mean = np.where(t_cl >= 0, t_cl, t_mean)
    best = best_copy(group, sniffer, sig) if best is None else best
    rows = np.arange(n) if keep_duplicates else best
    ts = t_mean[group[rows]] if not keep_duplicates else common_ns[rows]
    # sort by (ts_ns, order in the A-MPDU, merged_id, sniffer) before the one take of every
    # column; one row per group comes in group order, so ties end by row
    later = rank[group[rows]]
    order = (order_by(ts - ts.min(initial=0), np.argsort(later.max(initial=0) - later, kind="stable"))
             if not keep_duplicates else np.lexsort((sniffer[rows], group[rows], -later, ts)))
    rows, ts = rows[order], ts[order]
    tc = None if tsft_common is None else \
        np.where(synced, tsft_common, df["tsft_us"].to_numpy(np.int64, na_value=0))[rows]
    out = _take(df, rows, consume)
    g = group[rows]
    out["ts_ns"] = ts
    if tc is not None:
        out["tsft_us"] = pd.array(tc, dtype="Int64")
    out["merged_id"] = g
    out["sniffers_heard"] = mask[g]
    out["n_heard"] = nh[g].astype(np.int16)
    out["best_sniffer"] = sniffer[best][g].astype(np.int16)
    out["unsynced"] = ~synced[rows]
    for s in range(n_sniffers):         # per-sniffer signal, from the copy of that sniffer
        v = np.full(ng, -128, np.int64)
        m = sniffer == s
        v[group[m]] = np.where(sig[m] > -1e8, sig[m], -128)
        vg = v[g]
        have = (mask[g] >> s) & 1 == 1
        out[f"signal_dbm_s{s}"] = pd.arrays.IntegerArray(vg.astype(np.int8), ~(have & (vg > -128)))
    return out


def _take(df: pd.DataFrame, rows: np.ndarray, consume: bool = False) -> pd.DataFrame:
    """``df.iloc[rows].reset_index(drop=True)`` for valid ``rows``: one numpy take per
    column (values and masks, category codes), without pandas' per-column checks;
    ``consume`` pops every column from ``df`` once taken."""
    cols, names = {}, df.columns
    for c in list(names):                # per column
        a = (df.pop(c) if consume else df[c]).array
        if isinstance(a, pd.Categorical):
            cols[c] = pd.Categorical.from_codes(a.codes[rows], dtype=a.dtype)
        elif isinstance(a, pd.arrays.IntegerArray | pd.arrays.BooleanArray | pd.arrays.FloatingArray):
            cols[c] = type(a)(a._data[rows], a._mask[rows])
        elif isinstance(a, pd.arrays.NumpyExtensionArray):
            cols[c] = a.to_numpy()[rows]
        else:                            # anything else: pandas' own take
            cols[c] = a.take(rows)
    out = pd.DataFrame(cols, copy=False)
    out.columns = names
    return out
