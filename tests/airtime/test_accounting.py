"""Airtime accounting (airtime.accounting): utilisation and idle time per window, airtime by
sender and class, CTS/ACK attributed to their sender, aggregation and MCS per transmitter.

Oracles: a hand-worked exchange (numbers in the comments); on the ns-3 hidden-node capture of
sniffer A, tshark 4.0.17's 802.11 fields (fixture tests/data/tshark/): each CTS/ACK's sender
is the RA of the frame captured just before it when that frame's TA is the response's RA;
A-MPDUs per transmitter from radiotap.ampdu.reference; and a brute-force 1-µs timeline for
the union of PPDU intervals.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from airtime.accounting import airtime_by_sender, senders, station_windows, utilisation

DATA = Path(__file__).parents[1] / "data"
CAPTURE = DATA / "captures" / "ns3-11n-ht20-hidden-snifferA-nearAP.pcap"
US = 1000


def _ppdus(rows):
    """PPDU rows: (kind, ta, ra, start_us, end_us, n_mpdus, retries, mcs)."""
    d = pd.DataFrame(rows, columns=["kind", "ta", "ra", "s", "e", "n_mpdus", "retries", "mcs"])
    return pd.DataFrame({"ppdu": np.arange(len(d)), "sniffer": 0, "start_ns": d["s"] * US, "end_ns": d["e"] * US,
                         "airtime_ns": (d["e"] - d["s"]) * US, "ta": pd.array(d["ta"], "UInt64"),
                         "ra": pd.array(d["ra"], "UInt64"), "kind": d["kind"].astype("category"),
                         "n_mpdus": d["n_mpdus"], "retries": d["retries"], "mcs": pd.array(d["mcs"], "UInt8")})


def _exchange():
    return _ppdus([
        ("rts", 1, 2, 0, 50, 1, 0, None),
        ("cts", None, 1, 66, 110, 1, 0, None),        # 16 µs after the RTS to 1: sent by 2
        ("data", 1, 2, 126, 1126, 4, 1, 7),           # 4 MPDUs, one a retry
        ("data", 3, 2, 1000, 1500, 1, 0, 3),          # hidden station 3 overlaps it
        ("ba", 2, 1, 1142, 1174, 1, 0, None),
        ("ack", None, 3, 1600, 1644, 1, 0, None),     # 100 µs after the last PPDU: nobody's
    ])


def test_hand_worked_exchange():
    p = _exchange()
    snd, attr = senders(p)
    assert list(snd) == [1, 2, 1, 3, 2, -1] and list(attr) == [False, True, False, False, False, False]
    u = utilisation(p, 1000 * US)
    # [0, 1 ms): 50 + 44 + (1000 - 126) = 968 µs; [1, 2 ms): 1000..1500 (the BA inside it) + 44 = 544 µs
    assert list(u["busy_ns"]) == [968 * US, 544 * US] and list(u["idle_ns"]) == [32 * US, 456 * US]
    ev = pd.DataFrame({"kind": ["overlap"], "ppdu": [2], "other_ppdu": [3]})
    a = airtime_by_sender(p, ev).set_index("sender")
    assert a.loc[1, "airtime_ns"] == 1050 * US and a.loc[1, "control_ns"] == 50 * US
    assert a.loc[1, "data_ns"] == 1000 * US and a.loc[1, "retried_ns"] == 250 * US      # 1 of 4 MPDUs
    assert a.loc[1, "collided_ns"] == 1000 * US and a.loc[3, "collided_ns"] == 500 * US
    assert a.loc[2, "control_ns"] == 76 * US and a.loc[2, "responses_attributed"] == 1
    assert a.loc[-1, "airtime_ns"] == 44 * US
    w = station_windows(p, 1000 * US)
    assert list(zip(w["window"], w["ta"], w["mpdus_per_ampdu_mean"], w["mcs_median"])) == [(0, 1, 4, 7), (1, 3, 1, 3)]


@pytest.fixture(scope="module")
def ns3():
    from airtime.ppdu import group_ppdus
    from sniffsync.decode.frames import read_capture
    f = read_capture(str(CAPTURE))
    return group_ppdus(f)[0], pd.read_csv(DATA / "tshark" / (CAPTURE.name + ".tsv.gz"), sep="\t", dtype=str)


def test_responses_attributed_as_tshark_fields_say(ns3):
    p, ws = ns3
    prev = ws.shift(1)
    resp = ws["wlan.fc.type_subtype"].isin(["0x001c", "0x001d"]) & (prev["wlan.ta"] == ws["wlan.ra"])
    want = prev.loc[resp, "wlan.ra"].value_counts()
    assert want.sum() == 125                                  # 39 CTS + 86 ACK
    a = airtime_by_sender(p)
    from sniffsync.decode.macs import mac_texts
    got = pd.Series(a["responses_attributed"].to_numpy(), index=mac_texts(a["sender"].astype("UInt64")))
    got = got[got > 0]
    assert got.sort_index().to_dict() == want.sort_index().to_dict()


def test_utilisation_equals_a_microsecond_timeline(ns3):
    p, _ = ns3
    u = utilisation(p, 50_000 * US)
    t0 = int(p["start_ns"].min()) // (50_000 * US) * 50_000
    line = np.zeros(int(p["end_ns"].max()) // US - t0 + 1, bool)
    for s, e in zip(p["start_ns"] // US - t0, p["end_ns"] // US - t0):       # the oracle's own loop
        line[s:e] = True
    per = np.add.reduceat(line, np.arange(0, len(line), 50_000))
    assert list(u["busy_ns"] // US) == list(per) and len(u) > 15
    assert (u["busy_ns"] + u["idle_ns"] == 50_000 * US).all() and u["utilisation"].max() > 0.5


def test_ampdus_per_transmitter_as_tshark_says(ns3):
    p, ws = ns3
    data = ws[ws["wlan.fc.type_subtype"] == "0x0028"]
    ampdu = data.groupby(["wlan.ta", data["radiotap.ampdu.reference"].fillna("f" + data["frame.number"])]).size()
    per = ampdu.groupby(level=0).agg(["size", "max"])
    w = station_windows(p, 200_000 * US)
    from sniffsync.decode.macs import mac_texts
    w["sta"] = mac_texts(w["ta"].astype("UInt64"))
    g = w.groupby("sta").agg(n=("data_ppdus", "sum"), mx=("mpdus_per_ampdu_max", "max"))
    assert (g.loc[per.index, "n"] == per["size"]).all() and (g.loc[per.index, "mx"] == per["max"]).all()
    assert w.groupby("window")["ta"].nunique().max() == 3          # per transmitter, never pooled
