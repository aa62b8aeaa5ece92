"""The 802.11 columns of :func:`sniffsync.decode.dot11.decode_dot11` and the LLC/SNAP header of
:func:`sniffsync.decode.payload.decode_llc` from one pass of the C extension
(``sniffsync.io._walk.dot11``, source ``sniffsync/io/_dot11.c``).

The C pass reads the frame control, duration, addresses, sequence and QoS control of
every frame, where its LLC payload starts (an A-MSDU's first subframe) and its LLC/SNAP
ethertype, row by row with the Python decoder's values everywhere (also where a field is
not valid). The few rows with a variable body -- Block Ack / BAR, beacons and probes,
(re)association responses -- are finished by the Python decoder's own functions on those
rows only. Used when :mod:`sniffsync.io.walk`'s backend is ``"c"``; the tests compare both
decoders on every test capture and on random headers.
"""
from __future__ import annotations

import numpy as np

__all__ = ["decode_dot11_c", "decode_dot11_llc", "dot11_c_ready", "OUTPUTS"]

_U1, _U2, _U4, _U8, _I8 = np.uint8, np.uint16, np.uint32, np.uint64, np.int64
# the C pass's outputs, in its order (sniffsync/io/_dot11.c); the last six only with roles
OUTPUTS = (
    ("type", _U1), ("subtype", _U1), ("type_ok", bool), ("type_subtype", _U2), ("ts_ok", bool),
    ("fc_flags", _U1), ("has_fc", bool), ("not_x", bool), ("to_ds", bool), ("from_ds", bool),
    ("retry", bool), ("protected", bool), ("htc", bool), ("htc_ok", bool), ("duration_us", _U2),
    ("dur_ok", bool), ("aid", _U2), ("aid_ok", bool), ("ra", _U8), ("ra_ok", bool),
    ("ta", _U8), ("ta_ok", bool), ("seq", _U2), ("frag", _U2), ("sc_ok", bool),
    ("amsdu", bool), ("qos_ok", bool), ("tid", _U1), ("short", bool), ("hdr", _U1),
    ("in_sub", _U1), ("wrap", bool), ("strip", bool), ("part", _U1), ("fcs", _U4),
    ("llc_off", _I8), ("llc_end", _I8), ("l3_off", _I8), ("ethertype", _U2), ("eth_ok", bool),
    ("bssid", _U8), ("bssid_ok", bool), ("sa", _U8), ("sa_ok", bool), ("da", _U8), ("da_ok", bool),
)
_ROLE_OUTPUTS = 6
# column -> its valid mask among the outputs, in decode_dot11's column order (before the parts)
_HEAD = (("type", "type_ok"), ("subtype", "type_ok"), ("type_subtype", "ts_ok"), ("fc_flags", "has_fc"),
         ("to_ds", "not_x"), ("from_ds", "not_x"), ("retry", "not_x"), ("protected", "not_x"),
         ("htc", "htc_ok"), ("duration_us", "dur_ok"), ("aid", "aid_ok"), ("ra", "ra_ok"), ("ta", "ta_ok"))
_ROLES = (("bssid", "bssid_ok"), ("sa", "sa_ok"), ("da", "da_ok"))
_SEQ = (("seq", "sc_ok"), ("frag", "sc_ok"), ("amsdu", "qos_ok"))
# values of the output "part": rows finished in Python
PART_BA, PART_MGMT_BODY, PART_ASSOC = 1, 2, 3


def dot11_c_ready() -> bool:
    """Whether :func:`decode_dot11_c` decodes (the extension built, with this pass, and in use)."""
    from sniffsync.io import walk
    return walk.backend() == "c" and getattr(walk._c, "dot11", None) is not None


def decode_dot11_c(buf, off, end, fcs_at_end, truncated=None, columns=None):
    """``(cols, llc_off, llc_end, marks, llc)`` as :func:`sniffsync.decode.dot11.decode_dot11`
    gives the first four, and ``llc`` = ``(l3_off, ethertype, ethertype_valid)`` as
    :func:`sniffsync.decode.payload.decode_llc` gives them for the rows with ``llc_off >= 0``
    (-1 / 0 / False on the others); None when the C extension is not in use."""
    from sniffsync.decode.dot11 import _ROLES as ROLE_COLUMNS
    from sniffsync.io import walk
    if not dot11_c_ready():
        return None
    wanted = None if columns is None else set(columns)

    def want(group):
        return wanted is None or not wanted.isdisjoint(group)
    off = np.ascontiguousarray(off, np.int64)
    end = np.ascontiguousarray(end, np.int64)
    n = len(off)
    cut = np.zeros(n, bool) if truncated is None else np.ascontiguousarray(truncated, bool)
    roles = want(ROLE_COLUMNS)
    o = {name: np.zeros(n if roles or k < len(OUTPUTS) - _ROLE_OUTPUTS else 0, dt)
         for k, (name, dt) in enumerate(OUTPUTS)}
    walk._c.dot11(buf, off, end, np.ascontiguousarray(fcs_at_end, bool).view(np.uint8), cut.view(np.uint8),
                  list(o.values()), roles)
    cols = {name: (o[name], o[ok]) for name, ok in _HEAD + (_ROLES if roles else ()) + _SEQ}
    marks = []
    short = np.flatnonzero(o["short"])
    if short.size:
        marks.append((short, "802.11: header truncated"))
    _bodies(buf, o, off, end, cut, cols, marks, want)
    cols["fcs"] = (o["fcs"], o["strip"])
    if wanted is not None:
        cols = {k: v for k, v in cols.items() if k in wanted}
    return cols, o["llc_off"], o["llc_end"], marks, (o["l3_off"], o["ethertype"], o["eth_ok"])


def _bodies(buf, o, off, end, cut, cols, marks, want) -> None:
    """``tid`` and the columns of the variable bodies (Block Ack / BAR, beacons and probe
    responses, association responses) into ``cols``, by the numpy decoder's functions on
    the rows the C pass points out (output ``part``)."""
    from sniffsync.decode import dot11 as D
    from sniffsync.decode import dot11_tables as T
    n, part = len(off), o["part"]
    parts = part.any()

    def rows_of(kind):
        return np.flatnonzero(part == kind) if parts else np.zeros(0, np.int64)

    def body_end(rows):                   # (FCS excluded)
        return end[rows] - 4 * o["strip"][rows]
    tid, tid_ok = o["tid"], o["qos_ok"].copy()
    if want(D._BA + ("bad",)):            # its marks feed the bad column
        rows = rows_of(PART_BA)
        at = off[rows] + 16 + 6 * o["wrap"][rows]
        cols.update(D._block_ack(buf, at, body_end(rows), o["in_sub"][rows] == 9, cut[rows], rows, n,
                                 tid, tid_ok, marks, want))
    cols["tid"] = (tid, tid_ok)
    if want(D._MGMT):
        rows = rows_of(PART_MGMT_BODY)
        sub, body = o["subtype"][rows], off[rows] + o["hdr"][rows]
        cols.update(D._mgmt_body(buf, body, body_end(rows), T.MGMT_HAS_TSF[sub], body + T.MGMT_IE_OFF[sub],
                                 rows, n))
        rows = rows_of(PART_ASSOC)
        cols["assoc_aid"] = D._assoc_aid(buf, off[rows] + o["hdr"][rows], body_end(rows), rows, n)


def decode_dot11_llc(buf, off, end, fcs_at_end, truncated, columns, llc: bool = True):
    """``(cols, marks, llc)``: :func:`sniffsync.decode.dot11.decode_dot11`'s columns and marks
    (one C pass, else the Python decoder) and, with ``llc`` and any data frame with an LLC
    payload, ``(llc_cols, l3_off, l3_end)`` of every row: the columns of
    :func:`sniffsync.decode.payload.decode_llc` for those rows (null on the others), where
    the IP packet starts (-1: none) and ends (``end`` on the others); else ``llc`` None."""
    fast = decode_dot11_c(buf, off, end, fcs_at_end, truncated, columns)
    if fast is None:
        from sniffsync.decode.dot11 import decode_dot11
        cols, llc_off, llc_end, marks = decode_dot11(buf, off, end, fcs_at_end, truncated, columns)
    else:
        cols, llc_off, llc_end, marks, (l3_off, eth, eth_ok) = fast
    has = llc_off >= 0
    if not (llc and has.any()):
        return cols, marks, None
    if fast is None:                 # decode_llc on those rows, placed in every row
        from sniffsync.decode.payload import decode_llc
        from sniffsync.decode.table import scatter
        rows = np.flatnonzero(has)
        l_cols, sub_l3 = decode_llc(buf, llc_off[rows], llc_end[rows])
        (eth, eth_ok), = scatter(len(has), rows, l_cols).values()
        l3_off = np.full(len(has), -1, np.int64)
        l3_off[rows] = sub_l3
    return cols, marks, ({"ethertype": (eth, eth_ok)}, l3_off, np.where(has, llc_end, end))
