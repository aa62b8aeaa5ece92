"""The run tables computed from the merged frame table beside the fairness analysis:
bytes in flight per flow direction over time (:mod:`sniffsync.tcp.inflight`), ICMP echo
round-trip times (:mod:`sniffsync.tcp.icmp`).

Each is a plain DataFrame with a ``ts_ns`` column (capture clock, as the other tables),
written to the run's cache folder and a SQL view of the campaign.
"""
from __future__ import annotations

import pandas as pd

from sniffsync.fairness.capture import OUTLIER

__all__ = ["QUANTITY_TABLES", "quantity_tables"]

QUANTITY_TABLES = ("inflight", "icmp")


def quantity_tables(frames: pd.DataFrame | None) -> dict:
    """Name -> DataFrame of every table of :data:`QUANTITY_TABLES` (empty without frames)."""
    from sniffsync.tcp.icmp import echo_rtts
    from sniffsync.tcp.inflight import inflight_samples, inflight_table
    if frames is None or not len(frames):
        return {"inflight": inflight_samples(pd.DataFrame()), "icmp": echo_rtts(pd.DataFrame())}
    if "bad" in frames:       # as the fairness analysis: frames with a wild stamp are left out
        frames = frames[~frames["bad"].eq(OUTLIER).fillna(False).to_numpy(bool)]
    return {"inflight": inflight_table(frames), "icmp": echo_rtts(frames)}
