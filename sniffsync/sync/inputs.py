"""The inputs of a merge: files read (one after the other, each one checked, aligned to PPDU
ends and given what the clock fit needs of it while the next is read) or tables taken, and
the checks of an input set. Used by :func:`sniffsync.sync.merge.merge`."""
from __future__ import annotations

import os

import numpy as np
import pandas as pd

from sniffsync import runtime
from sniffsync.decode.linklayer import WLAN_LINKTYPES
from sniffsync.errors import CaptureError, UsageError
from sniffsync.sync.perinput import content_part, input_part
from sniffsync.sync.readahead import NEEDED_COLUMNS, read_columns_of

__all__ = ["RADIO_LINKTYPES"]

RADIO_LINKTYPES = WLAN_LINKTYPES     # radiotap, PPI, Prism, AVS or bare 802.11


def _validate(paths, tables, checked: bool = False):
    """One clear error per bad input set (``checked``: each table passed
    :func:`_check_table` already; only the set is checked)."""
    if paths is not None:
        real = [os.path.realpath(p) for p in paths]
        for i, p in enumerate(real):
            if p in real[:i]:
                raise UsageError(f"{paths[i]}: the same file is given twice")
    for s, t in enumerate([] if checked else tables):
        _check_table(paths[s] if paths is not None else f"table {s}", t)
    first = {s: int(t["linktype"].to_numpy().min()) for s, t in enumerate(tables) if len(t)}   # (no sort)
    if len(set(first.values())) > 1:
        raise CaptureError("mismatched link types: " + ", ".join(
            f"{paths[s] if paths else s}={k}" for s, k in first.items()))


def _check_table(name, t) -> None:
    """One clear error for an input table that cannot be merged."""
    if len(t) == 0:
        raise CaptureError(f"{name}: no frames")
    lt = np.unique(t["linktype"].to_numpy())
    if not np.isin(lt, RADIO_LINKTYPES).all():
        raise CaptureError(f"{name}: not an 802.11 capture (link type {', '.join(map(str, lt))});"
                           " merge needs 802.11 (+radiotap) captures")


def _read_all(paths, columns, prep=None, first=None):
    """Records, frame tables and whether each is a merged file (stamps at PPDU ends, one
    clock) of every input (``columns``: see :func:`merge`). With ``prep``, each table
    goes to ``prep(s, table, ends)`` on a thread while the next input is read
    (:func:`_prepare`) and comes as a future of its result: an error is raised by its
    ``result()``, in input order. ``first``: the first input's read
    (:class:`sniffsync.sync.readahead.ReadAhead`)."""
    from sniffsync.decode.frames import read_columns
    from sniffsync.decode.table import frame_table
    want = None if columns is None else list(dict.fromkeys([*NEEDED_COLUMNS, *columns]))
    read = read_columns_of(columns)

    from sniffsync.sync.mergedfile import file_meta, read_as_input
    from sniffsync.sync.snaplen import drop_cut_fcs, min_snaplen
    snaplen = min_snaplen(paths)         # frames some input cut: no FCS in the keys

    def one(s):
        if file_meta(paths[s]) is not None:     # an earlier merge's output: one input, one clock
            return (*read_as_input(paths[s], s, want), True)
        rec, n, cols, marks = first.take() if s == 0 and first is not None else \
            read_columns(paths[s], s, read)     # walk and decode overlap
        return rec, drop_cut_fcs(frame_table(n, cols, marks, want), snaplen), False
    out = []
    with runtime.pool(limit=1) as ex:
        for s in range(len(paths)):      # one after the other: bounded peak memory
            rec, t, ends = one(s)
            if prep is not None:         # checked and aligned while the next input is read
                t = ex.submit(prep, s, t, ends)
            out.append((rec, t, ends))
            del t
    return [r for r, _, _ in out], [t for _, t, _ in out], [m for _, _, m in out]


def _prepare(paths, tsft_at, anchors, sort_key, s, t, ends):
    """``(table, conv, part)`` of input ``s``: ``t`` checked, its stamps moved to
    PPDU ends (:func:`airtime.ppdu.align_to_ppdu_end`, with what they marked; ``ends``:
    they already do; ``tsft_at=None``: left), and what the fit needs of its rows
    (:func:`sniffsync.sync.perinput.input_part`: clocks, anchor candidates, the copies'
    key; ``sort_key``: with its order)."""
    from airtime.ppdu import align_to_ppdu_end
    _check_table(paths[s], t)
    conv = {}
    with runtime.pool(limit=1) as ex:    # keys and candidates (content only) beside the alignment
        content = ex.submit(content_part, t, anchors, sort_key)
        if tsft_at is not None:
            t, conv = align_to_ppdu_end(t, "end" if ends else tsft_at)   # (same rows, new stamps)
        return t, conv, input_part(t, anchors, sort_key, content.result())


def _load(items, names, columns, say, prep=None, first=None):
    """``(paths, records, tables, names, ends)`` of the inputs: files read, or the caller's
    tables copied with their ``sniffer`` column set to their index; ``ends``: per input,
    whether its stamps already mark PPDU ends (a merged file). Files with ``prep``:
    futures of its results (:func:`_read_all`)."""
    paths = None if isinstance(items[0], pd.DataFrame) else [os.fspath(p) for p in items]
    _validate(paths, [])
    if paths is None:
        tables = [t.assign(sniffer=np.int16(s)) for s, t in enumerate(items)]
        return None, None, tables, names or [f"s{s}" for s in range(len(items))], [False] * len(items)
    names = names or [os.path.splitext(os.path.basename(p))[0] for p in paths]
    say(f"read {', '.join(map(os.path.basename, paths))}")
    recs, tables, ends = _read_all(paths, columns, prep, first)
    return paths, recs, tables, names, ends


def _align(tables, tsft_at, names, ends):
    """Every sniffer's stamps moved to PPDU ends, and per sniffer name what they marked
    (``ends``: inputs whose stamps already do)."""
    from airtime.ppdu import align_to_ppdu_end
    with runtime.pool(len(tables)) as ex:   # tables are independent; numpy releases the GIL
        done = list(ex.map(lambda te: align_to_ppdu_end(te[0], "end" if te[1] else tsft_at),
                           zip(tables, ends)))
    return [t for t, _ in done], {names[s]: conv.get(s, "end") for s, (_, conv) in enumerate(done)}
