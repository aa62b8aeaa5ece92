"""The frame table: read captures into one row per frame, one typed column per field.

Pipeline (all vectorised past the record walk): container records -> radiotap ->
802.11 -> LLC/SNAP, or the wired link layer -> IP -> TCP/UDP, chunk by chunk
(:mod:`sniffsync.decode.chunk`). Frames are decoded in chunks of ``chunk_rows`` (bounded temporaries; the mapped file
pages of a decoded chunk are dropped), and with ``columns`` only what they need is
decoded. :func:`decode_columns` is pandas-free; the DataFrame is built at the end.
The sizes (``window_bytes`` walked at a time, ``batch_rows`` per streamed batch,
``chunk_rows`` per decoding chunk) only bound memory and spread work: results never
depend on them.
"""
from __future__ import annotations

import threading
from collections import deque

import numpy as np

from sniffsync.io.capture import WINDOW_BYTES, concat_records, iter_records, release
from sniffsync.runtime import Inline, pool, workers
from sniffsync.decode.chunk import LINK_DOT11, LINK_RADIOTAP, WIRED_LINKTYPES, decode_chunk
from sniffsync.decode.table import ColumnSink, concat_cols, frame_table

__all__ = ["read_capture", "read_captures", "read_columns", "iter_columns", "decode_columns",
           "split_records", "concat_tables", "LINK_RADIOTAP", "LINK_DOT11", "WIRED_LINKTYPES",
           "CHUNK_ROWS", "BATCH_ROWS"]

CHUNK_ROWS = 1 << 16      # frames per decoding chunk: temporaries stay in the tens of MB
BATCH_ROWS = 1 << 15      # frames per streamed batch (a Parquet row group; x workers + 1 in flight)
WALK_ROWS = 1 << 14       # frames walked at a time by a stream (their file pages then dropped)
STREAM_CHUNK_ROWS = 1 << 14   # frames a stream's worker decodes at a time (pages mapped at once)


def decode_columns(rec, sniffer: int = 0, columns=None, threads: int | None = None, *,
                   chunk_rows: int = CHUNK_ROWS):
    """Decode the records of :func:`sniffsync.io.capture.read_records` into numpy columns.

    Parameters
    ----------
    rec : sniffsync.io.capture.Records
        The capture's record index.
    sniffer : int
        Value of the ``sniffer`` column.
    columns : list of str, optional
        Columns wanted (default: all). Stages and fields no requested column needs are
        skipped (e.g. no IP/TCP decoding for a radiotap-only export); ``bad`` is always
        computable from the returned marks.
    threads : int, optional
        Decoding threads over the chunks of ``rec`` (default :func:`sniffsync.runtime.workers`).
    chunk_rows : int
        Frames decoded at a time (about; the chunks are even).

    Returns
    -------
    n : int
        Number of frames.
    cols : dict
        ``{name: (values, valid)}`` (``Cols``): numpy arrays or :class:`sniffsync.decode.table.Cat`.
    marks : list
        ``[(row indices, reason)]`` for frames that could not be fully decoded.
    """
    wanted = set(columns) if columns else None
    n = len(rec.data_off)
    cols = {
        "sniffer": (np.full(n, sniffer, np.int16), None),
        "frame": (np.arange(rec.row0 + 1, rec.row0 + n + 1, dtype=np.int64), None),
        "ts_ns": (np.asarray(rec.ts_ns, np.int64), None),
        "caplen": (np.asarray(rec.caplen, np.int32), None),
        "wirelen": (np.asarray(rec.wirelen, np.int32), None),
        "linktype": (np.asarray(rec.linktype).astype(np.int32), None),
    }
    marks = list(rec.marks)
    parts = []
    bounds = _even_bounds(n, chunk_rows)
    # chunks are independent and numpy releases the GIL: decode them on worker threads
    with Inline() if threads == 1 else pool(len(bounds), limit=threads) as ex:
        done = ex.map(lambda b: decode_chunk(rec, b[0], b[1], wanted), bounds)
        for (lo, hi), (chunk_cols, chunk_marks) in zip(bounds, done):
            parts.append(chunk_cols)        # (only wanted columns: _Chunk.stage drops the rest)
            marks.extend((rows + lo, why) for rows, why in chunk_marks)
            # the chunk's bytes are decoded: drop its file pages
            release(rec, int(rec.data_off[hi]) - 64 if hi < n else int(rec.data_off[-1]) + int(rec.caplen[-1]),
                    int(rec.data_off[lo]) - 16)
    if parts:
        cols.update(concat_cols(parts, consume=True))
    else:
        cols.update(decode_chunk(rec, 0, 0, wanted)[0])
    if wanted is not None:
        cols = {k: v for k, v in cols.items() if k in wanted}
    return n, cols, marks


def _even_bounds(n: int, size: int) -> list:
    """``[(lo, hi)]`` splitting ``0..n`` into equal parts of about ``size`` rows (at most
    1.5 x ``size``): a window walked a few records past ``size`` stays one part, not two."""
    k = max(1, round(n / size))
    cuts = [n * i // k for i in range(k + 1)]
    return [(lo, hi) for lo, hi in zip(cuts[:-1], cuts[1:]) if hi > lo]


def split_records(rec, rows: int = BATCH_ROWS):
    """Consecutive slices of ``rec`` of about ``rows`` records (``row0`` and marks adjusted)."""
    n = len(rec.data_off)
    bounds = _even_bounds(n, rows)
    if len(bounds) <= 1:
        yield rec
        return
    for lo, hi in bounds:
        marks = []
        for r, why in rec.marks:
            r = np.asarray(r, np.int64)
            r = r[(r >= lo) & (r < hi)] - lo
            if r.size:
                marks.append((r, why))
        yield rec._replace(
            data_off=rec.data_off[lo:hi], caplen=rec.caplen[lo:hi], wirelen=rec.wirelen[lo:hi],
            ts_ns=rec.ts_ns[lo:hi], linktype=rec.linktype[lo:hi], iface=rec.iface[lo:hi],
            marks=marks, problems=rec.problems if lo == 0 else [], row0=rec.row0 + lo)


def iter_columns(path, sniffer: int = 0, columns=None, *, post=None, ahead: int | None = None,
                 batch_rows: int = BATCH_ROWS, chunk_rows: int = STREAM_CHUNK_ROWS,
                 window_bytes: int = WINDOW_BYTES, walk_rows: int = WALK_ROWS, drop_walked: bool = True,
                 fail=None):
    """Walk and decode one capture at once: yields, in file order, one result per batch.

    The main thread walks the record headers (the one per-record loop, in C when built:
    :mod:`sniffsync.io.walk`) while
    batches of about ``batch_rows`` frames are decoded on worker threads (numpy releases
    the GIL), so the walk costs almost nothing on two cores.

    Memory: the walk goes ``walk_rows`` records at a time and drops each window's file
    pages once walked; a worker maps again (from the page cache) the ``chunk_rows``
    records it decodes and drops them after. So the capture's pages held at once are a
    few chunks, not the batches in flight (at 730 B per frame, a 64k batch is 47 MB).

    Parameters
    ----------
    path, sniffer, columns
        As :func:`read_capture`.
    post : callable, optional
        ``post(rec, n, cols, marks)`` run on the worker right after a batch is decoded
        (e.g. conversion to Arrow); its result is yielded instead of the tuple.
    ahead : int, optional
        Batches decoded ahead of the consumer at most (default: one per worker thread, plus
        one): bounds the decoded columns held at once.
    batch_rows, chunk_rows, window_bytes, walk_rows : int
        Frames per batch, frames per decoding chunk, bytes and frames walked at a time.
    drop_walked : bool
        Drop each walked window's pages (False: they stay mapped until their batch is
        decoded, at most ``ahead`` + 1 batches: the decoder then does not map them again).
    fail : callable, optional
        ``fail(rec)`` run on the worker when decoding the batch ``rec`` raises (before the
        error reaches the consumer): e.g. to wake a ``post`` of a later batch waiting for it.

    Yields
    ------
    tuple
        ``(rec, n, cols, marks)`` per batch (``rec`` the batch's :class:`Records`, marks
        relative to it), or ``post``'s result.
    """
    def work(rec):
        try:
            out = (rec, *decode_columns(rec, sniffer, columns, threads=1, chunk_rows=chunk_rows))
        except BaseException:
            if fail is not None:
                fail(rec)
            raise
        return post(*out) if post is not None else out

    pending = deque()
    ahead = workers() + 1 if ahead is None else ahead
    with pool() as ex:
        for rec in _batches(iter_records(path, drop_walked, batch_rows=min(walk_rows, batch_rows),
                                         window_bytes=window_bytes), batch_rows):
            pending.append(ex.submit(work, rec))
            while pending and (len(pending) > ahead or pending[0].done()):
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def _batches(walked, rows: int):
    """Consecutive walked windows joined into batches of about ``rows`` records (a
    window larger than that, e.g. a whole pcapng, split evenly)."""
    held, count = [], 0
    for rec in walked:
        held.append(rec)
        count += len(rec.data_off)
        if count >= rows:
            yield from split_records(concat_records(held), rows)
            held, count = [], 0
    if held:
        yield from split_records(concat_records(held), rows)


def read_columns(path, sniffer: int = 0, columns=None, records: bool = True, *,
                 batch_rows: int = BATCH_ROWS, chunk_rows: int = CHUNK_ROWS,
                 window_bytes: int = WINDOW_BYTES, walk_rows: int = WALK_ROWS):
    """Records and decoded numpy columns of one capture, walked and decoded at once.

    ``batch_rows``, ``chunk_rows``, ``window_bytes`` and ``walk_rows`` are as
    :func:`iter_columns` (``walk_rows`` a little above ``batch_rows``: each walked window
    is a batch of its own, no window joined to the next; more of the file mapped at once).

    Returns
    -------
    rec : Records or None
        The whole file's record index (as :func:`sniffsync.io.capture.read_records`), or
        None with ``records=False`` (callers that need neither the record index nor
        its problem lines skip concatenating it).
    n, cols, marks
        As :func:`decode_columns`.
    """
    recs, marks, sink = [], [], _InOrder()
    for rec, n, batch_marks in iter_columns(path, sniffer, columns, batch_rows=batch_rows, chunk_rows=chunk_rows,
                                            window_bytes=window_bytes, walk_rows=walk_rows, post=sink.add,
                                            fail=sink.fail):
        marks.extend((np.asarray(r, np.int64) + rec.row0, why) for r, why in batch_marks)
        if records:
            recs.append(rec)
    rec = concat_records(recs) if records else None
    return rec, sink.n, sink.result(), marks


class _InOrder:
    """A :class:`ColumnSink` fed by the decoding workers: each copies its batch in (the
    copy and its page faults were ~30 % of the main thread's read), in file order (a
    batch waits for the one before it; a failed batch wakes the later ones: they stop, and
    the consumer meets the failed batch's own error first)."""

    def __init__(self):
        self.sink, self.next_row, self.failed_row = None, 0, float("inf")
        self.turn = threading.Condition()

    def add(self, rec, n: int, cols, marks):
        """``iter_columns``' ``post``: ``cols`` added; ``(rec, n, marks)`` passed on."""
        with self.turn:
            self.turn.wait_for(lambda: self.next_row == rec.row0 or rec.row0 > self.failed_row)
            if rec.row0 > self.failed_row:
                raise RuntimeError("an earlier batch failed")     # (its own error is raised first)
            try:
                if self.sink is None:
                    self.sink = ColumnSink(_rows_estimate(rec))
                self.sink.add(cols, n)             # the batch's own arrays are freed here
                self.next_row += len(rec.data_off)
            except BaseException:
                self.failed_row = rec.row0
                raise
            finally:
                self.turn.notify_all()
        return rec, n, marks

    def fail(self, rec) -> None:
        with self.turn:
            self.failed_row = min(self.failed_row, rec.row0)
            self.turn.notify_all()

    @property
    def n(self) -> int:
        return self.sink.n

    def result(self):
        return self.sink.result()


def _rows_estimate(rec) -> int:
    """Frames in the whole capture, judged by the first batch's bytes per frame (+25 %)."""
    n = len(rec.data_off)
    if not n:
        return 1024
    end = int(rec.data_off[-1]) + int(rec.caplen[-1])
    return int(n * rec.buf.size / max(end, 1) * 1.25) + 1024


def read_capture(path, *, sniffer: int = 0, columns=None, batch_rows: int = BATCH_ROWS,
                 chunk_rows: int = CHUNK_ROWS, window_bytes: int = WINDOW_BYTES):
    """Read one capture (pcap, pcapng, optionally gzip-compressed) into a frame table.

    Parameters
    ----------
    path : str or os.PathLike
        The capture file.
    sniffer : int
        Value of the ``sniffer`` column (the input's index when reading several).
    columns : list of str, optional
        Keep only these columns (see ``docs/columns.md``).
    batch_rows, chunk_rows, window_bytes : int
        As :func:`iter_columns` (memory and threads only, never the result).

    Returns
    -------
    pandas.DataFrame
        One row per record, columns per :mod:`sniffsync.decode.schema`.
    """
    _, n, cols, marks = read_columns(path, sniffer, columns, batch_rows=batch_rows,
                                     chunk_rows=chunk_rows, window_bytes=window_bytes)
    return frame_table(n, cols, marks, columns)


def concat_tables(tables: list):
    """Concatenate frame tables, keeping categorical columns categorical."""
    if len(tables) == 1:
        return tables[0]
    import pandas as pd
    from pandas.api.types import union_categoricals
    cats = [c for c in tables[0].columns if isinstance(tables[0][c].dtype, pd.CategoricalDtype)]
    merged = {c: union_categoricals([t[c] for t in tables], ignore_order=True) for c in cats}
    out = pd.concat([t.drop(columns=cats) for t in tables], ignore_index=True)
    for c in cats:
        out[c] = merged[c]
    return out[tables[0].columns]


def read_captures(paths, columns=None):
    """Read several captures into one frame table; ``sniffer`` is each file's index in ``paths``."""
    return concat_tables([read_capture(p, sniffer=i, columns=columns) for i, p in enumerate(paths)])
