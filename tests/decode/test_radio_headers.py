"""PPI, Prism and AVS headers against tshark (fixtures) and against the raw bytes (zlib CRC).

Captures in tests/data/captures/radio/: a real Prism capture (pypacker) and a real PPI
capture (packetnet), plus hand-built PPI (802.11n MAC+PHY, A-MPDU, bad FCS, TSF in ms,
aligned fields), AVS v1/v2 and AVS-in-Prism records (tests/decode/radio_bytes.py, field by
field). tshark 4.0.17's reading of each is in tests/data/tshark_radio/ (make_fixtures.sh).
"""
from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sniffsync.decode.crc import fcs_matches
from sniffsync.decode.frames import read_capture
from tests.decode import radio_bytes

DATA = Path(__file__).parents[1] / "data"
RADIO = DATA / "captures" / "radio"
FIXTURES = DATA / "tshark_radio"
NAMES = sorted(p.name for p in RADIO.glob("*.pcap"))

# wlan_radio.phy (Wireshark PHY codes) -> our phy values it allows
# (None: tshark names no PHY for an OFDM rate with no channel: 11a or 11g)
TSHARK_PHY = {4: {"dsss", "cck"}, 5: {"ofdm"}, 6: {"ofdm"}, 7: {"ht"}, None: {"ofdm", "unknown"}}


def tshark_table(name: str) -> pd.DataFrame:
    return pd.read_csv(FIXTURES / f"{name}.tsv", sep="\t", dtype=str, keep_default_na=False, quoting=3)


def ours(t: pd.DataFrame, col: str) -> list:
    return [None if pd.isna(v) else (v if isinstance(v, str) else int(v)) for v in t[col].astype(object)]


def theirs(t: pd.DataFrame, field: str, parse=int) -> list:
    return [parse(s) if s != "" else None for s in t[field]]


def records(name: str) -> list[bytes]:
    """Record bytes by a slow, obvious pcap walk (little-endian, microsecond pcap)."""
    data = (RADIO / name).read_bytes()
    out, pos = [], 24
    while pos < len(data):
        caplen = struct.unpack_from("<I", data, pos + 8)[0]
        out.append(data[pos + 16:pos + 16 + caplen])
        pos += 16 + caplen
    return out


def test_fixtures_cover_every_capture():
    assert sorted(p.name[:-4] for p in FIXTURES.glob("*.tsv")) == NAMES
    assert len(NAMES) == 5


def test_handbuilt_captures_are_the_committed_bytes():
    for name, (_lt, recs) in radio_bytes.build_all().items():
        assert records(name) == recs, name


@pytest.mark.parametrize("name", NAMES)
def test_columns_match_tshark(name):
    ts = tshark_table(name)
    df = read_capture(RADIO / name)
    assert len(df) == len(ts) and df["bad"].isna().all()
    # where the 802.11 frame starts: tshark's 802.11 fields agree
    assert ours(df, "type_subtype") == theirs(ts, "wlan.fc.type_subtype", lambda s: int(s, 16))
    ta = theirs(ts, "wlan.ta", lambda s: int(s.replace(":", ""), 16))   # (tshark: none for CF-End)
    assert [a for a, b in zip(ours(df, "ta"), ta) if b is not None] == [b for b in ta if b is not None]
    assert ours(df, "seq") == theirs(ts, "wlan.seq")
    assert ours(df, "tsft_us") == theirs(ts, "wlan_radio.timestamp")
    assert ours(df, "freq_mhz") == theirs(ts, "wlan_radio.frequency")
    assert ours(df, "short_preamble") == theirs(ts, "wlan_radio.short_preamble", lambda s: bool(int(s)))
    # signal / noise: the common header's (wlan_radio), else the MAC+PHY antenna 0 value
    for col, common, ant0 in (("signal_dbm", "wlan_radio.signal_dbm", "ppi.80211n-mac-phy.dbmant0.signal"),
                              ("noise_dbm", "wlan_radio.noise_dbm", "ppi.80211n-mac-phy.dbmant0.noise")):
        want = [c if c is not None else (a if a not in (None, -128) else None)
                for c, a in zip(theirs(ts, common), theirs(ts, ant0))]
        assert ours(df, col) == want, col
    phy = ours(df, "phy")
    for ph, code in zip(phy, theirs(ts, "wlan_radio.phy")):
        assert ph in TSHARK_PHY[code]
    # the legacy rate (tshark's data_rate is the HT rate on HT frames)
    rate = theirs(ts, "wlan_radio.data_rate", lambda s: int(Decimal(s) * 1000))
    assert [r for r, p in zip(ours(df, "rate_kbps"), phy) if p != "ht"] == \
        [r for r, p in zip(rate, phy) if p != "ht"]
    assert ours(df, "mcs") == theirs(ts, "ppi.80211n-mac-phy.mcs")
    nflags = theirs(ts, "ppi.80211n-mac.flags", lambda s: int(s, 16))
    agg = [f is not None and bool(f & 0x10) for f in nflags]
    assert ours(df, "ampdu_ref") == [a if g else None for a, g in
                                     zip(theirs(ts, "ppi.80211n-mac.ampdu_id", lambda s: int(s, 16)), agg)]
    assert ours(df, "ampdu_last") == [(not f & 0x20) if g else None for f, g in zip(nflags, agg)]
    assert ours(df, "bw_mhz")[:len(nflags)] == [None if f is None else (40 if f & 2 else 20) for f in nflags]
    assert ours(df, "gi_ns") == [None if f is None else (400 if f & 4 else 800) for f in nflags]
    if name.startswith(("packetnet", "handbuilt_ppi")):
        assert ours(df, "fcs_bad") == theirs(ts, "ppi.80211-common.flags.fcs-invalid", lambda s: bool(int(s)))


@pytest.mark.parametrize("name", [n for n in NAMES if "prism" in n or "avs" in n])
def test_fcs_of_headers_without_an_fcs_flag(name):
    """Prism / AVS say nothing of the FCS: our column against zlib's CRC-32 of each frame."""
    df = read_capture(RADIO / name)
    recs = records(name)
    mpdus = [r[h:] for r, h in zip(recs, df["rt_len"].astype(int))]
    assert df["fcs"].astype(int).tolist() == [struct.unpack("<I", m[-4:])[0] for m in mpdus]
    assert df["fcs_bad"].tolist() == [zlib.crc32(m[:-4]) != struct.unpack("<I", m[-4:])[0] for m in mpdus]
    assert df["mpdu_len"].tolist() == [len(m) for m in mpdus]


def test_real_prism_capture_carries_a_valid_fcs_on_every_frame():
    # tshark calls 54 of the 80 frames malformed: it assumes no FCS, so its element parser
    # runs into the 4 trailing bytes. Every one of them is the CRC-32 of the frame before it.
    df = read_capture(RADIO / "pypacker_packets_prism.pcap")
    assert len(df) == 80 and not df["fcs_bad"].any() and df["fcs"].notna().all()
    ts = tshark_table("pypacker_packets_prism.pcap")
    assert df["mpdu_len"].tolist() == theirs(ts, "prism.did.frmlen")    # frame length item: FCS included
    assert ours(df, "signal_dbm") == theirs(ts, "prism.did.rssi")


def test_fcs_matches_against_zlib():
    rng = np.random.default_rng(1)
    frames = [rng.integers(0, 256, k, dtype=np.uint8).tobytes() for k in (0, 3, 10, 100, 1500)]
    frames = [f + struct.pack("<I", zlib.crc32(f)) for f in frames]
    frames.append(frames[3][:-1] + bytes([frames[3][-1] ^ 1]))
    buf = np.frombuffer(b"".join(frames), np.uint8)
    stop = np.cumsum([len(f) for f in frames])
    start = stop - [len(f) for f in frames]
    assert fcs_matches(buf, start, stop).tolist() == [False, True, True, True, True, False]


def test_ppi_foreign_dlt_and_short_header_are_marked():
    f = radio_bytes.qos_data(9)
    recs = [radio_bytes.ppi([radio_bytes.common(rate=2)], dlt=1) + f, b"\x00\x00\x40\x00\x69"]
    buf = np.frombuffer(b"".join(recs), np.uint8)
    from sniffsync.decode.ppi import decode_ppi
    cols, hdr, fcs, marks = decode_ppi(buf, np.array([0, len(recs[0])]), np.array([len(recs[0]), len(buf)]))
    assert hdr.tolist() == [0, 0]
    assert sorted(why for _r, why in marks) == ["ppi: corrupt header", "ppi: inner link type not 802.11"]


@pytest.mark.tshark
@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")
def test_fixtures_are_tsharks_output(tmp_path):
    """Re-run the fixture script into a copy and compare (same tshark version only)."""
    ver = subprocess.run(["tshark", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    if ver != (FIXTURES / "TSHARK_VERSION").read_text().strip():
        pytest.skip("another tshark version")
    (tmp_path / "t").mkdir()
    shutil.copy(FIXTURES / "make_fixtures.sh", tmp_path / "t")
    shutil.copytree(RADIO, tmp_path / "captures" / "radio")
    subprocess.run(["sh", str(tmp_path / "t" / "make_fixtures.sh")], check=True, capture_output=True)
    for name in NAMES:
        assert (tmp_path / "t" / f"{name}.tsv").read_text() == (FIXTURES / f"{name}.tsv").read_text()


def test_radiotap_and_ppi_interfaces_in_one_pcapng(tmp_path):
    """Two radio link types in one file: each decoded by its own header, columns merged."""
    from sniffsync.io.writers import write_pcapng
    f = radio_bytes.qos_data(5)
    # radiotap: version 0, length 11, present bits 1 (Flags) and 2 (Rate); Flags 0x10 FCS, Rate 12 = 6 Mb/s
    rt = bytes.fromhex("00 00 0b 00 06 00 00 00 10 0c 00".replace(" ", "")) + f + radio_bytes.fcs(f)
    recs = [rt] + radio_bytes.ppi_records()[:2]
    data = np.frombuffer(b"".join(recs), np.uint8)
    off = np.concatenate([[0], np.cumsum([len(r) for r in recs])])
    path = tmp_path / "mixed.pcapng"
    write_pcapng(str(path), [{"name": "rt", "linktype": 127}, {"name": "ppi", "linktype": 192}],
                 np.array([0, 1, 1]), np.array([1, 2, 3]) * 10**9, data, off)
    t = read_capture(path)
    assert t["rt_len"].tolist() == [11, 32, 84]
    assert ours(t, "rate_kbps") == [6000, 24000, None]
    assert ours(t, "freq_mhz") == [None, 5180, 5180]
    assert ours(t, "mcs") == [None, None, 15]
    assert ours(t, "phy") == ["ofdm", "ofdm", "ht"]
    assert ours(t, "seq") == [5, 1, 2] and t["bad"].isna().all()
