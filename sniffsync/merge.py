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

from .errors import CaptureError, UsageError
from .sync import cluster, hash_key, sync

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
                 gate_ns: float) -> np.ndarray:
    """Group id per frame: frames with one content key, within ``gate_ns``, one per sniffer.

    Frames of unsynced clocks (``synced`` False) are never grouped with others.
    """
    key = hash_key(df, MERGE_KEY)
    sniffer = df["sniffer"].to_numpy(np.int64)
    # unsynced frames get a unique key each so they stay alone
    key = np.where(synced, key, np.arange(len(df), dtype=np.uint64) * np.uint64(0x9E3779B1) + np.uint64(1))
    return cluster(key, np.asarray(common_ns, np.int64), sniffer, gate_ns)


def heard_by(mask: np.ndarray, signals: dict, names: list[str]) -> np.ndarray:
    """Per frame text ``"A(-41 dBm) B(-67 dBm)"`` from the bitmask and per-sniffer signal columns."""
    out = pd.Series([""] * len(mask), dtype=object)
    for s, name in enumerate(names):    # per sniffer, not per frame
        sig = signals.get(s)
        here = (np.asarray(mask) >> s) & 1 == 1
        if sig is None:
            txt = pd.Series(np.full(len(mask), name), dtype=object)
        else:
            v = pd.Series(sig).astype("Float64")
            txt = name + "(" + v.astype("Int64").astype(str).str.replace("<NA>", "?") + " dBm)"
        sep = np.where(out.to_numpy() == "", "", " ")
        out = out.where(~here, out + sep + txt)
    return out.to_numpy()


def best_copy(group, sniffer, sig) -> np.ndarray:
    """Row of the strongest copy of every group (ties -> lowest sniffer index)."""
    order = np.lexsort((sniffer, -sig, group))
    g = group[order]
    first = np.r_[True, g[1:] != g[:-1]] if len(g) else np.zeros(0, bool)
    best = np.zeros(int(group.max()) + 1 if len(group) else 0, np.int64)
    best[g[first]] = order[first]
    return best


def merged_table(df: pd.DataFrame, common_ns: np.ndarray, tsft_common: np.ndarray | None,
                 group: np.ndarray, synced: np.ndarray, n_sniffers: int,
                 keep_duplicates: bool = False, best=None) -> pd.DataFrame:
    """One row per group (the strongest copy), or every copy with ``keep_duplicates``.

    Adds ``sniffers_heard`` (bitmask), ``n_heard``, ``best_sniffer``, ``merged_id``,
    ``unsynced`` and ``signal_dbm_s<k>`` per sniffer; ``ts_ns`` is the mean common time of
    the copies and ``tsft_us`` its value on the reference TSF (null when not derived).
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
    # sort by (ts_ns, merged_id, sniffer) before the one take of every column
    order = np.lexsort((sniffer[rows], group[rows], ts))
    rows, ts = rows[order], ts[order]
    out = df.iloc[rows].reset_index(drop=True)
    g = group[rows]
    out["ts_ns"] = ts
    if tsft_common is not None:
        tc = np.where(synced, tsft_common, df["tsft_us"].to_numpy(np.int64, na_value=0))
        out["tsft_us"] = pd.array(tc[rows], dtype="Int64")
    out["merged_id"] = g
    out["sniffers_heard"] = mask[g]
    out["n_heard"] = nh[g].astype(np.int16)
    out["best_sniffer"] = sniffer[best][g].astype(np.int16)
    out["unsynced"] = ~synced[rows]
    for s in range(n_sniffers):         # per-sniffer signal, from the copy of that sniffer
        v = np.full(ng, -128, np.int64)
        m = sniffer == s
        v[group[m]] = np.where(sig[m] > -1e8, sig[m], -128)
        have = (mask >> s) & 1 == 1
        out[f"signal_dbm_s{s}"] = pd.arrays.IntegerArray(v[g].astype(np.int8), ~(have[g] & (v[g] > -128)))
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
    from .capture import read_records
    from .frames import decode_records
    want = None if columns is None else list(dict.fromkeys([*NEEDED_COLUMNS, *columns]))

    def one(s):
        rec = read_records(paths[s])
        return rec, decode_records(rec, s, want)
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
    from .frames import concat_tables
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
        tables = [align_to_ppdu_end(t, tsft_at) for t in tables]
    tsft_conv = {names[s]: t.attrs.get("tsft_at", {}).get(s, "end") for s, t in enumerate(tables)}
    df = concat_tables([_str_categories(t) for t in tables]) if len(tables) > 1 else tables[0]
    n_in = len(tables)
    del tables                          # only the concatenated table stays alive
    say("sync clocks")
    res = sync(df, reference=reference, anchors=anchors, knot_s=knot_s,
               allow_unsynced=allow_unsynced, names=names)
    model = res.model
    synced = model.synced[res.clock]
    if gate_ns is None:
        held = res.anchors[res.anchors.held_out & res.anchors.ok].residual_ns.abs()
        gate_ns = max(MIN_GATE_NS, 2 * float(held.quantile(0.99))) if len(held) else MIN_GATE_NS
    say("match copies")
    group = match_copies(df, res.common_ns, synced, gate_ns)
    ref_tsft = bool(model.clocks.tsft[model.reference])
    to_epoch = _epoch_map(df["ts_ns"].to_numpy(np.int64), res.local_ns, res.clock == model.reference)
    common_epoch = np.where(synced, to_epoch(res.common_ns), df["ts_ns"].to_numpy(np.int64))
    tsft_common = np.rint(res.common_ns / 1000).astype(np.int64) if ref_tsft else None
    say("build merged table")
    best = best_copy(group, df["sniffer"].to_numpy(np.int64),
                     df["signal_dbm"].to_numpy(np.float64, na_value=-1e9))
    out = merged_table(df, common_epoch, tsft_common, group, synced, n_in, keep_duplicates, best)
    report = merge_report(res, df, group, names, anchors, gate_ns, len(out), keep_duplicates, best)
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
    out = []
    for s, name in enumerate(names):    # per sniffer: a handful
        mine_c = np.flatnonzero(cl.sniffer.to_numpy() == s)
        touch = pairs.clock_a.isin(mine_c) | pairs.clock_b.isin(mine_c)
        used, hold = pairs[touch & pairs.used], pairs[touch & pairs.held_out]
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
            "anchors": {a: int((used.kind == a).sum()) for a in anchors},
            "model": segs,
            "heldout": {"n": int(hold.ok.sum()), "outliers": int((~hold.ok).sum()),
                        "abs_residual_us_p50_p95_p99": _pct(hold.residual_ns[hold.ok].abs().to_numpy() / 1000)},
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


_CHUNK_BYTES = 64 << 20     # pcapng bytes assembled per step: memory stays bounded


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


def _copy_rows(dst, dst_off, src, src_off, lens):
    """``dst[dst_off[i]:+lens[i]] = src[src_off[i]:+lens[i]]`` for all ``i``.

    One row copy per distinct length through sliding-window views (memcpy per row, no
    per-byte index arrays): a loop over lengths, not packets.
    """
    from numpy.lib.stride_tricks import sliding_window_view as windows
    order = np.argsort(lens, kind="stable")
    ln = lens[order]
    cut = np.flatnonzero(np.r_[True, ln[1:] != ln[:-1], True]) if len(ln) else np.zeros(1, np.int64)
    for a, b in zip(cut[:-1], cut[1:]):
        w = int(ln[a])
        if w == 0:
            continue
        r = order[a:b]
        windows(dst, w, writeable=True)[dst_off[r]] = windows(src, w)[src_off[r]]


def _opt_blobs(texts):
    """EPB option bytes per text: opt_comment (code 1, padded to 4) + opt_endofopt."""
    import struct
    blobs = [struct.pack("<HH", 1, len(t)) + t + b"\0" * (-len(t) % 4) + b"\0\0\0\0" if t else b""
             for t in (x.encode() for x in texts)]
    lens = np.array([len(b) for b in blobs], np.int64)
    return np.frombuffer(b"".join(blobs) or b"\0", np.uint8), np.r_[0, np.cumsum(lens)[:-1]], lens


def _write_epbs(fh, records, sn, start, caplen, wirelen, ts_ns, opt) -> None:
    """Stream Enhanced Packet Blocks (the layout of :func:`sniffsync.writers.write_pcapng`).

    ``opt = (blob bytes, blob offset per text, blob length per text, text index per row)``.
    Assembled ~64 MiB at a time in two reused buffers; the kernel write of one (GIL
    released) overlaps the assembly of the other. Input pages below every sniffer's
    lowest pending record are released, so memory stays bounded whatever the size.
    """
    from .capture import release
    ob, oo, ol, inv = opt
    n, big = len(sn), np.iinfo(np.int64).max
    olen, pad = ol[inv], -caplen % 4
    blen = 32 + caplen + pad + olen
    end = np.cumsum(blen)
    hdr = np.empty((n, 7), "<u4")        # 28 header bytes per packet, built for all at once
    hdr[:, 0], hdr[:, 1], hdr[:, 2] = 6, blen, sn
    hdr[:, 3], hdr[:, 4] = ts_ns >> 32, ts_ns & 0xFFFFFFFF    # if_tsresol 9: ticks = ns
    hdr[:, 5], hdr[:, 6] = caplen, wirelen
    hdr, trailer = hdr.view(np.uint8).ravel(), blen.astype("<u4").view(np.uint8)
    cuts = np.unique(np.r_[0, np.searchsorted(end, np.arange(_CHUNK_BYTES, end[-1], _CHUNK_BYTES)), n]) \
        if n else np.zeros(1, np.int64)
    # per sniffer, the lowest input offset still needed from each row on (suffix minimum)
    low = np.full((len(records), n + 1), big)
    for s in range(len(records)):        # per sniffer
        low[s] = np.minimum.accumulate(np.r_[np.where(sn == s, start, big), big][::-1])[::-1]
    size = int(np.diff(np.r_[0, end[cuts[1:] - 1]]).max()) if n else 0
    bufs, pending = [np.empty(size, np.uint8) for _ in range(2)], None
    with ThreadPoolExecutor(1) as pool:
        for i, (a, b) in enumerate(zip(cuts[:-1], cuts[1:])):
            e0 = end[a - 1] if a else 0
            o, out = end[a:b] - blen[a:b] - e0, bufs[i % 2][:end[b - 1] - e0]
            out[:] = 0                   # padding
            r = np.arange(a, b)
            _copy_rows(out, o, hdr, r * 28, np.full(b - a, 28))
            for s, rec in enumerate(records):
                m = np.flatnonzero(sn[a:b] == s)
                _copy_rows(out, o[m] + 28, rec.buf, start[a:b][m], caplen[a:b][m])
            _copy_rows(out, o + 28 + caplen[a:b] + pad[a:b], ob, oo[inv[a:b]], olen[a:b])
            _copy_rows(out, o + blen[a:b] - 4, trailer, r * 4, np.full(b - a, 4))
            if pending is not None:
                pending.result()         # at most one write in flight, on the other buffer
            pending = pool.submit(fh.write, out.data)
            for s, rec in enumerate(records):
                if low[s, b] < big:
                    release(rec, int(low[s, b]))
        if pending is not None:
            pending.result()


def write_merged(path, merged: pd.DataFrame, records=None, names=None) -> int:
    """Write the merged table as pcapng: one IDB per sniffer, a comment per packet.

    Each row is written on the interface of its ``sniffer`` column (the strongest copy,
    or every copy when the table kept duplicates), at its common ``ts_ns``, with the
    comment ``"heard by: A(-41 dBm) B(-67 dBm)"``. The file is streamed (bounded
    memory) to a temporary name and renamed into place. Returns the number of packets.
    """
    from .writers import _atomic_write, _idb, _shb
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
    opt = _opt_blobs(["heard by: " + t for t in texts]) + (inv,)
    head = _shb() + b"".join(_idb({"name": n, "linktype": int(np.asarray(r.linktype)[0])
                                   if len(r.linktype) else 127}) for n, r in zip(names, records))

    def produce(fh):
        fh.write(head)
        _write_epbs(fh, records, sn, start, caplen, merged["wirelen"].to_numpy(np.int64), ts_ns, opt)

    _atomic_write(path, produce)
    return len(merged)
