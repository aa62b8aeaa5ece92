"""TCP/UDP flows from the frame table and per-segment sequence classification.

Columnar throughout: one sort by (flow direction, time), then diffs, cumulative
maxima and searchsorted lookups; no per-packet Python.

Vocabulary
----------
flow
    one 5-tuple, both directions paired (``flow`` id, ``dir`` 0 = the side that
    sent the first SYN, or the first packet when no SYN was captured).
fd
    flow direction, ``flow * 2 + dir``: the unit of sequence analysis.
MAC duplicate
    an 802.11 copy of an MPDU already counted: same transmitter, 802.11 sequence
    number and TCP/UDP identity, either a MAC retry (retry bit) seen by the same
    sniffer or the same transmission seen by another sniffer of a merged table.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from sniffsync.tcp.core import (KIND, KIND_NAMES, SEG_COLUMNS, TH_ACK, TH_FIN, TH_RST, TH_SYN,  # noqa: F401
                                Lazy, api_column, flow_arrays, grouped_cummax, segment_arrays)
from sniffsync.tcp.sequence import CLASSIFY_COLUMNS, classify_arrays

__all__ = ["KIND_NAMES", "KIND", "segments", "classify_segments", "flow_table", "grouped_cummax",
           "TH_FIN", "TH_SYN", "TH_RST", "TH_ACK", "frame_source", "seg_view", "seg_frame", "flow_frame"]


def _np(frames: pd.DataFrame, name: str, fill, dtype) -> np.ndarray:
    """Plain numpy column with nulls replaced by ``fill`` (absent column -> all ``fill``)."""
    if name not in frames:
        return np.full(len(frames), fill, dtype)
    col = frames[name]
    if isinstance(col.dtype, pd.CategoricalDtype):
        raise TypeError(name)
    return col.to_numpy(dtype=dtype, na_value=fill)


def _ip_codes(frames: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, pd.Index]:
    """Integer codes of ip_src / ip_dst in one shared category index (-1 = null)."""
    src = frames["ip_src"].astype("category")
    dst = frames["ip_dst"].astype("category")
    cats = src.cat.categories.union(dst.cat.categories)
    s_map = np.append(cats.get_indexer(src.cat.categories), -1)
    d_map = np.append(cats.get_indexer(dst.cat.categories), -1)
    return s_map[src.cat.codes.to_numpy()], d_map[dst.cat.codes.to_numpy()], cats


def frame_source(frames: pd.DataFrame):
    """``(get, ip_codes)`` of a frame table for :func:`sniffsync.flows_core.segment_arrays`."""
    def get(name, fill, dtype, rows=None):
        v = _np(frames, name, fill, dtype)
        return v if rows is None else v[rows]

    def ip_codes(rows):
        return _ip_codes(frames[["ip_src", "ip_dst"]].iloc[rows])
    return get, ip_codes


def seg_view(seg: pd.DataFrame) -> Lazy:
    """The columns of a segment DataFrame as numpy arrays (read on first use); src/dst as codes."""
    def col(c):
        v = seg[c]
        return v.cat.codes.to_numpy().astype(np.int64) if isinstance(v.dtype, pd.CategoricalDtype) \
            else v.to_numpy()
    return Lazy(thunks={c: (lambda c=c: col(c)) for c in seg.columns})


def seg_frame(seg, names) -> pd.DataFrame:
    """The segment DataFrame of :func:`segments` from core columns and endpoint names."""
    cats = pd.Index(names, dtype=object) if not isinstance(names, pd.Index) else names
    data = {k: (pd.Categorical.from_codes(seg[k], categories=cats) if len(cats) else None)
            if k in ("src", "dst") else api_column(seg[k]) for k in SEG_COLUMNS}
    out = pd.DataFrame(data)
    out["mac_dup"] = seg["mac_dup"]
    return out


def segments(frames: pd.DataFrame, dedup: bool = True) -> pd.DataFrame:
    """TCP and UDP rows of a frame table, with flow ids and MAC duplicates marked.

    Parameters
    ----------
    frames : DataFrame
        Frame table (columns per :mod:`sniffsync.schema`); 802.11, Ethernet or cooked.
    dedup : bool
        Mark MAC duplicates (``mac_dup``); analysis stages skip those rows.

    Returns
    -------
    DataFrame
        One row per TCP/UDP frame, sorted by (fd, ts_ns, input row): ``row`` (index into
        ``frames``), ``sniffer``, ``frame``, ``ts_ns``, ``flow``, ``dir``, ``fd``, ``proto``,
        ``src``/``dst`` (text endpoints of the flow's dir-0 side), ``payload_len``, ``flags``,
        ``seq_raw``, ``ack_raw`` (int64, -1 = null), ``win``, ``wscale``, ``tsval``, ``tsecr``,
        ``ta`` (-1 = wired), ``wlan_seq``, ``retry``, ``mcs``, ``mac_dup``.
    """
    seg, cats = segment_arrays(*frame_source(frames), dedup=dedup)
    return seg_frame(seg, cats)


def classify_segments(seg: pd.DataFrame) -> pd.DataFrame:
    """Relative sequence numbers, new bytes and sequence class of every TCP segment.

    Works on the non-duplicate TCP rows of :func:`segments` (MAC duplicates get kind
    ``none``). Adds ``rel_seq`` (unwrapped, 0 = first sequence number seen in the fd),
    ``seg_end`` (rel_seq + payload + SYN + FIN), ``is_data``, ``frontier`` (highest
    seg_end sent before this row), ``new_bytes`` (bytes above that frontier: goodput),
    ``kind`` (code into :data:`KIND_NAMES`) and ``deliver_ns``
    (:func:`sniffsync.flows_core.in_order_delivery`):

    * ``new``: advances the highest sequence number sent;
    * ``retransmission``: below it and its first byte was sent before (same start seen
      earlier, or not inside a hole the frontier jumped over);
    * ``out_of_order``: below it but inside a hole never sent before;
    * ``keepalive``: zero/one byte at frontier - 1.
    """
    out = seg.copy(deep=False)    # new columns only; copy-on-write keeps the input intact
    view = seg_view(seg)
    classify_arrays(view)
    for c in CLASSIFY_COLUMNS:
        out[c] = api_column(view[c])
    return out


def flow_table(seg: pd.DataFrame) -> pd.DataFrame:
    """Per flow direction totals from classified segments.

    Returns one row per fd that sent anything: endpoints, ``segments`` (non-duplicate
    rows), ``data_segments``, ``bytes`` (payload incl. retransmissions = throughput),
    ``goodput_bytes`` (new bytes), ``retransmissions``, ``out_of_order``, ``zero_windows``,
    ``mac_retries`` (frames with the retry bit), ``mac_duplicates`` (copies removed),
    ``first_ns``/``last_ns`` of data, ``ta`` (most frequent transmitter, -1 when wired).
    """
    return flow_frame(flow_arrays(seg_view(seg)), seg["src"].dtype)


def flow_frame(ft: dict, endpoints) -> pd.DataFrame:
    """DataFrame of :func:`sniffsync.flows_core.flow_arrays` columns: ``proto`` as text,
    ``src``/``dst`` categorical (``endpoints``: their CategoricalDtype or the names)."""
    data = dict(ft)
    data["proto"] = pd.Series(np.asarray(ft["proto"], np.int64)).map({6: "tcp", 17: "udp"}).array
    if isinstance(endpoints, (list, pd.Index)):
        endpoints = pd.CategoricalDtype(endpoints if isinstance(endpoints, pd.Index)
                                        else pd.Index(endpoints, dtype=object))
    elif not isinstance(endpoints, pd.CategoricalDtype):
        endpoints = None
    for c in ("src", "dst"):
        data[c] = pd.Categorical.from_codes(ft[c], dtype=endpoints) if endpoints is not None else ft[c]
    return pd.DataFrame(data)
