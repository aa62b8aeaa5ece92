"""TCP SACK blocks (option 5, RFC 2018) in the frame table's ``tcp_sack_blocks``.

Oracles: Wireshark 4.0.17's ``tcp.options.sack_le`` / ``sack_re`` (raw sequence numbers) of the
hand-built capture tests/data/captures/tcp/sack_hand.pcap (fixture tests/data/tshark_sack/, and
re-run live when tshark is installed), and hand-written option bytes.
"""
from __future__ import annotations

import struct
import subprocess
from io import StringIO

import numpy as np
import pandas as pd
import pytest

from sniffsync.decode.frames import read_capture
from sniffsync.decode.payload import ETH_IPV4, decode_l3
from frame_rows import DATA

CAPTURE = DATA / "captures" / "tcp" / "sack_hand.pcap"
FIXTURE = DATA / "tshark_sack" / "sack_hand.tsv"


def _tshark_blocks(ws: pd.DataFrame) -> list:
    """Per frame, tshark's blocks as our text ("LE-RE,..." in option order), None without."""
    out = []
    for le, re_ in zip(ws["tcp.options.sack_le"], ws["tcp.options.sack_re"]):
        out.append(None if pd.isna(le) else ",".join(f"{a}-{b}" for a, b in zip(le.split(","), re_.split(","))))
    return out


def _ours() -> list:
    f = read_capture(str(CAPTURE))
    tcp = f[f["tcp_seq"].notna()]
    return [None if pd.isna(v) else v for v in tcp["tcp_sack_blocks"]]


def test_sack_blocks_match_tshark_fixture():
    want = _tshark_blocks(pd.read_csv(FIXTURE, sep="\t", dtype=str))
    assert sum(w is not None for w in want) == 5 and "8001-9001,5001-7001" in want
    assert _ours() == want


@pytest.mark.tshark
def test_sack_blocks_match_live_tshark():
    out = subprocess.run(["tshark", "-n", "-r", str(CAPTURE), "-Y", "tcp", "-o", "tcp.relative_sequence_numbers:FALSE",
                          "-T", "fields", "-E", "header=y", "-E", "separator=/t",
                          "-e", "tcp.options.sack_le", "-e", "tcp.options.sack_re"],
                         capture_output=True, text=True, check=True).stdout
    assert _ours() == _tshark_blocks(pd.read_csv(StringIO(out), sep="\t", dtype=str))


def _ip_tcp(opts: bytes) -> bytes:
    tcp = struct.pack("!HHIIBBHHH", 1, 2, 100, 200, (20 + len(opts)) // 4 << 4, 0x10, 1000, 0, 0) + opts
    return struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 0, 0, 64, 6, 0, b"\x0a\0\0\1", b"\x0a\0\0\2") + tcp


def test_four_blocks_truncated_and_malformed_options():
    four = b"\x01\x01\x05\x22" + struct.pack("!8I", 10, 20, 30, 40, 50, 60, 4294967290, 5)     # 34 bytes + 2 NOP
    bad_len = b"\x05\x0b" + bytes(9) + b"\x00"                    # length 11: not 2 + 8k
    past_end = b"\x01\x01\x05\x12" + struct.pack("!2I", 7, 8)     # says 2 blocks, the header holds 1
    pkts = [_ip_tcp(four), _ip_tcp(bad_len), _ip_tcp(past_end), _ip_tcp(b"")]
    buf = np.frombuffer(b"".join(pkts), np.uint8)
    off = np.cumsum([0] + [len(p) for p in pkts[:-1]])
    end = off + np.array([len(p) for p in pkts])
    cols, _ = decode_l3(buf, off, end, np.full(len(pkts), ETH_IPV4, np.uint16))
    cat, ok = cols["tcp_sack_blocks"]
    assert list(ok) == [True, False, False, False]
    assert list(np.asarray(cat))[0] == "10-20,30-40,50-60,4294967290-5"
    assert list(cols["tcp_sack"][0]) == [True, True, True, False]      # option 5 present, blocks unusable
