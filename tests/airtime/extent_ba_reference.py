"""The Block-Ack evidence count of airtime.extent_ba as it was before its windows became 64-bit
masks (one array element per window position, captured keys searched with ``searchsorted``):
the reference its mask form must match (tests/airtime/test_extent_chunks.py)."""
from __future__ import annotations

import numpy as np
import pandas as pd

import airtime.extent_ba as B


def missed_subframes(ctx, resp, group, need=None) -> np.ndarray:
    frames, c, n = ctx.frames, ctx.c, len(ctx.data)
    add = np.zeros(n, np.int64)
    ba_now = np.where(ctx.data & (resp >= 0), c.first_frame[np.maximum(resp, 0)], -1)
    ba_prev, prev_t = B._previous_ba(ctx)
    d = np.flatnonzero(ctx.data & ((ba_now >= 0) | (ba_prev >= 0)) & (True if need is None else need))
    if not len(d) or "ba_ssn" not in frames:
        return add
    captured, lo, hi = _captured_bounds(ctx, group, 2 * n)
    lo, hi = lo[group[d]], hi[group[d]]
    ssn = B._np_rows(frames, "ba_ssn", -1, np.where(ba_now[d] >= 0, ba_now[d], ba_prev[d]))
    in_ba = (ssn >= 0) & ((lo - ssn) % 4096 < B.BA_REACH)
    base = np.where(in_ba, ssn, (lo - B.BA_REACH // 2) % 4096)
    bm = pd.Series(frames["ba_bitmap_lo"].array.take(np.maximum(ba_now[d], 0))).to_numpy(np.uint64, na_value=0) \
        if "ba_bitmap_lo" in frames else np.zeros(len(d), np.uint64)
    top = np.where((ba_now[d] >= 0) & in_ba & (bm > 0),
                   np.minimum(np.floor(np.log2(np.maximum(bm, 1).astype(float))), 63), -1).astype(np.int64)
    width = np.minimum(np.maximum((hi - base) % 4096, top) + 1, B.BA_REACH)
    rows, k, s = _not_captured(group[d], base, width, ssn >= 0, captured)
    code = np.unique(B._key(c.ta, c.ra, c.clock), return_inverse=True)[1].reshape(-1).astype(np.int64)
    pairs = np.zeros(int(code.max()) + 1 if len(code) else 1, bool)
    pairs[code[d]] = True
    table = B._capture_table(ctx, code, pairs)
    last_known = np.full(len(d), -1, np.int64)
    acked = B.BaAnswers(frames)
    pid = d[rows]
    now, prev = ba_now[pid], ba_prev[pid]
    acked_now = np.zeros(len(s), bool)
    acked_now[now >= 0] = acked(now[now >= 0], s[now >= 0])
    known = np.zeros(len(s), bool)
    known[prev >= 0] = acked(prev[prev >= 0], s[prev >= 0])
    known |= B._sent_since(table, code[pid] * 4096 + s, c.t_ns[pid] - B.COPY_TOL_NS, prev_t[pid])
    np.maximum.at(last_known, rows[known], k[known])
    between = ((s - lo[rows]) % 4096 < (hi[rows] - lo[rows]) % 4096) & (hi[rows] >= 0)
    before = (k > last_known[rows]) & (k < (lo[rows] - base[rows]) % 4096) & (prev >= 0)
    missed = ~known & (acked_now | between | before)
    np.add.at(add, pid[missed], 1)
    return add


def _not_captured(group_d, base, width, has_ssn, captured):
    rows = np.repeat(np.arange(len(width)), width)
    k = np.arange(len(rows)) - np.repeat(np.cumsum(width) - width, width)
    s = (base[rows] + k) % 4096
    key = group_d[rows] * 4096 + s
    at = np.minimum(np.searchsorted(captured, key), max(len(captured) - 1, 0))
    cand = ((captured[at] != key) if len(captured) else np.ones(len(key), bool)) & has_ssn[rows]
    return rows[cand], k[cand], s[cand]


def _captured_bounds(ctx, group, n):
    first = np.full(n, -1, np.int64)
    keys = [np.zeros(0, np.int64)]
    for gf, sq in _captured_rows(ctx, group):
        keys.append(gf * 4096 + sq)
        u, at = np.unique(gf, return_index=True)
        new = first[u] < 0
        first[u[new]] = sq[at[new]]
    captured = np.sort(np.concatenate(keys), kind="stable")
    lo_off = np.zeros(n, np.int64)
    hi_off = np.zeros(n, np.int64)
    for gf, sq in _captured_rows(ctx, group):
        off = (sq - first[gf]) % 4096
        off = np.where(off > 2048, off - 4096, off)
        np.minimum.at(lo_off, gf, off)
        np.maximum.at(hi_off, gf, off)
    has = first >= 0
    return captured, np.where(has, (first + lo_off) % 4096, -1), np.where(has, (first + hi_off) % 4096, -1)


def _captured_rows(ctx, group):
    ok = (ctx.fp >= 0) & (ctx.seq >= 0)
    yield group[ctx.fp[ok]], ctx.seq[ok]
