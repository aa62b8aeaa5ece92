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

# ---------------------------------------------------------------------------
# Vectorised decoder.
#
# Algorithm: read version, it_len and the present-word chain of every frame at
# once; group frames by their layout (all present words); walk the bits of each
# distinct layout ONCE in Python to get each field's offset; gather that field's
# bytes for the whole group. Field values are then decoded column-wise by
# sniffsync.radiotap_values. Offsets are aligned relative to the header start
# (radiotap.org "Alignment in radiotap").
# ---------------------------------------------------------------------------
import numpy as np  # noqa: E402

from .bytecols import u16le, u32le  # noqa: E402

__all__ += ["decode_radiotap", "layout_offsets", "MAX_PRESENT_WORDS"]

MAX_PRESENT_WORDS = 32          # a longer bit-31 chain is treated as a corrupt header
_CORRUPT = "radiotap: corrupt header"
_VENDOR_HDR = 6                 # OUI(3), sub_namespace(1), skip_length(u16)


def _align(pos, a):
    """Round ``pos`` (int or int64 array) up to a multiple of ``a`` (a power of two)."""
    return (pos + (a - 1)) & ~(a - 1)


def _present_words(buf, off, it_len, good, word0):
    """Present words of every frame as an ``(n, k)`` uint32 array, zero after the chain.

    ``word0`` is each frame's first present word. Follows bit 31 (Ext) vectorised: each
    round reads the next word only for the frames whose previous word had bit 31 set. Returns the words and the mask of
    frames whose chain stays inside ``it_len``.
    """
    n = len(off)
    cols = [np.where(good, word0, 0).astype(np.uint32)]
    active = np.flatnonzero(good & (cols[0] >> EXT & 1).astype(bool))
    good = good.copy()
    k = 1
    while active.size:
        at = 4 + 4 * k
        inside = at + 4 <= it_len[active]
        if k >= MAX_PRESENT_WORDS:
            inside[:] = False
        good[active[~inside]] = False
        active = active[inside]
        col = np.zeros(n, np.uint32)
        col[active] = u32le(buf, off[active] + at)
        cols.append(col)
        active = active[(col[active] >> EXT & 1).astype(bool)]
        k += 1
    words = np.stack(cols, axis=1)
    words[~good] = 0
    return words, good


def layout_offsets(words):
    """Walk one layout's present words: field offsets and vendor-namespace steps.

    Parameters
    ----------
    words : sequence of int
        The present words of one layout, in order (trailing zero words ignored).

    Returns
    -------
    steps : list of tuple
        In header order, ``("field", bit, Field, None)`` for a radiotap field and
        ``("vendor", None, None, None)`` for a vendor namespace whose data must be
        skipped by its per-frame ``skip_length``. Offsets are resolved by the caller,
        because a vendor skip makes them per-frame.
    stop : str or None
        Why decoding stopped early (an undefined field whose size is unknown), or None.
    n_words : int
        Number of present words (data starts at ``4 + 4 * n_words``).
    """
    words = [int(w) for w in words]
    n_words = 1
    while n_words < len(words) and words[n_words - 1] >> EXT & 1:
        n_words += 1
    steps, stop = [], None
    in_radiotap, base = True, 0
    for word in words[:n_words]:
        if in_radiotap:
            for b in range(TLV + 1):
                if not word >> b & 1:
                    continue
                bit = base + b
                if bit == TLV:                      # TLV list: rest of the header
                    return steps, None, n_words
                field = FIELDS.get(bit)
                if field is None:                   # size unknown: cannot go on
                    return steps, f"radiotap: undefined field bit {bit}", n_words
                steps.append(("field", bit, field, None))
        # bits 29/30 switch the namespace of the NEXT word (radiotap.org, "Namespaces")
        if word >> NS_RADIOTAP & 1:
            in_radiotap, base = True, 0
        elif word >> NS_VENDOR & 1:
            steps.append(("vendor", None, None, None))
            in_radiotap = False
        elif in_radiotap:
            base += 32
    return steps, stop, n_words


def _layout_groups(words):
    """Distinct layouts and each frame's layout index.

    The present words are folded two at a time into one uint64 key and factorised by
    hashing (``pandas.factorize``, O(n)) — a 2-D ``np.unique`` sorted rows and cost
    seconds on a million frames.
    """
    import pandas as pd
    w = words.astype(np.uint64)
    codes, _ = pd.factorize(w[:, 0] | (w[:, 1] << np.uint64(32)) if w.shape[1] > 1 else w[:, 0])
    for j in range(2, w.shape[1]):
        codes, _ = pd.factorize((codes.astype(np.uint64) << np.uint64(32)) | w[:, j])
    first = np.zeros(codes.max() + 1 if len(codes) else 0, np.int64)
    first[codes[::-1]] = np.arange(len(codes))[::-1]        # first row of each layout
    return words[first], codes.astype(np.int64)


def _decode_group(buf, off, it_len, steps, raw, present, rows, marks):
    """Gather the bytes of every field of one layout for the frames ``rows``."""
    pos = None                                   # set by the caller through steps[0]
    seen = set()
    bad = np.zeros(len(rows), bool)
    for kind, bit, field, start in steps:
        if kind == "start":
            pos = start
            continue
        if kind == "vendor":
            pos = _align(pos, 2)
            inside = pos + _VENDOR_HDR <= it_len
            skip = np.where(inside, u16le(buf, off + pos + 4), 0).astype(np.int64)
            _mark_new(rows, ~inside, bad, "radiotap: vendor namespace beyond header", marks)
            pos = pos + _VENDOR_HDR + skip
            continue
        pos = _align(pos, field.align)
        if field.name in seen:                   # first occurrence wins
            pos = pos + field.size
            continue
        seen.add(field.name)
        inside = pos + field.size <= it_len
        _mark_new(rows, ~inside, bad, f"radiotap: field {field.name} beyond header", marks)
        ok = inside & ~bad
        sel = rows[ok]
        at = (off + pos)[ok] if np.ndim(pos) else off[ok] + pos
        _as_void(raw[field.name])[sel] = _void_rows(buf, at, field.size)
        present[field.name][sel] = True
        pos = pos + field.size


def _void_rows(buf, at, width):
    """Bytes ``buf[at[i] : at[i] + width]`` as ``(m,)`` void items, one copy per row.

    A strided view of ``buf`` with one ``width``-byte item starting at every byte lets
    numpy copy each field with one fancy-index step instead of ``width`` byte gathers
    (about 4x faster than :func:`sniffsync.bytecols.gather` here). Callers pass only
    offsets whose field lies inside the header, hence inside ``buf``.
    """
    items = np.ndarray(shape=(max(len(buf) - width + 1, 0),), dtype=np.dtype((np.void, width)),
                       buffer=buf, strides=(1,))
    return items[at]


def _as_void(a2d):
    """``(n, w)`` contiguous uint8 array viewed as ``(n,)`` w-byte void items."""
    return a2d.view(np.dtype((np.void, a2d.shape[1])))[:, 0]


def _mark_new(rows, where, bad, reason, marks):
    """Mark the rows of ``where`` not marked before with ``reason``."""
    new = where & ~bad
    if new.any():
        marks.append((rows[new], reason))
        bad |= new


def decode_radiotap(buf, off, end):
    """Decode the radiotap header of many frames at once.

    Parameters
    ----------
    buf : numpy.ndarray of uint8
        The capture bytes.
    off : numpy.ndarray of int64
        Start of each frame's radiotap header in ``buf``.
    end : numpy.ndarray of int64
        End (exclusive) of each frame's captured bytes.

    Returns
    -------
    cols : dict
        ``{name: (values, valid)}`` for the radiotap columns of :mod:`sniffsync.schema`.
    hdr_len : numpy.ndarray of int64
        ``it_len``, 0 where the header is unusable.
    fcs_at_end : numpy.ndarray of bool
        Flags 0x10: the frame ends with a 4-byte FCS.
    marks : list of (numpy.ndarray, str)
        Rows that could not be fully decoded and why.

    Examples
    --------
    >>> hdr = bytes.fromhex("0000 0a00 02000000 1000")   # Flags (bit 1) = 0x10, pad
    >>> cols, n, fcs, marks = decode_radiotap(np.frombuffer(hdr, np.uint8),
    ...                                       np.array([0]), np.array([10]))
    >>> int(n[0]), bool(fcs[0]), int(cols["rt_flags"][0][0])
    (10, True, 16)
    """
    from .radiotap_values import field_values

    buf = np.asarray(buf, np.uint8)
    off = np.asarray(off, np.int64)
    end = np.asarray(end, np.int64)
    n = len(off)
    caplen = end - off
    has8 = caplen >= 8
    fixed = np.zeros((n, 8), np.uint8)          # version, pad, it_len, first present word
    _as_void(fixed)[has8] = _void_rows(buf, off[has8], 8)
    version = np.where(has8, fixed[:, 0], 255)
    it_len = fixed[:, 2:4].copy().view("<u2")[:, 0].astype(np.int64)
    good = has8 & (version == 0) & (it_len >= 8) & (it_len <= caplen)
    word0 = fixed[:, 4:8].copy().view("<u4")[:, 0]
    words, good = _present_words(buf, off, it_len, good, word0)
    marks = []
    if (~good).any():
        marks.append((np.flatnonzero(~good), _CORRUPT))

    raw = {f.name: np.zeros((n, f.size), np.uint8) for f in FIELDS.values()}
    present = {f.name: np.zeros(n, bool) for f in FIELDS.values()}
    good_rows = np.flatnonzero(good)
    if good_rows.size:
        layouts, inv = _layout_groups(words[good_rows])
        order = np.argsort(inv, kind="stable")
        bounds = np.searchsorted(inv[order], np.arange(len(layouts) + 1))
        for g, layout in enumerate(layouts):
            rows = good_rows[order[bounds[g]:bounds[g + 1]]]
            steps, _stop, n_words = layout_offsets(layout)
            steps = [("start", None, None, 4 + 4 * n_words)] + steps
            # an undefined field ends decoding (its size is unknown) without marking the
            # frame, as Wireshark does: the 802.11 frame behind it_len is intact
            _decode_group(buf, off[rows], it_len[rows], steps, raw, present, rows, marks)
    cols = field_values(raw, present, good)
    hdr_len = np.where(good, it_len, 0)
    flags = raw["flags"][:, 0]
    fcs_at_end = present["flags"] & (flags & 0x10).astype(bool)
    return cols, hdr_len, fcs_at_end, marks
