"""Detection on hand-built sequences (times worked by hand) and the window join vs a brute-force oracle."""
import dataclasses

import numpy as np
import pandas as pd
import pytest

from airtime.detect import detect
from airtime.match import match_in_window, overlapping_pairs
from sniffsync.decode.table import frame_table

AP, STA1, STA2 = 0x020000000003, 0x020000000001, 0x020000000002
US = 1000


@pytest.mark.parametrize("seed", range(4))
def test_match_in_window_vs_bruteforce(seed):
    rng = np.random.default_rng(seed)
    ka, kb = rng.integers(0, 5, 300), rng.integers(0, 5, 400)
    ta, tb = rng.integers(0, 10_000, 300), rng.integers(0, 10_000, 400)
    got = match_in_window(ka, ta, kb, tb, 10, 60)
    for i in range(300):
        cand = [j for j in range(400) if kb[j] == ka[i] and ta[i] + 10 <= tb[j] <= ta[i] + 60]
        if not cand:
            assert got[i] == -1
        else:   # the earliest qualifying time
            assert got[i] in cand and tb[got[i]] == min(tb[j] for j in cand)


def test_overlapping_pairs_vs_bruteforce():
    rng = np.random.default_rng(9)
    s = rng.integers(0, 1000, 200)
    e = s + rng.integers(1, 50, 200)
    i, j = overlapping_pairs(s, e)
    got = {tuple(sorted(p)) for p in zip(i.tolist(), j.tolist())}
    want = {(a, b) for a in range(200) for b in range(a + 1, 200) if s[a] < e[b] and s[b] < e[a]}
    assert got == want


def test_overlapping_pairs_refuse_a_pile_of_ppdus(monkeypatch):
    """Every PPDU stamped at one instant (a broken clock) would make ~n^2 / 2 pairs: a clear
    CaptureError instead of GBs (the crash corpus' all-corrupt capture took 35 s and 11 GB)."""
    import airtime.match as M
    from sniffsync.errors import CaptureError
    monkeypatch.setattr(M, "MAX_PAIRS_PER_INTERVAL", 0)         # (so a small pile is enough)
    s = np.zeros(2000, np.int64)
    with pytest.raises(CaptureError, match="overlapping PPDUs"):
        overlapping_pairs(s, s + 10)
    assert len(overlapping_pairs(s, s)[0]) == 0                   # zero-length: no pairs at all


def _tables(rows):
    """Frame table + PPDU table from (ppdu, kind, start_us, end_us, ta, ra, extra) rows, one frame per MPDU."""
    frames, ppdus = [], []
    for pid, kind, s_us, e_us, ta, ra, mp in rows:
        ppdus.append({"ppdu": pid, "start_ns": s_us * US, "end_ns": e_us * US, "ta": ta, "ra": ra,
                      "kind": kind, "n_mpdus": max(1, len(mp.get("seqs", [0]))), "first_frame": len(frames)})
        ts = {"rts": 0x1b, "cts": 0x1c, "ack": 0x1d, "ba": 0x19, "data": 0x28}[kind]
        for k, seq in enumerate(mp.get("seqs", [None])):
            frames.append({"ppdu": pid, "type": ts >> 4, "type_subtype": ts, "seq": seq, "tid": 0,
                           "retry": mp.get("retry", False), "ba_ssn": mp.get("ssn"), "ba_bitmap_lo": mp.get("bm"),
                           "ta": ta, "ra": ra, "freq_mhz": 5180})
    n = len(frames)
    cols = {"sniffer": (np.zeros(n), None), "frame": (np.arange(1, n + 1), None),
            "ts_ns": (np.zeros(n), None), "caplen": (np.ones(n), None), "wirelen": (np.ones(n), None),
            "linktype": (np.full(n, 127), None)}
    for c in ("type", "type_subtype", "seq", "tid", "ba_ssn", "ba_bitmap_lo", "ta", "ra", "freq_mhz"):
        v = [f[c] for f in frames]
        cols[c] = (np.array([0 if x is None else x for x in v], dtype=np.uint64), np.array([x is not None for x in v]))
    cols["retry"] = (np.array([f["retry"] for f in frames]), None)
    ft = frame_table(n, cols, [])
    p = pd.DataFrame(ppdus)
    p["ta"] = pd.array([None if v is None else v for v in p["ta"]], dtype="UInt64")
    p["ra"] = pd.array(p["ra"], dtype="UInt64")
    return ft, p, np.array([f["ppdu"] for f in frames])


def test_hidden_node_sequence():
    # STA2 (hidden from STA1) sends RTS to the AP; the AP answers CTS at 52+16 = 68 us.
    # STA1 sends its RTS at 60 us: it overlaps the AP's CTS, the AP never hears it -> no CTS.
    # STA2's 4-MPDU A-MPDU (seqs 10..13) gets a BA with bitmap 0b1011: seq 12 failed,
    # retried at 2 ms and acknowledged (fate retried_delivered). A later A-MPDU gets no BA.
    rows = [
        (0, "rts", 0, 52, STA2, AP, {}),
        (1, "cts", 68, 112, None, STA2, {}),
        (2, "rts", 60, 112, STA1, AP, {}),
        (3, "data", 128, 1128, STA2, AP, {"seqs": [10, 11, 12, 13]}),
        (4, "ba", 1144, 1176, AP, STA2, {"ssn": 10, "bm": 0b1011}),
        (5, "data", 2000, 2400, STA2, AP, {"seqs": [12], "retry": True}),
        (6, "ack", 2416, 2460, None, STA2, {}),
        (7, "data", 5000, 6000, STA2, AP, {"seqs": [14, 15]}),
    ]
    ft, p, fp = _tables(rows)
    res = detect(ft, p, fp)
    assert dataclasses.is_dataclass(res) and not isinstance(res, dict)
    ev = res.events
    by = {k: g for k, g in ev.groupby("kind", observed=True)}
    assert by["rts_unanswered"]["ppdu"].tolist() == [2]                 # STA2's RTS was answered
    coll = by["rts_cts_collision"]
    assert coll["ppdu"].tolist() == [2] and coll["other_ppdu"].tolist() == [1]
    assert int(coll["other_ta"].iloc[0]) == AP                          # CTS transmitter inferred
    failed = by["mpdu_failed"]
    assert failed["seq"].tolist() == [12] and failed["detail"].astype(str).tolist() == ["retried_delivered"]
    assert by["ba_missing"]["ppdu"].tolist() == [7]
    st = res.stations.set_index("ta")
    assert st.loc[STA1, "rts"] == 1 and st.loc[STA1, "cts_received"] == 0 and st.loc[STA1, "rts_cts_collisions"] == 1
    assert st.loc[STA2, "cts_received"] == 1
    mp = res.mpdus.sort_values(["start_ns", "seq"])
    assert mp["acked"].tolist() == [True, True, False, True, True]      # 10, 11, 12, 13, then 12 again


def test_failed_mpdu_never_retried_is_lost():
    rows = [(0, "data", 0, 500, STA1, AP, {"seqs": [1, 2]}),
            (1, "ba", 516, 548, AP, STA1, {"ssn": 1, "bm": 0b01})]
    ft, p, fp = _tables(rows)
    ev = detect(ft, p, fp).events
    f = ev[ev["kind"] == "mpdu_failed"]
    assert f["seq"].tolist() == [2] and f["detail"].astype(str).tolist() == ["lost"]


def test_ssn_wraps_modulo_4096():
    rows = [(0, "data", 0, 500, STA1, AP, {"seqs": [4094, 4095, 0, 1]}),
            (1, "ba", 516, 548, AP, STA1, {"ssn": 4094, "bm": 0b0111})]
    ft, p, fp = _tables(rows)
    ev = detect(ft, p, fp).events
    assert ev[ev["kind"] == "mpdu_failed"]["seq"].tolist() == [1]


def test_rts_collisions_list_no_pairs_without_an_unanswered_rts(monkeypatch):
    """The all-PPDU overlap pairs are only for unanswered RTS: none, none computed."""
    import types
    import airtime.detect as D

    def boom(*a):
        raise AssertionError("overlap pairs computed")
    monkeypatch.setattr(D, "overlapping_pairs", boom)
    n = 5
    air = types.SimpleNamespace(tx=np.zeros(n, np.int64), ta=np.zeros(n, np.int64), ra=np.zeros(n, np.int64),
                                start=np.zeros(n, np.int64), end=np.zeros(n, np.int64), p=np.arange(n))
    rts, partner = D._rts_collisions(air, np.zeros(0, np.int64), 1000)
    assert len(rts) == len(partner) == 0
