"""ICMP echo round-trip times (ping under load, the bufferbloat test) at the capture point.

An echo request (ICMP type 8, ICMPv6 128) from A to B is answered by the echo reply
(0 / 129) from B to A with the same identifier and sequence number. Per request key
(family, A, B, id, seq): the request is dated by its first captured copy (802.11 retries
and other sniffers' copies are the same request), the reply by its first copy at or after
that; ``rtt_ns`` = reply − request (Wireshark's ``icmp.resptime``). A request without a
captured reply has ``rtt_ns`` = -1 (lost, or the sniffer missed the reply).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["ECHO_COLUMNS", "echo_rtts", "echo_summary"]

ECHO_COLUMNS = ["ts_ns", "reply_ts_ns", "rtt_ns", "src", "dst", "icmp_id", "icmp_seq", "v6",
                "request_frame", "reply_frame"]
REQUEST = {4: 8, 6: 128}
REPLY = {4: 0, 6: 129}


def _empty() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series([], dtype=object if c in ("src", "dst") else
                                      bool if c == "v6" else np.int64) for c in ECHO_COLUMNS})


def _echoes(frames: pd.DataFrame) -> pd.DataFrame | None:
    """Echo request/reply rows: kind (0 request, 1 reply), key columns, time, frame."""
    if "icmp_type" not in frames or not len(frames):
        return None
    t = frames["icmp_type"].to_numpy(np.int64, na_value=-1)
    proto = frames["ip_proto"].to_numpy(np.int64, na_value=-1)
    v6 = proto == 58
    req = np.where(v6, t == REQUEST[6], t == REQUEST[4]) & ((proto == 1) | v6)
    rep = np.where(v6, t == REPLY[6], t == REPLY[4]) & ((proto == 1) | v6)
    rows = np.flatnonzero((req | rep) & frames["icmp_id"].notna().to_numpy(bool))
    if not len(rows):
        return None
    f = frames.iloc[rows]
    is_rep = rep[rows]
    src, dst = f["ip_src"].astype(str).to_numpy(), f["ip_dst"].astype(str).to_numpy()
    # the requester is the request's source and the reply's destination
    return pd.DataFrame({"reply": is_rep, "src": np.where(is_rep, dst, src), "dst": np.where(is_rep, src, dst),
                         "v6": v6[rows], "icmp_id": f["icmp_id"].to_numpy(np.int64),
                         "icmp_seq": f["icmp_seq"].to_numpy(np.int64),
                         "ts_ns": f["ts_ns"].to_numpy(np.int64), "frame": f["frame"].to_numpy(np.int64)})


def echo_rtts(frames: pd.DataFrame) -> pd.DataFrame:
    """One row per echo request (see the module text), sorted by request time."""
    e = _echoes(frames)
    if e is None:
        return _empty()
    key = ["v6", "src", "dst", "icmp_id", "icmp_seq"]
    e = e.sort_values(["ts_ns", "frame"], kind="stable")
    req = e[~e["reply"]].drop_duplicates(key, keep="first")
    rep = e[e["reply"]].rename(columns={"ts_ns": "reply_ts_ns", "frame": "reply_frame"})
    rep = rep.astype({"reply_ts_ns": "Int64", "reply_frame": "Int64"})      # no float round-trip
    m = req.merge(rep[key + ["reply_ts_ns", "reply_frame"]], on=key, how="left")
    m = m[~(m["reply_ts_ns"] < m["ts_ns"]).fillna(False).to_numpy(bool)]   # an earlier reply answers an older one
    m = m.sort_values(["ts_ns", "frame", "reply_ts_ns"], kind="stable").drop_duplicates(key, keep="first")
    # requests whose only replies came earlier were dropped with them: back, unanswered
    lost = req.merge(m[key], on=key, how="left", indicator=True)
    lost = lost[lost["_merge"] == "left_only"].drop(columns="_merge")
    out = pd.concat([m, lost], ignore_index=True).sort_values(["ts_ns", "frame"], kind="stable")
    out = out.rename(columns={"frame": "request_frame"})
    for c in ("reply_ts_ns", "reply_frame"):
        out[c] = out[c].astype("Int64").fillna(-1).astype(np.int64)
    out["rtt_ns"] = np.where(out["reply_ts_ns"] >= 0, out["reply_ts_ns"] - out["ts_ns"], -1)
    return out[ECHO_COLUMNS].reset_index(drop=True)


def echo_summary(echo: pd.DataFrame, tcp_rtt_ns=None) -> dict:
    """Requests, replies, loss %, RTT p50/p95/max (ms); with ``tcp_rtt_ns`` (the run's TCP RTT
    samples) their p50 and ping p50 − TCP p50 (ms): ping measures the queue a flow builds."""
    got = echo.loc[echo["rtt_ns"] >= 0, "rtt_ns"].astype(np.float64) / 1e6 if len(echo) else pd.Series([], dtype=float)
    n = len(echo)
    out = {"ping_requests": n, "ping_replies": len(got),
           "ping_loss_pct": 100.0 * (n - len(got)) / n if n else np.nan,
           "ping_p50_ms": got.quantile(0.5) if len(got) else np.nan,
           "ping_p95_ms": got.quantile(0.95) if len(got) else np.nan,
           "ping_max_ms": got.max() if len(got) else np.nan}
    if tcp_rtt_ns is not None:
        t = pd.Series(np.asarray(tcp_rtt_ns, np.float64) / 1e6)
        t = t[t >= 0]
        out["tcp_rtt_p50_ms"] = t.quantile(0.5) if len(t) else np.nan
        out["ping_minus_tcp_p50_ms"] = out["ping_p50_ms"] - out["tcp_rtt_p50_ms"]
    return out
