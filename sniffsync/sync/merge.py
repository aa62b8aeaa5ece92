"""Merge many sniffers' captures onto one clock: copies of one transmission become one frame.

:func:`merge` reads every input (or takes frame tables), moves every sniffer's stamps to
PPDU ends (:func:`airtime.ppdu.align_to_ppdu_end`), fits the clocks
(:func:`sniffsync.sync.clock.sync`), matches and merges the copies
(:mod:`sniffsync.sync.copies`) and reports (:mod:`sniffsync.sync.report`). It returns a
:class:`Merged`: the table with what belongs to it -- the inputs' records (for
:func:`write_merged`), the sniffer names, what the stamps mean -- as plain fields,
since pandas drops ``DataFrame.attrs`` on many operations.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from functools import partial

import numpy as np
import pandas as pd

from sniffsync import runtime
from sniffsync.errors import UsageError
from sniffsync.sync.ampdu import ppdu_clusters
from sniffsync.sync.anchors import _key_only_clusters, hash_key, key_order
from sniffsync.sync.anchorsample import check_sample, sample_anchors
from sniffsync.sync.clock import local_clocks, reference_clock, sync, sync_candidates
from sniffsync.sync.fit import epoch_map
from sniffsync.sync.copies import MERGE_KEY, best_copy, copy_gates, default_gate, match_copies, merged_table
from sniffsync.sync.pcapng import write_merged
from sniffsync.sync.inputs import _align, _load, _prepare, _validate
from sniffsync.sync.readahead import NEEDED_COLUMNS
from sniffsync.sync.perinput import join_key, join_parts
from sniffsync.sync.report import merge_report
from sniffsync.sync.tables import concat_columns, str_categories
from sniffsync.sync.retime import add_provenance, provenance_totals, retime
from sniffsync.sync.windows import match_windowed, output_rank

# write_merged is named beside merge() by the package's API (merge(), then write_merged())
__all__ = ["Merged", "merge", "write_merged", "NEEDED_COLUMNS", "WRITTEN_COLUMNS"]

# the columns the clock fit and the copies' key read: with the anchor candidates known,
# only these are concatenated before the fit, the rest on a thread beside it
FIT_COLUMNS = ("sniffer", "frame", "ts_ns", "tsft_us", "signal_dbm", *MERGE_KEY)
# the input columns write_merged reads (with the merge's own): merge(keep=WRITTEN_COLUMNS)
# when the table is only written (the CLI)
WRITTEN_COLUMNS = ("sniffer", "frame", "ts_ns", "tsft_us", "caplen", "wirelen", "signal_dbm")
MIN_GATE_NS = 3_000          # TSFT copies differ by quantisation + jitter, ~1 µs


@dataclass
class Merged:
    """What :func:`merge` returns.

    ``frames``: the merged frame table, sorted by common time. ``report``: the sync and
    merge report (JSON-ready; None for a table nothing was merged into). ``records``: per input, the capture records the rows
    point into (``sniffer``, ``frame``), needed by :func:`write_merged`; None when the
    inputs were frame tables. ``sniffers``: the inputs' names, by ``sniffer`` index.
    ``stamps``: what ``ts_ns``/``tsft_us`` mark -- ``"end"`` (PPDU ends: the merge
    aligned every sniffer) or ``"capture"`` (each sniffer's stamps as captured); pass it
    on as ``group_ppdus(..., stamps=)`` and ``fairness(..., stamps=)``.
    """
    frames: pd.DataFrame
    report: dict | None
    records: list | None
    sniffers: list[str]
    stamps: str
    by_index: bool = False               # a row's record is records[sniffer][frames.index], not frame - 1


def _window_ns(window_s) -> int:
    """``window_s`` in ns, checked."""
    if not window_s > 0:
        raise UsageError(f"window_s must be > 0 s, not {window_s!r}")
    return max(1, int(round(window_s * 1e9)))


def _merge_key(cols: pd.DataFrame, sort: bool) -> tuple:
    """The copies' content key of every row and (``sort``) its key order
    (:func:`sniffsync.sync.anchors.key_order`): computed beside the clock fit, so the
    matching sorts only inside runs of one key."""
    key = hash_key(cols, MERGE_KEY)
    return key, key_order(key) if sort else None


def _join_rest(df: pd.DataFrame, rest, order) -> None:
    """``rest``'s columns (the same rows) into ``df``, in place, each at its place in
    ``order`` (the tables' column order)."""
    for c in rest.columns:
        df.insert(order.index(c), c, rest.pop(c))


def _sync_and_match(df, n_in, reference, anchors, knot_s, allow_unsynced, gate_ns, keep_duplicates,
                    names, say, window_ns=None, found=None, rest=None, sample="auto", keep=None):
    """The merged table and report of the concatenated table ``df`` (emptied on the way;
    ``found``: a list holding :func:`sniffsync.sync.perinput.join_parts` of the inputs
    when known (the clocks, anchor candidates and copies' key), emptied; ``rest``:
    ``(tables, order)``, the per-input tables of the columns ``df`` lacks, concatenated
    beside the fit and joined after it in the column ``order``, then emptied; ``sample``:
    of the "unique" anchors, :func:`sniffsync.sync.clock.sync`'s; ``keep``: the input
    columns the merged table holds, None: all)."""
    say("sync clocks")
    rest, order = rest or (None, None)
    ts_ns = df["ts_ns"].to_numpy(np.int64)
    with runtime.pool(limit=1) as ex:   # what needs no fitted clock runs beside the fit
        here, weight = runtime.Inline, None
        if found:                        # found per input while the next was read
            clocks, cand, key = found.pop()
            cand, weight, sample = sample_anchors(cand, clocks[1][cand[0]], clocks[2], anchors,
                                                  knot_s * 1e9, sample, clocks[0][cand[0]])
            # the fit's first step (clusters by key alone), the copies' key and the epoch
            # line there; the columns the fit does not read here
            key_cid = ex.submit(_key_only_clusters, cand[2], clocks[1][cand[0]], cand[3])
            cand, key = here.submit(tuple, cand), ex.submit(join_key, *key)
        else:
            cand, key_cid, here = ex.submit(sync_candidates, df, anchors), None, ex
            clocks = local_clocks(df)
            key = ex.submit(_merge_key, df[list(MERGE_KEY)], window_ns is None)
        on_ref = clocks[1] == reference_clock(clocks[2], reference)
        to_epoch = ex.submit(epoch_map, ts_ns, clocks[0], on_ref)
        if rest is not None:             # what only the matching and the merged table read
            rest = here.submit(concat_columns, rest)
        res = sync(df, reference=reference, anchors=anchors, knot_s=knot_s, allow_unsynced=allow_unsynced,
                   names=names, clocks=clocks, candidates=cand.result(), key_cid=key_cid,
                   sample=sample, weight=weight)
        del weight
        del key_cid
        (key, by_key), to_epoch = key.result(), to_epoch.result()
        if rest is not None:
            _join_rest(df, rest.result(), order)
    del cand, rest
    del clocks, on_ref
    model = res.model
    synced = model.synced[res.clock]
    if gate_ns is None:
        gate_ns = default_gate(res, MIN_GATE_NS)
    say("match copies")
    gates = copy_gates(res, gate_ns)
    if window_ns is None:
        group = match_copies(df, res.common_ns, synced, gate_ns, key, res.clock, gates, by_key)
    else:                                # windows cut on the output time before re-timing
        first_epoch = np.where(synced, to_epoch(res.common_ns), ts_ns)
        group = match_windowed(df, res.common_ns, first_epoch, synced, gate_ns, key, window_ns,
                               clock=res.clock, clock_gate_ns=gates)
        del first_epoch
    del key, by_key
    ref_tsft = bool(model.clocks.tsft[model.reference])
    sniffer = df["sniffer"].to_numpy(np.int64)
    sig = df["signal_dbm"].to_numpy(np.float64, na_value=-1e9)
    # the strongest copies beside the re-timing; then the A-MPDU clusters and the report
    # (reads only) there while this thread makes the merged table
    with runtime.pool(limit=1) as ex:
        best = ex.submit(best_copy, group, sniffer, sig)
        rt = retime(df, res, group, synced)   # best time per copy: TSFT, other sniffer, protocol, host
        best_ns = res.common_ns + rt.shift_ns
        common_epoch = np.where(synced, to_epoch(best_ns), ts_ns)
        tsft_common = np.rint(best_ns / 1000).astype(np.int64) if ref_tsft else None
        del best_ns
        del ts_ns
        say("build merged table")
        ng = int(group.max()) + 1 if len(group) else 0
        clusters = ex.submit(ppdu_clusters, sniffer, common_epoch, group, ng)
        best = best.result()
        n_out = len(df) if keep_duplicates else len(best)
        # plain arrays, not df[[...]] (a frame sharing df's blocks would make every pop of
        # merged_table (consume) copy what is left of them), and not copied
        few = pd.DataFrame({"sniffer": sniffer, "ts_ns": df["ts_ns"].to_numpy(np.int64), "signal_dbm": sig},
                           copy=False)
        del sig
        report = ex.submit(_report, res, few, group, names, anchors, gate_ns, n_out, keep_duplicates, best,
                           rt, sniffer)
        del few, res                     # the fit's arrays: the report's until it is done
        # df is merge()'s own (concatenated, or copies of the caller's tables): emptied
        rank = output_rank(sniffer, common_epoch, group) if keep_duplicates else None
        out = merged_table(df, common_epoch, tsft_common, group, synced, n_in, keep_duplicates, best,
                           consume=True, retimed=rt, clusters=clusters, columns=keep)
        del clusters
        report = report.result()
    out["merged_id"] = merged_ids(out["merged_id"].to_numpy(np.int64), rank)
    report["totals"]["ts_src"] = provenance_totals(out)
    return out, report


def _report(res, few, group, names, anchors, gate_ns, n_out, keep_duplicates, best, rt, sniffer) -> dict:
    """The merge report with the times' provenance (:func:`merge_report`, :func:`add_provenance`)."""
    report = merge_report(res, few, group, names, anchors, gate_ns, n_out, keep_duplicates, best)
    add_provenance(report, rt, sniffer, res)
    return report


def merged_ids(group: np.ndarray, rank=None) -> np.ndarray:
    """``merged_id`` of the merged table's rows: the transmission's row in the table
    without duplicates (``rank`` per group id, :func:`sniffsync.sync.windows.output_rank`;
    None: the rows are that table), so ids do not depend on how copies were matched
    (whole or in windows) and name one transmission with and without duplicates."""
    return np.arange(len(group), dtype=np.int64) if rank is None else rank[group]


def merge(paths_or_tables, reference: int = 0, allow_unsynced: bool = False,
          anchors=("beacon", "ba", "unique"), keep_duplicates: bool = False,
          knot_s: float = 1.0, gate_ns: float | None = None, names=None, progress=None,
          tsft_at="auto", columns=None, window_s: float | None = None, anchor_sample="auto",
          read_ahead=None, keep=None) -> Merged:
    """Synchronise and merge several sniffers' captures.

    Parameters
    ----------
    paths_or_tables : list of path or list of DataFrame
        Capture files, or frame tables (their ``sniffer`` column is reset to the index).
    reference : int
        Input whose clock is the common clock.
    allow_unsynced : bool
        Keep sniffers that cannot be synced on their own clock (flagged ``unsynced``)
        instead of raising :class:`sniffsync.errors.SyncError`.
    anchors : sequence of str
        Anchor kinds for the clock fit (see :data:`sniffsync.sync.anchors.ANCHOR_KEYS`).
    keep_duplicates : bool
        Keep every copy (on the common clock) instead of one row per transmission.
    knot_s : float
        Knot spacing of the clock model, seconds.
    gate_ns : float, optional
        Time gate for copies; default from the held-out anchor residuals (>= 3 µs).
    tsft_at : {"auto", "start", "end"} or None
        What each sniffer's timestamps mark (see :func:`airtime.ppdu.align_to_ppdu_end`);
        stamps are moved to PPDU ends before syncing, so the merged ``ts_ns``/``tsft_us``
        mark PPDU ends (``Merged.stamps == "end"``; the report's ``tsft_at`` says what
        each sniffer's stamps marked). ``None`` leaves stamps as they are
        (``stamps == "capture"``).
    names : list of str, optional
        Sniffer names for the report (default: file stems or ``s0``, ``s1``...).
    progress : callable, optional
        ``progress(stage: str)`` called as stages start.
    columns : list of str, optional
        When reading files: columns wanted in the merged table besides
        :data:`NEEDED_COLUMNS` (always decoded); ``None`` decodes every column. ``[]``
        decodes only what the merge and :func:`write_merged` need (the CLI's choice:
        about half the decoding time and memory).
    keep : list of str, optional
        Of the inputs' columns, only these go into the merged table (besides the merge's
        own); ``None``: all. :data:`WRITTEN_COLUMNS` is what :func:`write_merged` needs (the
        CLI's choice: the table is only written); a name the inputs lack raises
        :class:`UsageError`. Not for one merged file (returned as read).
    window_s : float, optional
        Match copies one window of this many seconds at a time
        (:mod:`sniffsync.sync.windows`); the result is the same as without.
    anchor_sample : "auto" or int
        Fit one "unique" anchor in this many (a power of two; :mod:`sniffsync.sync.anchorsample`):
        ``"auto"`` samples only large captures, 1 fits every anchor.
    read_ahead : ReadAhead, optional
        The first input's read when the caller started it
        (:func:`sniffsync.sync.readahead.read_ahead` with these ``columns``; taken once).

    Returns
    -------
    Merged
        The merged frame table sorted by common time, the report, the records, the
        sniffer names and the stamps convention.
    """
    say = progress or (lambda stage: None)
    check_sample(anchor_sample)          # before any input is read
    items = list(paths_or_tables)
    if not items:
        raise UsageError("merge needs at least one input")
    if len(items) == 1 and not isinstance(items[0], pd.DataFrame):
        from sniffsync.sync.mergedfile import read_merged
        again = read_merged(items[0], columns, records=True)
        if again is not None:            # one merged file: nothing to merge, as it was
            return again
    prep = None if isinstance(items[0], pd.DataFrame) else \
        partial(_prepare, [os.fspath(p) for p in items], tsft_at, anchors, window_s is None)
    paths, recs, tables, names, ends = _load(items, names, columns, say, prep, read_ahead)
    if not 0 <= reference < len(tables):
        raise UsageError(f"reference {reference} is not an input index (0..{len(tables) - 1})")
    tsft_conv, found = None, []          # found: join_parts of the inputs (a future), when known
    # every sniffer's stamps must mean the same instant: the end of the PPDU
    if tsft_at is not None:
        say("align stamps to PPDU ends")
    if paths is not None:                # checked, aligned, candidates found while reading
        done = [f.result() for f in tables]
        tables = [t for t, _, _ in done]
        if tsft_at is not None:
            tsft_conv = {names[s]: conv.get(s, "end") for s, (_, conv, _) in enumerate(done)}
        parts = [c for _, _, c in done]
        del done
        _validate(paths, tables, checked=True)   # the set: mixed link types
    else:
        _validate(paths, tables)         # before the alignment reads them
        if tsft_at is not None:
            tables, tsft_conv = _align(tables, tsft_at, names, ends)
    missing = [c for c in keep or () if c not in tables[0].columns]
    if missing:                          # a typo would drop a column without a word
        raise UsageError(f"keep: no column {', '.join(map(str, missing))} in the inputs"
                         + ("" if columns is None else " (decode it too: columns=[...])"))
    n_in, rest = len(tables), None
    with runtime.pool(limit=1) as ex:    # the parts joined while the fit's columns are
        if paths is not None:
            found.append(ex.submit(join_parts, parts))
            del parts                    # (the per-input parts)
        if n_in == 1:
            df = tables[0]
        else:                            # the fit's columns now, the rest beside the fit
            tables = [str_categories(t) for t in tables]
            order = list(tables[0].columns)
            df = concat_columns(tables, FIT_COLUMNS if found else None)
            rest = (tables, order) if found and len(tables[0].columns) else None
        del tables                      # only the concatenated table (and rest) stay alive
        found = [f.result() for f in found]
    runtime.release_free_heap()          # the read's and the inputs' parts' freed heap (lower peak)
    out, report = _sync_and_match(df, n_in, reference, anchors, knot_s, allow_unsynced, gate_ns,
                                  keep_duplicates, names, say,
                                  None if window_s is None else _window_ns(window_s), found, rest,
                                  anchor_sample, keep)
    del df
    if tsft_conv is not None:
        report["tsft_at"] = tsft_conv
    return Merged(out, report, recs, names, "capture" if tsft_at is None else "end")
