"""The merge's first input read while the merge itself is imported (pandas: ~0.3 s).

``sniffsync merge`` would import :mod:`sniffsync.sync.merge` (pandas, pyarrow) and only
then start reading. The reader is numpy only and its C passes release the GIL, so the
command starts the first capture's read on a thread here (no pandas imported) and hands
it to :func:`sniffsync.sync.merge.merge`, which takes it as that input's read.
"""
from __future__ import annotations

import threading

from airtime.columns import GROUPING_COLUMNS

__all__ = ["NEEDED_COLUMNS", "ReadAhead", "read_columns_of", "read_ahead"]

# what read -> align -> sync -> match -> merged table -> pcapng need (merge(columns=...))
NEEDED_COLUMNS = tuple(dict.fromkeys((
    "sniffer", "frame", "ts_ns", "caplen", "wirelen", "linktype", "bad",          # record, write
    "bssid", "beacon_tsf_us", "ba_ssn", "ba_bitmap_lo", "seq", "frag", "duration_us",  # keys
    "fcs", "signal_dbm",
    *GROUPING_COLUMNS)))          # PPDU grouping and airtime (airtime.ppdu.group_ppdus)


def read_columns_of(columns) -> list | None:
    """The columns the reader decodes for a merge wanting ``columns`` (None: all).

    "bad" alone would make the reader decode LLC/IP/TCP for their marks (~40 % of the
    read); without it, "bad" is still built from the record, radiotap and 802.11 marks,
    all the anchors look at (anchors.PAYLOAD_MARKS)."""
    if columns is None:
        return None
    return [c for c in dict.fromkeys([*NEEDED_COLUMNS, *columns]) if c != "bad"]


class ReadAhead:
    """One capture's ``read_columns`` on a daemon thread, handed over once: :meth:`take`
    returns it (or raises its error) and forgets it, so whoever still holds this object
    (the command, ``merge()``'s argument) does not keep the decoded columns alive."""

    def __init__(self, path, read):
        self._done, self._out, self._err = threading.Event(), None, None
        threading.Thread(target=self._work, args=(path, read), name="sniffsync-read-ahead",
                         daemon=True).start()

    def _work(self, path, read) -> None:
        from sniffsync.decode.frames import read_columns
        try:
            self._out = read_columns(path, 0, read)
        except BaseException as exc:     # noqa: BLE001 (raised where the merge takes it)
            self._err = exc
        finally:
            self._done.set()

    def take(self):
        """``(rec, n, cols, marks)`` of the read (waited for), once."""
        self._done.wait()
        out, err, self._out, self._err = self._out, self._err, None, None
        if err is not None:
            raise err
        if out is None:
            raise RuntimeError("the read-ahead was taken already")
        return out


def read_ahead(path, columns) -> ReadAhead | None:
    """:class:`ReadAhead` of ``read_columns(path, 0, read_columns_of(columns))``; None for an
    earlier merge's output, which is read another way."""
    from sniffsync.sync.mergedfile import file_meta
    if file_meta(path) is not None:
        return None
    return ReadAhead(path, read_columns_of(columns))
