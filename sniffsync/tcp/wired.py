"""A wired capture (the AP's or the server's side) joined to a run's 802.11 frames: the same
IP packet found on both sides gives its one-way delay and the AP's queueing delay.

A packet is identified by (source, destination, protocol, ports, IP ID, TCP sequence number,
payload length); on each side its first copy counts (802.11 retries and other sniffers'
copies are later copies). The two sides are paired by that key and the nearest time
(within ``max_gap_ns`` after removing the clocks' offset, the median difference per flow
direction: the 16-bit IP ID wraps on long UDP runs). A flow direction is **downlink** (wire
→ air) when most of its 802.11 copies have FromDS set (the AP sent them), **uplink** when
most have ToDS; without DS bits, downlink when most were seen on the wire first.
``owd_ns`` = air − wire (downlink) or wire − air (uplink). The two captures have their own clocks,
so ``owd_ns`` includes their offset; ``queue_ns`` = ``owd_ns`` − the direction's minimum
(the offset cancels, clock drift over the run does not): the time a downlink packet waited
in the AP (queue plus channel access and MAC retries before its first transmission), or an
uplink packet in the station and on the air.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["WIRED_COLUMNS", "join_wired", "wired_summary"]

WIRED_COLUMNS = ["ts_ns", "src", "sport", "dst", "dport", "proto", "ip_id", "direction", "wired_ts_ns",
                 "air_ts_ns", "owd_ns", "queue_ns"]
_KEY = ["src", "dst", "proto", "sport", "dport", "ip_id", "seq", "plen"]


def _packets(frames: pd.DataFrame) -> pd.DataFrame:
    """First copy of every IPv4 TCP/UDP packet, keyed by :data:`_KEY`, sorted by time."""
    need = {"ip_src", "ip_dst", "ip_proto", "ip_id", "ts_ns"}
    if not need <= set(frames.columns) or not len(frames):
        return pd.DataFrame(columns=_KEY + ["ts_ns", "ds"])
    proto = frames["ip_proto"].to_numpy(np.int64, na_value=-1)
    ok = np.isin(proto, (6, 17)) & frames["ip_id"].notna().to_numpy(bool)
    f = frames[ok]

    def num(c, fill=-1):
        return f[c].to_numpy(np.int64, na_value=fill) if c in f else np.full(len(f), fill, np.int64)
    d = pd.DataFrame({"src": f["ip_src"].astype(str).to_numpy(), "dst": f["ip_dst"].astype(str).to_numpy(),
                      "proto": proto[ok], "sport": num("sport"), "dport": num("dport"), "ip_id": num("ip_id"),
                      "seq": num("tcp_seq"), "plen": np.where(proto[ok] == 6, num("tcp_payload_len"), num("udp_len")),
                      "ts_ns": f["ts_ns"].to_numpy(np.int64),
                      "ds": (num("from_ds", 0) - num("to_ds", 0)) if "from_ds" in f else 0})
    # copies (802.11 retries, sniffers) within a second are one packet: keep the first
    d = d.sort_values("ts_ns", kind="stable")
    gap = d.groupby(_KEY, sort=False)["ts_ns"].diff()
    return d[~(gap < 1_000_000_000).to_numpy(bool)].reset_index(drop=True)


def join_wired(air: pd.DataFrame, wired: pd.DataFrame, max_gap_ns: int = 1_000_000_000) -> pd.DataFrame:
    """One row per packet seen on both sides (see the module text), sorted by ``ts_ns`` (the
    earlier side's time)."""
    a, w = _packets(air), _packets(wired)
    if not len(a) or not len(w):
        return pd.DataFrame(columns=WIRED_COLUMNS)
    a = a.rename(columns={"ts_ns": "air_ts_ns"})
    w = w.rename(columns={"ts_ns": "wired_ts_ns"}).drop(columns="ds")
    flow = ["src", "sport", "dst", "dport", "proto"]
    # the clocks' offset per flow direction: the median difference of exact key matches
    first = a.drop_duplicates(_KEY).merge(w.drop_duplicates(_KEY), on=_KEY)
    if not len(first):
        return pd.DataFrame(columns=WIRED_COLUMNS)
    off = (first["air_ts_ns"] - first["wired_ts_ns"]).groupby([first[c] for c in flow]).median()
    off = off.rename("off").round().astype(np.int64).reset_index()
    w = w.merge(off, on=flow)
    w["t"] = w["wired_ts_ns"] + w["off"]
    a["t"] = a["air_ts_ns"]
    m = pd.merge_asof(w.sort_values("t"), a.sort_values("t"), on="t", by=_KEY, direction="nearest",
                      tolerance=max_gap_ns).dropna(subset=["air_ts_ns"])
    if not len(m):
        return pd.DataFrame(columns=WIRED_COLUMNS)
    m["air_ts_ns"] = m["air_ts_ns"].astype(np.int64)
    m = m.drop_duplicates(_KEY + ["air_ts_ns"])          # one air packet answers one wired packet
    d = m["air_ts_ns"] - m["wired_ts_ns"]
    keys = [m[c] for c in flow]
    ds = m["ds"].astype(np.float64).groupby(keys).transform("mean")
    down = np.where(ds > 0, True, np.where(ds < 0, False, (d > 0).groupby(keys).transform("mean") >= 0.5))
    m["direction"] = np.where(down, "downlink", "uplink")
    m["owd_ns"] = np.where(down, d, -d)
    m["queue_ns"] = m["owd_ns"] - m.groupby(flow)["owd_ns"].transform("min")
    m["ts_ns"] = np.minimum(m["air_ts_ns"], m["wired_ts_ns"])
    return m.sort_values("ts_ns", kind="stable")[WIRED_COLUMNS].reset_index(drop=True)


def wired_summary(j: pd.DataFrame) -> pd.DataFrame:
    """Per flow direction: packets joined, one-way delay p50 (clock offset included), queueing
    delay mean / p50 / p95 / max (ms)."""
    flow = ["src", "sport", "dst", "dport", "proto", "direction"]
    if not len(j):
        return pd.DataFrame(columns=flow + ["packets", "owd_p50_ms", "queue_mean_ms", "queue_p50_ms",
                                            "queue_p95_ms", "queue_max_ms"])
    g = (j["queue_ns"].astype(np.float64) / 1e6).groupby([j[c] for c in flow])
    o = (j["owd_ns"].astype(np.float64) / 1e6).groupby([j[c] for c in flow])
    return pd.DataFrame({"packets": g.size(), "owd_p50_ms": o.median(), "queue_mean_ms": g.mean(),
                         "queue_p50_ms": g.median(), "queue_p95_ms": g.quantile(0.95),
                         "queue_max_ms": g.max()}).reset_index()
