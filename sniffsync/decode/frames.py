"""The frame table: read captures into one row per frame, one typed column per field.

Pipeline (all vectorised past the record walk): container records -> radiotap ->
802.11 -> LLC/SNAP, or the wired link layer -> IP -> TCP/UDP. Each stage decodes the
subset of rows it applies to; :func:`sniffsync.table.scatter` places the results.
Frames are decoded in chunks of ``CHUNK_ROWS`` (bounded temporaries; the mapped file
pages of a decoded chunk are dropped), and with ``columns`` only what they need is
decoded. :func:`decode_columns` is pandas-free; the DataFrame is built at the end.
"""
from __future__ import annotations

import os
from collections import deque
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from sniffsync.io.capture import concat_records, iter_records, prefetch, release
from sniffsync.runtime import Inline
from sniffsync.decode.linklayer import decode_link
from sniffsync.decode.payload import decode_l3, decode_llc
from sniffsync.decode.schema import COLUMNS
from sniffsync.decode.table import ColumnSink, concat_cols, frame_table, scatter

__all__ = ["read_capture", "read_captures", "read_columns", "iter_columns", "decode_columns",
           "concat_tables", "LINK_RADIOTAP", "LINK_DOT11", "WIRED_LINKTYPES", "CHUNK_ROWS"]

CHUNK_ROWS = 1 << 16      # frames per decoding chunk: temporaries stay in the tens of MB
BATCH_ROWS = 1 << 16      # frames per streamed batch (a Parquet row group)
THREADS = min(2, os.cpu_count() or 1)

LINK_RADIOTAP = 127
LINK_DOT11 = 105
WIRED_LINKTYPES = (1, 101, 113, 228, 229, 276)
_RADIOTAP = {c.name for c in COLUMNS if c.source.startswith("radiotap")} | {"rt_len", "mpdu_len", "phy"}


def _stage(n, rows, result, cols, marks):
    """Merge one stage's subset output into the full-length columns and marks."""
    sub_cols, sub_marks = result
    cols.update(scatter(n, rows, sub_cols))
    marks.extend((rows[np.asarray(r, np.int64)], why) for r, why in sub_marks)


_RECORD = {"sniffer", "frame", "ts_ns", "caplen", "wirelen", "linktype", "bad"}
_PAYLOAD = {c.name for c in COLUMNS[COLUMNS.index(next(c for c in COLUMNS if c.name == "ethertype")):]}


def decode_columns(rec, sniffer: int = 0, columns=None, threads: int = THREADS):
    """Decode the records of :func:`sniffsync.capture.read_records` into numpy columns.

    Parameters
    ----------
    rec : sniffsync.capture.Records
        The capture's record index.
    sniffer : int
        Value of the ``sniffer`` column.
    columns : list of str, optional
        Columns wanted (default: all). Stages and fields no requested column needs are
        skipped (e.g. no IP/TCP decoding for a radiotap-only export); ``bad`` is always
        computable from the returned marks.
    threads : int
        Decoding threads over the chunks of ``rec``.

    Returns
    -------
    n : int
        Number of frames.
    cols : dict
        ``{name: (values, valid)}`` (``Cols``): numpy arrays or :class:`sniffsync.table.Cat`.
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
    bounds = _even_bounds(n, CHUNK_ROWS)
    # chunks are independent and numpy releases the GIL: decode them on two threads
    with ThreadPoolExecutor(threads) if threads > 1 and len(bounds) > 1 else Inline() as pool:
        done = pool.map(lambda b: _decode_chunk(rec, b[0], b[1], wanted), bounds)
        for (lo, hi), (chunk_cols, chunk_marks) in zip(bounds, done):
            parts.append(chunk_cols)
            marks.extend((rows + lo, why) for rows, why in chunk_marks)
            # the chunk's bytes are decoded: drop its file pages
            release(rec, int(rec.data_off[hi]) - 64 if hi < n else int(rec.data_off[-1]) + int(rec.caplen[-1]),
                    int(rec.data_off[lo]) - 16)
    if parts:
        cols.update(concat_cols(parts, consume=True))
    else:
        cols.update(_decode_chunk(rec, 0, 0, wanted)[0])
    if wanted is not None:
        cols = {k: v for k, v in cols.items() if k in wanted}
    return n, cols, marks


def _even_bounds(n: int, size: int) -> list:
    """``[(lo, hi)]`` splitting ``0..n`` into equal parts of about ``size`` rows (at most
    1.5 x ``size``): a window walked a few records past ``size`` stays one part, not two."""
    k = max(1, round(n / size))
    cuts = [n * i // k for i in range(k + 1)]
    return [(lo, hi) for lo, hi in zip(cuts[:-1], cuts[1:]) if hi > lo]


def split_records(rec, rows: int | None = None):
    """Consecutive slices of ``rec`` of about ``rows`` records (``BATCH_ROWS``; ``row0``
    and marks adjusted)."""
    n = len(rec.data_off)
    bounds = _even_bounds(n, rows or BATCH_ROWS)
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


def iter_columns(path, sniffer: int = 0, columns=None, *, post=None, ahead: int = 4):
    """Walk and decode one capture at once: yields, in file order, one result per batch.

    The main thread walks the record headers (the one per-record Python loop) while
    batches of at most ``BATCH_ROWS`` frames are decoded on ``THREADS`` worker threads
    (numpy releases the GIL), so the walk costs almost nothing on two cores.

    Parameters
    ----------
    path, sniffer, columns
        As :func:`read_capture`.
    post : callable, optional
        ``post(rec, n, cols, marks)`` run on the worker right after a batch is decoded
        (e.g. conversion to Arrow); its result is yielded instead of the tuple.
    ahead : int
        Batches decoded ahead of the consumer at most: bounds the memory of a stream.

    Yields
    ------
    tuple
        ``(rec, n, cols, marks)`` per batch (``rec`` the batch's :class:`Records`, marks
        relative to it), or ``post``'s result.
    """
    def work(rec):
        out = (rec, *decode_columns(rec, sniffer, columns, threads=1))
        return post(*out) if post is not None else out

    pending = deque()
    with ThreadPoolExecutor(THREADS) as pool:
        for batch in iter_records(path, drop_walked=False, batch_rows=BATCH_ROWS):
            for rec in split_records(batch):
                pending.append(pool.submit(work, rec))
                while pending and (len(pending) > ahead or pending[0].done()):
                    yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def read_columns(path, sniffer: int = 0, columns=None, records: bool = True):
    """Records and decoded numpy columns of one capture, walked and decoded at once.

    Returns
    -------
    rec : Records or None
        The whole file's record index (as :func:`sniffsync.capture.read_records`), or
        None with ``records=False`` (callers that need neither the record index nor
        its problem lines skip concatenating it).
    n, cols, marks
        As :func:`decode_columns`.
    """
    recs, marks, sink = [], [], None
    for rec, n, cols, batch_marks in iter_columns(path, sniffer, columns):
        marks.extend((np.asarray(r, np.int64) + rec.row0, why) for r, why in batch_marks)
        if records:
            recs.append(rec)
        if sink is None:
            sink = ColumnSink(_rows_estimate(rec))
        sink.add(cols, n)                  # the batch's own arrays are freed here
        del cols
    rec = concat_records(recs) if records else None
    return rec, sink.n, sink.result(), marks


def _rows_estimate(rec) -> int:
    """Frames in the whole capture, judged by the first batch's bytes per frame (+25 %)."""
    n = len(rec.data_off)
    if not n:
        return 1024
    end = int(rec.data_off[-1]) + int(rec.caplen[-1])
    return int(n * rec.buf.size / max(end, 1) * 1.25) + 1024


def _sub(a: np.ndarray, rows: np.ndarray, n: int) -> np.ndarray:
    """``a[rows]``; ``a`` itself when ``rows`` is every one of the ``n`` rows (no copy)."""
    return a if len(rows) == n else a[rows]


def _decode_chunk(rec, lo: int, hi: int, wanted):
    """Columns and marks (rows relative to ``lo``) of the frames ``lo:hi``."""
    # every stage can mark a frame: "bad" needs them all
    need_payload = wanted is None or "bad" in wanted or bool(wanted & _PAYLOAD)
    need_dot11 = need_payload or wanted is None or bool(wanted - _RECORD - _RADIOTAP)
    buf = rec.buf
    n = hi - lo
    off = np.asarray(rec.data_off[lo:hi], np.int64)
    end = off + np.asarray(rec.caplen[lo:hi], np.int64)
    if n:
        prefetch(rec, int(off[0]), int(end[-1]))      # map the chunk's bytes in one call
    lt = np.asarray(rec.linktype[lo:hi])
    wire = np.asarray(rec.wirelen[lo:hi], np.int64)
    cols, marks = {}, []
    truncated = np.asarray(rec.caplen[lo:hi]) < wire

    # radiotap header, then 802.11 behind it
    dot11_off = np.full(n, -1, np.int64)
    fcs_at_end = np.zeros(n, bool)
    rt_len = np.zeros(n, np.int64)
    rows = np.flatnonzero(lt == LINK_RADIOTAP)
    if rows.size:
        from sniffsync.decode.radiotap import decode_radiotap  # (802.11 decoders load when needed)
        rt_cols, hdr_len, fcs, rt_marks = decode_radiotap(
            buf, off[rows], end[rows], None if wanted is None else wanted | {"bad"})
        _stage(n, rows, (rt_cols, rt_marks), cols, marks)
        ok = hdr_len > 0
        dot11_off[rows[ok]] = off[rows[ok]] + hdr_len[ok]
        rt_len[rows] = hdr_len
        fcs_at_end[rows] = fcs
    rows = np.flatnonzero(lt == LINK_DOT11)
    dot11_off[rows] = off[rows]
    if wanted is None or "rt_len" in wanted:
        cols["rt_len"] = (rt_len, rt_len > 0)
    if wanted is None or "mpdu_len" in wanted:
        cols["mpdu_len"] = (wire - rt_len, (dot11_off >= 0) & (wire >= rt_len))

    l3_off = np.full(n, -1, np.int64)
    ethertype = np.zeros(n, np.uint16)
    l3_end = end.copy()
    rows = np.flatnonzero(dot11_off >= 0) if need_dot11 else np.zeros(0, np.int64)
    if rows.size:
        from sniffsync.decode.dot11 import decode_dot11
        d_cols, llc_off, llc_end, d_marks = decode_dot11(
            buf, dot11_off[rows], end[rows], fcs_at_end[rows], truncated[rows],
            None if wanted is None else wanted | {"bad"})
        _stage(n, rows, (d_cols, d_marks), cols, marks)
        has = llc_off >= 0
        llc_rows = rows[has] if need_payload else np.zeros(0, np.int64)
        if llc_rows.size:
            l_cols, sub_l3 = decode_llc(buf, llc_off[has], llc_end[has])
            _stage(n, llc_rows, (l_cols, []), cols, marks)
            l3_off[llc_rows] = sub_l3
            l3_end[llc_rows] = llc_end[has]
            eth = l_cols.get("ethertype")
            if eth is not None:
                ethertype[llc_rows] = np.where(eth[1] if eth[1] is not None else True, eth[0], 0)

    rows = np.flatnonzero(np.isin(lt, WIRED_LINKTYPES)) if need_payload else np.zeros(0, np.int64)
    if rows.size:
        w_cols, sub_l3, w_marks = decode_link(buf, _sub(off, rows, n), _sub(end, rows, n), _sub(lt, rows, n))
        _stage(n, rows, (w_cols, w_marks), cols, marks)
        l3_off[rows] = sub_l3
        eth = w_cols.get("ethertype")
        if eth is not None:
            ethertype[rows] = np.where(eth[1] if eth[1] is not None else True, eth[0], 0)

    unknown = ~np.isin(lt, (LINK_RADIOTAP, LINK_DOT11) + WIRED_LINKTYPES)
    if unknown.any():
        marks.append((np.flatnonzero(unknown), "unsupported link type"))

    rows = np.flatnonzero(l3_off >= 0)
    if rows.size:
        _stage(n, rows, decode_l3(buf, _sub(l3_off, rows, n), _sub(l3_end, rows, n),
                                  _sub(ethertype, rows, n)), cols, marks)
    return cols, marks


def read_capture(path, *, sniffer: int = 0, columns=None):
    """Read one capture (pcap, pcapng, optionally gzip-compressed) into a frame table.

    Parameters
    ----------
    path : str or os.PathLike
        The capture file.
    sniffer : int
        Value of the ``sniffer`` column (the input's index when reading several).
    columns : list of str, optional
        Keep only these columns (see ``docs/columns.md``).

    Returns
    -------
    pandas.DataFrame
        One row per record, columns per :mod:`sniffsync.schema`.
    """
    _, n, cols, marks = read_columns(path, sniffer, columns)
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
