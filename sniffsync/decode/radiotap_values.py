"""Radiotap field bytes -> frame-table columns, column-wise.

Input: for each radiotap field (``sniffsync.decode.radiotap.FIELDS`` names) an ``(n, size)``
uint8 array of its bytes and a presence mask, as gathered by
:func:`sniffsync.decode.radiotap.decode_radiotap`. Output: ``Cols`` (``{name: (values, valid)}``).
Every sub-field is decoded with masks and lookup tables indexed by the code; a value is
valid only when its field is present and its "known" bit is set. Bit positions follow
radiotap.org's defined-fields pages (cited per field below).
"""
from __future__ import annotations

import numpy as np

from sniffsync.decode.schema import PHY_NAMES
from sniffsync.decode.table import Cat
from sniffsync.io.bytecols import le

__all__ = ["field_values", "fields_for", "COLUMN_FIELDS", "PHY_CODE", "RATE_PHY", "HT_NSS", "VHT_BW_MHZ", "HE_BW_MHZ",
           "PHY_OUTPUTS"]

PHY_CODE = {name: i for i, name in enumerate(PHY_NAMES)}
_NULL = -1          # "no value" entry in the lookup tables below

# Legacy Rate (500 kbit/s units) -> PHY: Clause 15 DSSS 1/2 Mb/s, Clause 16 HR/DSSS
# (CCK) 5.5/11 Mb/s, Clause 17/18 OFDM 6..54 Mb/s at 20 MHz.
RATE_PHY = np.full(256, PHY_CODE["unknown"], np.int8)
RATE_PHY[[2, 4]] = PHY_CODE["dsss"]
RATE_PHY[[11, 22]] = PHY_CODE["cck"]
RATE_PHY[[12, 18, 24, 36, 48, 72, 96, 108]] = PHY_CODE["ofdm"]

# HT MCS index -> N_SS (IEEE 802.11-2020 19.5: MCS 0-31 equal modulation, 8 per stream;
# 32 is the 1-stream 40 MHz duplicate; 33-38 two, 39-52 three, 53-76 four streams with
# unequal modulation). 77-127 reserved -> null.
HT_NSS = np.full(128, _NULL, np.int16)
HT_NSS[:32] = np.arange(32) // 8 + 1
HT_NSS[32] = 1
HT_NSS[33:39] = 2
HT_NSS[39:53] = 3
HT_NSS[53:77] = 4

HT_BW_MHZ = np.array([20, 40, 20, 20], np.int16)          # MCS flags 0x03: 20, 40, 20L, 20U
# VHT bandwidth code 0..25 -> width of the PPDU itself (radiotap VHT "bandwidth": e.g.
# 2 = 20 MHz in the lower half of a 40 MHz channel); 26..31 reserved -> null.
VHT_BW_MHZ = np.full(32, _NULL, np.int16)
VHT_BW_MHZ[:26] = [20, 40, 20, 20, 80, 40, 40, 20, 20, 20, 20,
                   160, 80, 80, 40, 40, 40, 40, 20, 20, 20, 20, 20, 20, 20, 20]
# HE data5 bits 0-3: 0..3 = 20/40/80/160 MHz; 4..10 are RU sizes (OFDMA), the channel
# width is then not carried -> null (phy stays 'he').
HE_BW_MHZ = np.full(16, _NULL, np.int16)
HE_BW_MHZ[:4] = [20, 40, 80, 160]
HE_GI_NS = np.array([800, 1600, 3200, _NULL], np.int16)   # data5 bits 4-5
HE_LTF_SIZE = np.array([_NULL, 1, 2, 4], np.int16)        # data5 bits 6-7, 0 = unknown
HE_N_LTF = np.array([1, 2, 4, 6, 8, _NULL, _NULL, _NULL], np.int16)   # data5 bits 8-10

HT_FORMATS = ["mf", "gf"]
HE_FORMATS = ["su", "ext_su", "mu", "trig"]
TS_UNITS = ["ms", "us", "ns", "ps"]        # radiotap.org: 0 ms, 1 us, 2 ns, 3-15 reserved
TS_POSITIONS = ["first_mpdu_bit", "plcp_sig_acq", "eo_ppdu", "eo_mpdu", "unknown"]
TS_POS_CODE = np.full(16, _NULL, np.int16)  # sampling position code -> category code
TS_POS_CODE[[0, 1, 2, 3, 15]] = [0, 1, 2, 3, 4]


def _bit(x, mask):
    return (x & mask) != 0


def _lookup(table, code, valid):
    """Table value per row; rows whose entry is null become invalid."""
    v = table[code]
    return v, valid & (v != _NULL)


def _categorical(codes, valid, categories):
    return Cat(np.where(valid, np.asarray(codes).astype(np.int16), np.int16(-1)), categories)


def _channel(raw, present):
    """Channel: u16 freq, u16 flags; XChannel: u32 flags, u16 freq (used only without Channel;
    its low 16 flag bits mean the same as Channel's). Returns freq, flags, valid."""
    ch, xch = present["channel"], present["xchannel"] & ~present["channel"]
    freq = np.where(ch, le(raw["channel"], 0, 2), le(raw["xchannel"], 4, 2))
    cflags = np.where(ch, le(raw["channel"], 2, 2), le(raw["xchannel"], 0, 2))
    return freq, cflags, ch | xch


def _flags(raw):
    return raw["flags"][:, 0]


# Simple columns: name -> (fields read, decoder(raw, present) -> (values, valid)).
# radiotap.org bits 0-18 and 20, 22, 26, 27.
_SIMPLE = {
    "tsft_us": (("tsft",), lambda r, p: (le(r["tsft"], 0, 8).view(np.int64), p["tsft"])),
    "rt_flags": (("flags",), lambda r, p: (_flags(r), p["flags"])),
    "fcs_bad": (("flags",), lambda r, p: (_bit(_flags(r), 0x40), p["flags"])),
    "short_preamble": (("flags",), lambda r, p: (_bit(_flags(r), 0x02), p["flags"])),
    "rate_kbps": (("rate",), lambda r, p: (r["rate"][:, 0].astype(np.uint32) * 500, p["rate"])),
    "freq_mhz": (("channel", "xchannel"), lambda r, p: _channel(r, p)[0::2]),
    "chan_flags": (("channel", "xchannel"), lambda r, p: _channel(r, p)[1:]),
    "signal_dbm": (("dbm_antsignal",), lambda r, p: (r["dbm_antsignal"][:, 0].view(np.int8), p["dbm_antsignal"])),
    "noise_dbm": (("dbm_antnoise",), lambda r, p: (r["dbm_antnoise"][:, 0].view(np.int8), p["dbm_antnoise"])),
    "antenna": (("antenna",), lambda r, p: (r["antenna"][:, 0], p["antenna"])),
    "zero_len_psdu": (("zero_len_psdu",), lambda r, p: (r["zero_len_psdu"][:, 0], p["zero_len_psdu"])),
}


def _ht(r, has):
    """MCS field (bit 19): u8 known, u8 flags, u8 mcs (radiotap.org fields/MCS). ``r`` = its rows."""
    known, flags, mcs = (r[:, i] for i in range(3))
    k = lambda m: has & _bit(known, m)       # noqa: E731
    ness = (flags >> 7 & 1) | ((known >> 7 & 1) << 1)   # Ness bit 0 in flags, bit 1 in known
    return {
        "mcs": lambda: (mcs, k(0x02)),
        "nss": lambda: _lookup(HT_NSS, mcs & 0x7F, k(0x02)),
        "bw_mhz": lambda: (HT_BW_MHZ[flags & 0x03], k(0x01)),
        "gi_ns": lambda: (np.where(_bit(flags, 0x04), 400, 800), k(0x04)),
        "ldpc": lambda: (_bit(flags, 0x10), k(0x10)),
        "stbc": lambda: (flags >> 5 & 0x03, k(0x20)),
        "ness": lambda: (ness, k(0x40)),
    }


def _vht(r, has):
    """VHT field (bit 21): u16 known, u8 flags, u8 bandwidth, u8 mcs_nss[4], u8 coding, ..."""
    known, flags, bw, mcs_nss, coding = le(r, 0, 2), r[:, 2], r[:, 3], r[:, 4], r[:, 8]
    k = lambda m: has & _bit(known, m)       # noqa: E731
    user0 = has & ((mcs_nss & 0x0F) != 0)    # nss 0: user 0 not present
    return {
        "mcs": lambda: (mcs_nss >> 4, user0),
        "nss": lambda: (mcs_nss & 0x0F, user0),
        "bw_mhz": lambda: _lookup(VHT_BW_MHZ, bw & 0x1F, k(0x0040)),
        "gi_ns": lambda: (np.where(_bit(flags, 0x04), 400, 800), k(0x0004)),
        "ldpc": lambda: (_bit(coding, 0x01), user0),
        "stbc": lambda: (flags & 0x01, k(0x0001)),
    }


def _he(r, has):
    """HE field (bit 23): u16 data1..data6 (radiotap.org fields/HE)."""
    d1, d2, d3, d5, d6 = (le(r, 2 * i, 2) for i in (0, 1, 2, 4, 5))
    k1 = lambda m: has & _bit(d1, m)         # noqa: E731
    k2 = lambda m: has & _bit(d2, m)         # noqa: E731
    stbc = _bit(d3, 0x8000) & k1(0x0200)
    nsts = d6 & 0x0F                          # 0 = unknown
    # NSTS counts space-time streams; with STBC each spatial stream uses two
    nss = np.where(stbc, nsts // 2, nsts)
    return {
        "mcs": lambda: (d3 >> 8 & 0x0F, k1(0x0020)),
        "nss": lambda: (nss, has & (nss > 0)),
        "bw_mhz": lambda: _lookup(HE_BW_MHZ, d5 & 0x0F, k1(0x4000)),
        "gi_ns": lambda: _lookup(HE_GI_NS, d5 >> 4 & 0x03, k2(0x0002)),
        "ldpc": lambda: (_bit(d3, 0x2000), k1(0x0080)),
        "stbc": lambda: (stbc.astype(np.uint8), k1(0x0200)),
        "he_ltf_size": lambda: _lookup(HE_LTF_SIZE, d5 >> 6 & 0x03, has),
        "he_n_ltf": lambda: _lookup(HE_N_LTF, d5 >> 8 & 0x07, k2(0x0004)),
        "he_pe_disambig": lambda: (_bit(d5, 0x8000), k2(0x0020)),
        "_he_format": lambda: (d1 & 0x03, has),
    }


# PHY fields in rising precedence: a later one overrides where present
_PHY_FIELDS = [("mcs", "ht", _ht), ("vht", "vht", _vht), ("he", "he", _he)]
_PHY_COLS = {"mcs": np.uint8, "nss": np.uint8, "bw_mhz": np.uint16, "gi_ns": np.uint16,
             "ldpc": bool, "stbc": np.uint8, "ness": np.uint8, "he_ltf_size": np.uint8,
             "he_n_ltf": np.uint8, "he_pe_disambig": bool, "_he_format": np.int8}
_PHY_SOURCES = ("mcs", "vht", "he")


def _phy_values(raw, present, want, out):
    """PHY-dependent columns: HE over VHT over HT. Each field is decoded on its own rows only,
    and only the requested columns (each decoder returns lazy column makers)."""
    n = len(present["mcs"])
    cols = [c for c in _PHY_COLS if c in want]
    vals = {c: np.zeros(n, _PHY_COLS[c]) for c in cols}
    valid = {c: np.zeros(n, bool) for c in cols}
    for field, _name, decode in _PHY_FIELDS:
        rows = np.flatnonzero(present[field])
        if not rows.size:
            continue
        dec = decode(raw[field][rows], np.ones(rows.size, bool))
        for c in cols:
            if c in dec:                # a field without this column leaves the lower one's value
                v, ok = dec[c]()
                vals[c][rows] = v
                valid[c][rows] = ok
    for c in cols:
        out[c] = (vals[c], valid[c])


def _phy_kind(raw, present, good, out):
    """``phy``: HE / VHT / HT by field presence, else legacy Rate code, else channel flags
    (OFDM 0x40 before CCK 0x20; dynamic CCK-OFDM 0x400 alone does not tell which -> unknown)."""
    phy = np.where(present["rate"], RATE_PHY[raw["rate"][:, 0]], PHY_CODE["unknown"])
    _freq, cflags, cf_ok = _channel(raw, present)
    from_chan = np.select([_bit(cflags, 0x40), _bit(cflags, 0x20)],
                          [PHY_CODE["ofdm"], PHY_CODE["cck"]], PHY_CODE["unknown"])
    phy = np.where((phy == PHY_CODE["unknown"]) & cf_ok, from_chan, phy)
    for field, name, _decode in _PHY_FIELDS:
        phy = np.where(present[field], PHY_CODE[name], phy)
    out["phy"] = (_categorical(phy, good, PHY_NAMES), good)


def _ht_format(raw, present, out):
    ok = present["mcs"] & ~present["vht"] & ~present["he"] & _bit(raw["mcs"][:, 0], 0x08)
    out["ht_format"] = (_categorical(raw["mcs"][:, 1] >> 3 & 1, ok, HT_FORMATS), ok)


def _he_format(raw, present, out):
    tmp = {}
    _phy_values(raw, present, {"_he_format"}, tmp)
    v, ok = tmp["_he_format"]
    out["he_format"] = (_categorical(v, ok, HE_FORMATS), ok)


def _ampdu(raw, present, out):
    """A-MPDU status (bit 20): u32 reference, u16 flags."""
    a = raw["ampdu_status"]
    ref, aflags = le(a, 0, 4), le(a, 4, 2)
    has = present["ampdu_status"]
    out["ampdu_ref"] = (ref.astype(np.int64), has)
    out["ampdu_last"] = (_bit(aflags, 0x0008), has & _bit(aflags, 0x0004))  # 0x8 valid if 0x4
    out["ampdu_delim_crc_bad"] = (_bit(aflags, 0x0010), has)


def _timestamp(raw, present, out):
    """Timestamp (bit 22): u64 ts, u16 accuracy, u8 unit/position, u8 flags."""
    t = raw["timestamp"]
    has = present["timestamp"]
    ts, unit_pos, tflags = le(t, 0, 8), t[:, 10], t[:, 11]
    ts = np.where(_bit(tflags, 0x01), ts & 0xFFFFFFFF, ts)   # 32-bit counter: high half unused
    out["rt_timestamp"] = (ts.view(np.int64), has)
    unit = (unit_pos & 0x0F).astype(np.int16)
    unit_ok = has & (unit <= 2)
    out["rt_timestamp_unit"] = (_categorical(unit, unit_ok, TS_UNITS), unit_ok)
    pos, pos_ok = _lookup(TS_POS_CODE, unit_pos >> 4, has)
    out["rt_timestamp_pos"] = (_categorical(pos, pos_ok, TS_POSITIONS), pos_ok)


def _lsig(raw, present, out):
    """L-SIG (bit 27): u16 data1 (known bits), u16 data2."""
    s = raw["lsig"]
    has = present["lsig"]
    d1, d2 = le(s, 0, 2), le(s, 2, 2)
    out["lsig_rate"] = ((d2 & 0x0F).astype(np.uint8), has & _bit(d1, 0x0001))
    out["lsig_length"] = (d2 >> 4, has & _bit(d1, 0x0002))


# Multi-column groups: (columns, fields read, writer(raw, present, out)).
_GROUPS = [
    (("phy",), ("rate", "channel", "xchannel") + _PHY_SOURCES, lambda r, p, g, w, o: _phy_kind(r, p, g, o)),
    (tuple(c for c in _PHY_COLS if not c.startswith("_")), _PHY_SOURCES,
     lambda r, p, g, w, o: _phy_values(r, p, w, o)),
    (("ht_format",), _PHY_SOURCES, lambda r, p, g, w, o: _ht_format(r, p, o)),
    (("he_format",), _PHY_SOURCES, lambda r, p, g, w, o: _he_format(r, p, o)),
    (("ampdu_ref", "ampdu_last", "ampdu_delim_crc_bad"), ("ampdu_status",),
     lambda r, p, g, w, o: _ampdu(r, p, o)),
    (("rt_timestamp", "rt_timestamp_unit", "rt_timestamp_pos"), ("timestamp",),
     lambda r, p, g, w, o: _timestamp(r, p, o)),
    (("lsig_rate", "lsig_length"), ("lsig",), lambda r, p, g, w, o: _lsig(r, p, o)),
]

# column -> radiotap fields it is decoded from (the Flags byte is always read: FCS at end)
COLUMN_FIELDS = {name: fields for name, (fields, _) in _SIMPLE.items()}
for _cols, _fields, _ in _GROUPS:
    for _c in _cols:
        COLUMN_FIELDS[_c] = _fields


def fields_for(columns) -> set:
    """Radiotap field names needed for ``columns`` (None: every column)."""
    if columns is None:
        return set(f for fs in COLUMN_FIELDS.values() for f in fs) | {"flags"}
    return {f for c in columns for f in COLUMN_FIELDS.get(c, ())} | {"flags"}


# the PHY columns from the C extension (sniffsync/io/_rtphy.c): its outputs, in its order
PHY_OUTPUTS = (("mcs", np.uint8), ("nss", np.uint8), ("bw_mhz", np.uint16), ("gi_ns", np.uint16),
               ("ldpc", bool), ("stbc", np.uint8), ("ness", np.uint8), ("he_ltf_size", np.uint8),
               ("he_n_ltf", np.uint8), ("he_pe_disambig", bool), ("_he_format", np.int8))
_PHY_C_FIELDS = ("rate", "channel", "xchannel", "mcs", "vht", "he")
_PHY_C_COLUMNS = {"phy", "ht_format", "he_format"} | set(c for c, _ in PHY_OUTPUTS)


def _phy_c(raw, mask, good, want, out) -> bool:
    """The PHY groups' columns of ``want`` (``_phy_kind``, ``_phy_values``, ``_ht_format``,
    ``_he_format``) from one pass of the C extension over the field bytes and the present
    bits ``mask``; False when the extension (with this pass) is not in use."""
    from sniffsync.io import walk
    if walk.backend() != "c" or getattr(walk._c, "rt_phy", None) is None:
        return False
    n = len(mask)
    o = {}
    for name, dt in PHY_OUTPUTS:
        o[name], o[name + "_ok"] = np.zeros(n, dt), np.zeros(n, bool)
    o["phy"], o["ht_format"], o["ht_format_ok"] = np.zeros(n, np.int16), np.zeros(n, np.int16), np.zeros(n, bool)
    walk._c.rt_phy(np.ascontiguousarray(mask, np.uint32),
                   *(np.ascontiguousarray(raw[f]) if f in raw else b"" for f in _PHY_C_FIELDS), list(o.values()))
    if "phy" in want:                   # (the Python groups' column order)
        out["phy"] = (_categorical(o["phy"], good, PHY_NAMES), good)
    for name, _ in PHY_OUTPUTS:
        if name in want:
            out[name] = (o[name], o[name + "_ok"])
    if "ht_format" in want:
        out["ht_format"] = (Cat(o["ht_format"], HT_FORMATS), o["ht_format_ok"])
    if "he_format" in want:
        ok = o["_he_format_ok"]
        out["he_format"] = (_categorical(o["_he_format"], ok, HE_FORMATS), ok)
    return True


def field_values(raw, present, good, columns=None, mask=None):
    """Frame-table columns from the gathered radiotap field bytes.

    Parameters
    ----------
    raw : dict of str -> numpy.ndarray
        Per field name, the ``(n, size)`` uint8 bytes of the field (zeros where absent);
        at least the fields :func:`fields_for` lists for ``columns``.
    present : dict of str -> numpy.ndarray of bool
        Per field name, the rows where the field was read.
    good : numpy.ndarray of bool
        Rows whose header is usable.
    columns : iterable of str, optional
        Columns wanted (default: every radiotap column of the schema).
    mask : numpy.ndarray of uint32, optional
        The present bits per row (the C pass's): the PHY columns then come from one C pass.

    Returns
    -------
    dict
        ``{column: (values, valid)}`` for the requested radiotap columns.
    """
    want = set(COLUMN_FIELDS) if columns is None else set(columns) & set(COLUMN_FIELDS)
    out = {}
    for name in want & set(_SIMPLE):
        out[name] = _SIMPLE[name][1](raw, present)
    phy_c = mask is not None and bool(want & _PHY_C_COLUMNS) and _phy_c(raw, mask, good, want, out)
    for cols, _fields, write in _GROUPS:
        if want.intersection(cols) and not (phy_c and _PHY_C_COLUMNS.issuperset(cols)):
            write(raw, present, good, want, out)
    return {k: v for k, v in out.items() if k in want}
