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

__all__ = ["KINDS", "SEVERITY", "TimelineIndex", "build_index", "tile", "busy_between"]

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
    end_sorted: np.ndarray     # per lane ends sorted (aligned segments)
    cum_end: np.ndarray
    longest: int               # longest airtime: how far before t0 an overlapping item can start
    ev_pos: np.ndarray         # positions (into start/end/...) of items with severity > 0
    kcheck: np.ndarray         # (n // CHECK + 1, len(KINDS)): airtime per kind of items [0, j*CHECK)


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
    return TimelineIndex(t0, t1, labels, lane_of, s, e, k, sev[rows], ids[rows], bounds,
                         _seg_cumsum(s, bounds), end_sorted, _seg_cumsum(end_sorted, bounds),
                         longest, np.flatnonzero(sev[rows] > 0), _kind_checkpoints(k, e - s))


def _kind_checkpoints(kind: np.ndarray, air: np.ndarray) -> np.ndarray:
    """Row j: airtime per kind of items [0, j*CHECK) (over all lanes: a lane's share is a
    difference of two positions inside it)."""
    nk, nb = len(KINDS), -(-len(kind) // CHECK)
    per = np.bincount(np.arange(len(kind)) // CHECK * nk + kind, weights=air, minlength=nb * nk)
    out = np.zeros((nb + 1, nk), np.int64)
    np.cumsum(per.reshape(nb, nk).astype(np.int64), axis=0, out=out[1:])   # ns sums < 2^53: exact
    return out


def _kind_air_before(idx: TimelineIndex, pos: np.ndarray) -> np.ndarray:
    """(len(pos), len(KINDS)): airtime per kind of items [0, pos) — the checkpoint row at or
    before each position plus the fewer than CHECK items after it."""
    nk = len(KINDS)
    j = pos // CHECK
    r = pos - j * CHECK                   # items between the checkpoint and the position
    row = np.repeat(np.arange(len(pos)), r)
    q = np.repeat(j * CHECK - (np.cumsum(r) - r), r) + np.arange(len(row))
    extra = np.bincount(row * nk + idx.kind[q], weights=idx.end[q] - idx.start[q], minlength=len(pos) * nk)
    return idx.kcheck[j] + extra.reshape(len(pos), nk).astype(np.int64)


def _seg_cumsum(x, bounds):
    """Prefix sums restarting at every lane boundary (prefix[i] = sum of its lane up to i)."""
    c = np.cumsum(x, dtype=np.int64)
    base = np.concatenate([[0], c])[bounds[:-1]]
    return c - np.repeat(base, np.diff(bounds))


def busy_between(idx: TimelineIndex, lane: int, edges: np.ndarray, ks=None) -> np.ndarray:
    """Busy ns of ``lane`` in each interval ``[edges[i], edges[i+1])`` (edges relative to t0).
    ``ks``: the edges' positions among the lane's starts when the caller has them (an item
    starting exactly at an edge adds 0 either side, so left or right positions both do)."""
    lo, hi = idx.bounds[lane], idx.bounds[lane + 1]
    s, cs = idx.start[lo:hi], idx.cum_start[lo:hi]
    e, ce = idx.end_sorted[lo:hi], idx.cum_end[lo:hi]

    t = np.asarray(edges, np.int64)       # integral: sum over items of clip(t - start, 0, airtime)
    ks = np.searchsorted(s, t, side="right") if ks is None else ks
    ke = np.searchsorted(e, t, side="right")
    ps = np.where(ks > 0, cs[np.maximum(ks - 1, 0)], 0)
    pe = np.where(ke > 0, ce[np.maximum(ke - 1, 0)], 0)
    return np.diff((ks * t - ps) - (ke * t - pe))


def tile(idx: TimelineIndex, t0_ns: int, t1_ns: int, px: int, max_items: int | None = None) -> dict:
    """JSON-able tile for ``[t0_ns, t1_ns)`` (relative to the run start) at ``px`` pixels.

    Returns ``{"mode": "items", "items": {...columns...}}`` when at most ``max_items``
    (default ``4 * px``) PPDUs overlap the range, else ``{"mode": "buckets", ...}`` with
    per-lane arrays ``busy_ns``, ``count``, ``kind`` (dominant by busy time) and ``severity``.
    """
    t0_ns, t1_ns, px = int(t0_ns), int(t1_ns), int(px)
    max_items = 4 * px if max_items is None else max_items
    # items overlapping the range: per lane, starts < t1 and ends > t0 (ends grow with starts
    # within a lane unless PPDUs nest, so the first candidate comes from the longest airtime)
    longest = idx.longest
    sel = []
    for lane in range(len(idx.lanes)):
        lo, hi = idx.bounds[lane], idx.bounds[lane + 1]
        a = lo + np.searchsorted(idx.start[lo:hi], t0_ns - longest, side="left")
        b = lo + np.searchsorted(idx.start[lo:hi], t1_ns, side="left")
        sel.append((a, b))
    total = sum(b - a for a, b in sel)
    out = {"t0_ns": t0_ns, "t1_ns": t1_ns, "px": px, "lanes": idx.lanes}
    if total <= max_items:
        rows = np.concatenate([np.arange(a, b) for a, b in sel]) if sel else np.zeros(0, np.int64)
        rows = rows[idx.end[rows] > t0_ns]
        out["mode"] = "items"
        out["items"] = {"lane": idx.lane_of[rows].tolist(), "start_ns": idx.start[rows].tolist(),
                        "end_ns": idx.end[rows].tolist(), "kind": idx.kind[rows].tolist(),
                        "severity": idx.severity[rows].tolist(), "ppdu": idx.ppdu[rows].tolist()}
        return out
    edges = np.linspace(t0_ns, t1_ns, px + 1).round().astype(np.int64)
    busy, count, kind, sev = [], [], [], []
    # per lane, the edges' positions among its starts: counts, busy time and kinds all read them
    pos = [idx.bounds[lane] + np.searchsorted(idx.start[idx.bounds[lane]:idx.bounds[lane + 1]], edges)
           for lane in range(len(idx.lanes))]
    kair = _kind_air_before(idx, np.concatenate(pos)).reshape(len(pos), px + 1, len(KINDS)) if pos else None
    for lane, (a, b) in enumerate(sel):
        lo = idx.bounds[lane]
        busy.append(busy_between(idx, lane, edges, pos[lane] - lo).tolist())
        # items are counted in the bucket where they start; those that started before t0 and
        # still run count in bucket 0 (few: they start within `longest` of t0)
        c = np.diff(pos[lane])
        early = np.arange(a, pos[lane][0])
        early = early[idx.end[early] > t0_ns]
        c[0] += len(early)
        count.append(c.tolist())
        sev.append(_severity(idx, a, b, t0_ns, edges, px).tolist())
        # dominant kind: airtime of the items starting in each bucket, per kind
        w = np.diff(kair[lane], axis=0).T
        np.add.at(w, (idx.kind[early], 0), idx.end[early] - idx.start[early])
        kind.append(np.where(w.sum(0) > 0, w.argmax(0), -1).tolist())
    out.update(mode="buckets", edges_ns=edges.tolist(), busy_ns=busy, count=count, kind=kind,
               severity=sev)
    return out


def _severity(idx: TimelineIndex, a: int, b: int, t0_ns: int, edges: np.ndarray, px: int) -> np.ndarray:
    """Worst event per bucket of the flagged items among positions [a, b): every bucket an
    item touches is marked, so a short failure never vanishes at coarse zoom."""
    ev = idx.ev_pos[np.searchsorted(idx.ev_pos, a):np.searchsorted(idx.ev_pos, b)]
    ev = ev[idx.end[ev] > t0_ns]
    first = np.clip(np.searchsorted(edges, idx.start[ev], side="right") - 1, 0, px - 1)
    last = np.clip(np.searchsorted(edges, idx.end[ev] - 1, side="right") - 1, 0, px - 1)
    v = idx.severity[ev]
    out = np.zeros(px, np.int8)
    for level in np.unique(v):            # a handful of levels, ascending: cover [first, last] per level
        m = v == level
        d = np.bincount(first[m], minlength=px + 1)[:px + 1] - np.bincount(last[m] + 1, minlength=px + 1)[:px + 1]
        out[np.cumsum(d[:px]) > 0] = level
    return out
