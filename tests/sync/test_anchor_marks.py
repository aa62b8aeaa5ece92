"""A damaged IP/TCP header does not stop a frame being an anchor (its 802.11 key is
intact), so merge(columns=[...]) may skip the LLC/IP/TCP stages and anchor alike."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

import sniffsync.decode.payload as payload
from sniffsync.decode.frames import read_capture
from sniffsync.sync.anchors import PAYLOAD_MARKS, anchor_candidates
from sniffsync.sync.merge import NEEDED_COLUMNS

CUT = Path(__file__).resolve().parents[1] / "data" / "captures" / "ns3-hidden-cut" / "snifferA.pcap.gz"


def test_payload_marks_are_every_reason_the_payload_stages_give():
    # hand-built: an IPv4 header cut at 10 bytes; a whole IPv4 header (proto 6) + 6 TCP bytes
    ip = bytes([0x45, 0, 0, 46, 0, 0, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2])
    buf = np.frombuffer(ip[:10] + ip + bytes(6), np.uint8)
    _, marks = payload.decode_l3(buf, np.array([0, 10]), np.array([10, 36]), np.array([0x0800, 0x0800]))
    got = {why: sorted(np.asarray(rows).tolist()) for rows, why in marks}
    assert got == {PAYLOAD_MARKS[0]: [0], PAYLOAD_MARKS[1]: [1]}
    # and no other reason is written in the payload stages' source
    src = Path(payload.__file__).read_text()
    assert set(re.findall(r'marks\.append\(\([^,]+, "([^"]+)"\)\)', src)) == set(PAYLOAD_MARKS)


def test_a_payload_mark_keeps_the_anchor_any_other_mark_drops_it():
    df = read_capture(CUT, columns=list(NEEDED_COLUMNS))
    rows = np.flatnonzero(df["ta"].notna().to_numpy() & (df["type_subtype"].to_numpy() != 0x08))[:3]
    df = df.iloc[rows].reset_index(drop=True)
    assert df["bad"].isna().all()
    why = [None, PAYLOAD_MARKS[1], "802.11: header truncated"]
    df["bad"] = pd.Categorical(why)
    got, kind, _ = anchor_candidates(df, ["unique"])
    assert got.tolist() == [0, 1]
