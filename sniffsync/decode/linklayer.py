"""Link layers: wired (Ethernet with 802.1Q / QinQ tags, Linux cooked SLL/SLL2, raw IP)
and the radio headers in front of 802.11 (radiotap, PPI, Prism, AVS).

Vectorised over records: each link type's header is read at every record's offset
in one numpy operation, with a declarative table of where the protocol field sits.
:func:`decode_radio` dispatches the radio link types through ``RADIO_DECODERS``; every
radio decoder maps its header onto the same frame-table columns (docs/radio-headers.md).
"""
from __future__ import annotations

import numpy as np

from sniffsync.io.bytecols import u8, u16be

__all__ = ["decode_link", "decode_radio", "RADIO_LINKTYPES", "COOKED", "RAW_IP", "VLAN_TPIDS", "WLAN_LINKTYPES", "IP_ETHERTYPES"]

# link type -> (header length, offset of the big-endian protocol field)
COOKED = {113: (16, 14),       # Linux cooked SLL: protocol at 14
          276: (20, 0)}        # SLL2: protocol first
RAW_IP = (101, 228, 229)       # raw IP; 228 IPv4 only, 229 IPv6 only
_RAW_EXPECT = {228: 4, 229: 6}
_VERSION_TO_ETHERTYPE = np.zeros(16, np.uint16)
_VERSION_TO_ETHERTYPE[4], _VERSION_TO_ETHERTYPE[6] = 0x0800, 0x86DD
VLAN_TPIDS = (0x8100, 0x88A8)  # 802.1Q, 802.1ad (QinQ outer)
IP_ETHERTYPES = (0x0800, 0x86DD)
WLAN_LINKTYPES = (105, 119, 127, 163, 192)   # decoded elsewhere: no ethertype, no mark


def _ethernet(buf, off, end):
    """Ethertype, header length and marks for Ethernet II with up to two VLAN tags."""
    n = off.size
    hlen = np.full(n, 14, np.int64)
    etype = u16be(buf, off + 12).astype(np.int64)
    for _ in range(2):                       # one tag (802.1Q) or two (QinQ)
        tagged = (etype == VLAN_TPIDS[0]) | (etype == VLAN_TPIDS[1])
        if not tagged.any():
            break
        hlen = np.where(tagged, hlen + 4, hlen)
        etype = np.where(tagged, u16be(buf, off + hlen - 2), etype)
    # 802.3 length field + LLC/SNAP: the ethertype follows the 3-byte OUI
    llc = etype <= 1500
    snap = np.zeros(n, bool)
    if llc.any():
        snap = llc & (u8(buf, off + hlen) == 0xAA) & (u8(buf, off + hlen + 1) == 0xAA) \
            & (u8(buf, off + hlen + 2) == 0x03)
        etype = np.where(snap, u16be(buf, off + hlen + 6), etype)
        hlen = np.where(snap, hlen + 8, hlen)
    ok = (off + hlen <= end) & (~llc | snap)
    short = off + hlen > end
    return etype, ok, hlen, [(np.flatnonzero(short), "truncated link header")]


def _cooked(lt):
    size, at = COOKED[lt]

    def decode(buf, off, end):
        etype = u16be(buf, off + at).astype(np.int64)
        short = off + size > end
        return etype, ~short & (etype > 1500), np.full(off.size, size, np.int64), \
            [(np.flatnonzero(short), "truncated link header")]
    return decode


def _raw_ip(lt):
    def decode(buf, off, end):
        version = u8(buf, off) >> 4
        short = off >= end
        etype = _VERSION_TO_ETHERTYPE[version].astype(np.int64)
        ok = ~short & (etype > 0)
        if lt in _RAW_EXPECT:
            ok &= version == _RAW_EXPECT[lt]
        bad = np.flatnonzero(~short & ~ok)
        return etype, ok, np.zeros(off.size, np.int64), [
            (np.flatnonzero(short), "truncated link header"), (bad, "not an IP packet")]
    return decode


DECODERS = {1: _ethernet, **{lt: _cooked(lt) for lt in COOKED}, **{lt: _raw_ip(lt) for lt in RAW_IP}}


def decode_link(buf, off, end, linktype):
    """Ethertype and network-layer offset of wired-link records.

    Parameters
    ----------
    buf : numpy.ndarray of uint8
        The capture buffer.
    off, end : numpy.ndarray of int64
        Start and end (exclusive) of each record's packet bytes in ``buf``.
    linktype : int or numpy.ndarray of int
        LINKTYPE of every record (1, 101, 113, 228, 229, 276 are decoded).

    Returns
    -------
    cols : dict
        ``{"ethertype": (uint16 values, valid mask)}`` (see :mod:`sniffsync.decode.table`).
    l3_off : numpy.ndarray of int64
        Offset of the IPv4/IPv6 header in ``buf``; -1 where the record carries no IP.
    marks : list of (row indices, reason)
        Rows whose link header is cut short, is not IP on a raw-IP link, or whose
        link type is not supported (802.11 link types are left alone, unmarked).
    """
    off = np.asarray(off, np.int64)
    end = np.asarray(end, np.int64)
    n = off.size
    lt = np.broadcast_to(np.asarray(linktype, np.int64), (n,))
    etype = np.zeros(n, np.uint16)
    valid = np.zeros(n, bool)
    hlen = np.zeros(n, np.int64)
    marks = []
    one = n and lt[0] == lt[-1] and (lt == lt[0]).all()     # usually one link type
    for code in (lt[:1] if one else np.unique(lt)):
        rows = np.arange(n) if one else np.flatnonzero(lt == code)
        decode = DECODERS.get(int(code))
        if decode is None:
            if int(code) not in WLAN_LINKTYPES:
                marks.append((rows, f"unsupported link type {int(code)}"))
            continue
        if one:
            etype, valid, hlen, sub_marks = decode(buf, off, end)
            etype, valid = etype.astype(np.uint16), valid.astype(bool)
        else:
            e, ok, h, sub_marks = decode(buf, off[rows], end[rows])
            etype[rows], valid[rows], hlen[rows] = e, ok, h
        marks.extend((rows[r], why) for r, why in sub_marks if len(r))
    is_ip = valid & ((etype == IP_ETHERTYPES[0]) | (etype == IP_ETHERTYPES[1])) & (off + hlen < end)
    l3_off = np.where(is_ip, off + hlen, -1)
    return {"ethertype": (etype, valid)}, l3_off, marks


# Radio headers in front of an 802.11 frame: link type -> "module:function", each with
# the contract of sniffsync.decode.radiotap.decode_radiotap (imported when first needed)
RADIO_DECODERS = {127: "radiotap:decode_radiotap", 192: "ppi:decode_ppi",
                  119: "prism:decode_prism", 163: "prism:decode_avs"}
RADIO_LINKTYPES = tuple(RADIO_DECODERS)
_NO_TRUNCATED = ("radiotap:decode_radiotap", "ppi:decode_ppi")   # need no caplen < wirelen


def _radio_decoder(lt: int):
    import importlib
    mod, fn = RADIO_DECODERS[lt].split(":")
    return getattr(importlib.import_module(f"sniffsync.decode.{mod}"), fn)


def decode_radio(buf, off, end, linktype, columns=None, truncated=None):
    """Decode the radio header (radiotap, PPI, Prism or AVS) of 802.11 records.

    Parameters
    ----------
    buf, off, end
        As :func:`decode_link`.
    linktype : numpy.ndarray of int
        LINKTYPE of every record, each one of ``RADIO_LINKTYPES``.
    columns : iterable of str, optional
        Columns wanted (default: all).
    truncated : numpy.ndarray of bool, optional
        Records cut short by the snap length (their FCS cannot be checked).

    Returns
    -------
    cols, hdr_len, fcs_at_end, marks
        As :func:`sniffsync.decode.radiotap.decode_radiotap`, for every record.
    """
    from sniffsync.decode.radio_fields import merge_cols

    off = np.asarray(off, np.int64)
    end = np.asarray(end, np.int64)
    n = off.size
    lt = np.broadcast_to(np.asarray(linktype, np.int64), (n,))
    truncated = np.zeros(n, bool) if truncated is None else np.asarray(truncated, bool)
    kinds = lt[:1] if n and lt[0] == lt[-1] and (lt == lt[0]).all() else np.unique(lt)   # usually one
    hdr_len = np.zeros(n, np.int64)
    fcs = np.zeros(n, bool)
    parts, marks = [], []
    for code in kinds:
        rows = np.arange(n) if len(kinds) == 1 else np.flatnonzero(lt == code)
        name = RADIO_DECODERS[int(code)]
        args = (buf, off[rows], end[rows], columns)
        out = _radio_decoder(int(code))(*args) if name in _NO_TRUNCATED else \
            _radio_decoder(int(code))(*args, truncated[rows])
        cols, h, f, m = out
        if len(kinds) == 1:
            return cols, h, f, m
        hdr_len[rows], fcs[rows] = h, f
        parts.append((rows, cols))
        marks.extend((rows[np.asarray(r, np.int64)], why) for r, why in m)
    return merge_cols(n, parts), hdr_len, fcs, marks
