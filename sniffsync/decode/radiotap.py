"""Radiotap header decoding (radiotap.org defined fields).

Declarative field table: present bit -> (name, alignment, size). Alignment is
relative to the start of the radiotap header. Bits 29/30 switch to the radiotap /
vendor namespace, bit 31 chains another present word.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from sniffsync.decode.table import factorize
from sniffsync.io.bytecols import gather, le, u16le, u32le

__all__ = ["Field", "FIELDS", "NS_RADIOTAP", "NS_VENDOR", "EXT", "decode_radiotap", "layout_offsets",
           "MAX_PRESENT_WORDS"]


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
# Algorithm: copy the first _HEAD bytes of every header once; read version, it_len
# and the present-word chain of every frame at once; group frames by their layout
# (all present words); walk the bits of each distinct layout ONCE in Python to get
# each field's offset; then read each wanted field for all frames in one pass over
# the compact header copy. Field values are decoded column-wise by
# sniffsync.decode.radiotap_values. Offsets are aligned relative to the header start
# (radiotap.org "Alignment in radiotap").
# With the C extension built, a chunk whose headers are all clean (nothing to mark) is read
# by one C pass instead (sniffsync.io._walk.radiotap: the same walk of each header, in
# cache, no per-layout numpy passes); this decoder stays the reference and the fallback.
# ---------------------------------------------------------------------------

MAX_PRESENT_WORDS = 32          # a longer bit-31 chain is treated as a corrupt header
_CORRUPT = "radiotap: corrupt header"
_VENDOR_HDR = 6                 # OUI(3), sub_namespace(1), skip_length(u16)
_HEAD = 64                      # header bytes copied per frame (holds nearly every field)


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
    """Distinct layouts, the rows sorted by layout and each layout's slice of that order.

    The present words are folded into one uint64 key per row: ``w0 | w1 << 32`` is exact
    for chains of up to two words (then bit 31 of ``w1`` is clear); the rare longer
    chains are numbered among themselves and keyed ``1 << 63 | number``. The keys are
    numbered by :func:`sniffsync.decode.table.factorize` (hashing, no sort) and the rows grouped
    by a stable radix sort of those small numbers. A 2-D ``np.unique(axis=0)`` cost
    seconds on a million frames.
    """
    w = words.astype(np.uint64)
    key = w[:, 0] | (w[:, 1] << np.uint64(32)) if w.shape[1] > 1 else w[:, 0].copy()
    long_rows = np.flatnonzero(w[:, 1] >> np.uint64(EXT) & np.uint64(1)) if w.shape[1] > 2 else []
    if len(long_rows):
        sub = np.ascontiguousarray(words[long_rows]).view(np.dtype((np.void, 4 * w.shape[1])))[:, 0]
        number = np.unique(sub, return_inverse=True)[1].ravel().astype(np.uint64)
        key[long_rows] = np.uint64(1 << 63) | number
    codes, uniq = factorize(key)
    order = np.argsort(codes.astype(np.int16 if len(uniq) < 2**15 else np.int64), kind="stable")
    bounds = np.concatenate([[0], np.cumsum(np.bincount(codes, minlength=len(uniq)))])
    return words[order[bounds[:-1]]], order, bounds


def _decode_group(buf, off, it_len, steps, field_off, rows, marks):
    """Record where each wanted field of one layout is, for the frames ``rows``.

    Sets ``field_off[name][rows]`` to the field's byte offset in ``buf`` (left at -1
    where absent or beyond the header); the bytes are gathered afterwards, one pass per
    field in file order. Fields not in ``field_off`` (no requested column needs them)
    are only stepped over, but still checked against ``it_len`` so marks do not depend
    on the columns asked for.
    """
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
        if field.name in field_off:
            ok = inside & ~bad
            field_off[field.name][rows[ok]] = (off + pos)[ok]
        pos = pos + field.size


def _field_bytes(head, base, buf, off, at, size):
    """``(n, size)`` bytes at the offsets ``at`` (-1: absent -> zeros).

    ``head`` is the flat copy of every frame's first ``_HEAD`` header bytes followed by
    ``_HEAD`` zero bytes. Fields inside those bytes (nearly all) are read from it: far
    fewer cache misses than reading the capture again for every field; absent fields
    read the zero tail; ``base + at`` is the offset in ``head``. The rest come from ``buf``.
    """
    n = len(at)
    fast = (at >= 0) & (at - off + size <= _HEAD)
    out = gather(head, np.where(fast, base + at, n * _HEAD), size)
    rows = np.flatnonzero((at >= 0) & ~fast)
    if rows.size:
        out[rows] = gather(buf, at[rows], size)
    return out


def _mark_new(rows, where, bad, reason, marks):
    """Mark the rows of ``where`` not marked before with ``reason``."""
    new = where & ~bad
    if new.any():
        marks.append((rows[new], reason))
        bad |= new


def decode_radiotap(buf, off, end, columns=None):
    """Decode the radiotap header of many frames at once.

    Parameters
    ----------
    buf : numpy.ndarray of uint8
        The capture bytes.
    off : numpy.ndarray of int64
        Start of each frame's radiotap header in ``buf``.
    end : numpy.ndarray of int64
        End (exclusive) of each frame's captured bytes.
    columns : iterable of str, optional
        Radiotap columns wanted (default: all); only the fields they need are read.

    Returns
    -------
    cols : dict
        ``{name: (values, valid)}`` for the (requested) radiotap columns of :mod:`sniffsync.decode.schema`.
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
    from sniffsync.decode.radiotap_values import field_values, fields_for

    buf = np.asarray(buf, np.uint8)
    off = np.asarray(off, np.int64)
    end = np.asarray(end, np.int64)
    need = fields_for(columns)
    fast = _c_fields(buf, off, end, need)
    if fast is not None:
        it_len, raw, present, mask = fast
        cols = field_values(raw, present, np.ones(len(off), bool), columns, mask)
        return cols, it_len, present["flags"] & (raw["flags"][:, 0] & 0x10).astype(bool), []
    head = gather(buf, off, _HEAD)             # the header's first bytes, copied once
    it_len, words, good = _fixed_header(buf, off, end, head)
    marks = []
    if (~good).any():
        marks.append((np.flatnonzero(~good), _CORRUPT))
    field_off = _field_offsets(buf, off, it_len, words, good, need, marks)
    n = len(off)
    head = np.concatenate([head.reshape(-1), np.zeros(_HEAD, np.uint8)])
    base = np.arange(n) * _HEAD - off
    raw = {f.name: _field_bytes(head, base, buf, off, field_off[f.name], f.size)
           for f in FIELDS.values() if f.name in need}
    present = {f.name: field_off[f.name] >= 0 if f.name in need else np.zeros(n, bool)
               for f in FIELDS.values()}
    cols = field_values(raw, present, good, columns)
    hdr_len = np.where(good, it_len, 0)
    flags = raw["flags"][:, 0]
    fcs_at_end = present["flags"] & (flags & 0x10).astype(bool)
    return cols, hdr_len, fcs_at_end, marks


def _c_fields(buf, off, end, need):
    """``(it_len, raw, present, mask)`` as the Python decoder below computes the first three,
    from one pass of the C extension over the headers (:mod:`sniffsync.io.walk`'s backend: the
    same switch selects both), and the present bits as uint32 (``mask``), or None: no
    extension, or a frame the Python decoder must mark."""
    from sniffsync.io import walk
    if walk.backend() != "c" or not len(off):
        return None
    bits = sorted(b for b, f in FIELDS.items() if f.name in need)
    got = walk._c.radiotap(buf, np.ascontiguousarray(off), np.ascontiguousarray(end),
                           sum(1 << b for b in bits))
    if got is None:
        return None
    it_len, mask, fields = got
    n = len(off)
    mask = np.frombuffer(mask, np.uint32)
    raw = {FIELDS[b].name: np.frombuffer(data, np.uint8).reshape(n, FIELDS[b].size)
           for b, data in zip(bits, fields)}
    present = {f.name: (mask >> np.uint32(b) & np.uint32(1)).astype(bool) if f.name in raw
               else np.zeros(n, bool) for b, f in FIELDS.items()}
    return np.frombuffer(it_len, np.int64), raw, present, mask


def _fixed_header(buf, off, end, head):
    """``it_len``, the present words and which headers are usable (version 0, a length
    inside the frame, a present-word chain inside the header)."""
    has8 = end - off >= 8
    fixed = head[:, :8]                         # version, pad, it_len, first present word
    version = np.where(has8, fixed[:, 0], 255)
    it_len = le(fixed, 2, 2).astype(np.int64)
    good = has8 & (version == 0) & (it_len >= 8) & (it_len <= end - off)
    words, good = _present_words(buf, off, it_len, good, le(fixed, 4, 4))
    return it_len, words, good


def _field_offsets(buf, off, it_len, words, good, need, marks) -> dict:
    """Per needed field name, its byte offset in ``buf`` in every frame (-1: absent), one
    walk of the present bits per distinct layout."""
    field_off = {f.name: np.full(len(off), -1, np.int64) for f in FIELDS.values() if f.name in need}
    good_rows = np.flatnonzero(good)
    if not good_rows.size:
        return field_off
    layouts, order, bounds = _layout_groups(words[good_rows])
    for g, layout in enumerate(layouts):
        rows = good_rows[order[bounds[g]:bounds[g + 1]]]
        steps, _stop, n_words = layout_offsets(layout)
        steps = [("start", None, None, 4 + 4 * n_words)] + steps
        # an undefined field ends decoding (its size is unknown) without marking the
        # frame, as Wireshark does: the 802.11 frame behind it_len is intact
        _decode_group(buf, off[rows], it_len[rows], steps, field_off, rows, marks)
    return field_off
