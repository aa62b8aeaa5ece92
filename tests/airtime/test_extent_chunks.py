"""Block-Ack evidence (airtime.extent_ba): its numpy answers (BaAnswers) are those of
airtime.blockack.acked_in_block_ack, whose results the Block-Ack bitmap tests check against
tshark; its windows as 64-bit masks count what the per-position code they replaced counted."""
from __future__ import annotations

import os
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

import airtime.extent_ba as B
from airtime.blockack import acked_in_block_ack
from sniffsync import read_capture

import extent_ba_reference as reference

CAP = os.path.join(os.path.dirname(__file__), "..", "data", "captures", "ns3-11n-ht20-hidden-snifferA-nearAP.pcap")


HIDDEN = [CAP] + [CAP.replace("snifferA-nearAP", n) for n in ("snifferB-nearSTA1", "snifferC-nearSTA2")]
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


def _unpack(masks):
    return ((np.asarray(masks, np.uint64)[:, None] >> np.arange(64, dtype=np.uint64)) & np.uint64(1)).astype(bool)


def test_window_masks_are_the_answers_per_position():
    """A window's 64 bits read from the bitmap's words at once = the answers position by
    position, on every Block-Ack variant, around the SSN and wrapping past 4095."""
    offsets = np.array([-70, -64, -5, 0, 1, 7, 63, 64, 65, 200, 1000, 2047, 4031, 4032, 4033, 4090, 4095])
    for cap in (CAP, *VARIANTS):
        frames = read_capture(cap)
        ba, _ = _queries(frames)
        ba = np.unique(ba)
        ssn = frames["ba_ssn"].to_numpy(np.int64, na_value=0)[ba]
        ba, base = np.repeat(ba, len(offsets)), (np.repeat(ssn, len(offsets)) + np.tile(offsets, len(ssn))) % 4096
        for table in (frames, frames.drop(columns="ba_info")):
            acked = B.BaAnswers(table)
            want = acked(np.repeat(ba, 64), ((base[:, None] + np.arange(64)) % 4096).reshape(-1)).reshape(-1, 64)
            assert want.any() and (~want).any()
            assert np.array_equal(_unpack(acked.window(ba, base)), want)


@pytest.fixture(scope="module")
def tables():
    """``(frames, stamps)``: three sniffers in one table, and with a fifth of its frames dropped
    at random (cut A-MPDUs, missed Block-Acks), the last also with its sequence numbers moved to
    wrap; and copies of one sniffer's PPDUs on one clock."""
    frames = []
    for k, p in enumerate(HIDDEN):
        fr = read_capture(p)
        fr["sniffer"] = np.full(len(fr), k, fr["sniffer"].dtype)
        frames.append(fr)
    both = pd.concat(frames, ignore_index=True)
    rng = np.random.default_rng(17)
    out = [both]
    for _ in range(3):
        out.append(both[rng.random(len(both)) > 0.2].reset_index(drop=True))
    # sequence numbers wrapping past 4095 mid-capture (Block-Acks read from ba_ssn / ba_bitmap)
    wrapped = out[-1].drop(columns="ba_info")
    for name in ("seq", "ba_ssn"):
        wrapped[name] = (wrapped[name] + 3700) % 4096
    # copies on one clock (stamps marking PPDU ends, as in a merged table): sniffer A twice, each
    # missing other frames, rows interleaved by time, sniffer 1's first (a group's first frame
    # is not its first PPDU's)
    a = frames[0]
    two = [a[rng.random(len(a)) > 0.2].assign(sniffer=np.int8(k)) for k in (1, 0)]
    copies = pd.concat(two, ignore_index=True)
    copies = copies.iloc[np.argsort(copies["ts_ns"].to_numpy(), kind="stable")].reset_index(drop=True)
    return [(t, "capture") for t in out + [wrapped]] + [(copies, "end")]


@pytest.mark.parametrize("scan", [B.SENT_SCAN, 0])
def test_window_masks_count_what_positions_count(tables, scan, monkeypatch):
    """The missed-subframe count of 64-bit windows = the count position by position (the
    code it replaced, tests/airtime/extent_ba_reference.py), on real windows with random
    gaps; ``scan`` 0: every data PPDU with an earlier capture asked per position."""
    import airtime.extent as E
    from airtime.ppdu import group_ppdus
    monkeypatch.setattr(B, "SENT_SCAN", scan)
    seen = []

    def both(ctx, resp, group, need=None):
        got = B._missed_subframes(ctx, resp, group, need)
        assert np.array_equal(got, reference.missed_subframes(ctx, resp, group, need))
        seen.append(int(got.sum()))
        return got
    monkeypatch.setattr(E, "_missed_subframes", both)
    for frames, stamps in tables:
        group_ppdus(frames, stamps=stamps)
    assert len(seen) == len(tables) and all(seen)


@pytest.mark.parametrize("chunk", [B.FRAME_CHUNK, 5])
def test_sent_since_masks_are_the_answers_per_position(chunk, monkeypatch):
    """:func:`airtime.extent_ba._sent_bits` (a scan of the pair's PPDUs between two stamps) =
    the per-position search it replaces, on random PPDUs whose stamps often tie the bounds
    (a stamp equal to ``since`` or to a data PPDU's stamp less COPY_TOL_NS) and whose windows wrap."""
    from airtime.extent import PpduCols
    monkeypatch.setattr(B, "FRAME_CHUNK", chunk)                # (chunks: memory, not results)
    rng = np.random.default_rng(5)
    for _ in range(400):
        n = int(rng.integers(5, 40))
        rows = int(rng.integers(1, 2 * n))                      # PPDUs of 1-2 frames: seq ranges at the edges
        t = rng.integers(0, 12, n) * 1000                       # COPY_TOL_NS = 3 steps: ties
        ta, ra = rng.integers(0, 2, n), rng.integers(0, 2, n)
        z = np.zeros(n, np.int64)
        c = PpduCols(t, z.astype(bool), z, z, ta, ra, rng.integers(0, 2, n), z, None, z, z, z)
        fp = np.where(rng.random(rows) < 0.1, -1, rng.integers(0, n, rows))
        at = rng.choice([100, 4040, 4050, 4070])                # windows that wrap past 4095 or not
        seq = np.where(rng.random(rows) < 0.1, -1, (at + rng.integers(0, 80, rows)) % 4096)
        ctx = SimpleNamespace(fp=fp, seq=seq, c=c, rows=B.rows_by_ppdu(fp, seq, n))     # what the two read
        d = np.unique(rng.integers(0, n, 8))
        base = (at - 60 + rng.integers(0, 120, len(d))) % 4096
        since = np.where(rng.random(len(d)) < 0.2, np.iinfo(np.int64).min, t[rng.integers(0, n, len(d))])
        want = B._sent_positions(ctx, B._pair_codes(c), d, base, since)
        assert np.array_equal(B._sent_bits(ctx, d, base, since), want)
