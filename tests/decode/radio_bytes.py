"""Hand-built PPI / AVS / Prism-wrapped-AVS records, field by field (no sniffsync code).

``build_all()`` gives ``{capture name: (linktype, [record bytes])}``;
``python -m tests.decode.radio_bytes`` writes them to tests/data/captures/radio/ (then
tests/data/tshark_radio/make_fixtures.sh records tshark's reading of them).
Layouts: CACE PPI spec v1.0 (802.11-Common, 802.11n MAC+PHY); wlan-ng AVS capture
header v1/v2 (big-endian); the 802.11 FCS is zlib's CRC-32 (the IEEE 802.3 one).
"""
from __future__ import annotations

import struct
import zlib
from pathlib import Path

A1, A2, A3 = bytes.fromhex("020000000001"), bytes.fromhex("020000000002"), bytes.fromhex("020000000003")


def fcs(frame: bytes) -> bytes:
    return struct.pack("<I", zlib.crc32(frame))


def qos_data(seq: int) -> bytes:
    """QoS data STA(A2) -> AP(A1), To DS, LLC/SNAP + IPv4 + UDP 10.0.0.2:40000 -> 10.0.0.1:5001."""
    mac = struct.pack("<BBH", 0x88, 0x01, 44) + A1 + A2 + A3 + struct.pack("<HH", seq << 4, 0)
    llc = bytes.fromhex("aaaa03000000 0800")
    udp = struct.pack(">HHHH", 40000, 5001, 12, 0) + b"abcd"
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), seq, 0, 64, 17, 0,
                     bytes([10, 0, 0, 2]), bytes([10, 0, 0, 1]))
    return mac + llc + ip + udp


def ack() -> bytes:
    return struct.pack("<BBH", 0xD4, 0, 0) + A2


def ppi(fields: list[tuple[int, bytes]], aligned: bool = False, dlt: int = 105) -> bytes:
    """PPI header: u8 version 0, u8 flags, u16 length, u32 DLT, then (type, data) fields."""
    body = b""
    for ftype, data in fields:
        body += struct.pack("<HH", ftype, len(data)) + data
        if aligned:
            body += bytes(-len(body) % 4)
    return struct.pack("<BBHI", 0, 1 if aligned else 0, 8 + len(body), dlt) + body


def common(tsf=0, flags=0x1, rate=0, freq=0, chan_flags=0, signal=-128, noise=-128) -> tuple:
    """802.11-Common (type 2): u64 TSF, u16 flags (1 FCS, 2 TSF in ms, 4 FCS bad), u16 rate
    (500 kb/s), u16 MHz, u16 channel flags, u8 hopset, u8 pattern, s8 dBm signal, s8 noise."""
    return 2, struct.pack("<QHHHHBBbb", tsf, flags, rate, freq, chan_flags, 0, 0, signal, noise)


def mac_phy(flags, ampdu_id, mcs, streams=0, sig0=-128, noise0=-128) -> tuple:
    """802.11n MAC+PHY (type 4, 48 bytes): u32 flags (1 greenfield, 2 HT40, 4 short GI,
    0x10 aggregate, 0x20 more aggregates, 0x40 delimiter CRC error), u32 A-MPDU id,
    u8 delimiters, u8 MCS, u8 streams, u8 RSSI combined, 4+4 RSSI, u16 ext MHz, u16 ext
    flags, 4 x (s8 dBm signal, s8 noise), 4 x u32 EVM."""
    return 4, (struct.pack("<IIBBBB", flags, ampdu_id, 0, mcs, streams, 255) + bytes([255] * 8)
               + struct.pack("<HH", 0, 0) + struct.pack("<bb", sig0, noise0) + bytes([0x80] * 6)
               + bytes(16))


def ppi_records() -> list[bytes]:
    f1 = qos_data(1)
    f2 = qos_data(2)
    recs = [
        # legacy: common only, OFDM 24 Mb/s on 5180 MHz, FCS present and good
        ppi([common(tsf=1000, rate=48, freq=5180, chan_flags=0x140, signal=-40, noise=-95)]) + f1 + fcs(f1),
        # A-MPDU subframe 1 of id 7: HT40, short GI, MCS 15, not last; signal from MAC+PHY only
        ppi([common(tsf=2000, freq=5180, chan_flags=0x140), mac_phy(0x16 | 0x20, 7, 15, 2, -50, -90)])
        + f2 + fcs(f2),
        # same A-MPDU, last subframe, greenfield 20 MHz, MCS 7; fields 32-bit aligned
        ppi([common(tsf=2000, freq=5180, chan_flags=0x140), mac_phy(0x11, 7, 7)], aligned=True)
        + f1 + fcs(f1),
        # bad FCS (flags 0x4), TSF in ms (flags 0x2)
        ppi([common(tsf=3, flags=0x7, rate=2, freq=2412, chan_flags=0xA0, signal=-70)])
        + ack() + b"\xde\xad\xbe\xef",
        # no FCS at all
        ppi([common(tsf=4000, flags=0, rate=22, freq=2412, chan_flags=0xA0)]) + ack(),
    ]
    return recs


def avs(version=1, mactime=0, phytype=4, channel=6, rate_100k=110, antenna=1, ssi_type=2,
        signal=-60, noise=-95, preamble=1, encoding=1) -> bytes:
    """AVS header, big-endian: magic|version, length (64, or 72 for v2 with sequence and
    drops appended)... see the module docstring."""
    v1 = struct.pack(">IIQQIIIIIIiiII", 0x80211000 | version, 64 if version == 1 else 72, mactime, 0,
                     phytype, channel, rate_100k, antenna, 0, ssi_type, signal, noise, preamble, encoding)
    return v1 if version == 1 else v1 + struct.pack(">II", 9, 0)


def avs_records() -> list[bytes]:
    f1, f2 = qos_data(3), qos_data(4)
    return [
        avs(mactime=10_000) + f1 + fcs(f1),                                    # 11 Mb/s CCK, ch 6
        avs(2, mactime=10_500, phytype=8, channel=36, rate_100k=540, preamble=0, encoding=3)
        + f2 + fcs(f2),                                                         # 11a 54 Mb/s, ch 36
        avs(mactime=11_000, ssi_type=1, signal=40, rate_100k=10) + ack() + fcs(ack()),   # RSSI not dBm
        avs(mactime=11_500) + f1[:-1] + b"X" + fcs(f1),                          # corrupted: bad FCS
    ]


def build_all() -> dict:
    return {"handbuilt_ppi_ht.pcap": (192, ppi_records()),
            "handbuilt_avs.pcap": (163, avs_records()),
            "handbuilt_prism_avs.pcap": (119, avs_records())}


def write_pcap(path: Path, linktype: int, records: list[bytes]) -> None:
    out = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, linktype)
    for i, r in enumerate(records):
        out += struct.pack("<IIII", 1_700_000_000, i, len(r), len(r)) + r
    path.write_bytes(out)


if __name__ == "__main__":
    here = Path(__file__).parents[1] / "data" / "captures" / "radio"
    for name, (lt, recs) in build_all().items():
        write_pcap(here / name, lt, recs)
        print(name, len(recs))
