"""The TCP analyses run one group of whole flow directions at a time
(sniffsync.tcp.columns.fd_slices, a lower peak on big captures): groups of a few rows
give the same segments, flows, RTT samples and fairness tables as one group of every row."""
from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

import sniffsync
from sniffsync.fairness import fairness
from sniffsync.tcp import columns
from sniffsync.tcp.frames import analyze_acks, classify_segments, flow_table, segments

CAP = os.path.join(os.path.dirname(__file__), "..", "data", "captures", "ns3-11n-ht20-hidden-sniffer{}.pcap")


def _analyse(frames):
    seg = analyze_acks(classify_segments(segments(frames)))
    res = fairness(frames)
    return {"seg": seg, "flows": flow_table(seg), "fl": res.flows, "windows": res.windows, "rtt": res.rtt}


@pytest.fixture(scope="module", params=["A-nearAP", "B-nearSTA1"])
def both(request):
    frames = sniffsync.read_capture(CAP.format(request.param))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(columns, "FD_CHUNK_ROWS", 1 << 40)
        whole = _analyse(frames)
        mp.setattr(columns, "FD_CHUNK_ROWS", 7)
        grouped = _analyse(frames)
    return whole, grouped


def test_fd_slices_hold_whole_flow_directions():
    fd = np.repeat(np.arange(5), [3, 9, 2, 2, 1])
    sl = columns.fd_slices(fd, 4)
    assert [(s.start, s.stop) for s in sl] == [(0, 3), (3, 12), (12, 16), (16, 17)]
    assert columns.fd_slices(fd[::-1], 4) == [slice(0, 17)]          # not sorted: one group


def test_grouped_analysis_equals_whole_table(both):
    whole, grouped = both
    assert len(columns.fd_slices(whole["seg"]["fd"].to_numpy(), 7)) >= 3       # several groups ran
    seg = whole["seg"]
    # the grouped paths had work: bytes inferred across holes, or MPDU retries that date goodput later
    assert (whole["fl"]["inferred_bytes"] > 0).any() or (seg["deliver_ns"] != seg["ts_ns"]).any()
    for name in whole:
        pd.testing.assert_frame_equal(whole[name], grouped[name], check_exact=True)
