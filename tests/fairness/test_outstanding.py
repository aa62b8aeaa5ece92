"""A flow counts as active while it has data outstanding (issue 14/15: a starved flow must read
as unfairness), and flow completion time.

Oracles: hand-worked segments (windows and indices worked in the comments) and Wireshark
4.0.17's TCP fields of the ns-3 hidden-node capture of sniffer A (fixture
tests/data/tshark_tcp/ns3-hidden-acks-snifferA-nearAP.tsv): relative sequence/ACK numbers and
times, from which the completion time is computed without our code.
"""
from __future__ import annotations

import os
from decimal import Decimal

import numpy as np
import pandas as pd
import pytest

from sniffsync.decode.frames import read_capture
from sniffsync.fairness.frames import fairness
from frame_rows import ACK, CAPS, DATA, MS, SYN, make_frames

W = S = 200 * MS
A, B, R = "10.0.0.1", "10.0.0.2", "10.0.0.9"


def _flow(src, sport, t_end_ms, acked_to_ms, t_stall_ms=None):
    """A sender ``src:sport`` -> R:5001: SYN at 0, 1000 B every 50 ms until ``t_end_ms``, each
    ACKed 10 ms later up to ``acked_to_ms``; with ``t_stall_ms``, one more segment then that is
    never ACKed (the flow is starved: data outstanding, nothing more sent)."""
    back = {"src": R, "dst": src, "sport": 5001, "dport": sport}
    rows = [{"t_ms": 0, "src": src, "sport": sport, "dst": R, "seq": 0, "flags": SYN},
            {"t_ms": 1, **back, "seq": 0, "ack": 1, "flags": SYN | ACK}]
    seq = 1
    for t in range(10, t_end_ms + 1, 50):
        rows.append({"t_ms": t, "src": src, "sport": sport, "dst": R, "seq": seq, "ack": 1, "len": 1000})
        seq += 1000
        if t + 10 <= acked_to_ms:
            rows.append({"t_ms": t + 10, **back, "seq": 1, "ack": seq})
    if t_stall_ms is not None:
        rows.append({"t_ms": t_stall_ms, "src": src, "sport": sport, "dst": R, "seq": seq, "ack": 1, "len": 1000})
    return rows


def test_starved_flow_stays_active_and_lowers_jain():
    # flow 1 sends every 50 ms to 1960 ms, all ACKed; flow 2 the same to 560 ms, then one
    # segment at 600 ms that is never ACKed: it has data outstanding to the end of the capture.
    rows = sorted(_flow(A, 1, 1960, 3000) + _flow(B, 2, 560, 3000, t_stall_ms=600), key=lambda r: r["t_ms"])
    res = fairness(make_frames(rows), W, S)
    f = res.flows[res.flows["goodput_bytes"] > 0].set_index("sport")
    end_ns = 1970 * MS                                   # the capture's last frame: flow 1's last ACK
    assert f.loc[2, "active_until_ns"] == end_ns and f.loc[2, "completed_ns"] == -1
    assert f.loc[2, "fct_ns"] == -1
    assert f.loc[1, "completed_ns"] == 1970 * MS and f.loc[1, "fct_ns"] == 1970 * MS
    acks_only = res.flows[res.flows["goodput_bytes"] == 0]
    # ACK-only directions have nothing outstanding
    assert len(acks_only) == 2 and (acks_only["active_until_ns"] == -1).all()
    j = res.jain.set_index("start_ns")                  # grid from t0 = 10 ms, the first payload
    # windows from 610 ms: flow 2 delivers nothing but counts, so J = (x + 0)^2 / (2 x^2) = 0.5
    # (before: flow 2 was no longer active there, n = 1 and those windows had no index)
    late = j.loc[j.index >= 610 * MS]
    assert len(late) == 7 and (late["n_active"] == 2).all() and np.allclose(late["jain"], 0.5)
    # [10, 210): both deliver 4 segments -> 1.0
    assert j.loc[10 * MS, "jain"] == pytest.approx(1.0)


def test_completed_flow_active_until_its_last_ack():
    # one flow, last segment at 510 ms ACKed at 520 ms: active until 520 ms, FCT = 520 ms - SYN (0)
    res = fairness(make_frames(_flow(A, 1, 510, 10_000)), W, S)
    f = res.flows[res.flows["goodput_bytes"] > 0].iloc[0]
    assert f["last_ns"] == 510 * MS and f["active_until_ns"] == 520 * MS and f["fct_ns"] == 520 * MS


def test_without_the_receivers_acks_activity_ends_with_the_last_transmission():
    rows = [r for r in _flow(A, 1, 510, 0) if r.get("src") == A]       # no ACK at all captured
    f = fairness(make_frames(rows), W, S).flows.iloc[0]
    assert f["active_until_ns"] == f["last_ns"] == 510 * MS and f["completed_ns"] == -1


def test_flow_completion_time_matches_tshark_fields():
    # per TCP data direction: the first ACK of the receiver whose relative tcp.ack covers the
    # sender's highest payload byte (max tcp.seq + tcp.len), minus the stream's first frame
    ws = pd.read_csv(DATA / "tshark_tcp" / "ns3-hidden-acks-snifferA-nearAP.tsv", sep="\t", dtype=str)
    ws["t_ns"] = ws["frame.time_epoch"].map(lambda x: int(Decimal(x) * 10**9))
    for c in ("tcp.seq", "tcp.len", "tcp.ack"):
        ws[c] = ws[c].astype(int)
    want = {}
    for (stream, src, sport), d in ws[ws["tcp.len"] > 0].groupby(["tcp.stream", "ip.src", "tcp.srcport"]):
        top = (d["tcp.seq"] + d["tcp.len"]).max()
        s = ws[ws["tcp.stream"] == stream]
        acks = s[(s["ip.dst"] == src) & (s["tcp.dstport"] == sport) & (s["tcp.ack"] >= top)]
        want[f"{src}:{sport}"] = int(acks["t_ns"].min() - s["t_ns"].min())
    f = read_capture(os.path.join(CAPS, "ns3-11n-ht20-hidden-snifferA-nearAP.pcap"))
    got = fairness(f, W, S).flows
    got = got[(got["proto"] == "tcp") & (got["goodput_bytes"] > 0)]
    got = dict(zip(got["src"].astype(str) + ":" + got["sport"].astype(str), got["fct_ns"]))
    assert len(want) == 2 and got == want
