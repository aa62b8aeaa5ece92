"""Frame tables built from a few hand-written rows, for the TCP and fairness tests."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from sniffsync.decode.table import frame_table

DATA = Path(__file__).parent / "data"
CAPS = str(DATA / "captures")
SYN, ACK = 0x02, 0x10
MS = 1_000_000

A, B = "10.0.0.1", "10.0.0.2"


def make_frames(rows, linktype=1):
    """Frame table from dicts with keys: t_ms or ts_ns, src, dst, sport, dport, proto
    (6/17), seq, ack, flags, len, win, tsval, tsecr, ta, wseq, retry, mcs, sniffer."""
    n = len(rows)

    def col(key, default, dtype=np.int64):
        vals = [r.get(key, default) for r in rows]
        ok = np.array([v is not None for v in vals], bool)
        return np.array([0 if v is None else v for v in vals], dtype=dtype), ok

    ts = np.array([r["ts_ns"] if "ts_ns" in r else int(round(r["t_ms"] * MS)) for r in rows], np.int64)
    proto = col("proto", 6)
    is_tcp = proto[0] == 6
    cols = {
        "sniffer": (col("sniffer", 0, np.int16)[0], None), "frame": (np.arange(1, n + 1), None),
        "ts_ns": (ts, None), "caplen": (np.zeros(n, np.int32), None),
        "wirelen": (np.zeros(n, np.int32), None), "linktype": (np.full(n, linktype, np.int32), None),
        "ip_src": (np.array([r.get("src", A) for r in rows], object), None),
        "ip_dst": (np.array([r.get("dst", B) for r in rows], object), None),
        "ip_proto": proto, "sport": col("sport", 40000), "dport": col("dport", 5001),
        "tcp_seq": (col("seq", 0)[0], is_tcp), "tcp_ack": (col("ack", 0)[0], is_tcp),
        "tcp_flags": (col("flags", ACK)[0], is_tcp), "tcp_win": (col("win", 1000)[0], is_tcp),
        "tcp_payload_len": (col("len", 0)[0], is_tcp),
        "udp_len": (col("len", 0)[0] + 8, ~is_tcp),
        "tcp_tsval": col("tsval", None), "tcp_tsecr": col("tsecr", None),
        "ta": col("ta", None), "seq": col("wseq", None), "retry": col("retry", False, bool),
        "mcs": col("mcs", None),
    }
    return frame_table(n, cols, [])
