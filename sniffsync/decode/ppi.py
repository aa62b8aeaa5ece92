"""PPI (Per-Packet Information, LINKTYPE 192) radio headers -> frame-table columns.

Layout (CACE PPI specification v1.0): a header ``u8 version, u8 flags (0x01: fields
32-bit aligned), u16 length, u32 DLT`` (all little-endian) followed by fields, each
``u16 type, u16 data length`` then its data. Decoded field types (declarative tables
below): 2 802.11-Common, 3 802.11n MAC extension, 4 802.11n MAC+PHY extension; other
types are stepped over. Only DLT 105 (802.11) is decoded behind the header.

Algorithm: the field chain is walked for every frame at once, one round per field
position (a frame leaves the walk at the end of its header), recording where each
decoded field type starts; each table is then read in one pass.
"""
from __future__ import annotations

import numpy as np

from sniffsync.decode.radio_fields import FixedField as F, cast, phy_column, read_fields, wanted
from sniffsync.decode.radiotap_values import HT_NSS
from sniffsync.decode.table import Cat
from sniffsync.io.bytecols import u8, u16le, u32le

__all__ = ["decode_ppi", "COMMON", "MAC_PHY", "FIELD_SIZES"]

PPI_COMMON, PPI_N_MAC, PPI_N_MAC_PHY = 2, 3, 4
FIELD_SIZES = {PPI_COMMON: 20, PPI_N_MAC: 12, PPI_N_MAC_PHY: 48}   # data bytes of each type
_MAX_FIELDS = 64
DLT_IEEE802_11 = 105

# 802.11-Common: u64 TSF timer, u16 flags, u16 rate (500 kb/s), u16 channel MHz,
# u16 channel flags (radiotap's), u8 FHSS hopset, u8 pattern, s8 dBm signal, s8 dBm noise.
# 0 means "not known" for TSF, rate and frequency; -128 (and 0, as Wireshark) for dBm.
COMMON = [
    F("rate_kbps", 10, "<u2", 500, 0),
    F("freq_mhz", 12, "<u2", 1, 0),
    F("chan_flags", 14, "<u2"),
]
COMMON_FLAG_FCS, COMMON_FLAG_TSF_MS, COMMON_FLAG_FCS_BAD = 0x1, 0x2, 0x4

# 802.11n MAC+PHY: the MAC extension's u32 flags, u32 A-MPDU id, u8 delimiters, then
# u8 MCS (255 unknown), u8 streams, RSSI bytes, u16 ext. channel MHz and flags, then per
# antenna s8 dBm signal / noise (-128 unknown), u32 EVM x4.
MAC_PHY = [
    F("mcs", 9, "u1", 1, 255),
    F("signal_dbm", 24, "i1", 1, -128),
    F("noise_dbm", 25, "i1", 1, -128),
]
N_GREENFIELD, N_HT40, N_SHORT_GI, N_AGGREGATE, N_MORE, N_DELIM_CRC = 0x1, 0x2, 0x4, 0x10, 0x20, 0x40


def _walk(buf, off, hdr_len, aligned):
    """Offset of the data of each decoded field type per frame (-1: absent) and the rows
    whose field chain runs past the header."""
    n = len(off)
    at = {t: np.full(n, -1, np.int64) for t in FIELD_SIZES}
    pos = np.full(n, 8, np.int64)
    bad = np.zeros(n, bool)
    active = np.flatnonzero(pos + 4 <= hdr_len)
    for _ in range(_MAX_FIELDS):
        if not active.size:
            break
        ftype = u16le(buf, off[active] + pos[active]).astype(np.int64)
        flen = u16le(buf, off[active] + pos[active] + 4 - 2).astype(np.int64)
        data = pos[active] + 4
        inside = data + flen <= hdr_len[active]
        bad[active[~inside]] = True
        for t, size in FIELD_SIZES.items():
            hit = inside & (ftype == t) & (flen == size)
            rows = active[hit]
            first = at[t][rows] < 0
            at[t][rows[first]] = (off[active] + data)[hit][first]
        nxt = data + flen
        nxt = np.where(aligned[active], (nxt + 3) & ~3, nxt)
        pos[active] = nxt
        active = active[inside & (nxt + 4 <= hdr_len[active])]
    return at, bad


def decode_ppi(buf, off, end, columns=None):
    """Decode the PPI header of many frames at once (the radiotap decoder's contract).

    Returns
    -------
    cols : dict
        ``{column: (values, valid)}``.
    hdr_len : numpy.ndarray of int64
        PPI header length, 0 where unusable or the DLT behind it is not 802.11.
    fcs_at_end : numpy.ndarray of bool
        802.11-Common flags 0x1.
    marks : list of (rows, reason)
    """
    off = np.asarray(off, np.int64)
    end = np.asarray(end, np.int64)
    n = len(off)
    has8 = end - off >= 8
    hdr_len = np.where(has8, u16le(buf, off + 2), 0).astype(np.int64)
    good = has8 & (u8(buf, off) == 0) & (hdr_len >= 8) & (off + hdr_len <= end)
    dlt = u32le(buf, off + 4)
    marks = []
    if (~good).any():
        marks.append((np.flatnonzero(~good), "ppi: corrupt header"))
    other = good & (dlt != DLT_IEEE802_11)
    if other.any():
        marks.append((np.flatnonzero(other), "ppi: inner link type not 802.11"))
    at, bad = _walk(buf, off, np.where(good, hdr_len, 0), (u8(buf, off + 1) & 1).astype(bool))
    if (bad & good).any():
        marks.append((np.flatnonzero(bad & good), "ppi: field beyond header"))
    cols, fcs_at_end = _columns(buf, at, n, columns)
    return cols, np.where(good & ~other, hdr_len, 0), fcs_at_end & good, marks


def _columns(buf, at, n, columns):
    com, nmac, nphy = at[PPI_COMMON], at[PPI_N_MAC], at[PPI_N_MAC_PHY]
    has_c, has_m, has_p = com >= 0, nmac >= 0, nphy >= 0
    cols = read_fields(buf, com, has_c, COMMON, columns)
    cflags = np.where(has_c, u16le(buf, np.where(has_c, com + 8, 0)), 0)
    tsf = np.where(has_c, u32le(buf, np.where(has_c, com, 0)).astype(np.uint64)
                   | (u32le(buf, np.where(has_c, com + 4, 0)).astype(np.uint64) << np.uint64(32)), 0)
    tsf = np.where(cflags & COMMON_FLAG_TSF_MS, tsf * np.uint64(1000), tsf)
    cols["tsft_us"] = (tsf.view(np.int64), has_c & (tsf != 0))
    cols["fcs_bad"] = ((cflags & COMMON_FLAG_FCS_BAD) != 0, has_c)
    for name, at_sig in (("signal_dbm", 18), ("noise_dbm", 19)):
        v = np.where(has_c, u8(buf, np.where(has_c, com + at_sig, 0)), 0).astype(np.uint8).view(np.int8)
        cols[name] = (v, has_c & (v != -128) & (v != 0))
    phy_src = np.where(has_p, nphy, nmac)           # MAC+PHY begins with the MAC extension
    has_n = has_m | has_p
    for name, (v, ok) in read_fields(buf, nphy, has_p, MAC_PHY, columns).items():
        if name in cols:                            # the Common field's dBm wins where valid
            v0, ok0 = cols[name]
            v, ok = np.where(ok0, v0, v), ok0 | ok
        cols[name] = (v, ok)
    nflags = np.where(has_n, u32le(buf, np.where(has_n, phy_src, 0)), 0)
    ampdu_id = np.where(has_n, u32le(buf, np.where(has_n, phy_src + 4, 0)), 0)
    agg = has_n & ((nflags & N_AGGREGATE) != 0)
    mcs, mcs_ok = cols.get("mcs", (np.zeros(n, np.uint8), np.zeros(n, bool)))
    cols["nss"] = (cast("nss", np.maximum(HT_NSS[mcs & 0x7F], 0)), mcs_ok & (HT_NSS[mcs & 0x7F] > 0))
    cols["bw_mhz"] = (cast("bw_mhz", np.where(nflags & N_HT40, 40, 20)), has_n)
    cols["gi_ns"] = (cast("gi_ns", np.where(nflags & N_SHORT_GI, 400, 800)), has_n)
    cols["ht_format"] = (Cat(np.where(has_n, (nflags & N_GREENFIELD) != 0, -1).astype(np.int16), ["mf", "gf"]), has_n)
    cols["ampdu_ref"] = (ampdu_id.astype(np.int64), agg)
    cols["ampdu_last"] = ((nflags & N_MORE) == 0, agg)
    cols["ampdu_delim_crc_bad"] = ((nflags & N_DELIM_CRC) != 0, agg)
    rate, rate_ok = cols.get("rate_kbps", (np.zeros(n, np.uint32), np.zeros(n, bool)))
    chan_flags, chan_ok = cols.get("chan_flags", (np.zeros(n, np.uint16), np.zeros(n, bool)))
    cols["phy"] = (phy_column(rate // 500, rate_ok, has_n, chan_flags, chan_ok), np.ones(n, bool))
    cols = {k: v for k, v in cols.items() if wanted(columns, k)}
    return cols, (cflags & COMMON_FLAG_FCS) != 0
