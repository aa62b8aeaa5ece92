"""The merge's first input read while the merge itself is imported (pandas: ~0.3 s).

``sniffsync merge`` would import :mod:`sniffsync.sync.merge` (pandas, pyarrow) and only
then start reading. The reader is numpy only and its C passes release the GIL, so the
command starts the first capture's read on a thread here (no pandas imported) and hands
it to :func:`sniffsync.sync.merge.merge`, which takes it as that input's read.
"""
from __future__ import annotations

import threading
from concurrent.futures import Future

from airtime.columns import GROUPING_COLUMNS

__all__ = ["NEEDED_COLUMNS", "read_columns_of", "read_ahead"]

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


def read_ahead(path, columns) -> Future | None:
    """A future of ``read_columns(path, 0, read_columns_of(columns))``, read on a daemon
    thread (an error is raised by ``result()``); None for an earlier merge's output,
    which is read another way."""
    from sniffsync.sync.mergedfile import file_meta
    if file_meta(path) is not None:
        return None
    done: Future = Future()

    def work():
        from sniffsync.decode.frames import read_columns
        try:
            done.set_result(read_columns(path, 0, read_columns_of(columns)))
        except BaseException as exc:     # noqa: BLE001 (raised where the merge takes it)
            done.set_exception(exc)
    threading.Thread(target=work, name="sniffsync-read-ahead", daemon=True).start()
    return done
