"""Bytes in flight per TCP flow direction over time, and their per-direction quantiles.

A sample per segment with payload the sender transmits: the highest sequence number sent so far
(this segment included, SYN/FIN not counted) minus the highest ACK the receiver sent
before it, as seen at the capture point (Wireshark's ``tcp.analysis.bytes_in_flight``;
the per-row value is :func:`sniffsync.tcp.frames.analyze_acks`'s). It approximates the
sender's congestion window when the flow is window-limited and the sniffer is near the
sender: a sniffer near the receiver sees data earlier and ACKs later by the path between.
A direction whose receiver's ACKs the sniffer never heard has no samples (Wireshark then
reports every byte sent as in flight).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["INFLIGHT_COLUMNS", "INFLIGHT_STATS", "inflight_samples", "inflight_stats", "inflight_table"]

INFLIGHT_COLUMNS = ["fd", "flow", "ts_ns", "bytes_in_flight"]
INFLIGHT_STATS = ["fd", "inflight_samples", "inflight_p50_bytes", "inflight_p95_bytes", "inflight_max_bytes"]


def inflight_samples(seg: pd.DataFrame) -> pd.DataFrame:
    """Samples of an ACK-analysed segment table (``analyze_acks``): segments with payload,
    MAC copies left out (unless the table was built without de-duplication)."""
    if not len(seg):
        return pd.DataFrame({c: pd.Series([], dtype=np.int64) for c in INFLIGHT_COLUMNS})
    b = seg["bytes_in_flight"].to_numpy(np.int64)
    # segments with payload only: a bare FIN carries no data (Wireshark gives it no value)
    keep = (seg["payload_len"].to_numpy(np.int64) > 0) & ~seg["mac_dup"].to_numpy(bool) & (b >= 0)
    # before any ACK of the receiver was captured the value would be all bytes sent so far
    keep &= seg["acked"].to_numpy(np.int64) >= 0
    out = pd.DataFrame({c: seg[c].to_numpy(np.int64)[keep] for c in INFLIGHT_COLUMNS})
    return out.sort_values(["fd", "ts_ns"], kind="stable", ignore_index=True)


def inflight_stats(samples: pd.DataFrame) -> pd.DataFrame:
    """Per flow direction: sample count, median, p95 (linear interpolation) and maximum."""
    if not len(samples):
        return pd.DataFrame({c: pd.Series([], dtype=np.float64) for c in INFLIGHT_STATS})
    g = samples["bytes_in_flight"].astype(np.float64).groupby(samples["fd"])
    return pd.DataFrame({"inflight_samples": g.size(), "inflight_p50_bytes": g.quantile(0.5),
                         "inflight_p95_bytes": g.quantile(0.95),
                         "inflight_max_bytes": g.max()}).reset_index()[INFLIGHT_STATS]


def inflight_table(frames: pd.DataFrame, dedup: bool = True) -> pd.DataFrame:
    """:func:`inflight_samples` of a frame table (segments, classified, ACK-analysed)."""
    from sniffsync.tcp.frames import analyze_acks, classify_segments, segments
    seg = segments(frames, dedup=dedup)
    return inflight_samples(analyze_acks(classify_segments(seg))) if len(seg) else inflight_samples(seg)
