"""UDP loss, reordering, duplicates and RFC 3550 interarrival jitter per flow direction.

Where the payload carries iperf sequence numbers and send times (``udp_w0..2``, the
payload's first three big-endian 32-bit words): **iperf2** (seq, sec, usec; a negative
seq marks the last datagram, its absolute value counts) or **iperf3** (sec, usec, seq; the
32-bit counter). A direction is read as one of them when >= 90 % of its datagrams carry a
send time within a day of the capture clock with usec < 10^6 and >= 50 % of the sequence
steps are +1. Otherwise, labelled ``ip_id``: the IPv4 Identification as the sequence (a
sender's counter per socket or destination; other traffic sharing it reads as loss), no jitter.

Sequence numbers are unwrapped (signed differences); in arrival order: ``expected`` = highest
− lowest + 1, ``lost`` = expected − distinct, ``duplicates`` = datagrams − distinct,
``reordered`` = first copies arriving after a higher sequence number. Jitter (iperf only):
D = (R_i − R_{i−1}) − (S_i − S_{i−1}) between consecutive datagrams in arrival order (R
capture time, S send time), J += (|D| − J) / 16 (RFC 3550 §6.4.1, A.8); ``jitter_ms`` is J
after the last datagram, ``jitter_max_ms`` its maximum. Copies of one datagram (802.11
retries, other sniffers: same addresses, ports, IP ID and payload words) count once.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["UDP_COLUMNS", "udp_flows", "rfc3550_jitter"]

UDP_COLUMNS = ["src", "sport", "dst", "dport", "method", "datagrams", "expected", "lost", "loss_pct",
               "duplicates", "reordered", "jitter_ms", "jitter_max_ms", "first_ns", "last_ns"]
DAY_S = 86_400
_KEY = ["ip_src", "sport", "ip_dst", "dport"]
_BLOCK = 1024                    # (16/15)^1024 ~ e^66: no overflow inside a block


def rfc3550_jitter(abs_d_ns: np.ndarray) -> np.ndarray:
    """The running jitter J_i = J_{i-1} + (|D_i| - J_{i-1}) / 16 (J_0 = 0) of ``|D|`` values,
    in closed form block by block: J_{s+k} = a^(k+1) J_{s-1} + a^k Σ_{m<=k} a^-m x_m / 16."""
    x = np.asarray(abs_d_ns, np.float64)
    out = np.empty(len(x))
    a, prev = 15 / 16, 0.0
    for s in range(0, len(x), _BLOCK):
        blk = x[s:s + _BLOCK]
        k = np.arange(len(blk))
        out[s:s + len(blk)] = a ** (k + 1) * prev + a ** k * np.cumsum(blk * a ** -k) / 16
        prev = out[s + len(blk) - 1]
    return out


def _unwrap(v: np.ndarray, bits: int) -> np.ndarray:
    """Sequence numbers modulo 2^bits unwrapped by signed differences."""
    if not len(v):
        return v.astype(np.int64)
    span = 1 << bits
    d = np.diff(v.astype(np.int64)) % span
    d = np.where(d >= span // 2, d - span, d)
    return int(v[0]) + np.concatenate([[0], np.cumsum(d)])


def _method(g: pd.DataFrame) -> str:
    """iperf2 / iperf3 / ip_id for one direction (columns w0, w1, w2, ts_ns)."""
    cap_s = g["ts_ns"].to_numpy(np.int64) // 1_000_000_000
    for name, sec, usec, seq in (("iperf2", "w1", "w2", "w0"), ("iperf3", "w0", "w1", "w2")):
        s, u, q = (g[c].to_numpy(np.float64) for c in (sec, usec, seq))
        if name == "iperf2":
            q = np.abs(q.astype(np.int64).astype(np.uint32).view(np.int32)).astype(np.float64)
        timed = np.isfinite(s) & np.isfinite(u) & (np.abs(s - cap_s) < DAY_S) & (u < 1e6)
        steps = np.diff(q)
        if len(g) >= 2 and timed.mean() >= 0.9 and (steps == 1).mean() >= 0.5:
            return name
    return "ip_id"


def _direction(g: pd.DataFrame, method: str) -> dict:
    ts = g["ts_ns"].to_numpy(np.int64)
    if method == "iperf2":
        raw = np.abs(g["w0"].to_numpy(np.int64).astype(np.uint32).view(np.int32).astype(np.int64))
        seq, sent = _unwrap(raw, 31), g["w1"].to_numpy(np.int64) * 10**9 + g["w2"].to_numpy(np.int64) * 1000
    elif method == "iperf3":
        seq = _unwrap(g["w2"].to_numpy(np.int64), 32)
        sent = g["w0"].to_numpy(np.int64) * 10**9 + g["w1"].to_numpy(np.int64) * 1000
    else:
        seq, sent = _unwrap(g["ip_id"].to_numpy(np.int64), 16), None
    first = ~pd.Series(seq).duplicated().to_numpy()
    distinct = int(first.sum())
    expected = int(seq.max() - seq.min() + 1)
    prior_max = np.maximum.accumulate(np.concatenate([[np.iinfo(np.int64).min], seq[:-1]]))
    out = {"method": method, "datagrams": len(seq), "expected": expected, "lost": expected - distinct,
           "loss_pct": 100.0 * (expected - distinct) / expected, "duplicates": len(seq) - distinct,
           "reordered": int((first & (seq < prior_max)).sum()), "jitter_ms": np.nan, "jitter_max_ms": np.nan,
           "first_ns": int(ts[0]), "last_ns": int(ts[-1])}
    if sent is not None and len(ts) >= 2:
        j = rfc3550_jitter(np.abs(np.diff(ts) - np.diff(sent)))
        out["jitter_ms"], out["jitter_max_ms"] = j[-1] / 1e6, j.max() / 1e6
    return out


def udp_flows(frames: pd.DataFrame) -> pd.DataFrame:
    """One row per UDP flow direction (see the module text), in order of first datagram."""
    need = {"ip_proto", "udp_len", "ts_ns", *_KEY}
    if not need <= set(frames.columns) or not len(frames):
        return pd.DataFrame(columns=UDP_COLUMNS)
    u = frames[(frames["ip_proto"] == 17).fillna(False).to_numpy(bool) & frames["udp_len"].notna().to_numpy(bool)]
    if not len(u):
        return pd.DataFrame(columns=UDP_COLUMNS)
    d = pd.DataFrame({"src": u["ip_src"].astype(str).to_numpy(), "sport": u["sport"].to_numpy(np.int64),
                      "dst": u["ip_dst"].astype(str).to_numpy(), "dport": u["dport"].to_numpy(np.int64),
                      "ts_ns": u["ts_ns"].to_numpy(np.int64),
                      "ip_id": u["ip_id"].to_numpy(np.float64, na_value=np.nan) if "ip_id" in u else np.nan})
    for k in range(3):
        c = f"udp_w{k}"
        d[f"w{k}"] = u[c].to_numpy(np.float64, na_value=np.nan) if c in u else np.nan
    key = ["src", "sport", "dst", "dport"]
    d = d.sort_values("ts_ns", kind="stable").drop_duplicates(key + ["ip_id", "w0", "w1", "w2"])
    rows = []
    for k, g in d.groupby(key, sort=False):
        method = _method(g)
        if method == "ip_id" and g["ip_id"].isna().any():
            continue                     # IPv6 has no IP ID: nothing to count
        rows.append({**dict(zip(key, k)), **_direction(g, method)})
    return pd.DataFrame(rows, columns=UDP_COLUMNS)
