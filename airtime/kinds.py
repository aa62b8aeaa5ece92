"""PPDU kinds from type_subtype, and whether a sniffer stamps PPDU starts or ends.

A lookup table for the kinds; the stamp convention voted per sniffer from the gaps of
responses (CTS/ACK/BA) to the frame before them.
"""
from __future__ import annotations

import numpy as np

from airtime.phy import sifs_ns

__all__ = ["KIND_NAMES", "kind_codes", "detect_tsft_at", "decide_tsft_at", "GAP_TOLERANCE_NS"]

# PPDU kind from type_subtype (Wireshark encoding type<<4 | subtype), a lookup table.
KIND_NAMES = ["other", "beacon", "rts", "cts", "ack", "ba", "bar", "data", "mgmt"]
_K = {k: i for i, k in enumerate(KIND_NAMES)}
_KIND_BY_TS = np.zeros(64, np.int64)             # 0..0x3f; default "other"
_KIND_BY_TS[0x00:0x10] = _K["mgmt"]
_KIND_BY_TS[0x20:0x30] = _K["data"]
for _ts, _name in {0x08: "beacon", 0x1b: "rts", 0x1c: "cts", 0x1d: "ack",
                   0x19: "ba", 0x18: "bar"}.items():
    _KIND_BY_TS[_ts] = _K[_name]
_RESPONSE_KINDS = (_K["cts"], _K["ack"], _K["ba"])
# A response-gap explanation only counts when it fits this well (ns): propagation,
# 1 us TSFT rounding and a few us of driver stamping jitter.
GAP_TOLERANCE_NS = 4000


def kind_codes(type_subtype) -> np.ndarray:
    """Index into :data:`KIND_NAMES` for each type_subtype (null/out of range -> other)."""
    ts = np.asarray(type_subtype, np.int64)
    return np.where((ts >= 0) & (ts < 64), _KIND_BY_TS[np.clip(ts, 0, 63)], 0)


def detect_tsft_at(sniffer, t_ns, airtime_ns, kind, ta, ra, freq_mhz) -> dict:
    """Per sniffer, whether its timestamps mark the start or the end of a PPDU.

    For a CTS/ACK/BA right after a frame from its receiver, the gap between the two
    timestamps is SIFS + airtime(response) when stamps mark the end and
    airtime(frame) + SIFS when they mark the start. Majority vote per sniffer
    (ties and no evidence: ``"start"``, radiotap's definition).

    Parameters
    ----------
    sniffer, t_ns, airtime_ns, kind, ta, ra, freq_mhz : np.ndarray
        Per-PPDU columns in time order within each sniffer.

    Returns
    -------
    dict
        ``{sniffer: "start" | "end"}``.
    """
    resp = np.isin(kind[1:], _RESPONSE_KINDS) & (ra[1:] == ta[:-1]) & (sniffer[1:] == sniffer[:-1])
    resp &= (airtime_ns[1:] > 0) & (airtime_ns[:-1] > 0)
    gap = t_ns[1:] - t_ns[:-1]
    sifs = sifs_ns(freq_mhz[1:])
    err_end = np.abs(gap - sifs - airtime_ns[1:])
    err_start = np.abs(gap - sifs - airtime_ns[:-1])
    vote_end = resp & (err_end < err_start) & (err_end <= GAP_TOLERANCE_NS)
    vote_start = resp & (err_start < err_end) & (err_start <= GAP_TOLERANCE_NS)
    snf = sniffer[1:]
    out = {}
    for s in _ids(sniffer):
        e, st = int(vote_end[snf == s].sum()), int(vote_start[snf == s].sum())
        out[int(s)] = "end" if e > st else "start"
    return out


def decide_tsft_at(tsft_at, snf, t_ns, airtime, kind, ta, ra, freq) -> dict:
    """``{sniffer: "start" | "end"}`` from the argument, or from response gaps for ``"auto"``."""
    if tsft_at == "auto":
        return detect_tsft_at(snf, t_ns, airtime, kind, ta, ra, freq)
    if isinstance(tsft_at, dict):
        return {int(s): tsft_at.get(int(s), "start") for s in _ids(snf)}
    return {int(s): tsft_at for s in _ids(snf)}


def _ids(sniffer) -> np.ndarray:
    """The sniffer ids present, ascending (small ids >= 0; np.unique would import numpy.ma)."""
    return np.flatnonzero(np.bincount(np.asarray(sniffer, np.int64)))
