"""Goodput across sniffer holes (sniffsync.tcp.holes): bytes the sniffer never captured
but the receiver's cumulative ACK covers are goodput, dated at that ACK, and reported
as ``inferred_bytes`` (issue 13 item 6).

Oracles: hand-built segment sequences (answers worked out in the comments), and
tshark's relative ACK numbers on the ns-3 hidden-node captures: the receiver's
cumulative ACK progress per flow direction is what reached its application
(fixtures ns3-hidden-acks-*.tsv in tests/data/tshark_tcp/, made by make_fixtures.sh;
re-run live when tshark is on PATH).
"""
from __future__ import annotations

import csv
import shutil
import subprocess

import numpy as np
import pytest

from sniffsync.decode.frames import read_capture
from sniffsync.fairness import fairness
from sniffsync.tcp.frames import classify_segments, flow_table, segments
from sniffsync.tcp.holes import TAIL_MAX, hole_bytes_below, hole_table
from frame_rows import ACK, CAPS, DATA, MS, SYN, A, B, make_frames

TSHARK = DATA / "tshark_tcp"
SNIFFERS = ("A-nearAP", "B-nearSTA1")
FIELDS = ["frame.time_epoch", "tcp.stream", "ip.src", "tcp.srcport", "ip.dst", "tcp.dstport", "tcp.seq",
          "tcp.len", "tcp.ack", "tcp.flags", "wlan.fc.retry"]


def _flow(rows_data, acks, syn=True):
    """SYN at 0 ms (ISN 999: payload from 1000), data rows (t_ms, offset, len), ACKs (t_ms, offset)."""
    rows = [{"t_ms": 0, "seq": 999, "flags": SYN}] if syn else []
    rows += [{"t_ms": t, "seq": 1000 + off, "len": n, "ack": 1} for t, off, n in rows_data]
    rows += [{"t_ms": t, "src": B, "dst": A, "sport": 5001, "dport": 40000, "seq": 1, "ack": 1000 + off,
              "flags": ACK} for t, off in acks]
    rows.sort(key=lambda r: r["t_ms"])
    return make_frames(rows)


def test_hole_table_and_bytes_below():
    # fd 0 captured [0,10) [20,30) [25,40) and a pure ACK at 50: holes [10,20), [40,50), tail
    fd = np.array([0, 0, 0, 0, 1])
    s, e = np.array([0, 20, 25, 50, 7]), np.array([10, 30, 40, 50, 9])
    h = hole_table(fd, s, e)
    assert h["lo"].tolist() == [10, 40, 50, 9] and h["hi"].tolist() == [20, 50, 50 + TAIL_MAX, 9 + TAIL_MAX]
    assert h["before"].tolist() == [0, 10, 20, 0]
    x = np.array([0, 15, 35, 45, 60, 5, 100])
    f = np.array([0, 0, 0, 0, 0, 1, 3])           # fd 3 has no rows: nothing inferred
    assert hole_bytes_below(h, f, x).tolist() == [0, 5, 10, 15, 30, 0, 0]


def test_acked_hole_counted_and_dated_at_the_ack():
    # 5 segments of 1000 B, the 3rd never captured; the ACK at 30 ms covers up to 3000
    # (hole included), the ACK at 250 ms covers all: 5000 B delivered, 1000 B inferred,
    # dated at 30 ms (window [0, 100 ms) of a 100 ms grid from the first payload at 10 ms)
    data = [(10, 0, 1000), (11, 1000, 1000), (13, 3000, 1000), (14, 4000, 1000)]
    fr = _flow(data, [(30, 3000), (250, 5000)])
    r = fairness(fr, 100 * MS, 100 * MS)
    f = r.flows.set_index("dir")
    assert f.loc[0, "goodput_bytes"] == 5000 and f.loc[0, "inferred_bytes"] == 1000
    assert f.loc[0, "bytes"] == 4000
    assert f.loc[0, "first_ns"] == 10 * MS               # first payload, not the SYN at 0
    w = r.windows[r.windows["dir"] == 0]
    assert w["goodput_bytes"].tolist()[0] == 5000


def test_missed_tail_counted_at_its_ack_and_extends_activity():
    # the last two segments were never captured; the ACK at 450 ms covers them
    fr = _flow([(10, 0, 1000), (11, 1000, 1000)], [(20, 2000), (450, 4000)])
    r = fairness(fr, 100 * MS, 100 * MS)
    f = r.flows.set_index("dir")
    assert f.loc[0, "goodput_bytes"] == 4000 and f.loc[0, "inferred_bytes"] == 2000
    assert f.loc[0, "last_ns"] == 450 * MS
    w = r.windows[r.windows["dir"] == 0].set_index("window")
    assert w.loc[0, "goodput_bytes"] == 2000 and w.loc[4, "goodput_bytes"] == 2000


def test_no_ack_or_implausible_ack_infers_nothing_beyond_bounds():
    fr = _flow([(10, 0, 1000), (13, 3000, 1000)], [])                 # hole, but no ACK seen
    ft = flow_table(classify_segments(segments(fr)))                    # no ACK analysis: none
    assert ft["inferred_bytes"].tolist() == [0]
    r = fairness(fr)
    assert r.flows["inferred_bytes"].tolist() == [0] and r.flows["goodput_bytes"].tolist() == [2000]
    # an ACK 2**31 - 1 above the data: only TAIL_MAX bytes past the last captured end
    fr = _flow([(10, 0, 1000)], [(20, 1000), (30, 2**31 - 2)])
    r = fairness(fr).flows.set_index("dir")
    assert r.loc[0, "inferred_bytes"] == TAIL_MAX


def test_missed_fin_of_an_ack_only_direction_makes_no_flow():
    # the receiver's FIN (its sequence number 2) was not captured, the sender's ACK 3
    # covers it: no byte is inferred for the ACK-only direction, which stays no flow
    rows = [{"t_ms": 0, "seq": 999, "flags": SYN},
            {"t_ms": 1, "src": B, "dst": A, "sport": 5001, "dport": 40000, "seq": 1, "ack": 1000,
             "flags": SYN | ACK},
            {"t_ms": 10, "seq": 1000, "len": 1000, "ack": 2},
            {"t_ms": 20, "src": B, "dst": A, "sport": 5001, "dport": 40000, "seq": 2, "ack": 2000, "flags": ACK},
            {"t_ms": 30, "seq": 2000, "len": 0, "ack": 3, "flags": ACK}]
    r = fairness(make_frames(rows))
    assert r.flows["inferred_bytes"].tolist() == [0, 0]
    assert r.flows[r.flows["goodput_bytes"] > 0]["dir"].tolist() == [0]


def test_retransmission_after_last_new_data_keeps_flow_active():
    # flow 0: new data at 10 ms, then only a retransmission at 650 ms; flow 1 sends 1000 B
    # every 100 ms. Flow 0 is active (idle) in windows 1 and 2: J = 0.5 there
    xs = [{"t_ms": 0, "seq": 999, "flags": SYN}, {"t_ms": 10, "seq": 1000, "len": 1000, "ack": 1},
          {"t_ms": 650, "seq": 1000, "len": 1000, "ack": 1},
          {"t_ms": 700, "src": B, "dst": A, "sport": 5001, "dport": 40000, "seq": 1, "ack": 2000, "flags": ACK}]
    ys = [{"t_ms": 15 + 100 * i, "sport": 40001, "seq": 1000 * i, "len": 1000} for i in range(7)]
    r = fairness(make_frames(sorted(xs + ys, key=lambda r: r["t_ms"])), 200 * MS, 200 * MS)
    f = r.flows.set_index(["flow", "dir"])
    assert f.loc[(0, 0), "last_ns"] == 650 * MS and f.loc[(0, 0), "first_ns"] == 10 * MS
    assert r.windows[r.windows["flow"] == 0]["active"].tolist() == [True, True, True, True]
    assert r.jain["jain"].tolist()[1:3] == [0.5, 0.5]


# ---------------------------------------------------------------- tshark oracle (ns-3)

def _delivered(rows) -> dict:
    """Payload bytes the receiver acknowledged per (stream, src, sport): its highest
    relative ACK less the SYN, less the FIN when acknowledged."""
    fin, best = {}, {}
    for r in rows:
        fl = int(r["tcp.flags"], 16)
        if fl & 0x01:
            fin[(r["tcp.stream"], r["ip.src"], r["tcp.srcport"])] = int(r["tcp.seq"]) + int(r["tcp.len"])
        if fl & 0x10:
            k = (r["tcp.stream"], r["ip.dst"], r["tcp.dstport"])
            best[k] = max(best.get(k, 0), int(r["tcp.ack"]))
    got = {k: a - 1 - (k in fin and a > fin[k]) for k, a in best.items()}
    return {k: n for k, n in got.items() if n > 0}


def _fixture(s):
    with open(TSHARK / f"ns3-hidden-acks-sniffer{s}.tsv") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


@pytest.mark.parametrize("s", SNIFFERS)
def test_goodput_equals_bytes_the_receiver_acknowledged(s):
    want = _delivered(_fixture(s))
    assert len(want) == 2
    f = fairness(read_capture(f"{CAPS}/ns3-11n-ht20-hidden-sniffer{s}.pcap")).flows
    for (_, src, sport), n in want.items():
        row = f[(f["src"].astype(str) == src) & (f["sport"] == int(sport)) & (f["proto"] == "tcp")]
        assert row["goodput_bytes"].tolist() == [n]
        # inferred = acknowledged bytes no captured segment carried (A: 118,184 B of 1,112,576)
        assert (row["goodput_bytes"] - row["inferred_bytes"]).tolist()[0] <= row["bytes"].tolist()[0]
    if s == "A-nearAP":
        assert f["inferred_bytes"].sum() == 1112576 - 994392


def test_sniffer_that_hears_no_acks_infers_nothing():
    f = fairness(read_capture(f"{CAPS}/ns3-11n-ht20-hidden-snifferC-nearSTA2.pcap")).flows
    assert f["inferred_bytes"].sum() == 0


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")
@pytest.mark.parametrize("s", SNIFFERS)
def test_fixture_is_what_tshark_says(s):
    cmd = ["tshark", "-r", f"{CAPS}/ns3-11n-ht20-hidden-sniffer{s}.pcap", "-Y", "tcp",
           "-o", "tcp.relative_sequence_numbers:TRUE", "-T", "fields", "-E", "header=y", "-E", "separator=/t"]
    for f in FIELDS:
        cmd += ["-e", f]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    rows = list(csv.DictReader(out.splitlines(), delimiter="\t"))
    assert _delivered(rows) == _delivered(_fixture(s))


def test_holes_of_whole_fd_blocks_equal_the_gathered_table():
    # every row live, few fds: each payload fd's hole table is built on views of its block
    # of rows (holes._whole_fds); it must equal the table of the gathered rows
    from sniffsync.tcp.columns import Lazy
    from sniffsync.tcp.holes import _live_holes
    rng = np.random.default_rng(13)
    for _ in range(30):
        fd = np.sort(rng.integers(0, 8, 400))
        start = rng.integers(0, 5000, 400)
        plen = np.where(rng.random(400) < 0.7, rng.integers(1, 300, 400), 0)
        plen[fd % 2 == 1] = 0                              # the odd directions only ACK
        seg = Lazy({"fd": fd, "rel_seq": start, "seg_end": start + plen, "payload_len": plen})
        got = _live_holes(seg, np.ones(400, bool))
        pay = np.isin(fd, np.unique(fd[plen > 0]))
        want = hole_table(fd[pay], start[pay], (start + plen)[pay])
        for k in want:
            assert np.array_equal(got[k], want[k]), k
