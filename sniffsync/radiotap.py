"""Radiotap header decoding (radiotap.org defined fields).

Declarative field table: present bit -> (name, alignment, size). Alignment is
relative to the start of the radiotap header. Bits 29/30 switch to the radiotap /
vendor namespace, bit 31 chains another present word.
"""
from __future__ import annotations

from typing import NamedTuple

__all__ = ["Field", "FIELDS", "NS_RADIOTAP", "NS_VENDOR", "EXT"]


class Field(NamedTuple):
    name: str
    align: int
    size: int


FIELDS: dict[int, Field] = {
    0: Field("tsft", 8, 8),
    1: Field("flags", 1, 1),
    2: Field("rate", 1, 1),
    3: Field("channel", 2, 4),           # u16 freq, u16 flags
    4: Field("fhss", 1, 2),
    5: Field("dbm_antsignal", 1, 1),
    6: Field("dbm_antnoise", 1, 1),
    7: Field("lock_quality", 2, 2),
    8: Field("tx_attenuation", 2, 2),
    9: Field("db_tx_attenuation", 2, 2),
    10: Field("dbm_tx_power", 1, 1),
    11: Field("antenna", 1, 1),
    12: Field("db_antsignal", 1, 1),
    13: Field("db_antnoise", 1, 1),
    14: Field("rx_flags", 2, 2),
    15: Field("tx_flags", 2, 2),
    16: Field("rts_retries", 1, 1),
    17: Field("data_retries", 1, 1),
    18: Field("xchannel", 4, 8),         # u32 flags, u16 freq, u8 chan, u8 maxpower
    19: Field("mcs", 1, 3),              # u8 known, u8 flags, u8 mcs
    20: Field("ampdu_status", 4, 8),     # u32 ref, u16 flags, u8 crc, u8 reserved
    21: Field("vht", 2, 12),             # u16 known, u8 flags, u8 bw, u8 mcs_nss[4], u8 coding, u8 gid, u16 paid
    22: Field("timestamp", 8, 12),       # u64 ts, u16 accuracy, u8 unit/pos, u8 flags
    23: Field("he", 2, 12),              # u16 data1..data6
    24: Field("he_mu", 2, 12),
    25: Field("he_mu_user", 2, 6),
    26: Field("zero_len_psdu", 1, 1),
    27: Field("lsig", 2, 4),             # u16 data1, u16 data2
}
TLV = 28          # radiotap TLVs: the rest of the header, not decoded
NS_RADIOTAP = 29
NS_VENDOR = 30
EXT = 31
