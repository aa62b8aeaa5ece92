"""One run's frames as the fairness analysis reads them (:class:`Capture`), and their 802.11
preparation: frames the reader flagged ``ts_outlier`` left out, segments dated at the end of
their PPDU, the PPDU table of the cross-layer view.
"""
from __future__ import annotations

import threading
from concurrent.futures import Future

import numpy as np

from airtime.columns import GROUPING_COLUMNS
from sniffsync.errors import UsageError
from sniffsync.runtime import release_free_heap, workers
from sniffsync.tcp.columns import cat_codes, frame_getter

__all__ = ["STAMPS", "OUTLIER", "TCP_COLUMNS", "TCP_ONLY", "PPDU_AND_TCP", "Capture", "skipping", "airtime_frames"]

STAMPS = ("capture", "end")      # what a table's ts_ns mark (see Capture)
OUTLIER = "ts_outlier"           # the reader's mark of a wild timestamp: such frames are ignored
# frame columns of the TCP analysis; the PPDU grouping reads the rest (and some of these)
TCP_COLUMNS = {"sniffer", "frame", "ts_ns", "linktype", "ip_src", "ip_dst", "ip_proto", "sport", "dport",
               "tcp_seq", "tcp_ack", "tcp_flags", "tcp_win", "tcp_wscale", "tcp_payload_len", "tcp_tsval",
               "tcp_tsecr", "udp_len", "ta", "seq", "retry", "mcs"}
_PPDU_READS = TCP_COLUMNS & set(GROUPING_COLUMNS)      # the grouping reads these too
# read by the TCP analysis only (not ``linktype``: it says whether to group PPDUs): an
# 802.11 capture's reader parks them while the PPDUs are grouped (sniffsync.fairness.spill)
TCP_ONLY = frozenset(TCP_COLUMNS - set(GROUPING_COLUMNS) - {"linktype"})
PPDU_AND_TCP = frozenset(_PPDU_READS)     # read by both: a copy parked, the grouping frees its own
# frames up to which the PPDU extents are estimated beside the TCP analysis (both peaks at
# once: ~+100 MB per 1M frames); above, one after the other (issue 16's 0.5x on 5M frames)
OVERLAP_MAX_ROWS = 1 << 21


class Capture:
    """One run's frames as the analysis reads them.

    ``get`` and ``ip_codes`` as :func:`sniffsync.tcp.segments.segment_arrays` takes them;
    ``to_frame()`` gives the frame-table DataFrame (built only when the ``airtime``
    package needs one: 802.11 captures with radiotap). ``stamps`` says what the frames'
    ``ts_ns`` mark: ``"capture"``, each sniffer's own stamps (a capture file as read), or
    ``"end"``, the end of each frame's PPDU (a merged table: the merge moved them there).
    """

    def __init__(self, get, ip_codes, to_frame, stamps: str = "capture", skip=None):
        if stamps not in STAMPS:
            raise UsageError(f"stamps must be capture or end, not {stamps!r}")
        self.get, self.ip_codes, self.to_frame, self.stamps = get, ip_codes, to_frame, stamps
        self.skip = skip            # frames not analysed (bad == "ts_outlier"), or None
        self.columns = None         # (n, cols, marks) of from_columns: the analysis may free them

    @classmethod
    def from_columns(cls, n: int, cols: dict, marks=(), columns=None, consume: bool = False,
                     stamps: str = "capture", release: bool = False) -> "Capture":
        """From :func:`sniffsync.decode.frames.decode_columns` output (no pandas).

        ``consume``: the analysis frees each column of ``cols`` once it has read it (a
        lower memory peak for a capture analysed once; ``to_frame`` is then unavailable).
        ``release``: the analysis may free columns of ``cols`` (802.11: the radio columns
        once the PPDUs are grouped, the rest as read).
        """
        def to_frame():
            if consume:
                raise ValueError("the columns of a consumed capture are gone")
            from sniffsync.decode.table import frame_table
            return frame_table(n, cols, list(marks), columns)
        if hasattr(cols, "restore"):      # columns parked by the reader (fairness.spill): all, for a table
            to_frame = _restoring(cols, to_frame)
        cap = cls(frame_getter(n, cols, consume), lambda rows: cat_codes(n, cols, rows, consume),
                  to_frame, stamps, _outliers(n, cols.get("bad"), marks))
        cap.columns = (n, cols, list(marks)) if release and not consume else None
        return cap

    @classmethod
    def from_frame(cls, frames, stamps: str = "capture") -> "Capture":
        """From a frame-table DataFrame."""
        from sniffsync.tcp.frames import frame_source
        get, ip_codes = frame_source(frames)
        bad = frames["bad"] if "bad" in frames else None
        skip = None if bad is None else (bad == OUTLIER).to_numpy(bool, na_value=False)
        return cls(get, ip_codes, lambda: frames, stamps, skip if skip is not None and skip.any() else None)


def _restoring(cols, to_frame):
    """``to_frame`` that first reads back every column parked in ``cols``
    (:class:`sniffsync.fairness.spill.SpilledCols`; the analysis reads them one by one)."""
    def to_frame_():
        cols.restore()
        return to_frame()
    return to_frame_


def _outliers(n: int, bad, marks) -> np.ndarray | None:
    """Rows marked ``ts_outlier`` (in the marks or a decoded ``bad`` column), or None."""
    skip = np.zeros(n, bool)
    for rows, why in marks:
        if why == OUTLIER:
            skip[np.asarray(rows, np.int64)] = True
    if bad is not None:
        from sniffsync.decode.table import as_cat
        cat = as_cat(*bad) if isinstance(bad, tuple) else as_cat(bad, None)
        if OUTLIER in cat.categories:
            skip |= np.asarray(cat.codes) == list(cat.categories).index(OUTLIER)
    return skip if skip.any() else None


def skipping(get, skip):
    """``get`` whose frames in ``skip`` have no transport port: segment_arrays leaves them out."""
    if skip is None:
        return get

    def masked(name, fill, dtype, rows=None):
        v = get(name, fill, dtype, rows)
        if name != "sport":
            return v
        return np.where(skip if rows is None else skip[rows], np.asarray(-1, v.dtype), v)
    return masked


def airtime_frames(cap: Capture, ppdus):
    """802.11 captures: ``(cap, ppdus)`` with segments dated at their PPDU's end and the
    PPDU table of the cross-layer view (``ppdus`` when given, else grouped here; a
    ``Future`` of it while it is computed beside the caller's work: :func:`resolved`)."""
    from airtime.ppdu import align_to_ppdu_end, group_ppdus    # (imports pandas: 802.11 only)
    if cap.columns is not None and cap.stamps == "capture":
        return _airtime_columns(cap, ppdus)
    if cap.skip is not None:                  # wild stamps group into no PPDU
        cap = Capture.from_frame(cap.to_frame()[~cap.skip].reset_index(drop=True), cap.stamps)
    if cap.stamps == "end":
        return cap, group_ppdus(cap.to_frame(), stamps="end").ppdus if ppdus is None else ppdus
    # an MPDU reaches the receiver when its PPDU ends: date segments there, whatever the
    # sniffer's TSFT convention (an A-MPDU can last 5 ms); one grouping serves both
    frames = cap.to_frame()
    grouped = group_ppdus(frames)
    frames, _ = align_to_ppdu_end(frames, grouped=grouped)
    return Capture.from_frame(frames, "end"), grouped.ppdus if ppdus is None else ppdus


def _airtime_columns(cap: Capture, ppdus):
    """:func:`airtime_frames` of decoded columns, with a lower memory peak and no pandas: the
    PPDUs are grouped on the radio columns only (no TCP/IP ones; :class:`airtime.framecols.Columns`),
    then the columns only the grouping read are freed and the TCP analysis consumes the rest
    as it reads them. Columns the reader parked on disk (:mod:`sniffsync.fairness.spill`: the
    TCP-only ones, and copies of those both stages read, which the grouping then frees) come
    back after it.

    When no sniffer stamps PPDU starts (nothing moves) and the capture has at most
    :data:`OVERLAP_MAX_ROWS` frames, the extent estimate (the grouping's larger half) runs on
    a thread of its own beside the TCP analysis: ``ppdus`` is then a ``Future``
    (:func:`resolved`)."""
    from airtime.framecols import Columns
    from airtime.ppdu import group_ppdus, ppdu_end_shift_ns
    n, cols, marks = cap.columns
    keep = np.ones(n, bool) if cap.skip is None else ~cap.skip     # wild stamps group into no PPDU
    copied = cols.spill.copy if hasattr(cols, "restore") else frozenset()
    radio = [c for c in cols if c not in TCP_COLUMNS or c in _PPDU_READS]
    # no copies; the columns only the grouping reads (or copied on disk) move into its mapping
    moved = {c for c in radio if c not in TCP_COLUMNS or c in copied}
    frames = Columns(n, {c: cols.pop(c) if c in moved else cols[c] for c in radio})
    if cap.skip is not None:
        frames = frames.take(keep)
    release_free_heap()                # the reader's freed batches
    pending = group_ppdus(frames, release=True, defer=True)   # (frees the columns as its steps are done)
    del frames
    moves = "start" in pending.tsft_at.values()
    # beside the TCP analysis only when it reads no column the grouping holds (else both
    # would read one array: fine, but not tested) and the two peaks may add up
    beside = not moves and n <= OVERLAP_MAX_ROWS and not (set(radio) - moved) and workers() > 1
    if beside:
        grouped = None
        if ppdus is None:              # (given PPDUs and no stamp to move: no extent needed)
            # (bound now: `del pending` below would otherwise race the thread for the name)
            ppdus = _background(lambda p=pending: _lite(p.finish()))
    else:
        grouped = pending.finish()
        # the cross-layer view reads three PPDU columns (sniffsync.fairness.crosslayer)
        ppdus = _lite(grouped) if ppdus is None else ppdus
    del pending
    release_free_heap()                # the grouping's freed temporaries, before the TCP analysis
    # (parked columns come back from disk as they are read: fairness.spill)
    for c in [c for c in cols if c not in TCP_COLUMNS]:
        del cols[c]
    end_ns = np.array(cols["ts_ns"][0], np.int64)
    if moves:
        sniffer = frame_getter(n, cols)("sniffer", 0, np.int64)
        end_ns[keep] += ppdu_end_shift_ns(sniffer[keep], grouped)
        del sniffer
    del grouped
    cols["ts_ns"] = (end_ns, None)
    release_free_heap()                # (the frame -> PPDU map)
    out = Capture.from_columns(n, cols, marks, consume=True, stamps="end")
    out.skip = cap.skip
    return out, ppdus


def _background(fn) -> Future:
    """``fn()`` on a thread of its own (it ends with it); its result or error in the Future."""
    done = Future()

    def run():
        try:
            done.set_result(fn())
        except BaseException as exc:              # raised where the result is read
            done.set_exception(exc)
    threading.Thread(target=run, name="ppdu-extent", daemon=True).start()
    return done


def resolved(ppdus):
    """``ppdus`` of :func:`airtime_frames`, waited for when it is a ``Future``."""
    return ppdus.result() if isinstance(ppdus, Future) else ppdus


def wait_quietly(ppdus) -> None:
    """Wait for a ``Future`` of :func:`airtime_frames` while another error propagates (its
    own error, if any, is the lesser one: dropped)."""
    if isinstance(ppdus, Future):
        ppdus.exception()


def _lite(grouped) -> dict:
    """The PPDU columns the cross-layer view reads (numpy; ``ta`` -1 where none)."""
    return {c: grouped.column(c, np.int64, -1) for c in ("ta", "start_ns", "airtime_ns")}
