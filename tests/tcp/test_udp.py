"""UDP loss, reordering, duplicates and RFC 3550 jitter (sniffsync.tcp.udp).

Oracles: a hand-built iperf2 capture whose answers are designed in its script
(tests/data/tshark_udp/make_capture.py: 20 datagrams, #5 lost, #8 after #9, #12 twice);
Wireshark 4.0.17's iperf2 dissector for the header words (fixture, and live when tshark is
installed); the jitter from a plain RFC 3550 loop over tshark's arrival times and iperf2
send times; a second direction without iperf header read by IP ID (104 of 100..109 missing).
"""
from __future__ import annotations

import subprocess
from decimal import Decimal
from io import StringIO

import numpy as np
import pandas as pd
import pytest

from sniffsync.decode.frames import read_capture
from sniffsync.tcp.udp import rfc3550_jitter, udp_flows
from frame_rows import DATA

CAPTURE = DATA / "captures" / "udp" / "iperf2_hand.pcap"
FIXTURE = DATA / "tshark_udp" / "iperf2_hand.tsv"


def _loop_jitter_ns(r_ns, s_ns):
    """RFC 3550 A.8, one packet at a time (the oracle's own loop)."""
    j = 0.0
    for i in range(1, len(r_ns)):
        d = (r_ns[i] - r_ns[i - 1]) - (s_ns[i] - s_ns[i - 1])
        j += (abs(d) - j) / 16
    return j


def _check(ws: pd.DataFrame) -> None:
    f = read_capture(str(CAPTURE))
    ip = ws[ws["iperf2.udp.sequence"].notna()]
    # the decoder's payload words = tshark's iperf2 seq / sec / usec
    ours = f.set_index("frame").loc[ip["frame.number"].astype(int)]
    seq = ours["udp_w0"].to_numpy(np.int64).astype(np.uint32).view(np.int32)
    assert (seq == ip["iperf2.udp.sequence"].astype(int).to_numpy()).all()
    assert (ours["udp_w1"].to_numpy(np.int64) == ip["iperf2.udp.sec"].astype(int).to_numpy()).all()
    assert (ours["udp_w2"].to_numpy(np.int64) == ip["iperf2.udp.usec"].astype(int).to_numpy()).all()
    u = udp_flows(f).set_index("sport")
    a = u.loc[40000]
    assert a["method"] == "iperf2" and a["datagrams"] == 20 and a["expected"] == 20
    assert a["lost"] == 1 and a["loss_pct"] == 5.0 and a["duplicates"] == 1 and a["reordered"] == 1
    r = [int(Decimal(x) * 10**9) for x in ip["frame.time_epoch"]]
    s = [int(a_) * 10**9 + int(b_) * 1000 for a_, b_ in zip(ip["iperf2.udp.sec"], ip["iperf2.udp.usec"])]
    assert a["jitter_ms"] == pytest.approx(_loop_jitter_ns(r, s) / 1e6, rel=1e-12)
    assert 0.5 < a["jitter_ms"] < 3                      # 2 ms alternating transit, ~ 1.5 ms after 19 steps
    b = u.loc[7000]
    assert b["method"] == "ip_id" and b["datagrams"] == 9 and b["expected"] == 10 and b["lost"] == 1
    assert np.isnan(b["jitter_ms"])


def test_udp_flows_match_the_designed_capture_and_tshark_fixture():
    _check(pd.read_csv(FIXTURE, sep="\t", dtype=str))


@pytest.mark.tshark
def test_udp_flows_match_live_tshark():
    cmd = ["tshark", "-r", str(CAPTURE), "-d", "udp.port==5001,iperf2", "-T", "fields", "-E", "header=y",
           "-E", "separator=/t"]
    for c in ("frame.number", "frame.time_epoch", "iperf2.udp.sequence", "iperf2.udp.sec", "iperf2.udp.usec"):
        cmd += ["-e", c]
    _check(pd.read_csv(StringIO(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout),
                       sep="\t", dtype=str))


def test_jitter_closed_form_equals_the_loop_over_many_blocks():
    rng = np.random.default_rng(3)
    x = rng.integers(0, 5_000_000, 5000).astype(np.float64)
    j = rfc3550_jitter(x)
    ref, acc = [], 0.0
    for v in x:                                         # J_i = J_{i-1} + (|D_i| - J_{i-1}) / 16
        acc += (v - acc) / 16
        ref.append(acc)
    np.testing.assert_allclose(j, ref, rtol=1e-9)
    # constant |D| = d: J_n = d (1 - (15/16)^n)
    np.testing.assert_allclose(rfc3550_jitter(np.full(40, 16.0))[[0, 39]], 16 * (1 - (15 / 16) ** np.array([1, 40])))


def test_iperf3_layout_and_sequence_wrap():
    # iperf3: (sec, usec, seq); seq wraps past 2^32; send every 1 ms, arrival + 1 ms; one lost
    n = 10
    seqs = [(2**32 - 5 + i) % 2**32 for i in range(n) if i != 7]
    sent = [i for i in range(n) if i != 7]
    t0 = 1_700_000_000
    frames = pd.DataFrame({"ip_proto": 17, "udp_len": 40, "ip_src": "10.0.0.1", "ip_dst": "10.0.0.2",
                           "sport": 1, "dport": 5201, "ip_id": pd.array(range(len(seqs)), "UInt16"),
                           "ts_ns": [t0 * 10**9 + (i + 1) * 10**6 for i in sent],
                           "udp_w0": pd.array([t0] * len(seqs), "UInt32"),
                           "udp_w1": pd.array([i * 1000 for i in sent], "UInt32"),
                           "udp_w2": pd.array(seqs, "UInt32")})
    a = udp_flows(frames).iloc[0]
    assert a["method"] == "iperf3" and a["expected"] == 10 and a["lost"] == 1 and a["reordered"] == 0
    assert a["jitter_ms"] == 0                                    # constant transit time
