"""802.11 MAC decoder: hand-built frames (hex, one comment per field) and tshark on real captures."""
from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sniffsync.decode.dot11 import decode_dot11
from sniffsync.decode.payload import decode_l3, decode_llc

CAPTURES = Path(__file__).parents[1] / "data" / "captures"
RA, TA, A3, A4 = "aabbccddeeff", "112233445566", "020000000003", "020000000004"
RA_I, TA_I, A3_I, A4_I = 0xAABBCCDDEEFF, 0x112233445566, 0x020000000003, 0x020000000004
LLC_IP = "aaaa03" "000000" "0800"   # LLC/SNAP: DSAP/SSAP AA AA, UI 03, OUI 0, ethertype IPv4


def h(s: str) -> bytes:
    return bytes.fromhex(s.replace(" ", ""))


# --- helpers shared with test_payload.py ---------------------------------------------

def frames_buffer(frames):
    """One uint8 buffer of back-to-back frames, with their start and end offsets."""
    blobs = [h(f) if isinstance(f, str) else f for f in frames]
    lens = np.array([len(b) for b in blobs], np.int64)
    end = np.cumsum(lens)
    return np.frombuffer(b"".join(blobs), np.uint8), end - lens, end


def load_capture(path):
    """buf, off (802.11 header), end, fcs_at_end, truncated of every record.

    Records are walked here (pcap or pcapng EPBs, either byte order) and radiotap is
    skipped by its it_len; the FCS flag is radiotap Flags 0x10.
    """
    data = Path(path).read_bytes()
    recs = []
    if data[:4] == b"\x0a\x0d\x0d\x0a":
        e = "<" if data[8:12] == b"\x4d\x3c\x2b\x1a" else ">"
        p = 0
        while p + 12 <= len(data):
            btype, blen = struct.unpack_from(e + "II", data, p)
            if btype == 6:                    # EPB: interface, ts hi, ts lo, caplen, origlen
                incl, orig = struct.unpack_from(e + "II", data, p + 20)
                recs.append((p + 28, incl, orig))
            p += blen
    else:
        e = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
        p = 24
        while p + 16 <= len(data):
            _, _, incl, orig = struct.unpack_from(e + "IIII", data, p)
            recs.append((p + 16, incl, orig))
            p += 16 + incl
    off, end, fcs, trunc = [], [], [], []
    for start, incl, orig in recs:
        it_len, present = struct.unpack_from("<HI", data, start + 2)
        q, word = 8, present
        while word & 0x80000000:              # chained present words
            word = struct.unpack_from("<I", data, start + q)[0]
            q += 4
        flags = 0
        if present & 2:
            if present & 1:                   # TSFT first, 8-byte aligned
                q = (q + 7) // 8 * 8 + 8
            flags = data[start + q]
        off.append(start + it_len)
        end.append(start + incl)
        fcs.append(bool(flags & 0x10))
        trunc.append(incl < orig)
    return (np.frombuffer(data, np.uint8), np.array(off, np.int64), np.array(end, np.int64),
            np.array(fcs), np.array(trunc))


def decode_all(buf, off, end, fcs, trunc=None):
    """802.11 + LLC + L3 columns as a DataFrame of pandas nullable columns (schema dtypes)."""
    from sniffsync.decode.schema import DTYPES
    from sniffsync.decode.table import nullable
    cols, llc_off, llc_end, marks = decode_dot11(buf, off, end, fcs, trunc)
    c2, l3 = decode_llc(buf, llc_off, llc_end)
    c3, m3 = decode_l3(buf, l3, llc_end, c2["ethertype"][0])
    cols.update(c2)
    cols.update(c3)
    df = pd.DataFrame({k: nullable(v, ok, DTYPES[k]) for k, (v, ok) in cols.items()})
    bad = np.full(len(off), None, object)
    for rows, why in marks + m3:
        bad[rows] = why
    df["bad"] = bad
    df["llc_off"] = llc_off - np.where(llc_off >= 0, off, 0)
    return df


def tshark_fields(path, fields, occurrence="a", limit=0):
    count = ["-c", str(limit)] if limit else []
    out = subprocess.run(["tshark", "-r", str(path), *count, "-o", "tcp.relative_sequence_numbers:FALSE",
                          "-T", "fields", "-E", f"occurrence={occurrence}", "-E", "aggregator=|"]
                         + [a for f in fields for a in ("-e", f)],
                         capture_output=True, text=True, check=True).stdout
    rows = [line.split("\t") for line in out.splitlines()]
    return {f: [r[i] for r in rows] for i, f in enumerate(fields)}


def write_pcap(path, frames, linktype=105):
    """Plain 802.11 (no radiotap, no FCS) pcap of the hand-built frames, for tshark."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, linktype))
        for i, fr in enumerate(frames):
            b = h(fr)
            f.write(struct.pack("<IIII", i, 0, len(b), len(b)) + b)


# --- hand-built frames ---------------------------------------------------------------

FRAMES = {
    "rts": "b400" "2c01" + RA + TA,                  # FC RTS (1/11); duration 300; RA; TA
    "cts": "c400" "1000" + RA,                       # FC CTS (1/12); duration 16; RA only
    "ack": "d400" "0000" + RA,                       # FC ACK (1/13); duration 0; RA only
    "ba_compressed": "9400" "0000" + RA + TA         # FC BA (1/9); duration; RA; TA
        + "0550"                                     # BA control: ack policy 1, type 2 (bits1-4), TID 5
        + "1001"                                     # SSC 0x0110 (LE): frag 0 (-> 8-byte bitmap), SSN 0x011 = 17
        + "0f00000000000080",                        # bitmap: ssn+0..3 and ssn+63 acked
    "ba_256": "9400" "0000" + RA + TA + "0400"       # BA type 2 compressed, TID 0
        + "1400"                                     # SSC: frag 4 (B2B1 = 2 -> 32-byte bitmap), SSN 1
        + "ff" * 31 + "01",                          # 256-bit bitmap
    "ba_basic": "9400" "0000" + RA + TA + "0030"     # BA control: type 0 basic, TID 3
        + "2000"                                     # SSC: SSN 2
        + "0100" "0000" "feff" + "0000" * 61,        # 64 x u16 fragment bitmaps: ssn+0 frag 0, ssn+2 frags 1-15
    "ba_multi_tid": "9400" "0000" + RA + TA + "0610"  # BA control: type 3 multi-TID, TID_INFO 1 (2 TIDs)
        + "0050" "1000" "0100000000000000"           # record 1: TID 5, SSN 1, bitmap
        + "0060" "2000" "0300000000000000",          # record 2: TID 6, SSN 2, bitmap
    "bar": "8400" "0000" + RA + TA                   # FC BAR (1/8)
        + "0470"                                     # BAR control: type 2 compressed, TID 7
        + "5000",                                    # SSC: SSN 5
    "ps_poll": "a400" "01c0" + RA + TA,              # FC PS-Poll (1/10); AID 1 | 0xC000; BSSID(RA); TA
    "ndpa": "5400" "2000" + RA + TA + "05" "00100000",  # FC NDPA (1/5); dur 32; RA; TA; token; STA info
    "trigger": "2400" "4000" + RA + TA + "00" * 8,   # FC Trigger (1/2); dur 64; RA; TA; common info
    "wrapper_rts": "7400" "1000" + RA                # FC control wrapper (1/7); dur 16; address 1
        + "b400" "00000000" + TA,                    # carried FC = RTS; HT control; carried TA
    "qos4_htc": "8883" "3000" + RA + TA + A3         # QoS data (2/8), to+from DS, +HTC/order; dur 48
        + "3012" + A4                                # seq ctl: frag 0, seq 0x123; address 4
        + "0500" "0000fcff"                          # QoS: TID 5; HT control
        + LLC_IP,
    "amsdu": "8801" "0000" + RA + TA + A3            # QoS data, to DS (BSSID=A1, SA=A2, DA=A3)
        + "4100"                                     # seq ctl: frag 1, seq 4
        + "8000"                                     # QoS: TID 0, A-MSDU present (bit 7)
        + A4 + TA + "0008"                           # subframe: DA, SA, length 8
        + LLC_IP,
    "beacon": "8000" "0000" "ffffffffffff" + TA + TA  # beacon (0/8); DA broadcast; SA; BSSID
        + "1000"                                     # seq 1
        + "0011223344556677"                         # timestamp 0x7766554433221100 us
        + "6400" "0104"                              # beacon interval 100 TU; capability
        + "0304" "01020304"                          # element 3 (DS param) walked over first
        + "0004" "74657374",                         # element 0 SSID "test"
    "probe_resp": "5000" "0000" + RA + TA + TA + "2000"  # probe response (0/5); seq 2
        + "0800000000000000" "c800" "0100"           # timestamp 8; interval 200 TU; capability
        + "0005" "6e6574c3a9",                       # SSID "neté" (UTF-8)
    "protected": "0841" "0000" + RA + TA + A3 + "0000" + "00" * 16,  # data, to DS, protected
    "null": "4801" "0000" + RA + TA + A3 + "0000",   # null data (2/4): no payload
    "rts_cut": "b400" "2c01" + RA + "1122",          # RTS truncated inside the TA
    "s1g_beacon": "1c00" "0000" + RA,                # extension frame (3/1)
}
ORDER = list(FRAMES)


@pytest.fixture(scope="module")
def hand():
    buf, off, end = frames_buffer([FRAMES[k] for k in ORDER])
    df = decode_all(buf, off, end, np.zeros(len(off), bool))
    df.index = ORDER
    return df


def test_type_subtype_wireshark_encoding(hand):
    expect = {"rts": 0x1B, "cts": 0x1C, "ack": 0x1D, "ba_compressed": 0x19, "bar": 0x18,
              "ps_poll": 0x1A, "ndpa": 0x15, "trigger": 0x12, "wrapper_rts": 0x1B,
              "qos4_htc": 0x28, "beacon": 0x08, "probe_resp": 0x05, "null": 0x24, "s1g_beacon": 0x31}
    for name, ts in expect.items():
        assert hand.type_subtype[name] == ts, name
    assert hand.subtype["wrapper_rts"] == 7        # outer subtype stays the wrapper


def test_control_addresses_and_duration(hand):
    assert hand.ra["rts"] == RA_I and hand.ta["rts"] == TA_I and hand.duration_us["rts"] == 300
    for name in ("cts", "ack"):
        assert hand.ra[name] == RA_I and pd.isna(hand.ta[name])
    assert hand.duration_us["cts"] == 16
    assert hand.ta["wrapper_rts"] == TA_I and hand.ra["wrapper_rts"] == RA_I
    for name in ("ndpa", "trigger"):
        assert (hand.ra[name], hand.ta[name]) == (RA_I, TA_I)
    assert pd.isna(hand.seq["rts"]) and pd.isna(hand.frag["ack"])     # no sequence control


def test_ps_poll_aid(hand):
    assert hand.aid["ps_poll"] == 1                 # 0xC001 & 0x3FFF
    assert pd.isna(hand.duration_us["ps_poll"])
    assert hand.bssid["ps_poll"] == RA_I


def test_block_ack_variants(hand):
    r = hand.loc["ba_compressed"]
    assert (r.ba_type, r.ba_ssn, r.tid) == ("compressed", 17, 5)
    assert r.ba_bitmap == "0f00000000000080"
    assert r.ba_bitmap_lo == 0x800000000000000F     # bit i acknowledges ssn+i
    r = hand.loc["ba_256"]
    assert r.ba_ssn == 1 and r.ba_bitmap == "ff" * 31 + "01" and r.ba_bitmap_lo == 2**64 - 1
    r = hand.loc["ba_basic"]
    assert (r.ba_type, r.ba_ssn, r.tid) == ("basic", 2, 3)
    assert len(r.ba_bitmap) == 256                  # 128 bytes as hex
    assert r.ba_bitmap_lo == 0b1                    # only ssn+0 has fragment 0 acked
    r = hand.loc["ba_multi_tid"]
    assert (r.ba_type, r.ba_n_tid, r.tid, r.ba_ssn) == ("multi_tid", 2, 5, 1)
    assert r.ba_bitmap == "0100000000000000"
    r = hand.loc["bar"]
    assert (r.ba_type, r.ba_ssn, r.tid) == ("compressed", 5, 7) and pd.isna(r.ba_bitmap)
    assert pd.isna(hand.ba_type["rts"])


def test_qos_data_four_address_htc(hand):
    r = hand.loc["qos4_htc"]
    assert (r.ra, r.ta, r.da, r.sa) == (RA_I, TA_I, A3_I, A4_I)
    assert pd.isna(r.bssid)
    assert (r.seq, r.frag, r.tid, r.amsdu, r.htc) == (0x123, 0, 5, False, True)
    assert r.llc_off == 36 and r.ethertype == 0x0800     # 24 + A4 6 + QoS 2 + HTC 4


def test_amsdu_first_subframe(hand):
    r = hand.loc["amsdu"]
    assert (r.bssid, r.sa, r.da, r.seq, r.frag) == (RA_I, TA_I, A3_I, 4, 1)
    assert r.amsdu and not r.htc
    assert r.llc_off == 26 + 14 and r.ethertype == 0x0800


def test_beacon_and_probe_response(hand):
    r = hand.loc["beacon"]
    assert (r.beacon_tsf_us, r.beacon_interval_tu, r.ssid) == (0x7766554433221100, 100, "test")
    assert (r.bssid, r.sa, r.da) == (TA_I, TA_I, 0xFFFFFFFFFFFF)
    r = hand.loc["probe_resp"]
    assert (r.beacon_tsf_us, r.beacon_interval_tu, r.ssid, r.seq) == (8, 200, "neté", 2)
    assert str(hand.ssid.dtype) == "category"


def test_no_payload_for_protected_null_control(hand):
    assert hand.protected["protected"] and hand.llc_off["protected"] == -1
    assert hand.llc_off["null"] == -1 and hand.llc_off["rts"] == -1
    assert pd.isna(hand.ethertype["protected"])


def test_truncated_header_marked(hand):
    r = hand.loc["rts_cut"]
    assert r.ra == RA_I and pd.isna(r.ta) and r.duration_us == 300
    assert r.bad == "802.11: header truncated"
    assert pd.isna(hand.bad["rts"])


def test_extension_frame_type_only(hand):
    r = hand.loc["s1g_beacon"]
    assert (r.type, r.subtype) == (3, 1)
    assert pd.isna(r.ra) and pd.isna(r.duration_us) and pd.isna(r.retry)


def test_fcs_stripped_only_when_captured():
    frame = h(FRAMES["ack"] + "deadbeef")
    buf, off, end = frames_buffer([frame, frame, frame[:8]])
    fcs = np.array([True, False, True])
    trunc = np.array([False, False, True])
    cols, *_ = decode_dot11(buf, off, end, fcs, trunc)
    val, ok = cols["fcs"]
    assert ok.tolist() == [True, False, False] and val[0] == 0xEFBEADDE   # u32 LE of de ad be ef
    assert cols["ra"][1].tolist() == [True, True, False]


def test_random_bytes_never_raise():
    rng = np.random.default_rng(1)
    buf = rng.integers(0, 256, 20000, dtype=np.uint8)
    off = np.sort(rng.integers(0, 19000, 500))
    end = np.minimum(off + rng.integers(0, 200, 500), len(buf))
    df = decode_all(buf, off, end, rng.random(500) < 0.5)
    assert len(df) == 500


@pytest.mark.tshark
def test_hand_frames_against_tshark(tmp_path, hand):
    path = tmp_path / "hand.pcap"
    write_pcap(path, [FRAMES[k] for k in ORDER])
    t = tshark_fields(path, ["wlan.fc.type_subtype", "wlan.ra", "wlan.ta", "wlan.fixed.ssc.sequence",
                             "wlan.ba.bm", "wlan.aid"])
    for i, name in enumerate(ORDER):
        ts = t["wlan.fc.type_subtype"][i].split("|")[-1]       # wrapper: carried frame last
        assert int(ts, 16) == hand.type_subtype[name], name
        if t["wlan.ta"][i] and name != "rts_cut":
            assert int(t["wlan.ta"][i].replace(":", ""), 16) == hand.ta[name], name
        if t["wlan.ba.bm"][i]:
            assert t["wlan.ba.bm"][i].split("|")[0] == hand.ba_bitmap[name], name
        if t["wlan.fixed.ssc.sequence"][i]:
            assert int(t["wlan.fixed.ssc.sequence"][i].split("|")[0]) == hand.ba_ssn[name], name
        if t["wlan.aid"][i]:
            assert int(t["wlan.aid"][i]) == hand.aid[name]


# --- real captures against tshark --------------------------------------------------------

def _mac(s):
    return int(s.replace(":", ""), 16)


def _hexssid(v):
    return "<MISSING>" if v == "" else v.encode().hex()


# our column -> (tshark field, parser, which rows to compare, occurrence index)
DOT11_FIELDS = {
    "type_subtype": ("wlan.fc.type_subtype", lambda s: int(s, 16), None, -1),
    "retry": ("wlan.fc.retry", lambda s: s in ("1", "True"), None, 0),
    "protected": ("wlan.fc.protected", lambda s: s in ("1", "True"), None, 0),
    "duration_us": ("wlan.duration", int, None, 0),
    "aid": ("wlan.aid", int, None, 0),
    "ra": ("wlan.ra", _mac, None, 0),
    # tshark names A2 of CF-End only "bssid"; 802.11-2020 9.3.1.7 calls it TA (BSSID)
    "ta": ("wlan.ta", _mac, lambda d: ~d.type_subtype.isin([0x1E, 0x1F]), 0),
    "bssid": ("wlan.bssid", _mac, None, 0),
    "sa": ("wlan.sa", _mac, None, 0),
    "da": ("wlan.da", _mac, None, 0),
    "seq": ("wlan.seq", int, None, 0),
    "frag": ("wlan.frag", int, None, 0),
    "tid": ("wlan.qos.tid", int, lambda d: d.type == 2, 0),          # BA TID checked by hand
    # ADDBA action frames also carry an SSC: ba_ssn is for BA/BAR only
    "ba_ssn": ("wlan.fixed.ssc.sequence", int, lambda d: d.type == 1, 0),
    "ba_bitmap": ("wlan.ba.bm", str, None, 0),
    "beacon_tsf_us": ("wlan.fixed.timestamp", int, None, 0),
    "ssid": ("wlan.ssid", str, None, 0),
    "fcs": ("wlan.fcs", lambda s: int(s, 16), None, 0),
}
CAPTURE_FILES = sorted(p.name for p in CAPTURES.glob("*.pcap*"))
TSHARK_FRAMES = 4000       # per capture: keeps tshark under ~1 s per file


def compare_with_tshark(path, fields, limit=TSHARK_FRAMES):
    """List of (column, frame, tshark, ours) mismatches over the first ``limit`` frames."""
    df = decode_all(*load_capture(path)).iloc[:limit]
    t = tshark_fields(path, [f[0] for f in fields.values()], limit=limit)
    assert len(t[next(iter(t))]) == len(df)
    bad = []
    for col, (fld, parse, rows, occ) in fields.items():
        use = np.ones(len(df), bool) if rows is None else pd.Series(rows(df)).fillna(False).to_numpy(bool)
        name = col.split("#")[0]           # 'sport#udp': same column, another tshark field
        ours = df[name].astype(object).where(df[name].notna(), None).tolist()
        for i in np.flatnonzero(use):
            s = t[fld][i]
            theirs = parse(s.split("|")[occ]) if s else None
            mine = ours[i]
            if name == "ssid" and mine is not None:
                mine = _hexssid(mine)
            if mine is not None and not isinstance(mine, (str, bool)):
                mine = int(mine)
            if theirs != mine:
                bad.append((col, i + 1, theirs, mine))
    return bad, df


@pytest.mark.tshark
@pytest.mark.parametrize("name", CAPTURE_FILES)
def test_captures_dot11_match_tshark(name):
    bad, df = compare_with_tshark(CAPTURES / name, DOT11_FIELDS)
    assert bad == [], bad[:10]
    assert df.type_subtype.notna().all()


def test_ns3_ba_bitmap_lo_matches_python_oracle():
    # ns-3 HT capture: every BA is compressed with a 64-bit bitmap; ba_bitmap_lo must be the
    # little-endian value of the hex bitmap, computed here by a slow obviously-correct loop.
    df = decode_all(*load_capture(CAPTURES / "ns3-11n-ht20-hidden-snifferA-nearAP.pcap"))
    ba = df[df.type_subtype == 0x19]
    assert len(ba) > 50
    assert (ba.ba_type == "compressed").all()
    assert (ba.ba_bitmap.str.len() == 16).all()
    oracle = [int.from_bytes(bytes.fromhex(b)[:8], "little") for b in ba.ba_bitmap]
    assert [int(v) for v in ba.ba_bitmap_lo] == oracle
