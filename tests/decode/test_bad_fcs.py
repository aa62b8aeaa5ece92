"""Frames that failed their FCS make no station, flow, PPDU or event; they are counted.

No capture at hand has bad-FCS frames (tshark: ``radiotap.flags.badfcs==1`` matches none in
tests/data or ../shared/captures), so the test builds one: the ns-3 hidden-node capture of
sniffer A plus corrupted copies of some of its data frames, each inserted right after its
original, with the radiotap Flags bad-FCS bit (0x40) set. Half of the copies keep their TA
(a plausible transmitter) and get their IP addresses and ports scrambled; the other half
also get a random TA. The oracle is the construction itself (how many copies, which TAs)
and the analysis of the untouched capture, which must come out identical.
"""
from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from airtime.detect import detect
from airtime.ppdu import group_ppdus
from sniffsync.decode.frames import read_capture
from sniffsync.decode.quality import bad_fcs_counts, good_fcs_mask
from sniffsync.tcp.frames import analyze_acks, classify_segments, flow_table, segments

CAP = Path(__file__).parents[1] / "data" / "captures" / "ns3-11n-ht20-hidden-snifferA-nearAP.pcap"
EVERY = 40                  # corrupt a copy of every 40th data frame
RT_FLAGS_AT = 16            # ns-3 radiotap: one present word with TSFT (at 8) and Flags (at 16)


def flows(frames):
    return flow_table(analyze_acks(classify_segments(segments(frames))))


def _records(data: bytes):
    pos = 24
    while pos < len(data):
        hdr = data[pos:pos + 16]
        caplen = struct.unpack_from("<I", hdr, 8)[0]
        yield hdr, data[pos + 16:pos + 16 + caplen]
        pos += 16 + caplen


def build(tmp_path: Path):
    """The capture with corrupted copies; returns (path, copies, copies that keep their TA)."""
    rng = np.random.default_rng(7)
    data = CAP.read_bytes()
    out, n_data, copies, plausible = [data[:24]], 0, 0, 0
    for hdr, rec in _records(data):
        out.append(hdr + rec)
        rt_len, present = struct.unpack_from("<HI", rec, 2)
        assert present & 0x80000003 == 0x3                     # the layout RT_FLAGS_AT assumes
        mac = rec[rt_len:]
        if len(mac) < 60 or (mac[0] >> 2) & 3 != 2:           # data frames with a body
            continue
        n_data += 1
        if n_data % EVERY:
            continue
        bad = bytearray(rec)
        bad[RT_FLAGS_AT] |= 0x40                               # Flags: bad FCS
        keep_ta = copies % 2 == 0
        if not keep_ta:                                        # address 2 (TA): random
            bad[rt_len + 10:rt_len + 16] = rng.integers(0, 256, 6, dtype=np.uint8).tobytes()
        body = rt_len + 26 + 8                                 # QoS header + LLC/SNAP: IPv4
        bad[body + 12:body + 24] = rng.integers(0, 256, 12, dtype=np.uint8).tobytes()  # IPs, ports
        out.append(hdr + bytes(bad))
        copies += 1
        plausible += keep_ta
    path = tmp_path / "with_bad_fcs.pcap"
    path.write_bytes(b"".join(out))
    return path, copies, plausible


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    path, copies, plausible = build(tmp_path_factory.mktemp("badfcs"))
    return read_capture(CAP), read_capture(path), copies, plausible, path


def test_corrupt_copies_are_marked(tables):
    good, mixed, copies, _, _ = tables
    assert copies >= 30
    assert len(mixed) == len(good) + copies
    assert int(mixed["fcs_bad"].sum()) == copies and not good["fcs_bad"].any()
    assert good_fcs_mask(mixed).sum() == len(good)


def test_no_ppdu_station_or_event_from_corrupt_frames(tables):
    good, mixed, _, _, _ = tables
    pg, pm = group_ppdus(good), group_ppdus(mixed)
    cols = [c for c in pg.ppdus.columns if c != "first_frame"]
    pd.testing.assert_frame_equal(pg.ppdus[cols], pm.ppdus[cols])
    bad = mixed["fcs_bad"].to_numpy(bool)
    assert (pm.frame_ppdu[bad] == -1).all()
    # first_frame still points at the PPDU's first frame in the mixed table
    assert (mixed["frame"].to_numpy()[pm.ppdus["first_frame"]] ==
            mixed["frame"].to_numpy()[~bad][pg.ppdus["first_frame"]]).all()
    dg, dm = detect(good, pg.ppdus, pg.frame_ppdu), detect(mixed, pm.ppdus, pm.frame_ppdu)
    pd.testing.assert_frame_equal(dg.events, dm.events)
    assert dg.stations["ta"].tolist() == dm.stations["ta"].tolist()
    assert dg.stations.drop(columns="fcs_bad").equals(dm.stations.drop(columns="fcs_bad"))


def test_no_flow_from_corrupt_frames(tables):
    good, mixed, _, _, _ = tables
    fg, fm = flows(good), flows(mixed)
    # (the endpoint categories may list the corrupt frames' addresses: no flow uses them)
    for c in ("src", "dst"):
        fg[c], fm[c] = fg[c].astype(str), fm[c].astype(str)
    pd.testing.assert_frame_equal(fg, fm)


def test_counts_per_sniffer_and_per_plausible_transmitter(tables):
    good, mixed, copies, plausible, _ = tables
    c = bad_fcs_counts(mixed)
    assert c[["sniffer", "frames", "fcs_checked", "fcs_bad", "fcs_bad_known_ta"]].values.tolist() == \
        [[0, len(mixed), len(mixed), copies, plausible]]
    pm = group_ppdus(mixed)
    st = detect(mixed, pm.ppdus, pm.frame_ppdu).stations
    assert int(st["fcs_bad"].sum()) == plausible
    # per station: the copies that kept its address
    bad = mixed[mixed["fcs_bad"].to_numpy(bool)]
    want = bad["ta"].value_counts()
    for ta, n in zip(st["ta"], st["fcs_bad"]):
        assert n == want.get(ta, 0)


def test_keep_bad_fcs_analyses_them(tables):
    good, mixed, copies, plausible, _ = tables
    pk = group_ppdus(mixed, keep_bad_fcs=True)
    assert (pk.frame_ppdu >= 0).all()
    st = detect(mixed, pk.ppdus, pk.frame_ppdu).stations
    n_good = len(detect(good, *group_ppdus(good)[:2]).stations)
    # the copies join their original's A-MPDU (same reference) or make PPDUs of their own;
    # a random TA heading a PPDU becomes a "station": what the analysis used to report
    assert int(pk.ppdus["n_mpdus"].sum()) == len(mixed)
    assert int(pk.ppdus["fcs_bad"].sum()) == copies
    assert len(st) > n_good
    # the TCP stage without the FCS verdict (what --keep-bad-fcs hands it)
    assert len(flows(mixed.drop(columns="fcs_bad"))) > len(flows(good))


@pytest.mark.tshark
@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")
def test_tshark_counts_the_same_bad_frames(tables):
    _, mixed, copies, _, path = tables
    out = subprocess.run(["tshark", "-r", str(path), "-T", "fields", "-e", "frame.number",
                          "-Y", "radiotap.flags.badfcs == 1"], capture_output=True, text=True, check=True)
    rows = [int(x) for x in out.stdout.split()]
    assert len(rows) == copies
    assert rows == mixed.loc[mixed["fcs_bad"].to_numpy(bool), "frame"].tolist()


def test_cli_detect_counts_and_keeps(tables, tmp_path, capsys):
    from sniffsync.cli.main import main
    import json
    _, _, copies, plausible, path = tables
    assert main(["detect", str(path), "-q", "--summary", str(tmp_path / "s.json")]) == 0
    out = capsys.readouterr().out
    assert f"bad FCS (not analysed): sniffer 0 {copies} of " in out
    rec = json.loads((tmp_path / "s.json").read_text())["summary"]["reception"]
    assert [(r["fcs_bad"], r["fcs_bad_known_ta"]) for r in rec] == [(copies, plausible)]
    st = json.loads((tmp_path / "s.json").read_text())["stations"]
    assert sum(s["fcs_bad"] for s in st) == plausible
    assert main(["detect", str(path), "-q", "--keep-bad-fcs", "--summary", str(tmp_path / "k.json")]) == 0
    assert "bad FCS (analysed: --keep-bad-fcs)" in capsys.readouterr().out
    assert len(json.loads((tmp_path / "k.json").read_text())["stations"]) > len(st)


# ---------------------------------------------------------------- MAC columns as text (item 7)
def test_other_ta_and_flow_ta_are_colon_hex(tables, tmp_path):
    from sniffsync.export.tables import write_table
    good = tables[0]
    ev = pd.DataFrame({"ta": pd.array([1], dtype="UInt64"),
                       "other_ta": pd.array([0x0A0B0C0D0E0F], dtype="UInt64")})
    write_table(ev, str(tmp_path / "ev.csv"))
    assert (tmp_path / "ev.csv").read_text().splitlines()[1] == '"00:00:00:00:00:01","0a:0b:0c:0d:0e:0f"'
    ta = flows(good)["ta"].tolist()
    assert set(ta) == {"00:00:00:00:00:01", "00:00:00:00:00:02", "00:00:00:00:00:03"}
