"""The run tables computed from the merged frame table beside the fairness analysis:
bytes in flight per flow direction over time (:mod:`sniffsync.tcp.inflight`), ICMP echo
round-trip times (:mod:`sniffsync.tcp.icmp`), UDP loss / reordering / jitter per flow
direction (:mod:`sniffsync.tcp.udp`); and from the PPDU table, airtime accounting
(:mod:`airtime.accounting`): channel utilisation per window, airtime by sender and class,
A-MPDU size and MCS per transmitter and window.

Each is a plain DataFrame with a ``ts_ns`` column (capture clock, as the other tables),
written to the run's cache folder and a SQL view of the campaign.
"""
from __future__ import annotations

import pandas as pd

from sniffsync.fairness.capture import OUTLIER

__all__ = ["QUANTITY_TABLES", "quantity_tables"]

QUANTITY_TABLES = ("inflight", "icmp", "udp", "utilisation", "airtime_senders", "station_windows")


def airtime_tables(ppdus: pd.DataFrame | None, events: pd.DataFrame | None, bin_ns: int) -> dict:
    """The airtime accounting tables (windows of ``bin_ns`` on the PPDUs' clock)."""
    from airtime.accounting import airtime_by_sender, station_windows, utilisation
    p = ppdus if ppdus is not None else pd.DataFrame(columns=["start_ns", "end_ns", "airtime_ns"])
    p = p[p["airtime_ns"].to_numpy() > 0] if len(p) else p       # wired frames have no airtime
    if not len(p):
        return {"utilisation": utilisation(p, bin_ns), "airtime_senders": airtime_by_sender(p),
                "station_windows": pd.DataFrame(columns=["window", "ts_ns", "ta"])}
    return {"utilisation": utilisation(p, bin_ns), "airtime_senders": airtime_by_sender(p, events),
            "station_windows": station_windows(p, bin_ns)}


def quantity_tables(frames: pd.DataFrame | None) -> dict:
    """Name -> DataFrame of the frame-based tables (empty without frames)."""
    from sniffsync.tcp.icmp import echo_rtts
    from sniffsync.tcp.inflight import inflight_samples, inflight_table
    from sniffsync.tcp.udp import udp_flows
    if frames is None or not len(frames):
        return {"inflight": inflight_samples(pd.DataFrame()), "icmp": echo_rtts(pd.DataFrame()),
                "udp": udp_flows(pd.DataFrame())}
    if "bad" in frames:       # as the fairness analysis: frames with a wild stamp are left out
        frames = frames[~frames["bad"].eq(OUTLIER).fillna(False).to_numpy(bool)]
    return {"inflight": inflight_table(frames), "icmp": echo_rtts(frames), "udp": udp_flows(frames)}


def wired_table(frames: pd.DataFrame, wired_paths) -> pd.DataFrame:
    """The run's 802.11 frames joined with its wired-side captures (:mod:`sniffsync.tcp.wired`;
    empty without any)."""
    from sniffsync.decode.frames import read_capture
    from sniffsync.tcp.wired import WIRED_COLUMNS, join_wired
    if not wired_paths:
        return pd.DataFrame(columns=WIRED_COLUMNS)
    wired = pd.concat([read_capture(str(p)) for p in wired_paths], ignore_index=True)
    return join_wired(frames, wired)
