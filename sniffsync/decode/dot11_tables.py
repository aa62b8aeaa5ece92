"""Declarative 802.11 tables: header lengths, address roles and Block Ack variants.

Indexed by numeric code so the decoder looks values up with one fancy index
instead of if-chains. References: IEEE 802.11-2020 clause 9.3 and 802.11ax-2021.
"""
from __future__ import annotations

import numpy as np

__all__ = [
    "MGMT", "CTRL", "DATA", "EXT",
    "CTRL_HDR_LEN", "CTRL_HAS_TA", "CTRL_BSSID_ADDR",
    "DS_ADDR_BSSID", "DS_ADDR_SA", "DS_ADDR_DA",
    "BA_TYPE_NAMES", "BA_TYPE_CODE", "BAR_TYPE_CODE", "COMPRESSED_BITMAP_LEN", "MSTA_BITMAP_LEN",
    "BA_FIXED_BITMAP_LEN", "BA_FRAG_TABLE", "BITMAP_BY_FRAG", "BA_LAYOUT", "BAR_LAYOUT",
    "BA_HAS_GCR_ADDR", "BA_TRAILER_LEN", "MSTA_RA_AID", "NONE", "SINGLE", "MULTI_TID", "MULTI_STA",
    "ASSOC_RESP_SUBTYPES", "ASSOC_AID_OFF",
    "MGMT_IE_OFF", "MGMT_HAS_TSF", "TS_WRAPPER", "TS_PS_POLL", "TS_BAR", "TS_BA", "CTRL_EXT_BASE",
]

MGMT, CTRL, DATA, EXT = 0, 1, 2, 3

# Wireshark wlan.fc.type_subtype values that need special handling.
TS_BAR, TS_BA, TS_PS_POLL, TS_WRAPPER = 0x18, 0x19, 0x1A, 0x17
CTRL_EXT_BASE = 0x160      # control frame extension: 0x160 + FC bits 8-11 (tshark 4.0)

# Control frame header length by subtype (bytes up to and including the last address).
#   0-1 reserved, 2 Trigger, 3 TACK, 4 BF report poll, 5 NDPA, 6 ctrl frame extension,
#   7 control wrapper (FC, Dur, A1, carried FC, HT control), 8 BAR, 9 BA, 10 PS-Poll,
#   11 RTS, 12 CTS, 13 ACK, 14 CF-End, 15 CF-End+CF-Ack
CTRL_HDR_LEN = np.array([4, 4, 16, 16, 16, 16, 10, 16, 16, 16, 16, 16, 10, 10, 16, 16], np.int64)
# Does address 2 (a TA) exist for this control subtype?  (CTS and ACK carry only RA.)
CTRL_HAS_TA = np.array([0, 0, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 0, 0, 1, 1], bool)
# Which address holds the BSSID in a control frame: 0 none, 1 = A1 (PS-Poll), 2 = A2 (CF-End).
CTRL_BSSID_ADDR = np.array([0] * 10 + [1, 0, 0, 0, 2, 2], np.int8)

# Data frames: which address (1-4, 0 = none) is BSSID / SA / DA, indexed by (from_ds<<1)|to_ds.
#   00: DA=A1 SA=A2 BSSID=A3   01 (to DS): BSSID=A1 SA=A2 DA=A3
#   10 (from DS): DA=A1 BSSID=A2 SA=A3   11: RA TA DA=A3 SA=A4, no BSSID
DS_ADDR_BSSID = np.array([3, 1, 2, 0], np.int8)
DS_ADDR_SA = np.array([2, 2, 3, 4], np.int8)
DS_ADDR_DA = np.array([1, 3, 1, 3], np.int8)

# BA / BAR control bits 1-4: BA type (802.11-2020 Table 9-24, 802.11ax-2021 adds 11);
# 4-5, 7-9, 12-15 reserved.  The BAR Type table (9-26) has no multi-STA variant (an
# 802.11ax STA solicits one with an MU-BAR Trigger frame), so BAR type 11 is reserved.
BA_TYPE_NAMES = ["basic", "extended_compressed", "compressed", "multi_tid", "gcr",
                 "glk_gcr", "multi_sta"]
_BA_CODE = {0: "basic", 1: "extended_compressed", 2: "compressed", 3: "multi_tid",
            6: "gcr", 10: "glk_gcr", 11: "multi_sta"}
BA_TYPE_CODE = np.full(16, -1, np.int8)       # BA type -> index into BA_TYPE_NAMES
for _code, _name in _BA_CODE.items():
    BA_TYPE_CODE[_code] = BA_TYPE_NAMES.index(_name)
BAR_TYPE_CODE = BA_TYPE_CODE.copy()
BAR_TYPE_CODE[11] = -1

# How the BA / BAR Information field is laid out, by BA type (index 0-15).
#   SINGLE: [SSC] [GCR group address] [bitmap] [RBUFCAP]       (one record)
#   MULTI_TID: TID_INFO + 1 x (Per TID Info(2), SSC, [bitmap 8])
#   MULTI_STA: Per AID TID Info records up to the end of the frame (9.3.1.8.7):
#     AID TID Info(2: AID11 B0-B10, Ack Type B11, TID B12-B15), then
#       AID11 = 2045: Reserved(4) + RA(6);  Ack Type 1: nothing (all-ack / single-MPDU ack);
#       else SSC(2) + bitmap (length from the SSC fragment number, MULTI_STA table).
#   NONE: not decoded (reserved types, and GLK-GCR whose body no oracle here decodes).
NONE, SINGLE, MULTI_TID, MULTI_STA = 0, 1, 2, 3
BA_LAYOUT = np.zeros(16, np.int8)
BA_LAYOUT[[0, 1, 2, 6]] = SINGLE
BA_LAYOUT[3] = MULTI_TID
BA_LAYOUT[11] = MULTI_STA
BAR_LAYOUT = BA_LAYOUT.copy()
BAR_LAYOUT[11] = NONE
BA_HAS_GCR_ADDR = np.zeros(16, bool)            # GCR: SSC, GCR group address, bitmap
BA_HAS_GCR_ADDR[6] = True
BA_TRAILER_LEN = np.zeros(16, np.int64)         # extended compressed: RBUFCAP octet after the bitmap
BA_TRAILER_LEN[1] = 1
MSTA_RA_AID = 2045                              # AID11 of a record that names its RA (unassociated STA)

# Bitmap length in bytes of a BA record: fixed by the type, or from the SSC fragment number
# subfield (B3, B2B1; B0 = fragmentation level 3).  0 = reserved / no bitmap.
BA_FIXED_BITMAP_LEN = np.zeros(16, np.int64)
BA_FIXED_BITMAP_LEN[0] = 128      # basic: 64 MSDUs x 16 fragment bits
BA_FIXED_BITMAP_LEN[1] = 8        # extended compressed
BA_FIXED_BITMAP_LEN[3] = 8        # multi-TID, per TID
# Which fragment-number table a type uses: 0 none (fixed), 1 compressed (and GCR), 2 multi-STA.
BA_FRAG_TABLE = np.zeros(16, np.int64)
BA_FRAG_TABLE[[2, 6]] = 1
BA_FRAG_TABLE[11] = 2


def _by_frag(lengths: dict) -> np.ndarray:
    """16 entries indexed by the fragment number subfield from ``{(B3, B2B1): bytes}``; B0 free."""
    out = np.zeros(16, np.int64)
    for (b3, b21), n in lengths.items():
        for b0 in (0, 1):
            out[b3 << 3 | b21 << 1 | b0] = n
    return out


# 802.11ax-2021 Table 9-28 (compressed): B2B1 0 -> 64 bits, 2 -> 256 bits; 802.11be adds
# B3 = 1: B2B1 0 -> 512, 1 -> 1024 bits.  Table 9-30 (multi-STA) adds 1 -> 128 and 3 -> 32 bits.
COMPRESSED_BITMAP_LEN = _by_frag({(0, 0): 8, (0, 2): 32, (1, 0): 64, (1, 1): 128})
MSTA_BITMAP_LEN = _by_frag({(0, 0): 8, (0, 1): 16, (0, 2): 32, (0, 3): 4, (1, 0): 64, (1, 1): 128})
BITMAP_BY_FRAG = np.stack([np.zeros(16, np.int64), COMPRESSED_BITMAP_LEN, MSTA_BITMAP_LEN])

# Management frames: (re)association response body = capability(2), status(2), AID(2).
ASSOC_RESP_SUBTYPES = (1, 3)
ASSOC_AID_OFF = 4

# Management frames: offset of the first element from the end of the MAC header
# (-1: no elements searched).  0 assoc req (capability, listen interval), 2 reassoc req
# (+ current AP), 4 probe req, 5 probe resp and 8 beacon (timestamp, interval, capability).
MGMT_IE_OFF = np.full(16, -1, np.int64)
MGMT_IE_OFF[[0, 2, 4, 5, 8]] = [4, 10, 0, 12, 12]
# Subtypes whose body starts with the 8-byte TSF timestamp and the beacon interval.
MGMT_HAS_TSF = np.zeros(16, bool)
MGMT_HAS_TSF[[5, 8]] = True
