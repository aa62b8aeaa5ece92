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
    "BA_TYPE_NAMES", "BA_TYPE_CODE", "COMPRESSED_BITMAP_LEN", "BA_FIXED_BITMAP_LEN",
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

# BA / BAR control bits 1-4: BA type (802.11ax-2021 Table 9-24); None = reserved.
BA_TYPE_NAMES = ["basic", "extended_compressed", "compressed", "multi_tid", "gcr",
                 "glk_gcr", "multi_sta"]
_BA_CODE = {0: "basic", 1: "extended_compressed", 2: "compressed", 3: "multi_tid",
            6: "gcr", 10: "glk_gcr", 11: "multi_sta"}
BA_TYPE_CODE = np.full(16, -1, np.int8)       # BA type -> index into BA_TYPE_NAMES
for _code, _name in _BA_CODE.items():
    BA_TYPE_CODE[_code] = BA_TYPE_NAMES.index(_name)

# Compressed BA bitmap length from the SSC fragment-number subfield bits B3..B1
# (802.11ax: B2B1 = 0 -> 64 bits, 2 -> 256 bits; others reserved here, as in ns-3 and
# Wireshark 4.0).  0 = unknown length (bitmap left null).
COMPRESSED_BITMAP_LEN = np.zeros(8, np.int64)
COMPRESSED_BITMAP_LEN[0] = 8
COMPRESSED_BITMAP_LEN[2] = 32

# Bitmap length of the BA variants whose length is fixed (0 = not decoded):
# basic 128 bytes (16 fragments x 64 MSDUs), extended compressed 8, multi-TID 8 per TID.
BA_FIXED_BITMAP_LEN = np.zeros(16, np.int64)
BA_FIXED_BITMAP_LEN[0] = 128
BA_FIXED_BITMAP_LEN[1] = 8
BA_FIXED_BITMAP_LEN[3] = 8

# Management frames: offset of the first element from the end of the MAC header
# (-1: no elements searched).  0 assoc req (capability, listen interval), 2 reassoc req
# (+ current AP), 4 probe req, 5 probe resp and 8 beacon (timestamp, interval, capability).
MGMT_IE_OFF = np.full(16, -1, np.int64)
MGMT_IE_OFF[[0, 2, 4, 5, 8]] = [4, 10, 0, 12, 12]
# Subtypes whose body starts with the 8-byte TSF timestamp and the beacon interval.
MGMT_HAS_TSF = np.zeros(16, bool)
MGMT_HAS_TSF[[5, 8]] = True
