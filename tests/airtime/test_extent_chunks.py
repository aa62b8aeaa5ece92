"""Block-Ack evidence (airtime.extent_ba): its numpy answers (BaAnswers) are those of
airtime.blockack.acked_in_block_ack, whose results the Block-Ack bitmap tests check against
tshark; windows listed in bounded chunks give the same PPDUs."""
from __future__ import annotations

import os

import numpy as np

import airtime.extent_ba as B
from airtime.blockack import acked_in_block_ack
from sniffsync import read_capture

CAP = os.path.join(os.path.dirname(__file__), "..", "data", "captures", "ns3-11n-ht20-hidden-snifferA-nearAP.pcap")


BA_FIX = os.path.join(os.path.dirname(CAP), "..", "tshark_ba")
# every Block-Ack variant (multi-STA all-ack and level 3, GCR, multi-TID, basic, BARs) and ns-3 multi-STA
VARIANTS = [os.path.join(BA_FIX, n) for n in ("hand_ba.pcap", "ns3-11ax-ulofdma-ap-multista.pcap")]


def _queries(frames):
    """Every Block-Ack frame x its window and beyond, plus repeats; BARs and data rows too."""
    ts = frames["type_subtype"].to_numpy(np.int64, na_value=-1)
    ba_rows = np.flatnonzero((ts == 0x19) | (ts == 0x18))[:60]
    ba_rows = np.concatenate([ba_rows, np.flatnonzero(ts == 0x28)[:3]])
    ssn = frames["ba_ssn"].to_numpy(np.int64, na_value=0)[ba_rows]
    ba = np.repeat(ba_rows, 72)
    seq = (np.repeat(ssn, 72) + np.tile(np.arange(-4, 68), len(ba_rows))) % 4096
    return np.concatenate([ba, ba[::3]]), np.concatenate([seq, seq[::3]])


def test_numpy_answers_are_acked_in_block_ack():
    for cap in (CAP, *VARIANTS):
        frames = read_capture(cap)
        ba, seq = _queries(frames)
        want = acked_in_block_ack(frames, ba, seq)
        assert want.any() and (~want).any()
        assert np.array_equal(B.BaAnswers(frames)(ba, seq), want)
        no_info = frames.drop(columns="ba_info")             # tables without ba_info
        assert np.array_equal(B.BaAnswers(no_info)(ba, seq), acked_in_block_ack(no_info, ba, seq))


def test_block_ack_windows_in_chunks_give_the_same_ppdus(monkeypatch):
    from airtime.ppdu import group_ppdus
    frames = read_capture(CAP)
    want = group_ppdus(frames).ppdus
    assert (want["extent_src"] == "ba_span").any()          # the path under test is taken
    monkeypatch.setattr(B, "WINDOW_CHUNK", 3)
    got = group_ppdus(frames).ppdus
    assert got.equals(want)
