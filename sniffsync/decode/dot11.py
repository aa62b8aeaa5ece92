"""Vectorised IEEE 802.11 MAC header decoder (IEEE 802.11-2020 clause 9).

The C extension does the fixed part of every header in one pass when built
(:mod:`sniffsync.decode.dot11c`); this module is the fallback and the reference.
Every frame's first ``WINDOW`` bytes are copied once into an ``(n, WINDOW)`` array;
fixed-offset fields are column slices of it and the few variable offsets (4th
address, QoS, +HTC) are ``np.where`` choices. Variable-length parts (Block Ack
bitmaps, the SSID element) are decoded only on the rows that have them. A field
is valid only when it lies inside the frame (FCS excluded), so truncated frames
decode what they carry and are marked.
"""
from __future__ import annotations

import numpy as np

from sniffsync.decode import dot11_tables as T
from sniffsync.decode.bytecat import categorical_from_bytes
from sniffsync.decode.bytecat import hexstr as _hexstr
from sniffsync.decode.dot11_ba import first_bits, walk_block_ack
from sniffsync.decode.macs import mac_ints
from sniffsync.decode.table import Cat, Cols, Marks
from sniffsync.io.bytecols import be, gather, le, u16le, u32le, u64le

__all__ = ["decode_dot11", "categorical_from_bytes", "WINDOW"]

WINDOW = 40          # covers the longest MAC header (36) and beacon fixed fields (+HTC: 40)
ADDR_OFF = np.array([0, 4, 10, 16, 24], np.int64)   # offset of address k (1-4); 0 = none
SSID_MAX_STEPS = 64  # elements examined before giving up on finding the SSID
# optional column groups, decoded only when one of their columns is requested
_ROLES = ("bssid", "sa", "da")
_BA = ("ba_type", "ba_ssn", "ba_n_tid", "ba_bitmap", "ba_bitmap_lo", "tid", "ba_n_records", "ba_info")
_MGMT = ("beacon_tsf_us", "beacon_interval_tu", "ssid", "assoc_aid")


def _pick(idx, addrs):
    """Per row, the address numbered ``idx`` (1-4) from ``addrs`` (list of 4 arrays); 0 -> 0."""
    out = np.zeros(idx.shape[0], np.uint64)
    for k, a in enumerate(addrs, start=1):
        out = np.where(idx == k, a, out)
    return out


def _ssid_str(key: bytes) -> str:
    raw = key[1:1 + key[0]]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("utf-8", "backslashreplace")


class _Header:
    """The MAC header fields every later step reads, for all frames at once.

    ``w`` holds every frame's first ``WINDOW`` bytes; ``flen`` counts the frame's bytes
    without a stripped FCS. A control wrapper carries another control frame: its FC sits
    at 10 and its fields start ``shift`` = 6 bytes later (``in_type``, ``in_sub``).
    """

    def __init__(self, buf, off, end, fcs_at_end, truncated):
        self.off = np.asarray(off, np.int64)
        end = np.asarray(end, np.int64)
        self.n = self.off.shape[0]
        strip = np.asarray(fcs_at_end, bool).copy()
        self.cut = np.zeros(self.n, bool) if truncated is None else np.asarray(truncated, bool)
        if truncated is not None:
            strip &= ~np.asarray(truncated, bool)     # a cut frame lost its FCS
        self.strip = strip & (end - self.off >= 4)
        self.body_end = end - 4 * self.strip
        self.flen = self.body_end - self.off
        w = self.w = gather(buf, self.off, WINDOW)
        self.fc0, self.fc1 = w[:, 0], w[:, 1]
        self.has_fc = self.fits(0, 2)
        self.ftype = (self.fc0 >> 2) & 3
        self.sub = self.fc0 >> 4
        self.is_m, self.is_c = self.ftype == T.MGMT, self.ftype == T.CTRL
        self.is_d, self.is_x = self.ftype == T.DATA, self.ftype == T.EXT
        self.not_x = self.has_fc & ~self.is_x
        self.wrap = self.is_c & (self.sub == 7)
        self.in_type = np.where(self.wrap, (w[:, 10] >> 2) & 3, self.ftype)
        self.in_sub = np.where(self.wrap, w[:, 10] >> 4, self.sub)
        self.in_ctrl = self.in_type == T.CTRL
        self.shift = 6 * self.wrap.astype(np.int64)
        self.ds = (self.fc1 & 3).astype(np.int64)
        self.a4 = self.is_d & (self.ds == 3)
        self.qos = self.is_d & ((self.sub & 8) != 0)
        self.htc = (self.is_m | self.qos) & ((self.fc1 & 0x80) != 0)
        hdr = np.where(self.is_c, T.CTRL_HDR_LEN[self.sub], 24 + 6 * self.a4 + 2 * self.qos + 4 * self.htc)
        hdr = np.where(self.wrap & self.in_ctrl, 6 + T.CTRL_HDR_LEN[self.in_sub], hdr)
        self.hdr = np.where(self.is_x, 2, hdr)
        self.short = self.flen < self.hdr

    def fits(self, at, size):
        """Rows whose frame holds the ``size`` bytes at ``at``."""
        return self.flen >= at + size


def decode_dot11(buf, off, end, fcs_at_end, truncated=None, columns=None):
    """Decode the 802.11 MAC header of every frame.

    Parameters
    ----------
    buf : np.ndarray of uint8
        The whole capture.
    off : int64[n]
        Start of each 802.11 header in ``buf``.
    end : int64[n]
        End of the captured bytes of each frame.
    fcs_at_end : bool[n]
        The original frame ends with a 4-byte FCS.
    truncated : bool[n], optional
        The capture cut the frame (caplen < wirelen): the FCS, if any, was not captured.
    columns : iterable of str, optional
        Columns wanted (default: all); the optional parts (address roles, Block Ack,
        beacon body, FCS) are decoded only when one of their columns is wanted.

    Returns
    -------
    cols : Cols
        802.11 columns of ``sniffsync.decode.schema`` as ``(values, valid)``.
    llc_off, llc_end : int64[n]
        Where the LLC payload starts / ends (-1: none decodable: not data, null data,
        protected, truncated). For an A-MSDU, the first subframe's LLC.
    marks : Marks
        Rows that could not be fully decoded.
    """
    from sniffsync.decode.dot11c import decode_dot11_c
    fast = decode_dot11_c(buf, off, end, fcs_at_end, truncated, columns)     # the same, one C pass
    if fast is not None:
        return fast[:4]
    wanted = None if columns is None else set(columns)

    def want(group):
        return wanted is None or not wanted.isdisjoint(group)

    h = _Header(buf, off, end, fcs_at_end, truncated)
    cols: Cols = _frame_control(h)
    cols.update(_addresses(h, want(_ROLES)))
    qosv, has_qos = _sequence_and_qos(h, cols)
    marks: Marks = []
    bad_hdr = np.flatnonzero(h.short)
    if bad_hdr.size:
        marks.append((bad_hdr, "802.11: header truncated"))
    tid, tid_ok = (qosv & 0xF).astype(np.uint8), has_qos.copy()
    # Block Ack / Block Ack Request (possibly inside a control wrapper)
    ba_rows = np.flatnonzero(h.has_fc & h.in_ctrl & h.is_c & ((h.in_sub == 8) | (h.in_sub == 9)))
    if want(_BA + ("bad",)):        # its marks feed the bad column
        at = h.off[ba_rows] + 16 + h.shift[ba_rows]
        cols.update(_block_ack(buf, at, h.body_end[ba_rows], h.in_sub[ba_rows] == 9, h.cut[ba_rows],
                               ba_rows, h.n, tid, tid_ok, marks, want))
    cols["tid"] = (tid, tid_ok)
    if want(_MGMT):                 # beacon / probe response fixed fields and SSID
        rows = np.flatnonzero(h.has_fc & h.is_m & (T.MGMT_IE_OFF[h.sub] >= 0) & ~h.short)
        body = h.off[rows] + h.hdr[rows]
        cols.update(_mgmt_body(buf, body, h.body_end[rows], T.MGMT_HAS_TSF[h.sub[rows]],
                               body + T.MGMT_IE_OFF[h.sub[rows]], rows, h.n))
        rows = np.flatnonzero(h.has_fc & h.is_m & np.isin(h.sub, T.ASSOC_RESP_SUBTYPES) & ~h.short)
        cols["assoc_aid"] = _assoc_aid(buf, h.off[rows] + h.hdr[rows], h.body_end[rows], rows, h.n)
    fcs = np.zeros(h.n, np.uint32)          # the FCS as sent
    rows = np.flatnonzero(h.strip) if want(("fcs",)) else np.zeros(0, np.int64)
    fcs[rows] = u32le(buf, h.body_end[rows])
    cols["fcs"] = (fcs, h.strip)
    llc_off, llc_end = _llc_bounds(buf, h, qosv, has_qos)
    if wanted is not None:
        cols = {k: v for k, v in cols.items() if k in wanted}
    return cols, llc_off, llc_end, marks


def _frame_control(h: _Header) -> Cols:
    """Type, subtype, flags; Duration (or a PS-Poll's AID)."""
    fc1, in_type, in_sub = h.fc1, h.in_type, h.in_sub
    type_subtype = (in_type.astype(np.uint16) << 4) | in_sub
    type_subtype = np.where(h.is_c & (h.sub == 6), T.CTRL_EXT_BASE + (fc1 & 0xF).astype(np.uint16), type_subtype)
    not_x = h.not_x
    cols: Cols = {
        "type": (h.ftype, h.fits(0, 1)),
        "subtype": (h.sub, h.fits(0, 1)),
        "type_subtype": (type_subtype, h.has_fc & (~h.wrap | h.fits(10, 2))),
        "fc_flags": (fc1, h.has_fc),
        "to_ds": ((fc1 & 1) != 0, not_x),
        "from_ds": ((fc1 & 2) != 0, not_x),
        "retry": ((fc1 & 8) != 0, not_x),
        "protected": ((fc1 & 0x40) != 0, not_x),
        "htc": (h.htc, h.has_fc & (h.is_m | h.is_d)),
    }
    dur = le(h.w, 2, 2)
    ps_poll = h.is_c & (in_sub == 0xA) & h.in_ctrl
    cols["duration_us"] = (dur, not_x & h.fits(2, 2) & ((dur & 0x8000) == 0) & ~ps_poll)
    cols["aid"] = (dur & 0x3FFF, ps_poll & h.fits(2, 2))
    return cols


def _addresses(h: _Header, roles: bool) -> Cols:
    """RA and TA, and with ``roles`` the BSSID, SA and DA picked by frame type and DS bits."""
    w, is_c, is_m, is_d, wrap, sub = h.w, h.is_c, h.is_m, h.is_d, h.wrap, h.sub
    a1, a2, a3 = mac_ints(w, 4), mac_ints(w, 10), mac_ints(w, 16)
    has_ta = ~is_c | np.where(wrap, h.in_ctrl & T.CTRL_HAS_TA[h.in_sub], T.CTRL_HAS_TA[sub])
    cols: Cols = {"ra": (a1, h.not_x & h.fits(4, 6)),
                  "ta": (np.where(wrap, a3, a2), h.not_x & has_ta & h.fits(10 + h.shift, 6))}
    if not roles:
        return cols
    addrs = [a1, a2, a3, mac_ints(w, 24)]
    zero = np.zeros(h.n, np.int8)
    which = {
        "bssid": np.select([is_m, is_d, is_c & ~wrap], [3, T.DS_ADDR_BSSID[h.ds], T.CTRL_BSSID_ADDR[sub]], zero),
        "sa": np.select([is_m, is_d], [2, T.DS_ADDR_SA[h.ds]], zero),
        "da": np.select([is_m, is_d], [1, T.DS_ADDR_DA[h.ds]], zero),
    }
    for name, idx in which.items():
        cols[name] = (_pick(idx, addrs), h.has_fc & (idx > 0) & (h.flen >= ADDR_OFF[idx] + 6))
    return cols


def _sequence_and_qos(h: _Header, cols: Cols):
    """Sequence control and the A-MSDU bit into ``cols``; returns the QoS control's first
    byte and where it is present."""
    sc = le(h.w, 22, 2)
    has_sc = h.has_fc & (h.is_m | h.is_d) & h.fits(22, 2)
    cols["seq"] = (sc >> 4, has_sc)
    cols["frag"] = (sc & 0xF, has_sc)
    qosv = np.where(h.a4, h.w[:, 30], h.w[:, 24])
    has_qos = h.has_fc & h.qos & h.fits(24 + 6 * h.a4, 2)
    cols["amsdu"] = ((qosv & 0x80) != 0, has_qos)
    return qosv, has_qos


def _llc_bounds(buf, h: _Header, qosv, has_qos):
    """Where the LLC payload of each data frame starts and ends (-1: none)."""
    protected = (h.fc1 & 0x40) != 0
    has_body = h.has_fc & h.is_d & ((h.sub & 4) == 0) & ~protected & (h.flen > h.hdr)
    llc_off = np.where(has_body, h.off + h.hdr, -1)
    llc_end = np.where(has_body, h.body_end, -1)
    # A-MSDU: skip the first subframe header (DA, SA, length) to its LLC.
    amsdu = np.flatnonzero(has_body & has_qos & ((qosv & 0x80) != 0))
    if amsdu.size:
        body_end = h.body_end[amsdu]
        sub_ok = llc_off[amsdu] + 14 <= body_end
        sub_len = be(gather(buf, llc_off[amsdu] + 12, 2), 0, 2).astype(np.int64)
        new_off = llc_off[amsdu] + 14
        llc_end[amsdu] = np.where(sub_ok, np.minimum(new_off + sub_len, body_end), -1)
        llc_off[amsdu] = np.where(sub_ok, new_off, -1)
    return llc_off, llc_end


def _block_ack(buf, ctl_off, end, is_ba, cut, rows, n, tid, tid_ok, marks, want=lambda group: True):
    """BA / BAR control and information fields (:mod:`sniffsync.decode.dot11_ba`); the
    frame table keeps the first record and the whole field as sent (``ba_info``).

    ``ctl_off`` is the BA/BAR control field, ``end`` the end of the frame's bytes, ``cut``
    the capture kept only part of the frame. Updates ``tid``/``tid_ok`` in place.
    The bitmap texts are built only if ``want`` asks for their columns (the costly part).
    """
    wk = walk_block_ack(buf, ctl_off, end, is_ba)
    code = np.where(is_ba, T.BA_TYPE_CODE[wk.batype], T.BAR_TYPE_CODE[wk.batype])
    ba_code = np.full(n, -1, np.int8)
    ba_code[rows] = np.where(wk.ctl_ok, code, -1)
    cols = {"ba_type": (Cat(ba_code, T.BA_TYPE_NAMES), ba_code >= 0)}
    layout = np.where(is_ba, T.BA_LAYOUT[wk.batype], T.BAR_LAYOUT[wk.batype])
    n_tid = np.zeros(n, np.uint8)
    n_tid[rows] = wk.tidinfo + 1
    cols["ba_n_tid"] = (n_tid, _full(n, rows, wk.ctl_ok & (wk.batype == 3)))
    n_rec = np.bincount(wk.src[~wk.cut], minlength=rows.shape[0]).astype(np.uint16)
    cols["ba_n_records"] = _scatter(n, rows, n_rec, wk.ctl_ok & (code >= 0) & (layout != T.NONE))
    _mark(marks, rows, wk.src[wk.reserved], "802.11: reserved BA bitmap length")
    _mark(marks, rows, wk.src[wk.cut & ~cut[wk.src]], "802.11: Block Ack body truncated")

    tid[rows] = wk.tidinfo                  # TID_INFO, unless a first record names a TID
    tid_ok[rows] = wk.ctl_ok & ((layout == T.SINGLE) | (layout == T.NONE))
    first = wk.rec == 0                     # the frame table keeps the first record
    src, ssc = wk.src[first], wk.ssc[first]
    tid[rows[src]] = np.maximum(wk.tid[first], 0)
    tid_ok[rows[src]] = wk.tid[first] >= 0
    ssn = np.zeros(n, np.uint16)
    ssn[rows[src]] = np.maximum(ssc, 0) >> 4
    cols["ba_ssn"] = (ssn, _full(n, rows[src], ssc >= 0))
    bm_len, bm_off, bpm = wk.bm_len[first], wk.bm_off[first], wk.bits_per_msdu[first]
    lo = np.zeros(n, np.uint64)
    bm_codes, bm_names = np.full(n, -1, np.int32), []
    text, bits = want(("ba_bitmap",)), want(("ba_bitmap_lo",))
    # (bincount, not np.unique: that imports numpy.ma, ~20 ms of a run's start-up)
    for length in np.flatnonzero(np.bincount(bm_len[bm_len > 0].astype(np.intp))):
        sel = np.flatnonzero(bm_len == length)
        bm_codes[rows[src[sel]]] = len(bm_names)         # (placeholder: only "has a bitmap")
        if not (text or bits):
            continue
        raw = gather(buf, bm_off[sel], int(length))
        for per in np.flatnonzero(np.bincount(bpm[sel].astype(np.intp))) if bits else ():  # 1, 4 or 16 bits per MSDU
            k = bpm[sel] == per
            lo[rows[src[sel[k]]]] = first_bits(raw[k], int(per))
        if text:
            cat = categorical_from_bytes(raw, _hexstr)   # lengths differ: names never collide
            bm_codes[rows[src[sel]]] = cat.codes + len(bm_names)
            bm_names += cat.categories
    if text:
        cols["ba_bitmap"] = (Cat(bm_codes, bm_names), bm_codes >= 0)
    if bits:
        cols["ba_bitmap_lo"] = (lo, bm_codes >= 0)
    if want(("ba_info",)):
        cols["ba_info"] = _hex_field(buf, ctl_off, end, rows, n)
    return cols


def _hex_field(buf, start, stop, rows, n):
    """Categorical hex text of ``buf[start:stop]`` per row (grouped by length)."""
    length = np.maximum(stop - start, 0)
    codes, names = np.full(n, -1, np.int32), []
    for size in np.flatnonzero(np.bincount(length[length > 0])):   # (np.unique imports numpy.ma)
        sel = np.flatnonzero(length == size)
        cat = categorical_from_bytes(gather(buf, start[sel], int(size)), _hexstr)
        codes[rows[sel]] = cat.codes + len(names)
        names += cat.categories
    return Cat(codes, names), codes >= 0


def _mark(marks, rows, which, reason):
    if which.size:
        marks.append((rows[np.unique(which)], reason))


def _assoc_aid(buf, body, body_end, rows, n):
    """AID a (re)association response assigns (its 2 top bits are set on air); ``body``:
    where the frame body of ``rows`` starts."""
    at = body + T.ASSOC_AID_OFF
    return _scatter(n, rows, u16le(buf, at) & 0x3FFF, at + 2 <= body_end)


def _mgmt_body(buf, body, body_end, has_tsf, ie_off, rows, n):
    """Timestamp and beacon interval (beacons, probe responses) and the SSID element.

    ``body`` is where the frame body starts, ``ie_off`` where its elements start.
    """
    cols = {
        "beacon_tsf_us": _scatter(n, rows, u64le(buf, body), has_tsf & (body + 8 <= body_end)),
        "beacon_interval_tu": _scatter(n, rows, u16le(buf, body + 8), has_tsf & (body + 10 <= body_end)),
    }
    # Walk the elements, a mask step per element index, until the SSID (id 0) is found.
    found = np.full(rows.shape[0], -1, np.int64)
    idx = np.arange(rows.shape[0])
    pos = ie_off
    stop = body_end
    for _ in range(SSID_MAX_STEPS):
        alive = pos + 2 <= stop[idx]
        idx, pos = idx[alive], pos[alive]
        if idx.shape[0] == 0:
            break
        eid = buf[pos]
        elen = buf[pos + 1].astype(np.int64)
        is_ssid = eid == 0
        hit = is_ssid & (pos + 2 + elen <= stop[idx])
        found[idx[hit]] = pos[hit]
        idx, pos = idx[~is_ssid], pos[~is_ssid] + 2 + elen[~is_ssid]
    have = np.flatnonzero(found >= 0)
    codes = np.full(n, -1, np.int32)
    cats: list = []
    if have.size:
        p = found[have]
        length = np.minimum(buf[p + 1], 32)
        key = np.zeros((have.size, 33), np.uint8)
        key[:, 0] = length
        key[:, 1:] = gather(buf, p + 2, 32)
        key[:, 1:][np.arange(32) >= length[:, None]] = 0     # bytes past the element are not SSID
        cat = categorical_from_bytes(key, _ssid_str)
        codes[rows[have]] = cat.codes
        cats = list(cat.categories)
    cols["ssid"] = (Cat(codes, cats), codes >= 0)
    return cols


def _full(n, rows, ok):
    out = np.zeros(n, bool)
    out[rows] = ok
    return out


def _scatter(n, rows, vals, ok):
    full = np.zeros(n, np.asarray(vals).dtype)
    full[rows] = vals
    return full, _full(n, rows, ok)
