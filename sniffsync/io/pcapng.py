"""pcapng: walk the blocks window by window and index the packet blocks (EPB, SPB, PB).

The walk (:mod:`sniffsync.io.walk`) assumes every block is a sane Enhanced Packet Block
and only steps by block length; the blocks walked are then checked
vectorised, and the first that is not a sane EPB (a section header, an interface
description, a corrupt length...) is handled by the careful one-block path. Sections
(byte order) and interfaces are tracked as they come, so packets are indexed per window
and decoding can start before the walk ends.
"""
from __future__ import annotations

import struct

import numpy as np

from sniffsync.io.bytecols import field, gather
from sniffsync.io.capture import (_BOM, _EPB, _IDB, _PACKET_BLOCKS, _PB, _SPB, MAX_RECORD, PCAPNG_SHB,
                                  WINDOW_BYTES, _finish, _release, next_window, tally)
from sniffsync.io.walk import pcapng_window

__all__ = ["pcapng_records", "custom_options"]


class _Walk:
    """State of one file's walk: sections, interfaces, problems and per-file tallies."""

    def __init__(self):
        self.order = "<"
        self.sections = []        # (byte order, index of its first IDB, offset)
        self.idbs = []
        self.problems = []
        self.unknown = [None, 0]  # first offset, count: packets of an interface with no IDB
        self.over = [None, 0]     # first offset, count: caplen > snaplen
        self.section_custom = []  # custom option values of the current section header


def _sane_epbs(buf, boff, order: str, n: int):
    """Whether each block at ``boff`` is a whole, sane EPB (the walk's fast-path test)."""
    h = gather(buf, boff, 8).view(np.dtype(order + "u4")).reshape(-1, 2)
    blen = h[:, 1].astype(np.int64)
    return (h[:, 0] == 6) & (blen >= 32) & (blen <= MAX_RECORD) & (blen % 4 == 0) & (boff + blen <= n)


def _one_block(buf, mv, pos: int, path, st: _Walk, offs: list, rare: dict):
    """Handle the block at ``pos`` carefully: the next position, whether to stop, and
    whether it was a sane EPB (then the fast walk can take over again)."""
    n = buf.size
    btype, blen = struct.unpack_from(st.order + "II", mv, pos)
    if btype == 6 and 32 <= blen <= MAX_RECORD and not blen & 3 and pos + blen <= n:
        offs.append(pos)
        return pos + blen, False, True
    if btype == PCAPNG_SHB:
        bom = struct.unpack_from("<I", mv, pos + 8)[0]
        if bom not in (_BOM, 0x4D3C2B1A):
            st.problems.append(f"{path}: offset {pos}: section header with bad byte-order "
                               f"magic 0x{bom:08x}; stopped")
            return pos, True, False
        st.order = "<" if bom == _BOM else ">"
        btype, blen = struct.unpack_from(st.order + "II", mv, pos)
        st.sections.append((st.order, len(st.idbs), pos))
        if 28 <= blen <= MAX_RECORD and pos + blen <= n:
            st.section_custom = custom_options(buf, pos + 24, pos + blen - 4, st.order)
    if blen < 12 or blen & 3 or blen > MAX_RECORD:
        st.problems.append(f"{path}: offset {pos}: corrupt block length {blen} "
                           f"(block type 0x{btype:x}); stopped")
        return pos, True, False
    if not st.sections:
        st.problems.append(f"{path}: offset {pos}: block before any section header; stopped")
        return pos, True, False
    kind = _PACKET_BLOCKS.get(btype)
    if pos + blen > n:
        if kind is not None and pos + (12 if kind == _SPB else 28) <= n:
            offs.append(pos)                      # keep the cut packet; clipped later
            rare[pos] = kind
        st.problems.append(f"{path}: offset {pos}: block of {blen} bytes cut at end of file "
                           f"({n - pos} present)")
        return n, True, False
    if kind is not None:
        offs.append(pos)
        rare[pos] = kind
    elif btype == _IDB:
        st.idbs.append(_idb(buf, pos, blen, st.order, f"{path}: offset {pos}: interface {len(st.idbs)}")
                       | {"section_custom": st.section_custom})
    return pos + blen, False, False


def _pcapng_windows(buf, path, st: _Walk, mapping, drop: bool, rows, window: int):
    """Yields ``(block offsets, kinds)`` of the packet blocks, one window at a time."""
    mv, n = memoryview(buf), buf.size
    pos, stopped, walked = 0, False, 0
    while pos + 12 <= n and not stopped:
        start = pos
        stop = min(pos + next_window(pos, walked, rows, window), n)
        parts, rare = [], {}
        while pos <= stop and pos + 12 <= n and not stopped:
            offs, end = pcapng_window(mv, pos, stop, st.order)
            boff = np.frombuffer(offs, np.int64) if len(offs) else np.zeros(0, np.int64)
            ok = _sane_epbs(buf, boff, st.order, n)
            k = boff.size if ok.all() else int(np.argmin(ok))
            parts.append(boff[:k])
            if k == boff.size:
                pos = end
                continue
            # careful path from the first block that is not a sane EPB until one is again
            # (a file of other blocks, e.g. all SPBs, is then walked one block at a time)
            slow, pos, epb = [], int(boff[k]), False
            while not (stopped or epb) and pos <= stop and pos + 12 <= n:
                pos, stopped, epb = _one_block(buf, mv, pos, path, st, slow, rare)
            parts.append(np.array(slow, np.int64))
        if drop:
            _release(mapping, min(pos, n) - 12, start)
        boff = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        walked += boff.size
        kind = np.zeros(boff.size, np.int8)       # _EPB unless listed in rare
        if rare:
            at = np.fromiter(rare.keys(), np.int64, len(rare))
            kind[np.searchsorted(boff, at)] = np.fromiter(rare.values(), np.int8, len(rare))
        if boff.size:
            yield boff, kind
    if 0 < n - pos < 12:
        st.problems.append(f"{path}: offset {pos}: {n - pos} trailing bytes (block header cut)")


def pcapng_records(buf, path, mapping=None, drop: bool = True, rows=None, window: int = WINDOW_BYTES):
    """:class:`sniffsync.io.capture.Records` of a pcapng, one batch per walked window.

    Problems of the whole file (the walk's, and the tallies of unknown interfaces and
    records over the snap length) come with the last batch.
    """
    st = _Walk()
    pending, row0 = None, 0
    for batch in _pcapng_windows(buf, path, st, mapping, drop, rows, window):
        if pending is not None:          # held back: the last batch gets the file's problems
            yield _batch(buf, path, *pending, st, row0, last=False)
            row0 += pending[0].size
        pending = batch
    if pending is None:
        pending = (np.zeros(0, np.int64), np.zeros(0, np.int8))
    yield _batch(buf, path, *pending, st, row0, last=True)


def _batch(buf, path, boff, kind, st: _Walk, row0: int, last: bool):
    """Records of the packet blocks ``boff`` (of kinds ``kind``) of one window."""
    marks = []
    n = boff.size
    idbs = st.idbs
    sec, w, iface_local = _block_words(buf, boff, kind, st)
    blen = w[:, 1]
    is_spb = kind == _SPB
    iface_local = np.where(kind == _EPB, w[:, 2], iface_local)
    iface_local[is_spb] = 0
    data_off = boff + np.where(is_spb, 12, 28)
    room = blen - np.where(is_spb, 16, 32)            # bytes the block can hold
    wirelen = np.where(is_spb, w[:, 2], w[:, 6])
    caplen = np.where(is_spb, wirelen, w[:, 5])
    ticks = (w[:, 3] << 32) | w[:, 4]
    ticks[is_spb] = 0
    # global interface number = first IDB of the record's section + local id
    sec_base = np.array([b for _, b, _ in st.sections] + [len(idbs)], np.int64)
    base = sec_base[sec] if n else np.zeros(0, np.int64)
    known = (iface_local >= 0) & (iface_local < sec_base[sec + 1] - base) if n else np.zeros(0, bool)
    iface = np.where(known, base + iface_local, -1).astype(np.int16)
    snap = np.array([i["snaplen"] for i in idbs] + [0], np.int64)[np.where(known, iface, -1)]
    if is_spb.any():
        marks.append((np.flatnonzero(is_spb), "no timestamp (simple packet block)"))
        caplen = np.where(is_spb & (snap > 0), np.minimum(caplen, snap), caplen)
        room = np.where(is_spb, np.maximum(room, 0), room)
        caplen = np.where(is_spb, np.minimum(caplen, room), caplen)
    bad = np.flatnonzero(~known)
    if bad.size:
        marks.append((bad, "unknown interface"))
        tally(st.unknown, boff, bad)
    over = np.flatnonzero(caplen > np.maximum(room, 0))
    if over.size:
        marks.append((over, "caplen beyond block"))
        caplen = np.minimum(caplen, np.maximum(room, 0))
    over = np.flatnonzero((snap > 0) & (caplen > snap))
    if over.size:
        marks.append((over, "caplen > snaplen"))
        tally(st.over, boff, over)
    ts_ns = _timestamps(ticks, iface, is_spb, idbs, marks)
    problems = _file_problems(path, st) if last else []
    rec = _finish(buf, path, data_off, caplen, wirelen, ts_ns, iface, idbs, marks, problems)
    return rec._replace(row0=row0)


def _block_words(buf, boff, kind, st: _Walk):
    """Section of every block, its first 7 header words (in its section's byte order)
    and the interface id of obsolete packet blocks."""
    n = boff.size
    starts = np.array([p for _, _, p in st.sections], np.int64)
    sec = (np.searchsorted(starts, boff, side="right") - 1).astype(np.int64)
    raw = gather(buf, boff, 28)
    w = np.zeros((n, 7), np.int64)
    iface_local = np.zeros(n, np.int64)
    sec_order = np.array([o == ">" for o, _, _ in st.sections], bool)
    big = sec_order[sec] if n else np.zeros(0, bool)
    for is_big, order in ((False, "<"), (True, ">")):
        rows = np.flatnonzero(big == is_big)
        if rows.size:
            w[rows] = raw[rows].view(np.dtype(order + "u4")).reshape(-1, 7)
            pb = rows[kind[rows] == _PB]       # obsolete PB: u16 interface id, u16 drops
            iface_local[pb] = field(raw[pb], 8, order + "u2")
    return sec, w, iface_local


def _timestamps(ticks, iface, is_spb, idbs, marks) -> np.ndarray:
    """ns since the epoch from each interface's ticks and offset (0 for SPBs: no timestamp);
    packets of an interface with an unusable timestamp option are marked in ``marks``."""
    ts_ns = np.zeros(len(ticks), np.int64)
    for g, i in enumerate(idbs):
        rows = np.flatnonzero((iface == g) & ~is_spb)
        if rows.size and i.get("ts_problem"):
            marks.append((rows, "timestamp: " + i["ts_problem"].rsplit(": ", 1)[-1]))
        if rows.size:
            ts_ns[rows] = _ticks_to_ns(ticks[rows], i["tsresol_base"], i["tsresol_exp"])
            ts_ns[rows] += i["tsoffset_s"] * 1_000_000_000
    return ts_ns


def _file_problems(path, st: _Walk) -> list:
    """The walk's problems and the per-file tallies (given with the last batch)."""
    problems = list(st.problems) + [i["ts_problem"] for i in st.idbs if i.get("ts_problem")]
    if st.unknown[1]:
        problems.append(f"{path}: offset {st.unknown[0]}: {st.unknown[1]} packet(s) refer to "
                        f"an interface with no IDB")
    if st.over[1]:
        problems.append(f"{path}: offset {st.over[0]}: {st.over[1]} record(s) "
                        f"with caplen > snaplen")
    return problems


def _options(buf, start: int, end: int, order: str) -> dict:
    """pcapng options ``{code: value bytes}`` between ``start`` and ``end`` (rare blocks only)."""
    opts = {}
    while start + 4 <= end:
        code, length = struct.unpack_from(order + "HH", buf, start)
        if code == 0 or start + 4 + length > end:
            break
        opts.setdefault(code, bytes(buf[start + 4:start + 4 + length]))
        start += 4 + (length + 3) // 4 * 4
    return opts


CUSTOM_OPTIONS = (2988, 2989, 19372, 19373)   # values start with a Private Enterprise Number


def custom_options(buf, start: int, end: int, order: str) -> list:
    """Values (PEN first) of every custom option between ``start`` and ``end``."""
    out = []
    while start + 4 <= end:
        code, length = struct.unpack_from(order + "HH", buf, start)
        if code == 0 or start + 4 + length > end:
            break
        if code in CUSTOM_OPTIONS:
            out.append(bytes(buf[start + 4:start + 4 + length]))
        start += 4 + (length + 3) // 4 * 4
    return out


def _tsresol(opt: bytes | None) -> tuple[int, int]:
    """if_tsresol as (base, exponent): ticks per second = base ** exponent (default 10**6)."""
    if not opt:
        return 10, 6
    v = opt[0]
    return (2, v & 0x7F) if v & 0x80 else (10, v)


# if_tsresol beyond these overflows 64-bit tick arithmetic (ticks finer than any clock)
MAX_TSRESOL_EXP = {10: 19, 2: 63}
_MAX_OFFSET_S = (2**63 - 1) // 1_000_000_000 // 2   # |if_tsoffset| that keeps ns in int64


def _idb(buf, pos: int, blen: int, order: str, where: str = "") -> dict:
    """An interface description. An unusable timestamp option (as tshark, the packets are
    kept) is named in ``ts_problem``: its packets are marked, and such an if_tsoffset is
    ignored."""
    linktype, _, snaplen = struct.unpack_from(order + "HHI", buf, pos + 8)
    opts = _options(buf, pos + 16, pos + blen - 4, order)
    base, exp = _tsresol(opts.get(9))
    off = opts.get(14)
    tsoffset_s = struct.unpack(order + "q", off)[0] if off and len(off) == 8 else 0
    problem = None
    if exp > MAX_TSRESOL_EXP[base]:
        problem = f"if_tsresol {base}^-{exp} s not supported (finest 10^-19 or 2^-63 s)"
    if abs(tsoffset_s) > _MAX_OFFSET_S:
        problem, tsoffset_s = f"if_tsoffset {tsoffset_s} s out of range (ignored)", 0
    return {"linktype": linktype, "snaplen": snaplen, "tsresol": base ** exp,
            "tsresol_base": base, "tsresol_exp": exp, "tsoffset_s": tsoffset_s,
            "name": opts.get(2, b"").decode("utf-8", "replace").rstrip("\0"),
            "description": opts.get(3, b"").decode("utf-8", "replace").rstrip("\0"),
            "ts_problem": problem and f"{where}: {problem}"}


def _ticks_to_ns(ticks: np.ndarray, base: int, exp: int) -> np.ndarray:
    """Integer ns from ticks of 1/base**exp s, rounding down, without int64 overflow."""
    t = ticks.astype(np.uint64)
    if (base == 10 and exp >= 29) or (base == 2 and exp >= 94):
        return np.zeros(len(t), np.int64)        # every u64 tick count is < 1 ns
    if base == 10 and exp > MAX_TSRESOL_EXP[10]:
        return (t // np.uint64(10 ** (exp - 19)) // np.uint64(10 ** 10)).astype(np.int64)
    if base == 10:
        if exp <= 9:
            return (t * np.uint64(10 ** (9 - exp))).astype(np.int64)
        return (t // np.uint64(10 ** (exp - 9))).astype(np.int64)
    if exp > 33:                    # keep frac * 1e9 inside 64 bits (also for exp > 63)
        t = t >> np.uint64(min(exp - 33, 63))
        exp = 33
    sec = t >> np.uint64(exp)
    frac = t & np.uint64((1 << exp) - 1)
    return (sec * np.uint64(10 ** 9) + ((frac * np.uint64(10 ** 9)) >> np.uint64(exp))).astype(np.int64)


