"""End-to-end exactness: every frame-table column that tshark also decodes, on every frame.

Oracle: ``tshark -T fields`` (Wireshark 4.0.17) output committed as fixtures in
``tests/data/tshark/*.tsv.gz`` (``make_fixtures.sh`` holds the exact command), so
tshark is not needed at run time. ``MAPPING`` is declarative: our column -> the
tshark field(s) -> how tshark prints it. Null must match null (our null <-> tshark
empty) and values must be equal, on ALL frames.

Where tshark differs by definition or is wrong, ``OVERRIDES`` replaces tshark's value
on exactly the rows concerned, and each override *proves* the value it substitutes
from the raw record bytes (a slow pure-Python reader below, independent of sniffsync)
or from the standard. Nothing is skipped silently: every override states how many
rows it may touch per capture, and the test fails if that changes.
"""
from __future__ import annotations

import gzip
import struct
from decimal import Decimal
from fractions import Fraction
from functools import lru_cache
from pathlib import Path
from typing import Callable, NamedTuple

import pandas as pd
import pytest

DATA = Path(__file__).parents[1] / "data"
CAPTURES = DATA / "captures"
FIXTURES = DATA / "tshark"
NAMES = sorted(p.name[:-len(".tsv.gz")] for p in FIXTURES.glob("*.tsv.gz"))


# ---------------------------------------------------------------- tshark's printing
def INT(s):            # decimal, negative, or 0x-hex (tshark prints BASE_HEX fields as 0x..)
    return int(s, 0)


def BOOL(s):           # tshark 4.0 prints FT_BOOLEAN as 1/0
    return {"1": True, "0": False, "True": True, "False": False}[s]


def KBPS(s):           # radiotap.datarate is Mb/s as a float ("19.5")
    return int(Decimal(s) * 1000)


def MAC(s):            # colon-hex, first byte on air = most significant
    return int(s.replace(":", ""), 16)


def HEX(s):            # FT_BYTES: plain lowercase hex
    return s.lower()


def SSID(s):           # FT_BYTES hex; "<MISSING>" handled by an override
    return bytes.fromhex(s).decode("utf-8", "surrogateescape") if s != "<MISSING>" else s


def EPOCH_NS(s):       # "sec.nnnnnnnnn" -> integer ns, no float on the way
    sec, _, frac = s.partition(".")
    return int(sec) * 1_000_000_000 + int((frac + "000000000")[:9])


def STR(s):
    return s


class F(NamedTuple):
    field: str                       # tshark field name (fixture column)
    parse: Callable = INT
    table: dict | Callable | None = None   # code -> our value (declarative); unknown -> UNMAPPED
    when: tuple | None = None        # (field, value): use only where that field prints value


UNMAPPED = "<no oracle value for this code: extend the table from the spec>"

# radiotap.org MCS field, bandwidth: 0 = 20, 1 = 40, 2 = 20L, 3 = 20U (a 20 MHz PPDU)
HT_BW = {0: 20, 1: 40, 2: 20, 3: 20}
# radiotap.org VHT bandwidth: only the codes that name the whole channel width
VHT_BW = {0: 20, 1: 40, 4: 80, 11: 160}
# radiotap.org HE data5 bits 0-3: 0 = 20, 1 = 40, 2 = 80, 3 = 160/80+80 (4-15 are RUs)
HE_BW = {0: 20, 1: 40, 2: 80, 3: 160}
# HT/VHT: the short-GI flag; HE data5 bits 4-5: 0 = 0.8, 1 = 1.6, 2 = 3.2 us
SGI_NS = {0: 800, 1: 400}
HE_GI_NS = {0: 800, 1: 1600, 2: 3200}
CODING = {0: False, 1: True}       # 0 = BCC, 1 = LDPC
# IEEE 802.11-2020 Table 9-24 (BA/BAR type)
BA_TYPES = {0: "basic", 1: "extended_compressed", 2: "compressed", 3: "multi_tid",
            6: "gcr", 10: "glk_gcr", 11: "multi_sta"}

MAPPING: dict[str, list[F]] = {
    "frame": [F("frame.number")],
    "ts_ns": [F("frame.time_epoch", EPOCH_NS)],
    "caplen": [F("frame.cap_len")],
    "wirelen": [F("frame.len")],
    "tsft_us": [F("radiotap.mactime")],
    "rt_flags": [F("radiotap.flags")],
    "fcs_bad": [F("radiotap.flags.badfcs", BOOL)],
    "short_preamble": [F("radiotap.flags.preamble", BOOL)],
    "rate_kbps": [F("radiotap.datarate", KBPS)],
    "freq_mhz": [F("radiotap.channel.freq")],
    "chan_flags": [F("radiotap.channel.flags")],
    "signal_dbm": [F("radiotap.dbm_antsignal")],
    "noise_dbm": [F("radiotap.dbm_antnoise")],
    "antenna": [F("radiotap.antenna")],
    "mcs": [F("radiotap.mcs.index"), F("radiotap.vht.mcs.0"), F("radiotap.he.data_3.data_mcs")],
    # HT: NSS = MCS // 8 + 1 (802.11-2020 19.5, MCS 0-31 equal modulation); HE carries none
    "nss": [F("radiotap.mcs.index", INT, lambda m: m // 8 + 1), F("radiotap.vht.nss.0"),
            # HE data6 bits 0-3: NSTS, 0 = unknown (radiotap.org); NSS = NSTS without STBC
            F("radiotap.he.data_6.nsts", INT, lambda v: v or None, when=("radiotap.he.data_3.stbc", "0x0000"))],
    "bw_mhz": [F("radiotap.mcs.bw", INT, HT_BW), F("radiotap.vht.bw", INT, VHT_BW),
               F("radiotap.he.data_5.data_bw_ru_allocation", INT, HE_BW)],
    "gi_ns": [F("radiotap.mcs.gi", INT, SGI_NS), F("radiotap.vht.gi", INT, SGI_NS),
              F("radiotap.he.data_5.gi", INT, HE_GI_NS)],
    "ldpc": [F("radiotap.mcs.fec", INT, CODING), F("radiotap.vht.coding.0", INT, CODING),
             F("radiotap.he.data_3.coding", INT, CODING)],
    "stbc": [F("radiotap.mcs.stbc"), F("radiotap.vht.stbc", BOOL, int),
             F("radiotap.he.data_3.stbc")],
    # radiotap.org HE data1 bits 0-1 and data5 bits 8-9 (0 = unknown)
    "he_format": [F("radiotap.he.data_1.ppdu_format", INT, {0: "su", 1: "ext_su", 2: "mu", 3: "trig"})],
    "he_ltf_size": [F("radiotap.he.data_5.ltf_symbol_size", INT, {0: None, 1: 1, 2: 2, 3: 4})],
    "ampdu_ref": [F("radiotap.ampdu.reference")],
    "ampdu_last": [F("radiotap.ampdu.flags.last", BOOL, when=("radiotap.ampdu.flags.lastknown", "1"))],
    "type_subtype": [F("wlan.fc.type_subtype")],
    "fc_flags": [F("wlan.flags")],
    "to_ds": [F("wlan.fc.tods", BOOL)],
    "from_ds": [F("wlan.fc.fromds", BOOL)],
    "retry": [F("wlan.fc.retry", BOOL)],
    "protected": [F("wlan.fc.protected", BOOL)],
    "duration_us": [F("wlan.duration")],
    "aid": [F("wlan.aid")],
    "ra": [F("wlan.ra", MAC)],
    "ta": [F("wlan.ta", MAC)],
    "bssid": [F("wlan.bssid", MAC)],
    "sa": [F("wlan.sa", MAC)],
    "da": [F("wlan.da", MAC)],
    "seq": [F("wlan.seq")],
    "frag": [F("wlan.frag")],
    "tid": [F("wlan.qos.tid"), F("wlan.ba.basic.tidinfo")],   # QoS data, then BA/BAR control
    "amsdu": [F("wlan.qos.amsdupresent", BOOL)],
    "ba_type": [F("wlan.ba.control.ba_type", INT, BA_TYPES)],
    "ba_ssn": [F("wlan.fixed.ssc.sequence")],
    "ba_bitmap": [F("wlan.ba.bm", HEX)],
    "beacon_tsf_us": [F("wlan.fixed.timestamp")],
    "beacon_interval_tu": [F("wlan.fixed.beacon")],
    "ssid": [F("wlan.ssid", SSID)],
    "fcs": [F("wlan.fcs")],
    "ethertype": [F("llc.type")],
    "ip_src": [F("ip.src", STR), F("ipv6.src", STR)],
    "ip_dst": [F("ip.dst", STR), F("ipv6.dst", STR)],
    "ip_proto": [F("ip.proto"), F("ipv6.nxt")],
    "ip_len": [F("ip.len")],
    "ip_id": [F("ip.id")],
    "sport": [F("tcp.srcport"), F("udp.srcport")],
    "dport": [F("tcp.dstport"), F("udp.dstport")],
    "udp_len": [F("udp.length")],
    "tcp_seq": [F("tcp.seq_raw")],
    "tcp_ack": [F("tcp.ack_raw")],
    "tcp_flags": [F("tcp.flags")],
    "tcp_win": [F("tcp.window_size_value")],
    "tcp_payload_len": [F("tcp.len")],
    "tcp_mss": [F("tcp.options.mss_val")],
    "tcp_wscale": [F("tcp.options.wscale.shift")],
    "tcp_tsval": [F("tcp.options.timestamp.tsval")],
    "tcp_tsecr": [F("tcp.options.timestamp.tsecr")],
}


@lru_cache(maxsize=None)
def tshark_table(name: str) -> pd.DataFrame:
    with gzip.open(FIXTURES / f"{name}.tsv.gz", "rt", encoding="utf-8") as fh:
        return pd.read_csv(fh, sep="\t", dtype=str, keep_default_na=False, quoting=3)


def oracle(t: pd.DataFrame, column: str) -> list:
    """tshark's value of ``column`` per frame (None = tshark printed nothing)."""
    out = [None] * len(t)
    for src in MAPPING[column]:
        cells = t[src.field].tolist()
        gate = t[src.when[0]].tolist() if src.when else None
        for i, s in enumerate(cells):
            if out[i] is not None or s == "" or (gate is not None and gate[i] != src.when[1]):
                continue
            v = src.parse(s)
            if isinstance(src.table, dict):
                v = src.table.get(v, UNMAPPED)
            elif src.table is not None:
                v = src.table(v)
            out[i] = v
    return out


# ---------------------------------------------------------------- raw bytes (independent)
@lru_cache(maxsize=None)
def raw_records(name: str) -> list[tuple[int, bytes]]:
    """``[(linktype, record bytes)]`` by a slow, obvious pcap / pcapng walk."""
    data = (CAPTURES / name).read_bytes()
    out = []
    if data[:4] == b"\n\r\r\n":                       # pcapng (little-endian files only here)
        links, pos = [], 0
        while pos + 12 <= len(data):
            btype, blen = struct.unpack_from("<II", data, pos)
            if btype == 1:                             # IDB: linktype u16
                links.append(struct.unpack_from("<H", data, pos + 8)[0])
            elif btype == 6:                           # EPB: iface, ts hi/lo, caplen, len
                iface, _, _, caplen = struct.unpack_from("<IIII", data, pos + 8)
                out.append((links[iface], data[pos + 28: pos + 28 + caplen]))
            pos += blen
        return out
    magic = struct.unpack_from("<I", data)[0]
    endian = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
    link = struct.unpack_from(endian + "I", data, 20)[0]
    pos = 24
    while pos + 16 <= len(data):
        caplen = struct.unpack_from(endian + "I", data, pos + 8)[0]
        out.append((link, data[pos + 16: pos + 16 + caplen]))
        pos += 16 + caplen
    return out


def radiotap_present_bits(rec: bytes) -> set[int]:
    """Radiotap-namespace present bits over all chained words (radiotap.org).

    Bit 29 starts the next word in the radiotap namespace at bit 0 again, bit 30 in a
    vendor namespace; with bit 31 alone the next word continues the numbering (+32).
    """
    bits, pos, base, ns_radiotap = set(), 4, 0, True
    while True:
        word = struct.unpack_from("<I", rec, pos)[0]
        if ns_radiotap:
            bits |= {base + b for b in range(29) if word >> b & 1}
        if word >> 29 & 1:
            ns_radiotap, base = True, 0
        elif word >> 30 & 1:
            ns_radiotap, base = False, 0
        else:
            base += 32
        if not word >> 31 & 1:
            return bits
        pos += 4


def dot11(rec: bytes) -> bytes:
    """The 802.11 frame behind the radiotap header (it_len at bytes 2-3, LE)."""
    return rec[struct.unpack_from("<H", rec, 2)[0]:]


# ---------------------------------------------------------------- overrides
class Override(NamedTuple):
    column: str
    why: str
    rows: Callable      # (tshark table, name) -> list of row indices where tshark is overridden
    value: Callable     # (tshark table, name, row) -> the proven value (asserts its proof)
    counts: dict        # capture -> number of rows it must touch (0 when absent)


# IEEE 802.11-2020 Tables 19-27/19-28 (HT, equal modulation): N_DBPS of one stream,
# 20 and 40 MHz; rate = N_SS * N_DBPS / T_SYM with T_SYM 4.0 us (800 ns GI) or 3.6 us (400 ns)
HT_NDBPS = {20: [26, 52, 78, 104, 156, 208, 234, 260], 40: [54, 108, 162, 216, 324, 432, 486, 540]}


def ht_rate_kbps(mcs: int, bw_mhz: int, gi_ns: int) -> Fraction:
    return Fraction(HT_NDBPS[bw_mhz][mcs % 8] * (mcs // 8 + 1) * 1000) / Fraction(3600 if gi_ns == 400 else 4000, 1000)


def _rate_rows(t, name):
    return [i for i, s in enumerate(t["radiotap.datarate"]) if s and t["radiotap.present.rate"][i] == "0"]


def _rate_value(t, name, i):
    # Proof 1: the record's radiotap present words (all radiotap-namespace words) lack bit 2.
    link, rec = raw_records(name)[i]
    assert link == 127 and 2 not in radiotap_present_bits(rec), (name, i)
    # Proof 2: tshark's number is the HT rate of the MCS / bandwidth / GI it shows
    # (computed, not read), to its printed precision of 0.1 Mb/s.
    mcs, bw, gi = (int(t[f][i]) for f in ("radiotap.mcs.index", "radiotap.mcs.bw", "radiotap.mcs.gi"))
    exact = ht_rate_kbps(mcs, HT_BW[bw], SGI_NS[gi])
    assert abs(KBPS(t["radiotap.datarate"][i]) - exact) <= 50, (name, i, exact)
    return None


def _cf_end_rows(t, name):
    return [i for i, s in enumerate(t["wlan.fc.type_subtype"]) if s in ("0x001e", "0x001f")]


def _cf_end_ta(t, name, i):
    # 802.11-2020 9.3.1.9/9.3.1.10: CF-End (+CF-Ack) = FC(2) Duration(2) RA(6) BSSID (TA)(6) FCS.
    # tshark 4.0 shows address 2 only as wlan.bssid; it is the transmitter address.
    link, rec = raw_records(name)[i]
    frame = dot11(rec) if link == 127 else rec
    assert frame[0] & 0xFC in (0xE4, 0xF4), frame[:2].hex()      # type 1, subtype 14 / 15
    ta = int.from_bytes(frame[10:16], "big")
    assert ta == MAC(t["wlan.bssid"][i])
    return ta


def _addba_rows(t, name):
    return [i for i, (ts, ssn) in enumerate(zip(t["wlan.fc.type_subtype"], t["wlan.fixed.ssc.sequence"]))
            if ts == "0x000d" and ssn]


def _addba_ssn(t, name, i):
    # tshark also prints the Starting Sequence Control of an ADDBA Request (802.11-2020
    # 9.6.4.2: category 3 Block Ack, action 0; dialog token, BA parameter set, timeout,
    # then SSC). ba_ssn is the BA / BAR field only, so null here.
    link, rec = raw_records(name)[i]
    body = (dot11(rec) if link == 127 else rec)[24:]
    assert body[0] == 3 and body[1] == 0, body[:2].hex()
    assert int.from_bytes(body[7:9], "little") >> 4 == int(t["wlan.fixed.ssc.sequence"][i])
    return None


def _ssid_rows(t, name):
    return [i for i, s in enumerate(t["wlan.ssid"]) if s == "<MISSING>"]


# Fixed fields before the elements, by management subtype (802.11-2020 9.3.3)
FIXED_LEN = {0: 4, 1: 6, 2: 10, 3: 6, 4: 0, 5: 12, 8: 12}


def _ssid_value(t, name, i):
    link, rec = raw_records(name)[i]
    frame = dot11(rec) if link == 127 else rec
    subtype = frame[0] >> 4
    ie = 24 + FIXED_LEN[subtype]
    # Proof: the first element is the SSID element (ID 0) with length 0 (wildcard SSID)
    assert frame[ie:ie + 2] == b"\x00\x00", (name, i, frame[ie:ie + 2].hex())
    return ""


OVERRIDES = [
    Override(
        "rate_kbps",
        "tshark fills radiotap.datarate from the HT MCS table when the radiotap Rate field "
        "(bit 2) is absent; rate_kbps is the Rate field only (docs/columns.md), so null.",
        _rate_rows, _rate_value,
        {"fragattacks_ping_D_BP_bcast_ra-fromap.pcapng": 31, "tcpdump_ieee802.11_exthdr.pcap": 2,
         "ns3-11n-ht20-hidden-snifferA-nearAP.pcap": 2751,
         "ns3-11n-ht20-hidden-snifferB-nearSTA1.pcap": 2489,
         "ns3-11n-ht20-hidden-snifferC-nearSTA2.pcap": 1811}),
    Override(
        "ssid",
        "tshark prints a zero-length SSID element (wildcard, probe requests) as '<MISSING>'; "
        "the element is present and empty, so our value is ''.",
        _ssid_rows, _ssid_value,
        {"wltrace_trace.pcap": 3, "fragattacks_ping_D_BP_bcast_ra-fromap.pcapng": 4}),
    Override(
        "ta",
        "CF-End carries the transmitter in address 2 'BSSID (TA)'; tshark prints it as wlan.bssid only.",
        _cf_end_rows, _cf_end_ta,
        {"ns3-11ac-vht80-snifferA-s256.pcap": 4, "ns3-11ax-he80-snifferA-s256.pcap": 4,
         "ns3-11n-ht20-hidden-snifferA-nearAP.pcap": 4, "ns3-11n-ht20-hidden-snifferB-nearSTA1.pcap": 3,
         "ns3-11n-ht20-hidden-snifferC-nearSTA2.pcap": 3}),
    Override(
        "ba_ssn",
        "tshark's wlan.fixed.ssc.sequence also comes from ADDBA Request action frames; "
        "ba_ssn is the Block Ack / BAR starting sequence number only.",
        _addba_rows, _addba_ssn,
        {"fragattacks_ping_D_BP_bcast_ra-fromap.pcapng": 1, "ns3-11ac-vht80-snifferA-s256.pcap": 4,
         "ns3-11ax-he80-snifferA-s256.pcap": 4, "ns3-11n-ht20-hidden-snifferA-nearAP.pcap": 3,
         "ns3-11n-ht20-hidden-snifferB-nearSTA1.pcap": 2, "ns3-11n-ht20-hidden-snifferC-nearSTA2.pcap": 2}),
]


def expected(name: str, column: str) -> list:
    t = tshark_table(name)
    want = oracle(t, column)
    for ov in OVERRIDES:
        if ov.column != column:
            continue
        rows = ov.rows(t, name)
        assert len(rows) == ov.counts.get(name, 0), \
            f"override for {column} touches {len(rows)} rows of {name}, declared {ov.counts.get(name, 0)}"
        for i in rows:
            want[i] = ov.value(t, name, i)
    return want


# ---------------------------------------------------------------- ours
@lru_cache(maxsize=None)
def our_table(name: str) -> pd.DataFrame:
    frames = pytest.importorskip("sniffsync.decode.frames")
    return frames.read_capture(CAPTURES / name)


def ours(name: str, column: str) -> list:
    col = our_table(name)[column]
    vals = col.astype(object).tolist()
    out = []
    for v in vals:
        if v is None or v is pd.NA or (isinstance(v, float) and v != v):
            out.append(None)
        elif isinstance(v, (bytes, bytearray)):
            out.append(bytes(v).hex())
        else:
            out.append(v.item() if hasattr(v, "item") else v)
    return out


# ---------------------------------------------------------------- tests
def test_fixtures_cover_every_capture():
    caps = sorted(p.name for p in CAPTURES.iterdir() if p.suffix in (".pcap", ".pcapng"))
    assert caps == NAMES
    assert "4.0.17" in (FIXTURES / "TSHARK_VERSION").read_text()


def test_oracle_helpers():
    # hand-checked: "0.033371000" s -> 33_371_000 ns; 19.5 Mb/s -> 19500 kb/s
    assert EPOCH_NS("0.033371000") == 33_371_000
    assert EPOCH_NS("1620684289.436839396") == 1_620_684_289_436_839_396
    assert KBPS("19.5") == 19_500 and MAC("aa:bb:cc:dd:ee:ff") == 0xAABBCCDDEEFF
    # present words 0xa000402f (bits 0-3,5,14; 29 radiotap-ns next; 31 ext) then 0x00000820
    rec = bytes.fromhex("0000 1000 2f4000a0 20080000 0000 0000".replace(" ", ""))
    assert radiotap_present_bits(rec) == {0, 1, 2, 3, 5, 14, 11}


@pytest.mark.parametrize("name", NAMES)
def test_frame_count(name):
    assert len(our_table(name)) == len(tshark_table(name)) == len(raw_records(name))


@pytest.mark.parametrize("column", list(MAPPING))
@pytest.mark.parametrize("name", NAMES)
def test_column_matches_tshark(name, column):
    want = expected(name, column)
    got = ours(name, column)
    frames = tshark_table(name)["frame.number"].tolist()
    bad = [(frames[i], g, w) for i, (g, w) in enumerate(zip(got, want))
           if (g is None) != (w is None) or (g is not None and g != w)]
    assert not bad, (f"{len(bad)} of {len(want)} frames differ (frame, ours, tshark): "
                     + "; ".join(f"#{f}: {g!r} vs {w!r}" for f, g, w in bad[:8]))
