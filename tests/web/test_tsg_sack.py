"""SACK blocks in the time-sequence graph (viz.tsg), against Wireshark 4.0.17's
``tcp.options.sack_le`` / ``sack_re`` of the hand-built capture tests/data/captures/tcp/sack_hand.pcap
(fixture tests/data/tshark_sack/sack_hand.tsv): every block of every ACK of the reverse
direction, at the ACK's time, relative to the data direction's ISN."""
from __future__ import annotations

import numpy as np
import pandas as pd

from sniffsync.decode.frames import read_capture
from viz.tsg import TsgIndex
from frame_rows import DATA

CAPTURE = DATA / "captures" / "tcp" / "sack_hand.pcap"
FIXTURE = DATA / "tshark_sack" / "sack_hand.tsv"


def test_sack_blocks_of_the_graph_match_tshark():
    f = read_capture(str(CAPTURE))
    t0 = int(f["ts_ns"].min())
    g = TsgIndex(f, t0).graph("10.0.0.2:40000→10.0.0.1:5001")
    ws = pd.read_csv(FIXTURE, sep="\t", dtype=str)
    isn = int(ws["tcp.seq"].iloc[0])                           # the SYN's
    t_ns = ws["frame.time_epoch"].str.replace(".", "", regex=False).astype(np.int64) - t0     # 9 decimals: exact ns
    rows = ws["tcp.options.sack_le"].notna() & (ws["ip.src"] == "10.0.0.1")
    want = sorted((int(t), int(a) - isn, int(b) - isn) for t, le, re_ in
                  zip(t_ns[rows], ws["tcp.options.sack_le"][rows], ws["tcp.options.sack_re"][rows])
                  for a, b in zip(le.split(","), re_.split(",")))
    got = sorted(zip(g["sack"]["t_ns"], g["sack"]["le"], g["sack"]["re"]))
    assert len(want) == 7 and got == want
    assert (4001, 6001) in {(le, re_) for _, le, re_ in got}     # relative: the second block of the 3rd dup ACK
    # the two retransmissions tshark flags are the graph's red bars
    retx = ws["tcp.analysis.retransmission"].notna() & (pd.to_numeric(ws["tcp.len"]) > 0)
    assert sorted(int(s) - isn for s in ws["tcp.seq"][retx]) == \
        sorted(s for s, r in zip(g["data"]["seq"], g["data"]["retx"]) if r)


def test_no_sack_column_no_blocks():
    f = read_capture(str(CAPTURE)).drop(columns="tcp_sack_blocks")
    g = TsgIndex(f, int(f["ts_ns"].min())).graph("10.0.0.2:40000→10.0.0.1:5001")
    assert g["sack"] == {"t_ns": [], "le": [], "re": []} and len(g["data"]["seq"]) == 14
