"""Copies of one transmission heard by several sniffers: found, ranked, merged into one row.

On the common clock (:func:`sniffsync.sync.clock.sync`), copies share their content --
a 64-bit key of :data:`MERGE_KEY`, so a retransmission (retry bit set) is another frame
and ACK/CTS, which carry only RA, match by RA + length + duration -- and fall within a
gate: rows of TSFT clocks are clustered by (key, common time) like anchors
(:func:`sniffsync.sync.anchors.cluster`) in the tight gate (a few µs). A clock whose
fit is wider (a host clock: no TSFT, stamps jittered by the host) gets its own gate,
:data:`GATE_SIGMAS` times its own residual scale (:func:`copy_gates`): its frames
are then attached, clock by clock from the tightest, to the nearest group of the same
key within that gate that holds no copy of their sniffer yet (one frame per group and
sniffer: the closest wins), else start a group of their own. The merged table keeps
the copy with the strongest signal; its time is that of the copies with the smallest
error (:mod:`sniffsync.sync.retime`).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from sniffsync.sync.ampdu import ppdu_clusters
from sniffsync.sync.anchors import cluster, hash_key
from sniffsync.sync.order import group_mean, order_by
from sniffsync.sync.streamstats import held_stats

__all__ = ["MERGE_KEY", "GATE_SIGMAS", "default_gate", "copy_gates", "match_copies", "best_copy", "merged_table"]

# content of a transmission that every receiver decodes identically
MERGE_KEY = ("type_subtype", "mpdu_len", "ta", "ra", "seq", "frag", "retry", "duration_us",
             "fcs", "ba_ssn", "ba_bitmap_lo", "beacon_tsf_us")


GATE_SIGMAS = 5.0          # a wide clock's copy gate, in its own residual scales
RA_ONLY = (0x1C, 0x1D)     # CTS, ACK: no TA, matched through their place too


def clock_sigma(res) -> np.ndarray:
    """Noise scale (ns) of every clock: ``res.sigma_ns`` when the sync result has it, else
    1.4826 x median |residual| of the anchor pairs that touch the clock (kept ones, held
    out or not; the model's prior where none)."""
    own = getattr(res, "sigma_ns", None)     # the fit's own per-clock noise, where sync gives one
    if own is not None:
        return np.asarray(own, np.float64)
    model, pairs = res.model, res.anchors
    ok = pairs["ok"].to_numpy(bool)
    ca, cb = (pairs[c].to_numpy(np.int64)[ok] for c in ("clock_a", "clock_b"))
    r = np.abs(pairs["residual_ns"].to_numpy(np.float64)[ok])
    c = np.r_[ca, cb]
    rr = np.r_[r, r]
    out = np.asarray(model.sigma_ns, np.float64).copy()
    o = np.lexsort((rr, c))
    c, rr = c[o], rr[o]
    start = np.flatnonzero(np.r_[True, c[1:] != c[:-1]]) if len(c) else np.zeros(0, np.int64)
    count = np.diff(np.r_[start, len(c)])
    out[c[start]] = 1.4826 * rr[start + count // 2]
    return out


def default_gate(res, floor_ns: float, st=None) -> float:
    """The tight copy gate: 2 x p99 of the held-out anchor residuals between TSFT clocks
    (all clocks when no two have TSFT), at least ``floor_ns``; read of ``st`` (default
    :func:`sniffsync.sync.streamstats.held_stats`: exact for one fit, a tiled fit's
    histograms)."""
    st = held_stats(res) if st is None else st
    tsft = res.model.clocks["tsft"].to_numpy(bool)
    both = np.flatnonzero((tsft[:, None] & tsft[None, :]).ravel() & (st.held_ok > 0))
    q = st.res.quantiles(both if len(both) else np.flatnonzero(st.held_ok), [99])
    return max(floor_ns, 2 * float(q[0])) if q is not None else floor_ns


def copy_gates(res, gate_ns: float) -> np.ndarray:
    """Per clock, the gate its copies are matched in: ``gate_ns`` for TSFT clocks,
    max(``gate_ns``, :data:`GATE_SIGMAS` x its residual scale) for host clocks."""
    host = res.model.kind == "host"      # a TSF segment placed via the host clock too
    return np.where(host, np.maximum(gate_ns, GATE_SIGMAS * clock_sigma(res)), gate_ns)


def match_copies(df: pd.DataFrame, common_ns: np.ndarray, synced: np.ndarray,
                 gate_ns: float, key=None, clock=None, clock_gate_ns=None, by_key=None) -> np.ndarray:
    """Group id per frame: frames with one content key, within the gate, one per sniffer.

    Frames of unsynced clocks (``synced`` False) are never grouped with others.
    ``key``: ``hash_key(df, MERGE_KEY)`` when already computed, ``by_key`` its
    :func:`sniffsync.sync.anchors.key_order` (then the clustering re-sorts only inside
    runs of one key; the same clusters). ``clock`` (per frame)
    and ``clock_gate_ns`` (per clock, :func:`copy_gates`): clocks with a gate wider
    than ``gate_ns`` are attached after the others (module docstring).
    """
    key = hash_key(df, MERGE_KEY) if key is None else key
    sniffer = df["sniffer"].to_numpy(np.int64)
    t = np.asarray(common_ns, np.int64)
    # unsynced frames get a unique key each so they stay alone
    key = np.where(synced, key, np.arange(len(df), dtype=np.uint64) * np.uint64(0x9E3779B1) + np.uint64(1))
    wide_gate = None if clock is None or clock_gate_ns is None else np.asarray(clock_gate_ns)[clock]
    if wide_gate is None or not (synced & (wide_gate > gate_ns)).any():
        # the key order holds while no key was replaced above
        return cluster(key, t, sniffer, gate_ns, by_key if synced.all() else None)
    tight = ~synced | (wide_gate <= gate_ns)
    group = np.full(len(df), -1, np.int64)
    group[tight] = cluster(key[tight], t[tight], sniffer[tight], gate_ns)
    ng = int(group.max()) + 1
    rows = np.flatnonzero(tight)
    reps = _Reps.of(group[rows], key[rows], t[rows], sniffer[rows], ng, gate_ns / GATE_SIGMAS)
    place = _Places(df, sniffer)
    clock = np.asarray(clock)
    wide = np.unique(clock[~tight])
    for c in wide[np.argsort(np.asarray(clock_gate_ns)[wide], kind="stable")]:   # tightest first
        r = np.flatnonzero((clock == c) & ~tight)
        resp = place.response[r]
        for is_resp in (False, True):        # ACK/CTS once what they answer is placed
            part = r[resp == is_resp]
            pref = place.after_answered(part, group, key) if is_resp else None
            group[part] = reps.attach(key[part], t[part], sniffer[part], float(wide_gate[r[0]]),
                                      gate_ns, pref)
    return group


class _Places:
    """Each sniffer's record order, to match an ACK/CTS (RA only) through its place: the
    frame after the one it answers (sent by its receiver), in a sniffer that heard both."""

    def __init__(self, df, sniffer):
        n = len(df)
        order = np.lexsort((df["frame"].to_numpy(np.int64), sniffer))
        same = sniffer[order][1:] == sniffer[order][:-1]
        self.prev, self.next = np.full(n, -1, np.int64), np.full(n, -1, np.int64)
        self.prev[order[1:][same]] = order[:-1][same]
        self.next[order[:-1][same]] = order[1:][same]
        tsub = df["type_subtype"].to_numpy(np.int64, na_value=-1)
        self.response = np.isin(tsub, RA_ONLY)
        self.ta = df["ta"].to_numpy(np.int64, na_value=-1) if "ta" in df else np.full(n, -1)
        self.ra = df["ra"].to_numpy(np.int64, na_value=-2) if "ra" in df else np.full(n, -2)
        self.sniffer = sniffer

    def after_answered(self, rows, group, key) -> np.ndarray:
        """Per response row: the group of the record that follows, in another sniffer, a
        copy of the frame it answers (same key; -1 where none)."""
        pref = np.full(len(rows), -1, np.int64)
        p = self.prev[rows]
        ok = (p >= 0) & (self.ta[np.maximum(p, 0)] == self.ra[rows])
        gp = np.where(ok, group[np.maximum(p, 0)], -1)
        ok &= gp >= 0
        if not ok.any():
            return pref
        ng = int(group.max()) + 1
        done = group >= 0
        for s in np.unique(self.sniffer[done]):          # per sniffer: a handful
            copy = np.full(ng, -1, np.int64)
            mine = np.flatnonzero(done & (self.sniffer == s))
            copy[group[mine]] = mine
            q = np.where(ok & (pref < 0), copy[np.maximum(gp, 0)], -1)
            nq = np.where(q >= 0, self.next[np.maximum(q, 0)], -1)
            hit = (nq >= 0) & (self.sniffer[rows] != s)
            hit &= np.where(hit, group[np.maximum(nq, 0)] >= 0, False)
            hit &= key[np.maximum(nq, 0)] == key[rows]
            pref[hit] = group[nq[hit]]
        return pref


class _Reps:
    """Groups as seen by a wide clock: content key, time, scale (gate / GATE_SIGMAS) and
    bitmask of the sniffers already in it."""

    def __init__(self, key, t, sigma, mask):
        self.key, self.t, self.sigma, self.mask = key, t, sigma, mask

    @classmethod
    def of(cls, group, key, t, sniffer, ng, sigma):
        t_g = group_mean(group, t, ng)
        k = np.zeros(ng, np.uint64)
        k[group] = key
        mask = np.zeros(ng, np.int64)
        np.bitwise_or.at(mask, group, np.int64(1) << sniffer)
        return cls(k, t_g, np.full(ng, sigma), mask)

    def attach(self, key, t, sniffer, gate, floor, pref=None):
        """Group of each row (new ids for rows left alone); updates the groups. ``pref``:
        per row a group to take first when it is within the gate and free (-1: none)."""
        ng, n = len(self.key), len(key)
        if n == 0:                       # (a clock without frames of this kind)
            return np.zeros(0, np.int64)
        sig = gate / GATE_SIGMAS
        if ng == 0:                      # nothing to join yet (every clock is wide)
            return self._add(np.full(n, -1, np.int64), key, t, sniffer, sig)
        both_k, both_t = np.r_[self.key, key], np.r_[self.t, t]
        is_row = np.r_[np.zeros(ng, bool), np.ones(n, bool)]
        o = np.lexsort((is_row, both_t, both_k))
        ks, ts, rs = both_k[o], both_t[o], is_row[o]
        pos = np.arange(len(o))
        prev = np.maximum.accumulate(np.where(rs, -1, pos))
        nxt = np.minimum.accumulate(np.where(rs, len(o), pos)[::-1])[::-1]
        best, best_dt = np.full(len(o), -1, np.int64), np.full(len(o), np.inf)
        for cand in (prev, nxt):         # the nearest group before and after, same key
            ok = rs & (cand >= 0) & (cand < len(o))
            c = np.clip(cand, 0, len(o) - 1)
            g = np.where(ok, o[c], 0)
            dt = np.abs(ts - ts[c]).astype(np.float64)
            lim = np.maximum(floor, GATE_SIGMAS * np.sqrt(sig ** 2 + self.sigma[g] ** 2))
            free = ((self.mask[g] >> sniffer[np.clip(o - ng, 0, n - 1)]) & 1) == 0
            ok &= (ks[c] == ks) & (dt <= lim) & free & (dt < best_dt)
            best = np.where(ok, g, best)
            best_dt = np.where(ok, dt, best_dt)
        row = o[rs] - ng
        g_row, d_row = np.full(n, -1, np.int64), np.full(n, np.inf)
        g_row[row], d_row[row] = best[rs], best_dt[rs]
        if pref is not None and (pref >= 0).any():        # placed by what it answers: first
            g = np.maximum(pref, 0)
            dt = np.abs(t - self.t[g]).astype(np.float64)
            lim = np.maximum(floor, GATE_SIGMAS * np.sqrt(sig ** 2 + self.sigma[g] ** 2))
            use = (pref >= 0) & (dt <= lim) & (((self.mask[g] >> sniffer) & 1) == 0)
            g_row[use], d_row[use] = pref[use], -1.0
        # one row per group: the closest keeps it
        cand = np.flatnonzero(g_row >= 0)
        cand = cand[np.lexsort((d_row[cand], g_row[cand]))]
        lose = np.r_[False, g_row[cand][1:] == g_row[cand][:-1]] if len(cand) else np.zeros(0, bool)
        g_row[cand[lose]] = -1
        return self._add(g_row, key, t, sniffer, sig)

    def _add(self, g_row, key, t, sniffer, sig):
        """Rows left alone (-1) start groups of their own; every row's sniffer joins its group."""
        alone = np.flatnonzero(g_row < 0)
        g_row[alone] = len(self.key) + np.arange(len(alone))
        self.key = np.r_[self.key, key[alone]]
        self.t = np.r_[self.t, t[alone]]
        self.sigma = np.r_[self.sigma, np.full(len(alone), sig)]
        self.mask = np.r_[self.mask, np.zeros(len(alone), np.int64)]
        np.bitwise_or.at(self.mask, g_row, np.int64(1) << sniffer)
        return g_row


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
                 keep_duplicates: bool = False, best=None, consume: bool = False,
                 retimed=None, clusters=None, columns=None) -> pd.DataFrame:
    """One row per group (the strongest copy), or every copy with ``keep_duplicates``.

    Adds ``sniffers_heard`` (bitmask), ``n_heard``, ``best_sniffer``, ``merged_id``,
    ``unsynced`` and ``signal_dbm_s<k>`` per sniffer; ``ts_ns`` is the mean common time of
    the copies and ``tsft_us`` its value on the reference TSF (null when not derived).
    ``consume``: drop each column from ``df`` once taken (``df`` is emptied), so the
    peak memory is about one table, not the input table plus the merged one.
    ``retimed`` (:class:`sniffsync.sync.retime.Retimed`, its shift already in
    ``common_ns``/``tsft_common``): the group's time is the mean of its least-error
    copies, and ``ts_err_ns``/``ts_src`` are added (:func:`_provenance`).
    ``clusters``: :func:`sniffsync.sync.ampdu.ppdu_clusters` of these rows when already
    computed, or a future of it (a thread works on it while this starts).
    ``columns``: of ``df``'s columns, only these are taken (None: all).
    """
    n = len(df)
    sniffer = df["sniffer"].to_numpy(np.int64)
    sig = df["signal_dbm"].to_numpy(np.float64, na_value=-1e9)
    ng = int(group.max()) + 1 if n else 0
    mask = np.zeros(ng, np.int64)
    np.bitwise_or.at(mask, group, np.int64(1) << sniffer)
    nh = np.bincount(group, minlength=ng)
    # the group's time: the mean of its copies of the best source (all without retimed)
    top, low = (np.ones(n, bool), None) if retimed is None else _best_source(group, retimed.src, ng)
    t_mean = group_mean(group, common_ns, ng, top)
    # subframes of one A-MPDU: one time (the mean of all their copies), the air's order
    if clusters is None:
        clusters = ppdu_clusters(sniffer, common_ns, group, ng)
    _, rank, t_cl = clusters.result() if hasattr(clusters, "result") else clusters
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
    out = _take(df, rows, consume, columns)
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
    if retimed is not None:
        err, src = _provenance(retimed, group, rows, top, low, keep_duplicates)
        out["ts_err_ns"] = pd.arrays.IntegerArray(np.maximum(err, 0), err < 0)
        out["ts_src"] = pd.Categorical.from_codes(src, TS_SRC_NAMES)
    return out


TS_SRC_NAMES = ("tsft", "other_sniffer", "protocol", "host")     # = sniffsync.sync.retime.TS_SRC


def _best_source(group, src, ng) -> tuple[np.ndarray, np.ndarray]:
    """Per row: whether its source is the best of its group's (lowest :data:`TS_SRC_NAMES`
    index: every TSFT copy when there is one); per group: that best source."""
    src = np.asarray(src, np.int64)
    low = np.full(ng, len(TS_SRC_NAMES))
    np.minimum.at(low, group, src)
    return src == low[group], low


def _provenance(retimed, group, rows, top, g_src, keep_duplicates):
    """``(ts_err_ns, ts_src code)`` of the written ``rows``: a copy's own; a merged row's
    is its group's best-source copies' (the largest of their errors), the source seen
    from the written copy (a TSFT copy written -> ``tsft``; a TSFT time taken from
    another copy -> ``other_sniffer``; ``g_src``: per group, its best source)."""
    err, src = retimed.err_ns, retimed.src.astype(np.int64)
    if keep_duplicates:
        return err[rows], src[rows]
    g_err = np.full(len(g_src), -1, np.int64)
    np.maximum.at(g_err, group[top], err[top])
    gs = g_src[group[rows]]
    return g_err[group[rows]], np.where(src[rows] == 0, 0, np.where(gs == 0, 1, gs))


def _take(df: pd.DataFrame, rows: np.ndarray, consume: bool = False, columns=None) -> pd.DataFrame:
    """``df.iloc[rows, columns].reset_index(drop=True)`` for valid ``rows``: one numpy
    take per column (values and masks, category codes), without pandas' per-column
    checks; ``consume`` pops every column from ``df`` (taken or not)."""
    names = df.columns if columns is None else df.columns[df.columns.isin(list(columns))]
    if consume:                          # what is not taken goes first: a lower peak
        for c in df.columns.difference(names, sort=False):
            del df[c]
    cols = {}
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
