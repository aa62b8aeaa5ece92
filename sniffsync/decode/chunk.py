"""One decoding chunk of a capture's records, layer by layer: radio header -> 802.11 ->
LLC/SNAP, or the wired link layer -> IP -> TCP/UDP (used by :mod:`sniffsync.decode.frames`).

Each stage decodes the subset of rows it applies to; :func:`sniffsync.decode.table.scatter`
places the results in the chunk's full-length columns.
"""
from __future__ import annotations

import numpy as np

from sniffsync.decode.linklayer import RADIO_LINKTYPES, decode_link, decode_radio
from sniffsync.decode.l3c import l3_c_ready
from sniffsync.decode.payload import decode_l3
from sniffsync.decode.schema import COLUMNS
from sniffsync.decode.table import scatter

__all__ = ["decode_chunk", "LINK_RADIOTAP", "LINK_DOT11", "WIRED_LINKTYPES"]

LINK_RADIOTAP = 127
LINK_DOT11 = 105
WIRED_LINKTYPES = (1, 101, 113, 228, 229, 276)
_RADIOTAP = {c.name for c in COLUMNS if c.source.startswith("radiotap")} | {"rt_len", "mpdu_len", "phy"}


_RECORD = {"sniffer", "frame", "ts_ns", "caplen", "wirelen", "linktype", "bad"}
_PAYLOAD = {c.name for c in COLUMNS[COLUMNS.index(next(c for c in COLUMNS if c.name == "ethertype")):]}


def _sub(a: np.ndarray, rows: np.ndarray, n: int) -> np.ndarray:
    """``a[rows]``; ``a`` itself when ``rows`` is every one of the ``n`` rows (no copy)."""
    return a if len(rows) == n else a[rows]


class _Chunk:
    """One chunk's record fields, where each layer starts, and the columns / marks so far."""

    def __init__(self, rec, lo: int, hi: int, wanted):
        self.buf, self.wanted, self.n = rec.buf, wanted, hi - lo
        self.off = np.asarray(rec.data_off[lo:hi], np.int64)
        self.end = self.off + np.asarray(rec.caplen[lo:hi], np.int64)
        self.lt = np.asarray(rec.linktype[lo:hi])
        # usually one link type in a chunk: tests of it are then one test, not one a frame
        self.one_lt = int(self.lt[0]) if self.n and (self.lt == self.lt[0]).all() else None
        self.wire = np.asarray(rec.wirelen[lo:hi], np.int64)
        self.truncated = np.asarray(rec.caplen[lo:hi]) < self.wire
        self.cols, self.marks = {}, []
        self.dot11_off = np.full(self.n, -1, np.int64)
        self.fcs_at_end = np.zeros(self.n, bool)
        self.l3_off = np.full(self.n, -1, np.int64)
        self.l3_end = self.end.copy()
        self.ethertype = np.zeros(self.n, np.uint16)

    def stage(self, rows, result) -> None:
        """Merge one stage's subset output into the full-length columns and marks."""
        sub_cols, sub_marks = result
        if self.wanted is not None:         # a stage's other columns are not placed
            sub_cols = {k: v for k, v in sub_cols.items() if k in self.wanted}
        self.cols.update(scatter(self.n, rows, sub_cols))
        self.marks.extend((rows[np.asarray(r, np.int64)], why) for r, why in sub_marks)

    def lt_in(self, codes) -> np.ndarray:
        """Which frames have one of the link types ``codes``."""
        if self.one_lt is not None:
            return np.full(self.n, self.one_lt in codes)
        return np.isin(self.lt, codes)

    def with_bad(self):
        """Columns a stage is asked for: the wanted ones and what its marks feed (``bad``)."""
        return None if self.wanted is None else self.wanted | {"bad"}

    def set_ethertype(self, rows, cols) -> None:
        eth = cols.get("ethertype")
        if eth is not None:
            self.ethertype[rows] = np.where(eth[1] if eth[1] is not None else True, eth[0], 0)


def decode_chunk(rec, lo: int, hi: int, wanted):
    """Columns and marks (rows relative to ``lo``) of the frames ``lo:hi``, layer by layer."""
    c = _Chunk(rec, lo, hi, wanted)
    # every stage can mark a frame: "bad" needs them all
    need_payload = wanted is None or "bad" in wanted or bool(wanted & _PAYLOAD)
    need_dot11 = need_payload or wanted is None or bool(wanted - _RECORD - _RADIOTAP)
    _radiotap_stage(c)
    if need_dot11:
        _dot11_stage(c, need_payload)
    if need_payload:
        _wired_stage(c)
    unknown = ~c.lt_in(RADIO_LINKTYPES + (LINK_DOT11,) + WIRED_LINKTYPES)
    if unknown.any():
        c.marks.append((np.flatnonzero(unknown), "unsupported link type"))
    rows = np.flatnonzero(c.l3_off >= 0)
    if rows.size and l3_c_ready():
        rows = np.arange(c.n)       # the C pass skips offsets -1 itself: no columns to scatter
    if rows.size:
        c.stage(rows, decode_l3(c.buf, _sub(c.l3_off, rows, c.n), _sub(c.l3_end, rows, c.n),
                                _sub(c.ethertype, rows, c.n), c.wanted))
    return c.cols, c.marks


def _radiotap_stage(c: _Chunk) -> None:
    """Radio headers (radiotap, PPI, Prism, AVS); where the 802.11 frame starts (also of
    raw 802.11 records); ``rt_len`` (the radio header's length) and ``mpdu_len``."""
    rt_len = np.zeros(c.n, np.int64)
    rows = np.flatnonzero(c.lt_in(RADIO_LINKTYPES))
    if rows.size:
        off = _sub(c.off, rows, c.n)        # (every row, usually: no copies)
        rt_cols, hdr_len, fcs, rt_marks = decode_radio(c.buf, off, _sub(c.end, rows, c.n), _sub(c.lt, rows, c.n),
                                                       c.with_bad(), _sub(c.truncated, rows, c.n))
        c.stage(rows, (rt_cols, rt_marks))
        rows = slice(None) if len(rows) == c.n else rows
        c.dot11_off[rows] = np.where(hdr_len > 0, off + hdr_len, -1)
        rt_len[rows] = hdr_len
        c.fcs_at_end[rows] = fcs
    rows = np.flatnonzero(c.lt_in((LINK_DOT11,)))
    c.dot11_off[rows] = c.off[rows]
    if c.wanted is None or "rt_len" in c.wanted:
        c.cols["rt_len"] = (rt_len, rt_len > 0)
    if c.wanted is None or "mpdu_len" in c.wanted:
        c.cols["mpdu_len"] = (c.wire - rt_len, (c.dot11_off >= 0) & (c.wire >= rt_len))


def _dot11_stage(c: _Chunk, need_payload: bool) -> None:
    """802.11 MAC headers, then the LLC/SNAP header of the data frames that carry one."""
    rows = np.flatnonzero(c.dot11_off >= 0)
    if not rows.size:
        return
    from sniffsync.decode.dot11c import decode_dot11_llc
    d_cols, d_marks, llc = decode_dot11_llc(c.buf, _sub(c.dot11_off, rows, c.n), _sub(c.end, rows, c.n),
                                            _sub(c.fcs_at_end, rows, c.n), _sub(c.truncated, rows, c.n),
                                            c.with_bad(), need_payload)
    c.stage(rows, (d_cols, d_marks))
    if llc is not None:                     # where the IP packets start, and their ethertype
        l_cols, c.l3_off[rows], c.l3_end[rows] = llc
        c.stage(rows, (l_cols, []))
        c.set_ethertype(rows, l_cols)


def _wired_stage(c: _Chunk) -> None:
    """Ethernet, Linux cooked and raw-IP link headers."""
    rows = np.flatnonzero(c.lt_in(WIRED_LINKTYPES))
    if not rows.size:
        return
    w_cols, sub_l3, w_marks = decode_link(c.buf, _sub(c.off, rows, c.n), _sub(c.end, rows, c.n),
                                          _sub(c.lt, rows, c.n))
    c.stage(rows, (w_cols, w_marks))
    c.l3_off[rows] = sub_l3
    c.set_ethertype(rows, w_cols)
