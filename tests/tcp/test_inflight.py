"""Bytes in flight per flow direction (sniffsync.tcp.inflight).

Oracles: hand-worked segments; Wireshark 4.0.17's ``tcp.analysis.bytes_in_flight`` of the
ns-3 hidden-node capture of sniffer B (fixture tests/data/tshark_tcp/, and re-run live when
tshark is installed): its per-direction median, p95 and maximum computed straight from
tshark's values.
"""
from __future__ import annotations

import os
import subprocess
from io import StringIO

import pandas as pd
import pytest

from sniffsync.decode.frames import read_capture
from sniffsync.tcp.frames import segments
from sniffsync.tcp.inflight import inflight_stats, inflight_table
from frame_rows import ACK, CAPS, DATA, SYN, A, B, make_frames

CAPTURE = os.path.join(CAPS, "ns3-11n-ht20-hidden-snifferB-nearSTA1.pcap")
FIXTURE = DATA / "tshark_tcp" / "ns3-hidden-snifferB-nearSTA1.tsv"


def test_hand_worked_in_flight():
    # data [1,1001) [1001,2001) [2001,3001); ACK 1001 at 3.5 ms; then [3001,4001):
    # in flight 1000, 2000, 3000, then 4001 - 1001 = 3000; the SYN gives no sample
    back = {"src": B, "dst": A, "sport": 5001, "dport": 40000}
    rows = [{"t_ms": 0, "seq": 0, "flags": SYN},
            {"t_ms": 0.5, **back, "seq": 100, "ack": 1, "flags": SYN | ACK},
            {"t_ms": 1, "seq": 1, "ack": 101, "len": 1000}, {"t_ms": 2, "seq": 1001, "ack": 101, "len": 1000},
            {"t_ms": 3, "seq": 2001, "ack": 101, "len": 1000},
            {"t_ms": 3.5, **back, "seq": 101, "ack": 1001},
            {"t_ms": 4, "seq": 3001, "ack": 101, "len": 1000}]
    s = inflight_table(make_frames(rows))
    assert list(s["bytes_in_flight"]) == [1000, 2000, 3000, 3000]
    assert list(s["ts_ns"]) == [1_000_000, 2_000_000, 3_000_000, 4_000_000]
    st = inflight_stats(s).iloc[0]
    assert st["inflight_samples"] == 4 and st["inflight_p50_bytes"] == 2500
    assert st["inflight_max_bytes"] == 3000 and st["inflight_p95_bytes"] == 3000


def _tshark_quantiles(ws: pd.DataFrame) -> pd.DataFrame:
    v = ws.dropna(subset=["tcp.analysis.bytes_in_flight"])
    b = pd.to_numeric(v["tcp.analysis.bytes_in_flight"]).astype(float)
    g = b.groupby(v["ip.src"] + ":" + v["tcp.srcport"])
    return pd.DataFrame({"n": g.size(), "p50": g.quantile(0.5), "p95": g.quantile(0.95), "max": g.max()})


def _ours(dedup: bool) -> pd.DataFrame:
    f = read_capture(CAPTURE)
    s = inflight_table(f, dedup=dedup)
    st = inflight_stats(s)
    seg = segments(f, dedup=dedup).drop_duplicates("fd").set_index("fd")
    names = seg["src"].astype(str) + ":" + seg["sport"].astype(str)     # the direction's sender
    st.index = names.reindex(st["fd"]).to_numpy()
    return st


def test_per_direction_quantiles_match_tshark_fixture():
    ws = pd.read_csv(FIXTURE, sep="\t", dtype=str)
    want = _tshark_quantiles(ws)
    assert len(want) == 2 and want["n"].sum() > 1500
    got = _ours(dedup=False)                   # Wireshark keeps the MAC retry copies
    got = got.loc[want.index]
    assert (got["inflight_samples"].to_numpy() == want["n"].to_numpy()).all()
    for ours, theirs in (("inflight_p50_bytes", "p50"), ("inflight_p95_bytes", "p95"),
                         ("inflight_max_bytes", "max")):
        assert got[ours].to_numpy() == pytest.approx(want[theirs].to_numpy(), abs=1e-6)
    # de-duplicated (the default), each retry copy counts once: fewer samples, same maximum
    dd = _ours(dedup=True).loc[want.index]
    assert (dd["inflight_samples"] <= got["inflight_samples"]).all()
    assert dd["inflight_samples"].sum() == got["inflight_samples"].sum() - 67    # Wireshark's 67 copies
    assert (dd["inflight_max_bytes"] == got["inflight_max_bytes"]).all()


@pytest.mark.tshark
def test_per_direction_quantiles_match_live_tshark():
    out = subprocess.run(["tshark", "-n", "-r", CAPTURE, "-Y", "tcp", "-T", "fields", "-E", "header=y",
                          "-E", "separator=/t", "-e", "ip.src", "-e", "tcp.srcport",
                          "-e", "tcp.analysis.bytes_in_flight"],
                         capture_output=True, text=True, check=True).stdout
    want = _tshark_quantiles(pd.read_csv(StringIO(out), sep="\t", dtype=str))
    got = _ours(dedup=False).loc[want.index]
    assert got["inflight_p95_bytes"].to_numpy() == pytest.approx(want["p95"].to_numpy(), abs=1e-6)
    assert (got["inflight_samples"].to_numpy() == want["n"].to_numpy()).all()


def test_no_samples_without_the_receivers_acks():
    # sniffer C (near STA2) hears AP -> STA1 data but none of STA1's ACKs: no estimate
    # (Wireshark reports up to 303,105 bytes "in flight" there: every byte sent since its last reset)
    f = read_capture(os.path.join(CAPS, "ns3-11n-ht20-hidden-snifferC-nearSTA2.pcap"))
    assert inflight_table(f).empty
