"""Which stations each bucket of a zoomed-out sniffer-lane tile holds, so the page's station and
flow filters can dim it (``lanefilter.js``).

A bucketed tile carries per lane and bucket only the dominant kind; in sniffer lanes the station
filter had nothing to go by. Here each bucket gets a bitmask: bit ``b`` set when a PPDU of the
station of bit ``b`` (its station lane: TA, else RA, as :func:`viz.tiles.build_index` places it)
that this sniffer heard overlaps the bucket. The 30 busiest stations own a bit each; when there
are more than 31, the others share bit 30 (``bits[30] = -1``). 31 bits: the page tests them with
JavaScript's 32-bit ``&``.

Per (sniffer lane, bit) group the items' starts and ends are kept sorted under one key
``group * width + t``; a tile's masks are then two ``searchsorted`` of all groups' bucket edges
at once (items starting before the bucket's end minus items ended at its start), whatever the
run's size.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["NBITS", "StationBits", "build_station_bits", "bucket_masks"]

NBITS = 31


class StationBits(NamedTuple):
    bits: list              # station lane of each bit; -1: the stations sharing the last bit
    n_lanes: int            # sniffer lanes
    width: int              # time keys are group * width + t (t relative to the run start)
    start_keys: np.ndarray  # sorted
    end_keys: np.ndarray    # sorted


def _bit_of_lane(station_lane: np.ndarray, n_stations: int) -> tuple[np.ndarray, list]:
    """(bit per station lane, station lane per bit): the busiest stations first."""
    if n_stations <= NBITS:
        return np.arange(n_stations), list(range(n_stations))
    rank = np.argsort(-np.bincount(station_lane, minlength=n_stations), kind="stable")
    bit = np.full(n_stations, NBITS - 1)
    bit[rank[:NBITS - 1]] = np.arange(NBITS - 1)
    return bit, [int(r) for r in rank[:NBITS - 1]] + [-1]


def build_station_bits(sniffer_idx, station_idx) -> StationBits:
    """From the two :class:`viz.tiles.TimelineIndex` of a run (sniffer lanes, station lanes)."""
    order = np.argsort(station_idx.ppdu, kind="stable")
    pos = np.searchsorted(station_idx.ppdu[order], sniffer_idx.ppdu)
    pos = np.minimum(pos, max(len(order) - 1, 0))
    lane = station_idx.lane_of[order[pos]] if len(order) else np.zeros(0, np.int64)
    bit_of, bits = _bit_of_lane(station_idx.lane_of, len(station_idx.lanes))
    group = np.asarray(sniffer_idx.lane_of, np.int64) * len(bits) + bit_of[lane]
    width = int(sniffer_idx.end.max()) + 2 if len(sniffer_idx.end) else 2
    return StationBits(bits, len(sniffer_idx.lanes), width,
                       np.sort(group * width + sniffer_idx.start), np.sort(group * width + sniffer_idx.end))


def bucket_masks(sb: StationBits, edges_ns) -> list:
    """Per sniffer lane, per bucket ``[edges[k], edges[k+1])``: the bitmask of the stations
    with a PPDU overlapping the bucket (0: none)."""
    e = np.clip(np.asarray(edges_ns, np.int64), 0, sb.width - 1)
    nb = len(sb.bits)
    g = np.arange(sb.n_lanes * nb, dtype=np.int64)[:, None] * sb.width
    began = np.searchsorted(sb.start_keys, (g + e[None, 1:]).ravel(), side="left")     # start < bucket end
    ended = np.searchsorted(sb.end_keys, (g + e[None, :-1]).ravel(), side="right")     # end <= bucket start
    base_s = np.searchsorted(sb.start_keys, g[:, 0])
    base_e = np.searchsorted(sb.end_keys, g[:, 0])
    live = (began.reshape(len(g), -1) - base_s[:, None]) - (ended.reshape(len(g), -1) - base_e[:, None]) > 0
    weights = (np.int64(1) << np.arange(nb, dtype=np.int64))
    return (live.reshape(sb.n_lanes, nb, -1) * weights[None, :, None]).sum(1).tolist()
