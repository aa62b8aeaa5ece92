"""A TCP flow's time-sequence graph (Stevens / tcptrace): data segments, ACK and window lines.

From the TCP stage's segment table (:func:`sniffsync.tcp.frames.segments`,
``classify_segments``): the data direction's segments (relative sequence number: 0 = the
first sequence number seen, the SYN's when captured, as Wireshark counts), each marked when
the TCP stage calls it a retransmission; the reverse direction's cumulative ACK and its SACK blocks (RFC 2018: the
ranges above the ACK the receiver holds, from the frame table's ``tcp_sack_blocks``) (relative
to the same origin) and its advertised window, shifted by the window scale that direction
announced in its SYN when both SYNs announced one (RFC 7323; a SYN's own window is never
scaled). MAC duplicates (the same frame heard again after an 802.11 retry) are left out.
"""
from __future__ import annotations

import threading

import numpy as np
import pandas as pd

__all__ = ["TsgIndex", "tsg"]

MOD = 1 << 32
SYN = 0x02


def _side(seg: pd.DataFrame):
    """Per row, the sender's (address, port) and the receiver's (the table's ``src``/``dst``)."""
    return ((seg["src"].astype(str).to_numpy(), seg["sport"].to_numpy(np.int64)),
            (seg["dst"].astype(str).to_numpy(), seg["dport"].to_numpy(np.int64)))


def _scale(rows: pd.DataFrame) -> int:
    """The window scale a direction announced in its SYN, -1 when none was seen."""
    syn = rows[(rows["flags"].to_numpy(np.int64) & SYN) != 0]
    ws = syn["wscale"].to_numpy(np.int64)
    return int(ws[ws >= 0][0]) if (ws >= 0).any() else -1


def tsg(seg: pd.DataFrame, a: tuple, b: tuple, t0_abs_ns: int) -> dict:
    """The graph of the data ``a`` = (ip, port) sends to ``b``; times run-relative ns."""
    (s_ip, s_port), (r_ip, r_port) = _side(seg)
    tcp = (seg["proto"].to_numpy(np.int64) == 6) & ~seg["mac_dup"].to_numpy(bool)
    fwd = tcp & (s_ip == a[0]) & (s_port == a[1]) & (r_ip == b[0]) & (r_port == b[1])
    rev = tcp & (s_ip == b[0]) & (s_port == b[1]) & (r_ip == a[0]) & (r_port == a[1])
    d, r = seg[fwd].sort_values("ts_ns", kind="stable"), seg[rev].sort_values("ts_ns", kind="stable")
    if not len(d):
        return {"data": None, "acks": None, "why": "no segment of this direction was captured"}
    isn = int(d["seq_raw"].to_numpy(np.int64)[0])
    data = d[d["payload_len"].to_numpy(np.int64) > 0]
    seq = (data["seq_raw"].to_numpy(np.int64) - isn) % MOD
    retx = data["kind"].to_numpy(np.int64) == 2             # KIND_NAMES: "retransmission"
    ack_rows = r[r["ack_raw"].to_numpy(np.int64) >= 0]
    ack = (ack_rows["ack_raw"].to_numpy(np.int64) - isn) % MOD
    sack = _sack(ack_rows, isn, t0_abs_ns)
    sc_fwd, sc_rev = _scale(d), _scale(r)
    shift = sc_rev if sc_fwd >= 0 and sc_rev >= 0 else 0
    syn = (ack_rows["flags"].to_numpy(np.int64) & SYN) != 0
    win = ack_rows["win"].to_numpy(np.int64) << np.where(syn, 0, shift)
    return {
        "label": f"{a[0]}:{a[1]}→{b[0]}:{b[1]}", "isn": isn, "window_scale": shift,
        "data": {"t_ns": (data["ts_ns"].to_numpy(np.int64) - t0_abs_ns).tolist(), "seq": seq.tolist(),
                 "len": data["payload_len"].to_numpy(np.int64).tolist(), "retx": retx.tolist()},
        "acks": {"t_ns": (ack_rows["ts_ns"].to_numpy(np.int64) - t0_abs_ns).tolist(), "ack": ack.tolist(),
                 "win": win.tolist()},
        "sack": sack,
    }


def _sack(rows: pd.DataFrame, isn: int, t0_abs_ns: int) -> dict:
    """One entry per SACK block of the ACK rows: time, left and right edge relative to ``isn``.

    ``rows["sack"]`` is the frame's ``tcp_sack_blocks`` (categorical text "LE-RE,LE-RE"); each
    distinct text is parsed once and spread to its rows by the category codes."""
    out = {"t_ns": [], "le": [], "re": []}
    if "sack" not in rows or not len(rows):
        return out
    cat = pd.Categorical(rows["sack"])
    codes = np.asarray(cat.codes)
    parsed = [np.array([b.split("-") for b in str(c).split(",")], np.int64).reshape(-1, 2)
              for c in cat.categories]
    if not parsed:
        return out
    n_blk = np.array([len(b) for b in parsed] + [0])[codes]           # code -1 -> 0 blocks
    rep = np.repeat(np.arange(len(rows)), n_blk)
    edges = np.concatenate([parsed[c] for c in codes[codes >= 0]]) if (codes >= 0).any() else np.zeros((0, 2), np.int64)
    t = rows["ts_ns"].to_numpy(np.int64)[rep] - t0_abs_ns
    return {"t_ns": t.tolist(), "le": ((edges[:, 0] - isn) % MOD).tolist(), "re": ((edges[:, 1] - isn) % MOD).tolist()}


def _ends(label: str):
    """``"10.1.1.2:49153→10.1.1.1:5001"`` -> (("10.1.1.2", 49153), ("10.1.1.1", 5001))."""
    a, b = label.split("→")
    return tuple((h, int(p)) for h, p in (x.rsplit(":", 1) for x in (a, b)))


class TsgIndex:
    """Graphs of the flows of a run, from a frame table loaded on first use (``frames()``)."""

    def __init__(self, frames, t0_abs_ns: int):
        self._frames, self.t0_abs_ns = frames, int(t0_abs_ns)
        self._seg = None
        self._lock = threading.Lock()

    def _segments(self) -> pd.DataFrame:
        with self._lock:
            if self._seg is None:
                from sniffsync.tcp.frames import classify_segments, segments
                f = self._frames() if callable(self._frames) else self._frames
                seg = classify_segments(segments(f))
                if "tcp_sack_blocks" in f:        # the SACK blocks of each segment's frame
                    seg = seg.assign(sack=f["tcp_sack_blocks"].iloc[seg["row"].to_numpy(np.int64)].to_numpy())
                self._seg = seg
            return self._seg

    def graph(self, label: str) -> dict:
        a, b = _ends(label)
        return tsg(self._segments(), a, b, self.t0_abs_ns)
