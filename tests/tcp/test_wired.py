"""A wired capture joined to the 802.11 frames of a run (sniffsync.tcp.wired).

Oracle: a wired capture built in the test from tshark 4.0.17's fields of the ns-3 sniffer-A
capture (fixture tests/data/tshark/: IP addresses, IP ID, TCP ports, raw sequence number,
length and time of each packet's first 802.11 copy) with designed delays: every AP -> STA1
packet was on the wire 5 ms + q ms before the air (q = its index mod 7: the AP's queue),
every STA1 -> AP packet 3 ms + (index mod 3) ms after; the wired clock runs 40 s ahead.
"""
from __future__ import annotations

import struct
from decimal import Decimal

import numpy as np
import pandas as pd

from sniffsync.decode.frames import read_capture
from sniffsync.tcp.wired import join_wired, wired_summary
from frame_rows import DATA

MS = 1_000_000
OFFSET = 40_000 * MS


def _first_copies() -> pd.DataFrame:
    ws = pd.read_csv(DATA / "tshark" / "ns3-11n-ht20-hidden-snifferA-nearAP.pcap.tsv.gz", sep="\t", dtype=str)
    t = ws[ws["tcp.srcport"].notna() & ws["ip.id"].notna()].copy()
    t["t_ns"] = t["frame.time_epoch"].map(lambda x: int(Decimal(x) * 10**9))
    return t.drop_duplicates(["ip.src", "ip.dst", "ip.id", "tcp.seq_raw", "tcp.len"]).reset_index(drop=True)


def _write_wired(path, t: pd.DataFrame, wire_ns) -> None:
    with open(path, "wb") as fh:
        fh.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for r, tw in sorted(zip(t.to_dict("records"), wire_ns), key=lambda x: x[1]):
            plen = int(r["tcp.len"])
            tcp = struct.pack("!HHIIBBHHH", int(r["tcp.srcport"]), int(r["tcp.dstport"]),
                              int(r["tcp.seq_raw"]), 0, 5 << 4, 0x10, 65535, 0, 0)
            ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 40 + plen, int(r["ip.id"], 0), 0, 64, 6, 0,
                             bytes(map(int, r["ip.src"].split("."))), bytes(map(int, r["ip.dst"].split("."))))
            eth = b"\x02" * 6 + b"\x04" * 6 + b"\x08\x00" + ip + tcp       # headers only: cut by the snaplen
            fh.write(struct.pack("<IIII", int(tw) // 10**9, (int(tw) % 10**9) // 1000, len(eth), len(eth) + plen)
                     + eth)


def test_one_way_and_queueing_delay_as_designed(tmp_path):
    t = _first_copies()
    down = (t["ip.src"] == "10.1.1.1").to_numpy()
    i = np.arange(len(t))
    q = np.where(down, (i % 7) * MS, (i % 3) * MS)
    wire = np.where(down, t["t_ns"] - 5 * MS - q, t["t_ns"] + 3 * MS + q) + OFFSET
    _write_wired(tmp_path / "wired.pcap", t, wire)
    j = join_wired(read_capture(str(DATA / "captures" / "ns3-11n-ht20-hidden-snifferA-nearAP.pcap")),
                   read_capture(str(tmp_path / "wired.pcap")))
    assert len(j) == len(t)                                        # every packet found on both sides
    want = pd.DataFrame({"ip_id": t["ip.id"].map(lambda x: int(x, 0)), "seq": t["tcp.seq_raw"].astype(np.int64),
                         "src": t["ip.src"], "q": q, "down": down})
    got = j.merge(want.drop(columns="seq"), on=["src", "ip_id"], how="left")
    assert got["q"].notna().all()
    assert ((got["direction"] == "downlink") == got["down"]).all()
    # queueing delay = the designed q minus the direction's smallest (0 here), to the µs of pcap stamps
    assert (np.abs(got["queue_ns"] - got["q"]) < 1000).all()
    s = wired_summary(j)
    mx = s.groupby("direction")["queue_max_ms"].max()
    assert abs(mx["downlink"] - 6) < 1e-3 and abs(mx["uplink"] - 2) < 1e-3
    # the one-way delay keeps the clocks' offset: downlink 5..11 ms - 40 s, uplink 3..5 ms + 40 s
    dn, up = s[s["direction"] == "downlink"], s[s["direction"] == "uplink"]
    assert len(dn) == 2 and len(up) == 2                       # data and ACKs of both TCP flows
    assert dn["owd_p50_ms"].between(5 - 40_000 - 1e-3, 11 - 40_000 + 1e-3).all()
    assert up["owd_p50_ms"].between(3 + 40_000 - 1e-3, 5 + 40_000 + 1e-3).all()
