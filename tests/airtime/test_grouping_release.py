"""``group_ppdus(release=True)`` (the fairness command's grouping: the columns only its
first steps read are deleted before the extent estimate) gives the same PPDU table, frame
-> PPDU map and stamp decision as the grouping of an untouched table, on ns-3's cut
A-MPDUs (Block-Ack evidence, NAV and response sources) and a hidden-node sniffer; and
``mpdu_bytes`` in chunks of 97 rows is the same as in one pass. A column the extent starts
reading that :data:`airtime.ppdu.EXTENT_READS` does not list would fail here."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import airtime.framecols as F
import airtime.ppdu as P
from sniffsync.decode.frames import read_capture

CAPTURES = {"cut A": "tests/data/captures/ns3-hidden-cut/snifferA.pcap.gz",
            "cut B": "tests/data/captures/ns3-hidden-cut/snifferB.pcap.gz",
            "hidden A": "tests/data/captures/ns3-11n-ht20-hidden-snifferA-nearAP.pcap"}


@pytest.fixture(scope="module")
def tables(request):
    return {k: read_capture(str(request.config.rootpath / p)) for k, p in CAPTURES.items()}


@pytest.mark.parametrize("name, tsft_at", [("cut A", "auto"), ("cut B", "start"), ("hidden A", "auto")])
def test_released_grouping_is_the_grouping(tables, name, tsft_at):
    frames = tables[name]
    want = P.group_ppdus(frames, tsft_at)
    given = frames.copy()
    got = P.group_ppdus(given, tsft_at, release=True)
    assert set(given.columns) < set(frames.columns)          # it did free columns
    assert "tsft_us" not in given and "rate_kbps" not in given
    pd.testing.assert_frame_equal(got.ppdus, want.ppdus)
    np.testing.assert_array_equal(got.frame_ppdu, want.frame_ppdu)
    assert got.tsft_at == want.tsft_at
    assert (want.ppdus["extent_src"] != "captured").any() or name == "hidden A"   # the extent sources ran
    # the end stamps the fairness command computes from it = align_to_ppdu_end's
    aligned, _ = P.align_to_ppdu_end(frames, grouped=want)
    shift = P.ppdu_end_shift_ns(frames["sniffer"].to_numpy(np.int64), got)
    np.testing.assert_array_equal(frames["ts_ns"].to_numpy(np.int64) + shift, aligned["ts_ns"].to_numpy(np.int64))
    if tsft_at == "start":
        assert shift.any()


def test_mpdu_bytes_in_chunks(tables, monkeypatch):
    frames = tables["cut A"]
    want = P.mpdu_bytes(frames)
    monkeypatch.setattr(F, "MPDU_CHUNK", 97)
    np.testing.assert_array_equal(F.mpdu_bytes(frames), want)
    assert len(frames) > 97 * 3 and (want > 0).all()


@pytest.mark.parametrize("name, tsft_at, bad", [("cut A", "auto", False), ("cut B", "start", True)])
def test_deferred_grouping_is_the_grouping(tables, name, tsft_at, bad):
    """``group_ppdus(defer=True)``: the stamp decision and frame -> PPDU map at once, the
    same grouping from ``finish()`` (frames of bad FCS: the grouping of the others, mapped)."""
    frames = tables[name]
    if bad:
        frames = frames.copy()
        frames["fcs_bad"] = pd.array(np.arange(len(frames)) % 7 == 3, "boolean")
    want = P.group_ppdus(frames, tsft_at)
    pending = P.group_ppdus(frames.copy(), tsft_at, release=True, defer=True)
    assert isinstance(pending, P.Pending) and pending.tsft_at == want.tsft_at
    np.testing.assert_array_equal(pending.frame_ppdu, want.frame_ppdu)
    got = pending.finish()
    pd.testing.assert_frame_equal(got.ppdus, want.ppdus)
    np.testing.assert_array_equal(got.frame_ppdu, want.frame_ppdu)
    assert got.tsft_at == want.tsft_at and (want.frame_ppdu == -1).any() == bad
