"""Merge many sniffers' frames onto one clock: copies of one transmission become one frame.

After :func:`sniffsync.sync.sync` puts every frame on the reference clock, copies are
found by content: a 64-bit key of :data:`MERGE_KEY` (so a retransmission, retry bit set,
is another frame; ACK/CTS carry only RA and match by RA + length + duration), then
sort by (key, common time) and cut where the gap exceeds the gate (a few µs, from the
held-out anchor residuals). The merged table keeps the copy with the strongest signal.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd

from sniffsync.errors import CaptureError, UsageError
from sniffsync.sync.anchors import cluster, hash_key, local_clocks, reference_clock, sync
from sniffsync.sync.order import order_by

__all__ = ["MERGE_KEY", "match_copies", "merged_table", "merge", "merge_report",
           "heard_by", "write_merged", "best_copy"]

# content of a transmission that every receiver decodes identically
MERGE_KEY = ("type_subtype", "wirelen", "ta", "ra", "seq", "frag", "retry", "duration_us",
             "fcs", "ba_ssn", "ba_bitmap_lo", "beacon_tsf_us")
# what read -> align -> sync -> match -> merged table -> pcapng need (merge(columns=...))
NEEDED_COLUMNS = (
    "sniffer", "frame", "ts_ns", "caplen", "wirelen", "linktype", "bad",          # record, write
    "bssid", "beacon_tsf_us", "ba_ssn", "ba_bitmap_lo", "seq", "frag", "duration_us",  # keys
    "fcs", "signal_dbm",
    # PPDU grouping and airtime (airtime.ppdu.group_ppdus)
    "tsft_us", "rt_len", "mpdu_len", "rt_flags", "fcs_bad", "short_preamble", "rate_kbps",
    "freq_mhz", "phy", "mcs", "nss", "bw_mhz", "gi_ns", "ldpc", "stbc", "ness", "ht_format",
    "he_format", "he_ltf_size", "he_n_ltf", "ampdu_ref", "ampdu_last", "type_subtype",
    "retry", "ta", "ra")
MIN_GATE_NS = 3_000          # TSFT copies differ by quantisation + jitter, ~1 µs
RADIO_LINKTYPES = (127, 105)


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
    best = best_copy(group, sniffer, sig) if best is None else best
    rows = np.arange(n) if keep_duplicates else best
    ts = t_mean[group[rows]] if not keep_duplicates else common_ns[rows]
    # sort by (ts_ns, merged_id, sniffer) before the one take of every column; one row
    # per group comes in group order, so the order is by time, ties by row
    order = (order_by(ts - ts.min(initial=0)) if not keep_duplicates
             else np.lexsort((sniffer[rows], group[rows], ts)))
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


def _epoch_map(ts_ns, local_ns, on_ref):
    """Robust line ``ts - local ~ a + b (local - x0)`` on the reference clock's frames."""
    x = local_ns[on_ref].astype(np.float64)
    d_int = ts_ns[on_ref] - local_ns[on_ref]
    # centre in int64 first: ts - local is ~1.7e18 ns, where float64 steps are 256 ns
    d0 = np.int64(d_int[len(d_int) // 2]) if len(d_int) else np.int64(0)
    d = (d_int - d0).astype(np.float64)
    if len(x) < 2 or np.ptp(x) == 0:
        a = float(np.median(d)) if len(d) else 0.0
        return lambda t: np.asarray(t, np.int64) + d0 + np.int64(round(a))
    x0 = x.min()
    ok = np.ones(len(x), bool)
    for _ in range(3):
        b, a = np.polyfit(x[ok] - x0, d[ok], 1)
        r = d - (a + b * (x - x0))
        mad = 1.4826 * np.median(np.abs(r[ok])) + 1.0
        ok = np.abs(r) <= 5 * mad
    return lambda t: np.asarray(t, np.int64) + d0 + np.rint(a + b * (np.asarray(t) - x0)).astype(np.int64)


def _str_categories(t: pd.DataFrame) -> pd.DataFrame:
    """All-null categoricals get object categories, so tables of any origin concatenate."""
    fix = {c: t[c].cat.set_categories(t[c].cat.categories.astype(str).astype(object))
           for c in t.columns if isinstance(t[c].dtype, pd.CategoricalDtype)
           and t[c].cat.categories.dtype != object}
    return t.assign(**fix) if fix else t


def _concat_columns(tables: list) -> pd.DataFrame:
    """``frames.concat_tables(tables)``, built one column at a time.

    Each input column is dropped from its table once copied, so the peak is the inputs
    plus one column, not twice the inputs, and the freed column is reused by the next
    (fresh pages cost more than the copy). ``tables`` are emptied.
    """
    from pandas.api.types import union_categoricals
    out = {}
    for c in list(tables[0].columns):   # per column, not per row
        parts = [t.pop(c) for t in tables]
        cat = isinstance(parts[0].dtype, pd.CategoricalDtype)
        out[c] = union_categoricals(parts, ignore_order=True) if cat else pd.concat(parts, ignore_index=True)
        del parts
    return pd.DataFrame(out, copy=False)


def _validate(paths, tables):
    """One clear error per bad input set."""
    if paths is not None:
        real = [os.path.realpath(p) for p in paths]
        for i, p in enumerate(real):
            if p in real[:i]:
                raise UsageError(f"{paths[i]}: the same file is given twice")
    for s, t in enumerate(tables):
        name = paths[s] if paths is not None else f"table {s}"
        if len(t) == 0:
            raise CaptureError(f"{name}: no frames")
        lt = np.unique(t["linktype"].to_numpy())
        if not np.isin(lt, RADIO_LINKTYPES).all():
            raise CaptureError(f"{name}: not an 802.11 capture (link type {', '.join(map(str, lt))});"
                               " merge needs 802.11 (+radiotap) captures")
    kinds = {int(np.unique(t["linktype"].to_numpy())[0]) for t in tables if len(t)}
    if len(kinds) > 1:
        raise CaptureError("mismatched link types: " + ", ".join(
            f"{paths[s] if paths else s}={int(t['linktype'].iloc[0])}" for s, t in enumerate(tables)))


def _read_all(paths, columns):
    """Records and frame tables of every input (``columns``: see :func:`merge`)."""
    from sniffsync.decode.frames import read_columns
    from sniffsync.decode.table import frame_table
    want = None if columns is None else list(dict.fromkeys([*NEEDED_COLUMNS, *columns]))

    def one(s):
        rec, n, cols, marks = read_columns(paths[s], s, want)     # walk and decode overlap
        return rec, frame_table(n, cols, marks, want)
    out = [one(s) for s in range(len(paths))]   # one after the other: bounded peak memory
    return [r for r, _ in out], [t for _, t in out]


def merge(paths_or_tables, reference: int = 0, allow_unsynced: bool = False,
          anchors=("beacon", "ba", "unique"), keep_duplicates: bool = False,
          knot_s: float = 1.0, gate_ns: float | None = None, names=None, progress=None,
          tsft_at="auto", columns=None):
    """Synchronise and merge several sniffers' captures.

    Parameters
    ----------
    paths_or_tables : list of path or list of DataFrame
        Capture files, or frame tables (their ``sniffer`` column is reset to the index).
    reference : int
        Input whose clock is the common clock.
    allow_unsynced : bool
        Keep sniffers that cannot be synced on their own clock (flagged ``unsynced``)
        instead of raising :class:`sniffsync.errors.SyncError`.
    anchors : sequence of str
        Anchor kinds for the clock fit (see :data:`sniffsync.sync.ANCHOR_KEYS`).
    keep_duplicates : bool
        Keep every copy (on the common clock) instead of one row per transmission.
    knot_s : float
        Knot spacing of the clock model, seconds.
    gate_ns : float, optional
        Time gate for copies; default from the held-out anchor residuals (>= 3 µs).
    tsft_at : {"auto", "start", "end"} or None
        What each sniffer's timestamps mark (see :func:`airtime.ppdu.align_to_ppdu_end`);
        stamps are moved to PPDU ends before syncing, so the merged ``ts_ns``/``tsft_us``
        mark PPDU ends (``attrs["stamps"] == "end"``). ``None`` leaves stamps as they are.
    names : list of str, optional
        Sniffer names for the report (default: file stems or ``s0``, ``s1``...).
    progress : callable, optional
        ``progress(stage: str)`` called as stages start.
    columns : list of str, optional
        When reading files: columns wanted in the merged table besides
        :data:`NEEDED_COLUMNS` (always decoded); ``None`` decodes every column. ``[]``
        decodes only what the merge and :func:`write_merged` need (the CLI's choice:
        about half the decoding time and memory).

    Returns
    -------
    (DataFrame, dict)
        The merged frame table sorted by common time, and the report.
    """
    say = progress or (lambda stage: None)
    items = list(paths_or_tables)
    if not items:
        raise UsageError("merge needs at least one input")
    paths = None if isinstance(items[0], pd.DataFrame) else [os.fspath(p) for p in items]
    _validate(paths, [])
    if paths is not None:
        names = names or [os.path.splitext(os.path.basename(p))[0] for p in paths]
        say(f"read {', '.join(map(os.path.basename, paths))}")
        recs, tables = _read_all(paths, columns)
    else:
        recs, tables = None, [t.assign(sniffer=np.int16(s)) for s, t in enumerate(items)]
        names = names or [f"s{s}" for s in range(len(items))]
    if not 0 <= reference < len(tables):
        raise UsageError(f"reference {reference} is not an input index (0..{len(tables) - 1})")
    _validate(paths, tables)
    if tsft_at is not None:
        # every sniffer's stamps must mean the same instant: the end of the PPDU
        from airtime.ppdu import align_to_ppdu_end
        say("align stamps to PPDU ends")
        with ThreadPoolExecutor(2) as pool:  # tables are independent; numpy releases the GIL
            tables = list(pool.map(lambda t: align_to_ppdu_end(t, tsft_at), tables))
    tsft_conv = {names[s]: t.attrs.get("tsft_at", {}).get(s, "end") for s, t in enumerate(tables)}
    df = _concat_columns([_str_categories(t) for t in tables]) if len(tables) > 1 else tables[0]
    n_in = len(tables)
    del tables                          # only the concatenated table stays alive
    say("sync clocks")
    ts_ns = df["ts_ns"].to_numpy(np.int64)
    clocks = local_clocks(df)
    with ThreadPoolExecutor(1) as pool:  # what needs no fitted clock runs beside the fit
        key = pool.submit(hash_key, df[list(MERGE_KEY)], MERGE_KEY)
        on_ref = clocks[1] == reference_clock(clocks[2], reference)
        to_epoch = pool.submit(_epoch_map, ts_ns, clocks[0], on_ref)
        res = sync(df, reference=reference, anchors=anchors, knot_s=knot_s,
                   allow_unsynced=allow_unsynced, names=names, clocks=clocks)
        key, to_epoch = key.result(), to_epoch.result()
    del clocks, on_ref
    model = res.model
    synced = model.synced[res.clock]
    if gate_ns is None:
        held = res.anchors[res.anchors.held_out & res.anchors.ok].residual_ns.abs()
        gate_ns = max(MIN_GATE_NS, 2 * float(held.quantile(0.99))) if len(held) else MIN_GATE_NS
    say("match copies")
    group = match_copies(df, res.common_ns, synced, gate_ns, key)
    del key
    ref_tsft = bool(model.clocks.tsft[model.reference])
    common_epoch = np.where(synced, to_epoch(res.common_ns), ts_ns)
    tsft_common = np.rint(res.common_ns / 1000).astype(np.int64) if ref_tsft else None
    del ts_ns
    say("build merged table")
    best = best_copy(group, df["sniffer"].to_numpy(np.int64),
                     df["signal_dbm"].to_numpy(np.float64, na_value=-1e9))
    n_out = len(df) if keep_duplicates else len(best)
    report = merge_report(res, df, group, names, anchors, gate_ns, n_out, keep_duplicates, best)
    del res                              # the fit's arrays: not held while the table is built
    # df is this function's own (concatenated, or copies of the caller's tables): emptied
    out = merged_table(df, common_epoch, tsft_common, group, synced, n_in, keep_duplicates, best,
                       consume=True)
    del df
    if recs is not None:
        out.attrs["records"] = _Shared(recs)
    out.attrs["names"] = names
    if tsft_at is not None:
        out.attrs["stamps"] = "end"
        report["tsft_at"] = tsft_conv
    return out, report


def _pct(x):
    return np.percentile(x, [50, 95, 99]).round(3).tolist() if len(x) else [None, None, None]


def merge_report(res, df, group, names, anchors, gate_ns, frames_out, keep_duplicates,
                 best=None) -> dict:
    """Per sniffer: anchors by kind, clock model per segment, held-out residuals, frame counts."""
    model, pairs = res.model, res.anchors
    cl = model.clocks
    sniffer = df["sniffer"].to_numpy(np.int64)
    sig = df["signal_dbm"].to_numpy(np.float64, na_value=-1e9)
    nh = np.bincount(group)
    is_best = np.zeros(len(df), bool)
    is_best[best_copy(group, sniffer, sig) if best is None else best] = True
    ca, cb = pairs.clock_a.to_numpy(np.int64), pairs.clock_b.to_numpy(np.int64)
    used_p, held_p, ok_p = (pairs[c].to_numpy(bool) for c in ("used", "held_out", "ok"))
    kinds = list(pairs.kind.cat.categories)
    kind_p = pairs.kind.cat.codes.to_numpy(np.int64)
    res_us = np.abs(pairs.residual_ns.to_numpy(np.float64)) / 1000
    clock_sn = cl.sniffer.to_numpy()
    out = []
    for s, name in enumerate(names):    # per sniffer: a handful
        mine_c = np.flatnonzero(clock_sn == s)
        mine = clock_sn == s
        touch = mine[ca] | mine[cb]
        used, hold = touch & used_p, touch & held_p
        n_kind = np.bincount(kind_p[used], minlength=len(kinds))
        segs = []
        for c in mine_c:
            k, v = model.knots[c], model.values[c]
            span = float(k[-1])
            segs.append({"segment": int(cl.segment[c]), "clock": "tsft" if cl.tsft[c] else "capture",
                         "frames": int(cl.frames[c]), "synced": bool(model.synced[c]),
                         "offset_ns": int(model.offset_ns[c] + round(v[0])),
                         "drift_ppm": round(float((v[-1] - v[0]) / span * 1e6), 4) if span > 0 else 0.0,
                         "knots": int(len(k)), "span_s": round(span / 1e9, 6)})
        m = sniffer == s
        out.append({
            "name": name, "reference": bool(cl.sniffer[model.reference] == s),
            "synced": bool(model.synced[mine_c].all()),
            "anchors": {a: int(n_kind[kinds.index(a)]) if a in kinds else 0 for a in anchors},
            "model": segs,
            "heldout": {"n": int((hold & ok_p).sum()), "outliers": int((hold & ~ok_p).sum()),
                        "abs_residual_us_p50_p95_p99": _pct(res_us[hold & ok_p])},
            "frames_in": int(m.sum()),
            "frames_merged": int((nh[group[m]] > 1).sum()),
            "duplicates": int((m & ~is_best).sum())})
    n_in = len(df)
    dup = 0 if keep_duplicates else n_in - frames_out
    return {"sniffers": out, "totals": {
        "frames_in": n_in, "frames_out": int(frames_out), "duplicates_removed": int(dup),
        "transmissions": int(len(nh)), "heard_by_2_or_more": int((nh > 1).sum()),
        "unsynced_frames": int((~model.synced[res.clock]).sum()),
        "gate_us": round(gate_ns / 1000, 3), "reference": names[cl.sniffer[model.reference]],
        "conserved": n_in == frames_out + dup}}


_CHUNK_BYTES = 32 << 20     # pcapng bytes assembled per step: memory stays bounded


class _Shared(list):
    """Records kept in ``DataFrame.attrs`` without pandas deep-copying them on every op."""

    def __deepcopy__(self, memo):
        return self


def _heard_by_table(mask, signals: dict, names: list[str]):
    """``(inv, texts)``: row ``i``'s "heard by" text is ``texts[inv[i]]``.

    Texts depend only on (mask, signal of each sniffer that heard): built once per
    distinct combination (a few thousand), not per frame.
    """
    mask = np.asarray(mask, np.int64)
    cols = [mask]
    for s in range(len(names)):        # per sniffer: 0..255 = signal + 128, 256 = null
        sig = signals.get(s)
        v = np.zeros(len(mask), np.int64) if sig is None else \
            pd.array(sig, dtype="Int16").to_numpy(np.int64, na_value=128) + 128
        cols.append(np.where((mask >> s) & 1 == 1, v, 0))
    m = np.stack(cols, 1)
    if len(names) <= 7:                # mixed radix fits in uint64: a 1-D unique is fast
        code = m[:, 0].astype(np.uint64)
        for c in range(1, m.shape[1]):
            code = code * np.uint64(257) + m[:, c].astype(np.uint64)
        _, first, inv = np.unique(code, return_index=True, return_inverse=True)
        uniq = m[first]
    else:
        uniq, inv = np.unique(m, axis=0, return_inverse=True)
    texts = []
    for row in uniq.tolist():          # per distinct combination: a lookup table
        parts = [names[s] if signals.get(s) is None else
                 f"{names[s]}({'?' if row[s + 1] == 256 else row[s + 1] - 128} dBm)"
                 for s in range(len(names)) if (row[0] >> s) & 1]
        texts.append(" ".join(parts))
    return np.asarray(inv).ravel(), texts


def heard_by(mask: np.ndarray, signals: dict, names: list[str]) -> np.ndarray:
    """Per frame text ``"A(-41 dBm) B(-67 dBm)"`` from the bitmask and per-sniffer signal columns."""
    inv, texts = _heard_by_table(mask, signals, names)
    return np.asarray(texts, dtype=object)[inv] if len(inv) else np.zeros(0, object)


def write_merged(path, merged: pd.DataFrame, records=None, names=None) -> int:
    """Write the merged table as pcapng: one IDB per sniffer, a comment per packet.

    Each row is written on the interface of its ``sniffer`` column (the strongest copy,
    or every copy when the table kept duplicates), at its common ``ts_ns``, with the
    comment ``"heard by: A(-41 dBm) B(-67 dBm)"``. The file is streamed (bounded
    memory) to a temporary name and renamed into place. Returns the number of packets.
    """
    from sniffsync.sync.pcapng import DirectSink, comment_blob, write_epbs
    from sniffsync.io.atomic import atomic_output
    from sniffsync.io.writers import _idb, _shb
    records = records if records is not None else merged.attrs.get("records")
    names = names or merged.attrs.get("names")
    if records is None:
        raise UsageError("writing a pcapng needs the capture records (merge from file paths)")
    d = os.path.dirname(os.path.abspath(path))
    if not os.access(d, os.W_OK):
        raise CaptureError(f"{path}: cannot write here (directory not writable)")
    sn = merged["sniffer"].to_numpy(np.int64)
    idx = merged["frame"].to_numpy(np.int64) - 1
    start, caplen = np.zeros(len(merged), np.int64), np.zeros(len(merged), np.int64)
    for s, rec in enumerate(records):   # per sniffer: where its packets' bytes are
        m = sn == s
        start[m] = np.asarray(rec.data_off, np.int64)[idx[m]]
        caplen[m] = np.asarray(rec.caplen, np.int64)[idx[m]]
    ts_ns = merged["ts_ns"].to_numpy(np.int64)
    if len(ts_ns) and ts_ns.min() < 0:
        raise UsageError("ts_ns must be >= 0 (ns since the Unix epoch)")
    signals = {s: merged[f"signal_dbm_s{s}"] for s in range(len(names)) if f"signal_dbm_s{s}" in merged}
    inv, texts = _heard_by_table(merged["sniffers_heard"].to_numpy(), signals, names)
    opt = comment_blob(["heard by: " + t for t in texts]) + (inv,)
    head = _shb() + b"".join(_idb({"name": n, "linktype": int(np.asarray(r.linktype)[0])
                                   if len(r.linktype) else 127}) for n, r in zip(names, records))

    def produce(fh):
        sink = DirectSink(fh)
        sink.write(head)
        write_epbs(sink, records, sn, start, caplen, merged["wirelen"].to_numpy(np.int64), ts_ns, opt,
                   _CHUNK_BYTES)
        sink.close()

    with atomic_output(path) as fh:
        produce(fh)
    return len(merged)
