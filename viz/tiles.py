"""Timeline tiles: what the D3 timeline draws for a time range at a pixel width.

The answer's size scales with pixels, not frames. When few PPDUs fall in the range
they are sent one by one; otherwise each lane is cut into pixel buckets carrying busy
time, PPDU count, the dominant kind and the worst event — so a short failure never
vanishes at coarse zoom. Busy time per bucket comes from prefix sums over the lane's
sorted starts and ends (``busy(t) = sum(clip(t - start, 0, airtime))``), so a tile costs
``O(px log n)`` whatever the run's size: per lane, one ``searchsorted`` of the bucket edges
into its starts and one into its ends give counts and busy time, and the airtime per kind
up to an edge (the dominant kind) is a checkpoint row kept every :data:`CHECK` items plus
the few items after it (a ``searchsorted`` per lane and kind cost ~9x more on 10M PPDUs).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

from airtime.ppdu import KIND_NAMES
from sniffsync.decode.macs import mac_text
from viz.jsonable import plain
from viz.keyed import ranges, search_within
from viz.laneranks import MAX_LANES, LaneRanks

__all__ = ["KINDS", "SEVERITY", "TimelineIndex", "build_index", "tile", "tile_arrays", "busy_between"]

# Drawing order of the PPDU kinds: a tile's kind is a code into it, the page colours by that
# code and names it from the list it is served (meta "kinds"). Data first, the control kinds
# in table order, then beacon, management and other.
_DRAWN_LAST = ["beacon", "mgmt", "other"]
KINDS = ["data"] + [k for k in KIND_NAMES if k not in ("data", *_DRAWN_LAST)] + _DRAWN_LAST
# event kind -> severity drawn on the timeline (0 = none); worst wins in a bucket
CHECK = 16                 # items between two rows of per-kind cumulative airtime
SEVERITY = {"retry": 1, "rts_unanswered": 2, "ba_missing": 3, "mpdu_failed": 3,
            "overlap": 3, "rts_cts_collision": 4}


class TimelineIndex(NamedTuple):
    t0_ns: int                 # run start (all times below are relative to it)
    t1_ns: int
    lanes: list                # lane labels
    lane_of: np.ndarray        # per item: lane index
    start: np.ndarray          # per item, int64 ns relative to t0, sorted by (lane, start)
    end: np.ndarray
    kind: np.ndarray           # int8 index into KINDS
    severity: np.ndarray       # int8 worst event on the PPDU
    ppdu: np.ndarray           # PPDU id
    bounds: np.ndarray         # lane l's items are [bounds[l], bounds[l+1])
    cum_start: np.ndarray      # per lane prefix sums (concatenated, aligned with start)
    end_sorted: np.ndarray     # per lane ends sorted (aligned segments); None when keyed (see ends())
    cum_end: np.ndarray
    longest: int               # longest airtime: how far before t0 an overlapping item can start
    ev_pos: np.ndarray         # positions (into start/end/...) of items with severity > 0
    kcheck: np.ndarray         # (n // CHECK + 1, len(KINDS)): airtime per kind of items [0, j*CHECK)
    stride: int                # lane l's times t are keyed l * stride + t + 1 (0: no keys, loop)
    start_key: np.ndarray      # start keyed by lane: one searchsorted finds every lane's positions
                               # (None when `ranks` are built: they answer every search)
    end_key: np.ndarray        # end_sorted keyed the same way
    ranks: dict | None = None  # "start"/"end" -> viz.laneranks.LaneRanks (None: many lanes, not built)


def build_index(ppdus: pd.DataFrame, events: pd.DataFrame | None = None,
                lanes: str = "station", n_sniffers: int = 1, names=None) -> TimelineIndex:
    """Sort PPDUs into lanes once; every tile is then a few searchsorted calls.

    ``lanes="station"``: one lane per transmitter (``ta``; PPDUs without TA — CTS/ACK —
    go to the lane of the station they answer, ``ra``). ``lanes="sniffer"``: one lane
    per sniffer, a PPDU appearing in every lane whose bit is set in ``heard_mask``.
    """
    n = len(ppdus)
    start = ppdus["start_ns"].to_numpy(np.int64)
    end = ppdus["end_ns"].to_numpy(np.int64)
    t0 = int(start.min()) if n else 0
    t1 = int(end.max()) if n else 1
    kind = pd.Categorical(ppdus["kind"].astype(str), categories=KINDS).codes.astype(np.int8)
    kind = np.where(kind < 0, KINDS.index("other"), kind).astype(np.int8)
    sev = np.zeros(n, np.int8)
    if events is not None and len(events) and "ppdu" in events:
        ev_sev = events["kind"].map(SEVERITY).fillna(0).to_numpy(np.int8)
        ev_p = events["ppdu"].to_numpy(np.int64)
        pos = np.searchsorted(ppdus["ppdu"].to_numpy(np.int64), ev_p)
        ok = (ev_p >= 0) & (pos < n)
        ok[ok] &= ppdus["ppdu"].to_numpy(np.int64)[pos[ok]] == ev_p[ok]
        np.maximum.at(sev, pos[ok], ev_sev[ok])
    ids = ppdus["ppdu"].to_numpy(np.int64)
    if lanes == "sniffer":
        mask = (ppdus["heard_mask"] if "heard_mask" in ppdus else 1 << ppdus["sniffer"]).to_numpy(np.int64)
        parts = [np.flatnonzero(mask >> s & 1) for s in range(n_sniffers)]
        rows = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        lane_of = np.repeat(np.arange(n_sniffers), [len(p) for p in parts])
        labels = list(names) if names is not None else [f"sniffer {s}" for s in range(n_sniffers)]
    else:
        ta = ppdus["ta"].astype("UInt64")
        who = ta.fillna(ppdus["ra"].astype("UInt64")).fillna(0).to_numpy(np.uint64)
        uniq, lane_of = np.unique(who, return_inverse=True)
        rows = np.arange(n)
        labels = [mac_text(u) if u else "unknown" for u in uniq]
    order = np.lexsort((start[rows], lane_of))
    rows, lane_of = rows[order], np.asarray(lane_of)[order]
    bounds = np.searchsorted(lane_of, np.arange(len(labels) + 1))
    s, e = start[rows] - t0, end[rows] - t0
    end_sorted = np.concatenate([np.sort(e[bounds[i]:bounds[i + 1]]) for i in range(len(labels))]
                                or [np.zeros(0, np.int64)])
    k = kind[rows]
    longest = int((e - s).max()) if len(s) else 0
    stride = int(e.max()) + 3 if len(e) else 3
    if len(labels) * stride >= 1 << 62:       # keys would overflow int64: per-lane searches instead
        stride, skey, ekey = 0, None, None
    else:
        skey, ekey = lane_of * stride + s + 1, lane_of * stride + end_sorted + 1
    ranks = _lane_ranks(s, e, lane_of, len(labels))
    if ranks is not None:             # the starts' keys are only searched without the ranks
        skey = None
    return TimelineIndex(t0, t1, labels, lane_of, s, e, k, sev[rows], ids[rows], bounds,
                         _seg_cumsum(s, bounds), None if stride else end_sorted, _seg_cumsum(end_sorted, bounds),
                         longest, np.flatnonzero(sev[rows] > 0), _kind_checkpoints(k, e - s),
                         stride, skey, ekey, ranks)


def _lane_ranks(start, end, lane_of, n_lanes: int) -> dict | None:
    if not 0 < n_lanes <= MAX_LANES:
        return None
    return {"start": LaneRanks(start, lane_of, n_lanes), "end": LaneRanks(end, lane_of, n_lanes)}


def _kind_checkpoints(kind: np.ndarray, air: np.ndarray) -> np.ndarray:
    """Row j: airtime per kind of items [0, j*CHECK) (over all lanes: a lane's share is a
    difference of two positions inside it)."""
    nk, nb = len(KINDS), -(-len(kind) // CHECK)
    per = np.bincount(np.arange(len(kind)) // CHECK * nk + kind, weights=air, minlength=nb * nk)
    out = np.zeros((nb + 1, nk), np.int64)
    np.cumsum(per.reshape(nb, nk).astype(np.int64), axis=0, out=out[1:])   # ns sums < 2^53: exact
    return out


def _kind_air_before(idx: TimelineIndex, pos: np.ndarray) -> np.ndarray:
    """(len(pos), len(KINDS)): airtime per kind of items [0, pos) — the checkpoint row nearest
    each position, plus the items between it and the position (or minus those after it): at
    most CHECK / 2 items each."""
    nk = len(KINDS)
    j = np.minimum((pos + CHECK // 2) // CHECK, len(idx.kcheck) - 1)
    c = np.minimum(j * CHECK, len(idx.kind))             # the checkpoint's position (the last one: n)
    lo, hi = np.minimum(c, pos), np.maximum(c, pos)
    row = np.repeat(np.arange(len(pos)), hi - lo)
    q = ranges(lo, hi)
    extra = np.bincount(row * nk + idx.kind[q], weights=idx.end[q] - idx.start[q], minlength=len(pos) * nk)
    sign = np.where(c < pos, 1, -1)[:, None]             # per position, not per item
    return idx.kcheck[j] + extra.reshape(len(pos), nk).astype(np.int64) * sign    # exact: sums < 2^53 ns


def _seg_cumsum(x, bounds):
    """Prefix sums restarting at every lane boundary (prefix[i] = sum of its lane up to i)."""
    c = np.cumsum(x, dtype=np.int64)
    base = np.concatenate([[0], c])[bounds[:-1]]
    return c - np.repeat(base, np.diff(bounds))


def ends(idx: TimelineIndex, lane: int) -> np.ndarray:
    """``lane``'s sorted ends (kept only as keys when the index is keyed: 8 bytes an item less)."""
    lo, hi = idx.bounds[lane], idx.bounds[lane + 1]
    if idx.end_sorted is not None:
        return idx.end_sorted[lo:hi]
    return idx.end_key[lo:hi] - (lane * idx.stride + 1)


def busy_between(idx: TimelineIndex, lane: int, edges: np.ndarray, ks=None) -> np.ndarray:
    """Busy ns of ``lane`` in each interval ``[edges[i], edges[i+1])`` (edges relative to t0).
    ``ks``: the edges' positions among the lane's starts when the caller has them (an item
    starting exactly at an edge adds 0 either side, so left or right positions both do)."""
    lo, hi = idx.bounds[lane], idx.bounds[lane + 1]
    s, cs = idx.start[lo:hi], idx.cum_start[lo:hi]
    e, ce = ends(idx, lane), idx.cum_end[lo:hi]

    t = np.asarray(edges, np.int64)       # integral: sum over items of clip(t - start, 0, airtime)
    ks = np.searchsorted(s, t, side="right") if ks is None else ks
    ke = np.searchsorted(e, t, side="right")
    ps = np.where(ks > 0, cs[np.maximum(ks - 1, 0)], 0)
    pe = np.where(ke > 0, ce[np.maximum(ke - 1, 0)], 0)
    return np.diff((ks * t - ps) - (ke * t - pe))


def _search(idx: TimelineIndex, which: str, q, within=None) -> np.ndarray:
    """(lanes, m) global positions of times ``q`` (the same m times for every lane) among each
    lane's starts (``which="start"``) or sorted ends, searchsorted left; ``within``: (k0, k1)
    per lane that bound the answers. One search of keyed times over all lanes: a time clipped
    to [-1, stride - 2] finds the same position (every time of the index is in [0, stride - 3])."""
    nl = len(idx.lanes)
    q = np.asarray(q, np.int64)
    if idx.ranks is not None:          # one search over all lanes' items (viz.laneranks)
        return idx.bounds[:-1, None] + idx.ranks[which].rank(q)
    if idx.stride:
        keys = idx.start_key if which == "start" else idx.end_key
        qk = np.arange(nl, dtype=np.int64)[:, None] * idx.stride + (np.clip(q, -1, idx.stride - 2) + 1)
        return np.searchsorted(keys, qk) if within is None else search_within(keys, *within, qk)
    vals = idx.start if which == "start" else idx.end_sorted
    b = idx.bounds
    return np.array([b[l] + np.searchsorted(vals[b[l]:b[l + 1]], q) for l in range(nl)],
                    np.int64).reshape(nl, len(q))


def tile(idx: TimelineIndex, t0_ns: int, t1_ns: int, px: int, max_items: int | None = None) -> dict:
    """:func:`tile_arrays` with plain lists (what the JSON answer reads as)."""
    return plain(tile_arrays(idx, t0_ns, t1_ns, px, max_items))


def tile_arrays(idx: TimelineIndex, t0_ns: int, t1_ns: int, px: int, max_items: int | None = None) -> dict:
    """JSON-able tile for ``[t0_ns, t1_ns)`` (relative to the run start) at ``px`` pixels,
    columns as numpy arrays (:mod:`viz.jsonable`).

    Returns ``{"mode": "items", "items": {...columns...}}`` when at most ``max_items``
    (default ``4 * px``) PPDUs overlap the range, else ``{"mode": "buckets", ...}`` with
    per-lane rows ``busy_ns``, ``count``, ``kind`` (dominant by busy time) and ``severity``.
    Every lane at once: a few numpy calls whatever the number of lanes.
    """
    t0_ns, t1_ns, px = int(t0_ns), int(t1_ns), int(px)
    max_items = 4 * px if max_items is None else max_items
    nl = len(idx.lanes)
    # items overlapping the range: per lane, starts < t1 and ends > t0 (ends grow with starts
    # within a lane unless PPDUs nest, so the first candidate comes from the longest airtime)
    a, b = _search(idx, "start", [t0_ns - idx.longest, t1_ns]).T
    out = {"t0_ns": t0_ns, "t1_ns": t1_ns, "px": px, "lanes": idx.lanes}
    if int((b - a).sum()) <= max_items:
        rows = ranges(a, b)
        rows = rows[idx.end[rows] > t0_ns]
        out["mode"] = "items"
        out["items"] = {"lane": idx.lane_of[rows], "start_ns": idx.start[rows], "end_ns": idx.end[rows],
                        "kind": idx.kind[rows], "severity": idx.severity[rows], "ppdu": idx.ppdu[rows]}
        return out
    edges = np.linspace(t0_ns, t1_ns, px + 1).round().astype(np.int64)
    # per lane, the edges' positions among its starts: counts, busy time and kinds all read them
    pos = _search(idx, "start", edges, (a, b))
    lo = idx.bounds[:-1, None]
    # items started before t0 and still running count in bucket 0 (few: within `longest` of t0)
    early = ranges(a, pos[:, 0])
    early = early[idx.end[early] > t0_ns]
    e_lane = idx.lane_of[early]
    count = np.diff(pos, axis=1)
    count[:, 0] += np.bincount(e_lane, minlength=nl)[:nl]
    # dominant kind: airtime of the items starting in each bucket, per kind
    nk = len(KINDS)
    w = np.diff(_kind_air_before(idx, pos.ravel()).reshape(nl, px + 1, nk), axis=1)
    w[:, 0, :] += np.bincount(e_lane * nk + idx.kind[early], weights=idx.end[early] - idx.start[early],
                              minlength=nl * nk).astype(np.int64).reshape(nl, nk)
    kind = np.where(w.sum(2) > 0, w.argmax(2), -1)
    out.update(mode="buckets", edges_ns=edges, busy_ns=_busy(idx, edges, pos, lo), count=count,
               kind=kind, severity=_severity(idx, a, b, t0_ns, edges, px))
    return out


def _busy(idx: TimelineIndex, edges: np.ndarray, pos: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """(lanes, px) busy ns per bucket, as :func:`busy_between` for every lane at once."""
    ke = _search(idx, "end", edges, _search(idx, "end", [edges[0], edges[-1] + 1]).T)
    ps = np.where(pos > lo, idx.cum_start[np.maximum(pos - 1, 0)], 0) if len(idx.start) else 0 * pos
    pe = np.where(ke > lo, idx.cum_end[np.maximum(ke - 1, 0)], 0) if len(idx.start) else 0 * ke
    return np.diff(((pos - lo) * edges - ps) - ((ke - lo) * edges - pe), axis=1)


def _severity(idx: TimelineIndex, a: np.ndarray, b: np.ndarray, t0_ns: int, edges: np.ndarray,
              px: int) -> np.ndarray:
    """(lanes, px) worst event per bucket of the flagged items among each lane's positions
    [a, b): every bucket an item touches is marked, so a short failure never vanishes at
    coarse zoom."""
    nl = len(idx.lanes)
    ev = idx.ev_pos[ranges(np.searchsorted(idx.ev_pos, a), np.searchsorted(idx.ev_pos, b))]
    ev = ev[idx.end[ev] > t0_ns]
    first = np.clip(np.searchsorted(edges, idx.start[ev], side="right") - 1, 0, px - 1)
    last = np.clip(np.searchsorted(edges, idx.end[ev] - 1, side="right") - 1, 0, px - 1)
    row = idx.lane_of[ev] * (px + 1)
    v = idx.severity[ev]
    out = np.zeros((nl, px), np.int8)
    for level in np.unique(v):            # a handful of levels, ascending: cover [first, last] per level
        m = v == level
        d = (np.bincount(row[m] + first[m], minlength=nl * (px + 1))
             - np.bincount(row[m] + last[m] + 1, minlength=nl * (px + 1))).reshape(nl, px + 1)
        out[np.cumsum(d[:, :px], axis=1) > 0] = level
    return out
