"""TCP acknowledgements, RTT samples, retransmission kinds and bytes in flight.

Input is the classified segment table of :func:`sniffsync.flows.classify_segments`
(sorted by fd, time, input row). Cross-direction questions ("the last ACK the other side
sent before this segment") are answered with one ``searchsorted`` on a composite key
``fd * (N + 1) + time_rank``, where ``time_rank`` orders all rows by (ts_ns, input row)
so that frames sharing a timestamp (the MPDUs of one A-MPDU) keep capture order.
The computations live in :mod:`sniffsync.flows_tcp` (pandas-free); this module is the
DataFrame API over them.
"""
from __future__ import annotations

import pandas as pd

from sniffsync.tcp.frames import seg_view
from sniffsync.tcp.core import api_column
from sniffsync.tcp.acks import (ACK_COLUMNS, DUPTHRESH, MIN_RTO_NS, RETX, RETX_NAMES, SOURCES,  # noqa: F401
                        ack_arrays, handshake_arrays, rtt_arrays)

__all__ = ["RETX_NAMES", "RETX", "analyze_acks", "rtt_samples", "handshake_rtt",
           "DUPTHRESH", "MIN_RTO_NS", "rtt_frame"]


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
    direction exceeds the RTO estimate (:func:`sniffsync.tcp.acks.rto_arrays`); else ``other``) and ``spurious`` (data
    already ACKed before it was retransmitted, or the first ACK covering it echoes a
    TSval older than the retransmission's: Eifel, RFC 3522).
    """
    out = seg.copy(deep=False)    # new columns only; copy-on-write keeps the input intact
    view = seg_view(seg)
    ack_arrays(view, min_rto_ns, dupthresh)
    for c in ACK_COLUMNS:
        out[c] = api_column(view[c])
    return out


_TEXT = pd.Series(["ack"]).dtype    # pandas' default dtype for text columns


def rtt_frame(s: dict) -> pd.DataFrame:
    """DataFrame of :func:`sniffsync.flows_tcp.rtt_arrays` columns (``source`` as text)."""
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
