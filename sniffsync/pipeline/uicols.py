"""Frame-table facts the UI shows, carried on the run's own tables so a run loaded from the
cache (which does not keep the frame table) answers exactly as a fresh one.

``ppdus``: ``rate_mbps`` (radiotap Rate of the PPDU's first frame: what legacy PHYs are read
by), ``nav_us`` (its Duration field), ``ba_ssn`` / ``ba_bitmap`` (a Block-Ack's starting
sequence number and bitmap as hex); ``mpdus``: ``mpdu_len``; ``ppdus.attrs["frame_counts"]``:
data / protected data / IP / TCP-or-UDP frame counts (why a run has no flows); ``run.inflight``:
bytes in flight per flow direction (:func:`sniffsync.tcp.inflight.inflight_table`).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["attach_frame_columns"]


def attach_frame_columns(run):
    """``run`` with the columns above added (in place on its tables; a no-op without frames)."""
    f = run.frames
    p = run.ppdus
    if f is not None and getattr(run, "inflight", None) is None and "tcp_seq" in f:
        from sniffsync.tcp.inflight import inflight_table
        run.inflight = inflight_table(f)
    if f is None or not len(f) or "first_frame" not in p or not len(p) or "rate_mbps" in p:
        return run
    ff = p["first_frame"].to_numpy(np.int64)
    if ff.min() < 0 or ff.max() >= len(f):
        return run

    def at(col, dtype):
        if col not in f:
            return pd.array([pd.NA] * len(p), dtype=dtype)
        return pd.array(f[col].to_numpy(dtype=float, na_value=np.nan)[ff], dtype=dtype)
    kbps = f["rate_kbps"].to_numpy(dtype=float, na_value=np.nan)[ff] if "rate_kbps" in f else np.full(len(p), np.nan)
    cols = {"rate_mbps": pd.array(np.round(kbps / 1000, 1), dtype="Float64"), "nav_us": at("duration_us", "Float64"),
            "ba_ssn": at("ba_ssn", "Float64").astype("Int64")}
    cols["ba_bitmap"] = pd.array(f["ba_bitmap"].astype(object).to_numpy()[ff] if "ba_bitmap" in f
                                 else [None] * len(p), dtype="string")
    run.ppdus = p.assign(**cols)
    m = run.mpdus
    if m is not None and len(m) and "frame" in m and "mpdu_len" in f:
        run.mpdus = m.assign(mpdu_len=pd.array(
            f["mpdu_len"].to_numpy(dtype=float, na_value=np.nan)[m["frame"].to_numpy(np.int64)], dtype="Float64"))
    data = (f["type"] == 2).fillna(False).to_numpy(bool) if "type" in f else np.zeros(len(f), bool)
    prot = f["protected"].fillna(False).to_numpy(bool) if "protected" in f else np.zeros(len(f), bool)
    proto = f["ip_proto"] if "ip_proto" in f else pd.Series(pd.NA, index=f.index)
    run.ppdus.attrs["frame_counts"] = {
        "data": int(data.sum()), "protected_data": int((data & prot).sum()),
        "ip": int(proto.notna().sum()), "tcpudp": int(proto.isin([6, 17]).fillna(False).sum())}
    return run
