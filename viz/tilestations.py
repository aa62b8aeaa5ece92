"""Which stations each bucket of a zoomed-out sniffer-lane tile holds, so the page's station and
flow filters can dim it (``lanefilter.js``).

A bucketed tile carries per lane and bucket only the dominant kind; in sniffer lanes the station
filter had nothing to go by. Here each bucket gets a bitmask: bit ``b`` set when a PPDU of the
station of bit ``b`` (its station lane: TA, else RA, as :func:`viz.tiles.build_index` places it)
that this sniffer heard overlaps the bucket. The 30 busiest stations own a bit each; when there
are more than 31, the others share bit 30 (``bits[30] = -1``). 31 bits: the page tests them with
JavaScript's 32-bit ``&``.

A station's PPDUs overlapping the bucket ``[a, b)`` are those starting before ``b`` less those
ending at or before ``a`` (they all started before ``b`` too): a bit is on when the first count
exceeds the second. Both are per-bit running counts at the edges' positions among the lane's
starts and among its sorted ends (a checkpoint row every :data:`CHECK` items plus the few
items after it, as the tile's per-kind airtime). Cost per tile: keyed ``searchsorted`` of every
lane's edges at once (as the tile's) and reads of ~CHECK/2 items per edge, whatever the run's
size or zoom; memory: two bytes per item and ``2 x 31 x 4`` bytes per :data:`CHECK` items.
The tile carries the masks only when asked (``stations=1``: a page with a filter on).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from viz.tiles import _search

__all__ = ["NBITS", "CHECK", "StationBits", "build_station_bits", "bucket_masks"]

NBITS = 31
CHECK = 32                 # items between two rows of per-bit running counts


class StationBits(NamedTuple):
    bits: list              # station lane of each bit; -1: the stations sharing the last bit
    code: np.ndarray        # per item of the sniffer-lane index (its order): its station's bit
    check: np.ndarray       # (n // CHECK + 1, len(bits)) int32: items of each bit among [0, j*CHECK)
    code_end: np.ndarray    # the same in the order of the index's sorted ends (per lane)
    check_end: np.ndarray


def _bit_of_lane(station_lane: np.ndarray, n_stations: int) -> tuple[np.ndarray, list]:
    """(bit per station lane, station lane per bit): the busiest stations first."""
    if n_stations <= NBITS:
        return np.arange(n_stations), list(range(n_stations))
    rank = np.argsort(-np.bincount(station_lane, minlength=n_stations), kind="stable")
    bit = np.full(n_stations, NBITS - 1)
    bit[rank[:NBITS - 1]] = np.arange(NBITS - 1)
    return bit, [int(r) for r in rank[:NBITS - 1]] + [-1]


def _checkpoints(code: np.ndarray, nb: int) -> np.ndarray:
    """(n // CHECK + 1, nb) int32: items of each bit among positions [0, j*CHECK)."""
    n = len(code)
    nc = -(-n // CHECK)
    per = np.bincount(np.arange(n) // CHECK * nb + code, minlength=nc * nb).reshape(nc, nb)
    check = np.zeros((nc + 1, nb), np.int32)
    np.cumsum(per, axis=0, out=check[1:])
    return check


def build_station_bits(sniffer_idx, station_idx) -> StationBits:
    """From the two :class:`viz.tiles.TimelineIndex` of a run (sniffer lanes, station lanes)."""
    order = np.argsort(station_idx.ppdu, kind="stable")
    pos = np.minimum(np.searchsorted(station_idx.ppdu[order], sniffer_idx.ppdu), max(len(order) - 1, 0))
    lane = station_idx.lane_of[order[pos]] if len(order) else np.zeros(0, np.int64)
    bit_of, bits = _bit_of_lane(station_idx.lane_of, len(station_idx.lanes))
    code = bit_of[lane].astype(np.int8)
    b = sniffer_idx.bounds                 # the items of each lane in the order of their ends
    by_end = np.concatenate([b[i] + np.argsort(sniffer_idx.end[b[i]:b[i + 1]], kind="stable")
                             for i in range(len(b) - 1)] or [np.zeros(0, np.int64)])
    nb = max(len(bits), 1)
    return StationBits(bits, code, _checkpoints(code, nb), code[by_end], _checkpoints(code[by_end], nb))


def _expand(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(row, position) of every position in the ranges ``[a[i], b[i])``."""
    r = np.maximum(b - a, 0)
    row = np.repeat(np.arange(len(a)), r)
    return row, np.repeat(a - (np.cumsum(r) - r), r) + np.arange(len(row))


def _counts_before(code: np.ndarray, check: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """(len(pos), bits): items of each bit among positions [0, pos)."""
    nb = check.shape[1]
    j = pos // CHECK
    row, q = _expand(j * CHECK, pos)
    extra = np.bincount(row * nb + code[q], minlength=len(pos) * nb).reshape(len(pos), nb)
    return check[j] + extra


def bucket_masks(sb: StationBits, idx, edges_ns) -> np.ndarray:
    """(lanes of ``idx`` (the sniffer-lane index), buckets ``[edges[k], edges[k+1])``) int64: the
    bitmask of the stations with a PPDU overlapping the bucket (0: none). Every lane at once:
    keyed searches as the tile's (:func:`viz.tiles._search`), no loop over lanes."""
    e = np.asarray(edges_ns, np.int64)
    nl, nb, px = len(idx.lanes), sb.check.shape[1], len(e) - 1
    if not nl or px < 1:
        return np.zeros((nl, max(px, 0)), np.int64)
    ps = _search(idx, "start", e[1:], _search(idx, "start", [e[1], e[-1]]).T)         # start < b
    pe = _search(idx, "end", e[:-1] + 1, _search(idx, "end", [e[0] + 1, e[-2] + 1]).T)  # end <= a
    started = _counts_before(sb.code, sb.check, ps.ravel())
    ended = _counts_before(sb.code_end, sb.check_end, pe.ravel())
    on = (started - ended > 0).reshape(nl, px, nb)
    return on.astype(np.int64) @ (np.int64(1) << np.arange(nb, dtype=np.int64))
