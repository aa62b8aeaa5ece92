"""The DataFrame API of the TCP analysis: segments, their sequence classes, per-direction
flow totals, ACK analysis, RTT samples and handshakes, as pandas tables.

A thin layer: each function reads its input's columns as numpy arrays
(:func:`seg_view`), runs the numpy core (:mod:`sniffsync.tcp.segments`,
:mod:`~sniffsync.tcp.sequence`, :mod:`~sniffsync.tcp.acks`, :mod:`~sniffsync.tcp.rtt`,
:mod:`~sniffsync.tcp.flows`) and builds the DataFrame of its result. Vocabulary (flow,
fd, MAC duplicate) in :mod:`sniffsync.tcp.segments`.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from sniffsync.tcp.acks import ACK_COLUMNS, DUPTHRESH, RETX, RETX_NAMES, ack_arrays
from sniffsync.tcp.columns import Lazy
from sniffsync.tcp.flows import flow_arrays
from sniffsync.tcp.rtt import MIN_RTO_NS, SOURCES, handshake_arrays, rtt_arrays
from sniffsync.decode.quality import good_fcs_mask
from sniffsync.tcp.segments import SEG_COLUMNS, segment_arrays
from sniffsync.tcp.sequence import CLASSIFY_COLUMNS, KIND, KIND_NAMES, classify_arrays

__all__ = ["KIND_NAMES", "KIND", "RETX_NAMES", "RETX", "segments", "classify_segments", "flow_table",
           "analyze_acks", "rtt_samples", "handshake_rtt", "frame_source", "seg_view", "seg_frame",
           "flow_frame", "rtt_frame", "api_column"]


def api_column(v: np.ndarray) -> np.ndarray:
    """A core column as the pandas API gives it: integers the core holds narrow (codes,
    flags, ports, windows) widened to int64, and always a writable array of its own."""
    if v.dtype.kind == "i" and v.dtype.itemsize < 8:
        return v.astype(np.int64)
    return v if v.flags.writeable else np.array(v)


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
    """``(get, ip_codes)`` of a frame table for :func:`sniffsync.tcp.segments.segment_arrays`."""
    def get(name, fill, dtype, rows=None):
        # fcs_bad as the analysis sees it: all False under --keep-bad-fcs (decode.quality)
        v = ~good_fcs_mask(frames) if name == "fcs_bad" else _np(frames, name, fill, dtype)
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
        Frame table (columns per :mod:`sniffsync.decode.schema`); 802.11, Ethernet or cooked.
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
    (:func:`sniffsync.tcp.sequence.in_order_delivery`):

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
    ``goodput_bytes`` (new bytes + ``inferred_bytes``: bytes never captured that the
    receiver acknowledged, :mod:`sniffsync.tcp.holes`; 0 unless the ACK analysis ran on
    the same table), ``retransmissions``, ``out_of_order``, ``zero_windows``,
    ``mac_retries`` (frames with the retry bit), ``mac_duplicates`` (copies removed),
    ``first_ns``/``last_ns`` of payload transmissions (retransmissions and MAC retries
    included) or of ACKs that inferred bytes, ``ta`` (most frequent transmitter, -1 when wired).
    """
    return flow_frame(flow_arrays(seg_view(seg)), seg["src"].dtype)


def flow_frame(ft: dict, endpoints) -> pd.DataFrame:
    """DataFrame of :func:`sniffsync.tcp.flows.flow_arrays` columns: ``proto`` as text,
    ``src``/``dst`` categorical (``endpoints``: their CategoricalDtype or the names)."""
    data = dict(ft)
    if "ta" in data:                            # MAC columns are colon-hex text at the edges
        from sniffsync.decode.macs import int_mac_texts
        data["ta"] = int_mac_texts(data["ta"])
    data["proto"] = pd.Series(np.asarray(ft["proto"], np.int64)).map({6: "tcp", 17: "udp"}).array
    if isinstance(endpoints, (list, pd.Index)):
        endpoints = pd.CategoricalDtype(endpoints if isinstance(endpoints, pd.Index)
                                        else pd.Index(endpoints, dtype=object))
    elif not isinstance(endpoints, pd.CategoricalDtype):
        endpoints = None
    for c in ("src", "dst"):
        data[c] = pd.Categorical.from_codes(ft[c], dtype=endpoints) if endpoints is not None else ft[c]
    return pd.DataFrame(data)


def analyze_acks(seg: pd.DataFrame, min_rto_ns: int = MIN_RTO_NS,
                 dupthresh: int = DUPTHRESH) -> pd.DataFrame:
    """Acknowledgement analysis of classified segments.

    Adds ``tr`` (global time rank), ``ack_rel`` (ACK number in the *other* direction's
    relative sequence space, -1 without ACK flag), ``dup_ack`` and ``dup_ack_num``
    (Wireshark's definition: no payload, no SYN/FIN/RST, same ACK and window as the
    previous ACK of the same direction), ``acked`` (highest ACK the other side sent
    before this row), ``bytes_in_flight`` (data rows: frontier incl. this row minus
    ``acked``), ``retx_kind`` (code into :data:`RETX_NAMES`: ``fast`` when the last ACK
    from the other side before it was its ``dupthresh``-th or later duplicate ACK for this
    sequence number; else ``timeout`` when the gap since the previous data segment of the
    direction exceeds its RTO estimate (:func:`sniffsync.tcp.rtt.rto_arrays` of its Karn
    ACK samples); else ``other``) and ``spurious`` (data already ACKed before it was
    retransmitted, or the first ACK covering it echoes a TSval older than the
    retransmission's: Eifel, RFC 3522).
    """
    out = seg.copy(deep=False)    # new columns only; copy-on-write keeps the input intact
    view = seg_view(seg)
    ack_arrays(view, min_rto_ns, dupthresh)
    for c in ACK_COLUMNS:
        out[c] = api_column(view[c])
    return out


_TEXT = pd.Series(["ack"]).dtype    # pandas' default dtype for text columns


def rtt_frame(s: dict) -> pd.DataFrame:
    """DataFrame of :func:`sniffsync.tcp.rtt.rtt_arrays` columns (``source`` as text)."""
    data = dict(s)
    data["source"] = pd.array(SOURCES[s["source"]], dtype=_TEXT)
    return pd.DataFrame(data)


def rtt_samples(seg: pd.DataFrame, karn: bool = True, tsecr: bool = True) -> pd.DataFrame:
    """RTT samples as seen at the capture point.

    ``source == 'ack'``: an ACK that raises the cumulative ACK to exactly the end of an
    earlier segment (as tcptrace and Wireshark's ``tcp.analysis.ack_rtt``); with ``karn``
    no sample when that segment end was sent more than once before the ACK or any
    retransmission of the direction happened between segment and ACK (Karn's rule).
    ``source == 'tsecr'``: the first ACK advancing the cumulative ACK that echoes a TSval,
    timed from the first segment carrying that TSval.

    Returns
    -------
    DataFrame
        ``fd`` (data direction), ``flow``, ``ts_ns`` (ACK time), ``rtt_ns``, ``source``,
        ``data_row``, ``ack_row`` (indices into the frame table).
    """
    return rtt_frame(rtt_arrays(seg_view(seg), karn=karn, tsecr=tsecr))


def handshake_rtt(seg: pd.DataFrame) -> pd.DataFrame:
    """SYN -> SYN/ACK -> ACK timing per TCP flow, as seen at the capture point.

    Uses the last SYN before the first SYN/ACK (Karn: a retransmitted SYN restarts the
    clock) and the first ACK from the initiator after it. ``hs_rtt_ns`` = ACK - SYN
    (Wireshark's ``tcp.analysis.initial_rtt``); ``server_ns`` = SYN/ACK - SYN (capture
    point to responder and back); ``client_ns`` = ACK - SYN/ACK.
    """
    return pd.DataFrame(handshake_arrays(seg_view(seg)))
