"""Copies of a host-clock sniffer, hand-built: the designed answer is the oracle.

Sniffer 0 has TSFT (tight gate 3 µs); sniffer 1 is a host clock (gate 150 µs). Both hear
data 1 (end 100 µs), its ACK (144 µs), data 2 (200 µs) and its ACK (244 µs). Sniffer 1's
first ACK is stamped 90 µs late, 10 µs from the second ACK: by time alone it would join
the wrong ACK; its place -- the record after data 1, which sniffer 0 follows with ACK 1 --
puts it right.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from sniffsync.sync.copies import MERGE_KEY, match_copies

US = 1000


def _table(rows):
    n = len(rows)
    cols = {c: pd.array([r.get(c) for r in rows], "Int64") for c in MERGE_KEY}
    cols["sniffer"] = np.array([r["sniffer"] for r in rows], np.int16)
    cols["frame"] = np.array([r["frame"] for r in rows], np.int64)
    cols["ta"] = pd.array([r.get("ta") for r in rows], "UInt64")
    cols["ra"] = pd.array([r["ra"] for r in rows], "UInt64")
    cols["retry"] = pd.array([False] * n, "boolean")
    return pd.DataFrame(cols)


def _frames(sniffer, ack1_late_us):
    data = dict(type_subtype=0x28, mpdu_len=120, ta=1, ra=2, duration_us=44)
    ack = dict(type_subtype=0x1D, mpdu_len=14, ra=1, duration_us=0)
    out = []
    for k, (f, t) in enumerate(((dict(data, seq=1), 100), (ack, 144 + ack1_late_us),
                                (dict(data, seq=2), 200), (ack, 244))):
        out.append(dict(f, sniffer=sniffer, frame=k + 1, t=t * US))
    return out


def _match(place=True):
    rows = _frames(0, 0) + _frames(1, 90)
    df = _table(rows)
    if not place:                        # a table without the order: every frame its own
        df["frame"] = np.arange(len(df)) * 7 % 5 + 1
    t = np.array([r["t"] for r in rows], np.int64)
    clock = df["sniffer"].to_numpy(np.int64)
    return match_copies(df, t, np.ones(len(df), bool), 3 * US, clock=clock,
                        clock_gate_ns=np.array([3 * US, 150 * US]))


def test_ack_matched_through_its_place():
    g = _match()
    assert [g[0] == g[4], g[1] == g[5], g[2] == g[6], g[3] == g[7]] == [True] * 4
    assert len(set(g)) == 4


def test_by_time_alone_the_late_ack_is_lost():
    """The same frames without the record order: the late ACK loses ACK 2 to the on-time
    copy and stays alone (what the place rule prevents)."""
    g = _match(place=False)
    assert g[3] == g[7] and g[1] != g[5] and len(set(g)) == 5
