"""Block-Ack evidence answered in bounded chunks (airtime.extent_ba._acked): the same answers
as one call of airtime.blockack.acked_in_block_ack, whose results the Block-Ack bitmap
tests check against tshark."""
from __future__ import annotations

import os

import numpy as np

import airtime.extent_ba as B
from airtime.blockack import acked_in_block_ack
from sniffsync import read_capture

CAP = os.path.join(os.path.dirname(__file__), "..", "data", "captures", "ns3-11n-ht20-hidden-snifferA-nearAP.pcap")


def test_block_ack_queries_in_chunks_answer_as_one_call(monkeypatch):
    frames = read_capture(CAP)
    ba_rows = np.flatnonzero(frames["type_subtype"].to_numpy(np.int64, na_value=-1) == 0x19)[:40]
    ssn = frames["ba_ssn"].to_numpy(np.int64, na_value=0)[ba_rows]
    ba = np.repeat(ba_rows, 72)
    seq = (np.repeat(ssn, 72) + np.tile(np.arange(-4, 68), len(ba_rows))) % 4096
    ba, seq = np.concatenate([ba, ba[::3]]), np.concatenate([seq, seq[::3]])     # repeated queries too
    want = acked_in_block_ack(frames, ba, seq)
    assert want.any() and (~want).any()
    monkeypatch.setattr(B, "QUERY_CHUNK", 7)
    assert np.array_equal(B._acked(frames, ba, seq), want)


def test_block_ack_windows_in_chunks_give_the_same_ppdus(monkeypatch):
    from airtime.ppdu import group_ppdus
    frames = read_capture(CAP)
    want = group_ppdus(frames).ppdus
    assert (want["extent_src"] == "ba_span").any()          # the path under test is taken
    monkeypatch.setattr(B, "WINDOW_CHUNK", 3)
    got = group_ppdus(frames).ppdus
    assert got.equals(want)


def test_unique_inverse_is_numpys():
    rng = np.random.default_rng(5)
    for key in (np.sort(rng.integers(0, 50, 300)), rng.integers(-9, 9, 200), np.zeros(0, np.int64)):
        u, inv = B._unique_inverse(key)
        wu, winv = np.unique(key, return_inverse=True)
        assert np.array_equal(u, wu) and np.array_equal(inv, winv.ravel())
