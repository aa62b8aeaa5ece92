"""ICMP echo RTTs (sniffsync.tcp.icmp) and the decoder's ICMP columns.

Oracles: Wireshark 4.0.17's ``icmp.resptime`` / ``icmpv6.resptime`` of a real loopback ping
capture (Linux answered; fixture tests/data/tshark_icmp/, re-run live when tshark is
installed), and hand-worked rows for retries, reuse and loss.
"""
from __future__ import annotations

import subprocess
from io import StringIO

import numpy as np
import pandas as pd
import pytest

from sniffsync.decode.frames import read_capture
from sniffsync.tcp.icmp import echo_rtts, echo_summary
from frame_rows import DATA

CAPTURE = DATA / "captures" / "icmp" / "ping_lo.pcapng"
FIXTURE = DATA / "tshark_icmp" / "ping_lo.tsv"


def _tshark(ws: pd.DataFrame) -> pd.DataFrame:
    """Per echo message: frame, type, id, seq (ICMP or ICMPv6 fields merged), resptime in ns."""
    out = pd.DataFrame({"frame": ws["frame.number"].astype(int),
                        "type": ws["icmp.type"].fillna(ws["icmpv6.type"]).astype(int),
                        "id": ws["icmp.ident"].fillna(ws["icmpv6.echo.identifier"]).map(lambda x: int(x, 0)),
                        "seq": ws["icmp.seq"].fillna(ws["icmpv6.echo.sequence_number"]).astype(int)})
    rt = pd.to_numeric(ws["icmp.resptime"].fillna(ws["icmpv6.resptime"]))      # ms
    out["rtt_ns"] = (rt * 1e6).round()
    return out


def _check(ws: pd.DataFrame) -> None:
    want = _tshark(ws)
    f = read_capture(str(CAPTURE))
    # the decoder's columns equal tshark's type, identifier and sequence number
    got_cols = f.set_index("frame").loc[want["frame"], ["icmp_type", "icmp_id", "icmp_seq"]]
    assert (got_cols.to_numpy(np.int64) == want[["type", "id", "seq"]].to_numpy()).all()
    e = echo_rtts(f)
    replies = want.dropna(subset=["rtt_ns"])
    assert len(replies) == 24 and len(e) == 25
    ours = e[e["reply_frame"] >= 0].set_index("reply_frame")["rtt_ns"]
    assert dict(ours) == {int(k): int(v) for k, v in replies.set_index("frame")["rtt_ns"].items()}
    lost = e[e["rtt_ns"] < 0]
    assert list(lost["request_frame"]) == [49] and list(lost["icmp_id"]) == [0x4321]
    assert e["v6"].sum() == 12


def test_echo_rtts_match_tshark_fixture():
    _check(pd.read_csv(FIXTURE, sep="\t", dtype=str))


@pytest.mark.tshark
def test_echo_rtts_match_live_tshark():
    cmd = ["tshark", "-r", str(CAPTURE), "-T", "fields", "-E", "header=y", "-E", "separator=/t"]
    for f in ("frame.number", "icmp.type", "icmpv6.type", "icmp.ident", "icmp.seq", "icmpv6.echo.identifier",
              "icmpv6.echo.sequence_number", "icmp.resptime", "icmpv6.resptime"):
        cmd += ["-e", f]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    _check(pd.read_csv(StringIO(out), sep="\t", dtype=str))


def _rows(rows):
    """Frame rows from (ms, src, dst, type, id, seq)."""
    return pd.DataFrame({"frame": np.arange(1, len(rows) + 1), "ts_ns": [int(r[0] * 1e6) for r in rows],
                         "ip_src": [r[1] for r in rows], "ip_dst": [r[2] for r in rows],
                         "ip_proto": 1, "icmp_type": pd.array([r[3] for r in rows], "UInt8"),
                         "icmp_id": pd.array([r[4] for r in rows], "UInt16"),
                         "icmp_seq": pd.array([r[5] for r in rows], "UInt16")})


def test_retry_copies_reuse_and_loss_hand_worked():
    A, B = "10.0.0.1", "10.0.0.2"
    e = echo_rtts(_rows([
        (0, A, B, 8, 7, 1), (1, A, B, 8, 7, 1),     # request and its MAC retry copy: dated at 0 ms
        (30, B, A, 0, 7, 1), (31, B, A, 0, 7, 1),   # reply and a copy: the first one counts -> 30 ms
        (100, A, B, 8, 7, 2),                       # never answered
        (200, B, A, 0, 9, 3), (250, A, B, 8, 9, 3),  # a reply before its request answers nothing
        (290, B, A, 0, 9, 3),                       # ... this one does: 40 ms
        (300, A, B, 0, 7, 4)]))                     # an unsolicited reply is no request
    assert list(e["icmp_seq"]) == [1, 2, 3]
    assert list(e["rtt_ns"]) == [30_000_000, -1, 40_000_000]
    assert list(e["request_frame"]) == [1, 5, 7] and list(e["reply_frame"]) == [3, -1, 8]
    s = echo_summary(e, tcp_rtt_ns=[10_000_000, 20_000_000, -1])
    assert s["ping_requests"] == 3 and s["ping_replies"] == 2 and s["ping_loss_pct"] == pytest.approx(100 / 3)
    assert s["ping_p50_ms"] == 35 and s["tcp_rtt_p50_ms"] == 15 and s["ping_minus_tcp_p50_ms"] == 20


def test_no_icmp_gives_empty_table():
    assert echo_rtts(pd.DataFrame({"ts_ns": [1]})).empty
    assert np.isnan(echo_summary(echo_rtts(pd.DataFrame()))["ping_p50_ms"])
