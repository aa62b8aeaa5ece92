"""Prism (LINKTYPE 119) and AVS (LINKTYPE 163) monitor headers -> frame-table columns.

Prism (linux-wlan-ng, hostap, madwifi): ``u32 msgcode, u32 msglen, char devname[16]``
then ten items ``u32 did, u16 status (0 = supplied), u16 len, u32 data`` in a fixed
order (host time, MAC time, channel, RSSI, SQ, signal, noise, rate, is-tx, frame
length), little-endian; the items are read by position (drivers number the DIDs
differently: 0x1041.. or 0x10044..). A LINKTYPE 119 record that starts with the AVS
magic ``0x802110xx`` is an AVS header (as libpcap and Wireshark treat it).

AVS (wlan-ng "capturefrm" v1/v2): big-endian ``u32 version (0x80211001/2), u32 length,
u64 mactime (us), u64 hosttime, u32 phytype, u32 channel, u32 datarate (100 kb/s),
u32 antenna, u32 priority, u32 ssi_type (2 = dBm), s32 ssi_signal, s32 ssi_noise,
u32 preamble (1 short, 2 long), u32 encoding``; v2 appends fields covered by ``length``.

Neither header says whether the 802.11 frame ends with its FCS. We decide it from the
bytes: a chunk's frames of one header kind carry an FCS when most of them (that are
not truncated) end with a valid CRC-32 (:func:`sniffsync.decode.crc.fcs_matches`);
then ``fcs_bad`` is that check per frame. See docs/radio-headers.md.
"""
from __future__ import annotations

import numpy as np

from sniffsync.decode.crc import fcs_matches
from sniffsync.decode.radio_fields import FixedField as F, cast, chan_to_mhz, merge_cols, phy_column, \
    read_fields, wanted
from sniffsync.decode.radiotap_values import PHY_CODE
from sniffsync.io.bytecols import read

__all__ = ["decode_prism", "decode_avs", "PRISM_ITEMS", "AVS", "AVS_MAGIC", "fcs_by_crc"]

PRISM_HDR = 144
_ITEM0, _ITEM = 24, 12                       # first item's offset, item size
# item position -> column (None: not mapped); data = u32 at +8 of the item
PRISM_ITEMS = {1: ("tsft_us", "<u4", 1), 2: ("_chan", "<u4", 1), 3: ("signal_dbm", "<i4", 1),
               6: ("noise_dbm", "<i4", 1), 7: ("rate_kbps", "<u4", 500)}

AVS_MAGIC = 0x80211000                       # low byte: version
AVS_MIN = 64
AVS = [
    F("tsft_us", 8, ">u8"),
    F("_phytype", 24, ">u4"),
    F("_chan", 28, ">u4", 1, 0),
    F("rate_kbps", 32, ">u4", 100, 0),
    F("antenna", 36, ">u4"),
    F("_ssi_type", 44, ">u4"),
    F("signal_dbm", 48, ">i4"),
    F("noise_dbm", 52, ">i4"),
    F("_preamble", 56, ">u4"),
]
# AVS phytype -> PHY when the rate does not tell (wlan-ng p80211 phy types)
AVS_PHY = np.full(16, PHY_CODE["unknown"], np.int16)
AVS_PHY[[2, 4]] = [PHY_CODE["dsss"], PHY_CODE["cck"]]
AVS_PHY[[6, 8, 9]] = PHY_CODE["ofdm"]


def fcs_by_crc(buf, start, end, truncated):
    """``(fcs_at_end, fcs_bad, fcs_bad_valid)`` of frames ``buf[start:end]`` with no FCS flag:
    the frames carry an FCS when most untruncated ones end with a valid CRC-32."""
    ok = fcs_matches(buf, start, end)
    whole = ~truncated & (end - start >= 14)
    votes = int(whole.sum())
    has_fcs = votes > 0 and int(ok[whole].sum()) * 2 >= votes
    n = len(start)
    if not has_fcs:
        return np.zeros(n, bool), np.zeros(n, bool), np.zeros(n, bool)
    return np.ones(n, bool), ~ok, ~truncated


def _prism_items(buf, off, good, columns):
    cols = {}
    for pos, (name, dtype, scale) in PRISM_ITEMS.items():
        item = off + _ITEM0 + _ITEM * pos
        status = read(buf, item + 4, "<u2")
        v = read(buf, item + 8, dtype).astype(np.int64)
        ok = good & (status == 0)
        if name in ("signal_dbm", "noise_dbm"):
            ok &= (v >= -128) & (v <= 127)
        cols[name] = (v * scale, ok)
    return cols


def decode_prism(buf, off, end, columns=None, truncated=None):
    """Decode Prism headers (and AVS headers in LINKTYPE 119 records) of many frames at once.

    Returns ``(cols, hdr_len, fcs_at_end, marks)`` like
    :func:`sniffsync.decode.radiotap.decode_radiotap`.
    """
    off = np.asarray(off, np.int64)
    end = np.asarray(end, np.int64)
    n = len(off)
    truncated = np.zeros(n, bool) if truncated is None else np.asarray(truncated, bool)
    is_avs = (end - off >= 4) & ((read(buf, off, ">u4") & 0xFFFFFF00) == AVS_MAGIC)
    avs_rows, rows = np.flatnonzero(is_avs), np.flatnonzero(~is_avs)
    hdr_len = np.zeros(n, np.int64)
    fcs = np.zeros(n, bool)
    marks, parts = [], []
    if avs_rows.size:
        c, h, f, m = decode_avs(buf, off[avs_rows], end[avs_rows], columns, truncated[avs_rows])
        hdr_len[avs_rows], fcs[avs_rows] = h, f
        parts.append((avs_rows, c))
        marks.extend((avs_rows[r], why) for r, why in m)
    if rows.size:
        o, e = off[rows], end[rows]
        msglen = read(buf, o + 4, "<u4").astype(np.int64)
        good = (e - o >= PRISM_HDR) & (msglen == PRISM_HDR)
        if (~good).any():
            marks.append((rows[~good], "prism: corrupt header"))
        raw = _prism_items(buf, o, good, columns)
        chan, chan_ok = raw.pop("_chan")
        freq, freq_ok = chan_to_mhz(chan)
        raw["freq_mhz"] = (freq, chan_ok & freq_ok)
        rate, rate_ok = raw["rate_kbps"]
        raw["phy"] = (phy_column(rate // 500, rate_ok & (rate > 0), np.zeros(len(rows), bool)), good)
        raw = {k: (cast(k, v) if not hasattr(v, "codes") else v, ok) for k, (v, ok) in raw.items()}
        start = o + PRISM_HDR
        f_at_end, bad, bad_ok = fcs_by_crc(buf, start, e, truncated[rows] | ~good)
        raw["fcs_bad"] = (bad, bad_ok & good)
        hdr_len[rows] = np.where(good, PRISM_HDR, 0)
        fcs[rows] = f_at_end & good
        parts.append((rows, raw))
    cols = {k: v for k, v in merge_cols(n, parts).items() if wanted(columns, k)}
    return cols, hdr_len, fcs, marks


def decode_avs(buf, off, end, columns=None, truncated=None):
    """Decode AVS headers of many frames at once; returns as :func:`decode_prism`."""
    off = np.asarray(off, np.int64)
    end = np.asarray(end, np.int64)
    n = len(off)
    truncated = np.zeros(n, bool) if truncated is None else np.asarray(truncated, bool)
    length = read(buf, off + 4, ">u4").astype(np.int64)
    good = (end - off >= AVS_MIN) & ((read(buf, off, ">u4") & 0xFFFFFF00) == AVS_MAGIC) \
        & (length >= AVS_MIN) & (off + length <= end)
    marks = [(np.flatnonzero(~good), "avs: corrupt header")] if (~good).any() else []
    raw = read_fields(buf, off, good, AVS, None)
    ssi = raw.pop("_ssi_type")[0]
    for name in ("signal_dbm", "noise_dbm"):      # dBm only when ssi_type says so
        v, ok = raw[name]
        raw[name] = (v, ok & (ssi == 2) & (v >= -128) & (v <= 127))
    phytype = raw.pop("_phytype")[0]
    chan, chan_ok = raw.pop("_chan")
    freq, freq_ok = chan_to_mhz(chan, phytype == 8)          # 8: OFDM 802.11a
    raw["freq_mhz"] = (freq, chan_ok & freq_ok)
    pre = raw.pop("_preamble")[0]
    raw["short_preamble"] = (pre == 1, good & ((pre == 1) | (pre == 2)))
    ant, ant_ok = raw["antenna"]
    raw["antenna"] = (ant, ant_ok & (ant < 256))
    rate, rate_ok = raw["rate_kbps"]
    fallback = AVS_PHY[np.clip(phytype, 0, 15).astype(np.int64)]
    raw["phy"] = (phy_column(rate // 500, rate_ok & (rate % 500 == 0), np.zeros(n, bool),
                             fallback=fallback), good)
    raw = {k: (cast(k, v) if not hasattr(v, "codes") else v, ok) for k, (v, ok) in raw.items()}
    start = off + np.where(good, length, 0)
    f_at_end, bad, bad_ok = fcs_by_crc(buf, start, end, truncated | ~good)
    raw["fcs_bad"] = (bad, bad_ok & good)
    cols = {k: v for k, v in raw.items() if wanted(columns, k)}
    return cols, np.where(good, length, 0), f_at_end & good, marks
