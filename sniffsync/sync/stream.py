"""Merging hours of capture in bounded memory: two streamed passes over the inputs.

:func:`merge_to_file` writes what :func:`sniffsync.sync.merge.merge` followed by
:func:`sniffsync.sync.pcapng.write_merged` writes, byte for byte, without holding the
frame table:

1. *Pass 1* decodes each input a batch at a time, moves its stamps to PPDU ends and
   keeps its clocks (:class:`sniffsync.sync.streamclock.InputClocks`: TSF jumps found per
   batch, TSFT segments as runs over the rows, each clock's ranges, a bounded sample of
   stamps) and the columns of the frames that can be anchors (what
   :func:`sniffsync.sync.clock.sync` reads) with their local time and clock. The clocks
   are fitted on those rows alone, with the clocks table of every frame: the fit of the
   whole table. Nothing is kept per frame.
2. *Pass 2* decodes the inputs again, in step, and merges one window of output time
   at a time (:mod:`sniffsync.sync.windows`: the window plus a margin either side is
   matched; it keeps the transmissions whose time falls in it). Each window's merged
   rows are written at once; batches a later window cannot need are dropped.

The report must stand in the section header, before the packets, but its counts are
known only at the end: the packets go to a scratch file beside the output first and
are then copied behind the header (the output's size in extra I/O).

Memory: pass 2 holds a window, its margins and two batches per input; pass 1 holds the
clock segments, a sample of :data:`SAMPLE_CAP` stamps (the epoch map and the host offsets:
beyond it, 1 in 2^k frames by row, the report's ``frame_sample``) and at most
``streamspill.SPILL_ROWS`` anchor rows per input: the rest wait in a scratch directory
beside the output. The tiled fit holds one tile's anchors (~250k rows, <= an hour) and
of the report's anchor pairs a summary of fixed size (:mod:`sniffsync.sync.streamstats`);
beyond :data:`ANCHOR_CAP` frames it sees 1 in k "unique" and Block-Ack anchors, picked by
content key (every sniffer keeps the same transmissions; the report says ``anchor_sample``),
which bounds the scratch files and the fit's CPU. Caveats: the stamps convention of an input (``tsft_at="auto"``)
is decided on its first batch, and a start-stamped PPDU cut by a batch edge gets the
airtime of its part (whole-table merging sees it whole); inputs must be in time order
to within half the margin (:class:`SyncError` otherwise).
"""
from __future__ import annotations

import gc
import os
import shutil
import tempfile

import numpy as np
import pandas as pd

from sniffsync.errors import CaptureError, SyncError, UsageError
from sniffsync.runtime import release_free_heap
from sniffsync.sync.anchors import ANCHOR_KEYS, anchor_candidates, hash_key
from sniffsync.sync.clock import place_via_host
from sniffsync.sync.copies import MERGE_KEY, copy_gates, default_gate
from sniffsync.sync.retime import TS_SRC, Tally, clock_errors
from sniffsync.sync.snaplen import NO_LIMIT, drop_cut_fcs, min_snaplen
from sniffsync.sync.streamfit import TILE_NS, fit_tiled, tile_pair_stats
from sniffsync.sync.streamclock import InputClocks, joint_clocks, output_range, sample_fits
from sniffsync.sync.streamspill import AnchorSpill
from sniffsync.sync.streamstats import held_stats
from sniffsync.sync.streamwindow import Counts, Ctx, window
from sniffsync.sync.windows import MARGIN_NS, window_bounds

__all__ = ["merge_to_file", "BATCH_ROWS", "ANCHOR_CAP", "SAMPLE_CAP"]

BATCH_ROWS = 1 << 14         # frames decoded at a time (x inputs x 2 in flight: the memory floor)
ANCHOR_CAP = 6_000_000       # frames whose "unique" anchors are all fitted (~1.5 GB for the fit)
SAMPLE_CAP = 1 << 20         # frames whose stamps all fit the epoch map (20 B each, all inputs)

# what anchor_candidates reads of an anchor row
ANCHOR_COLUMNS = tuple(dict.fromkeys(("sniffer", "type_subtype", "bad", "fcs_bad", "ta", "beacon_tsf_us",
                                      *(c for _, cols in ANCHOR_KEYS.values() for c in cols))))


class _Input:
    """Pass 1's keep of one input: its clocks (:class:`InputClocks`: segments, runs, a
    bounded sample) and its anchor rows with their local time and TSFT segment."""

    def __init__(self, sample_cap, anchors):
        self.clocks, self.anchors, self.linktype, self.conv = InputClocks(sample_cap), anchors, None, None
        self.every = 1                   # "unique" anchors sampled 1 in every (by key)
        self.n_beacon = 0                # beacon rows among the anchor rows (the tiled fit's sample)


def _check_linktype(path, t, linktype):
    """The input's link type, each batch checked as the one-pass merge checks a table (an
    empty batch has none: a file without frames is said after pass 1)."""
    from sniffsync.sync.inputs import _check_table
    if not len(t):
        return linktype
    _check_table(path, t)
    return int(t["linktype"].min()) if linktype is None else linktype


def _batches(path, s, want, conv, batch_rows, snaplen=NO_LIMIT):
    """``(rec, table, conv)`` per batch of input ``s``, stamps moved to PPDU ends
    (``conv``: "start", "end", "auto" (decided on the first batch) or None: as captured;
    ``snaplen``: the inputs' smallest, :func:`sniffsync.sync.snaplen.drop_cut_fcs`)."""
    from airtime.ppdu import align_to_ppdu_end
    from sniffsync.decode.frames import iter_columns
    from sniffsync.decode.table import frame_table
    # one batch decoded ahead: more would hold a capture's worth of rows in flight
    for rec, n, cols, marks in iter_columns(path, s, want, batch_rows=batch_rows, ahead=1):
        t = drop_cut_fcs(frame_table(n, cols, marks, want), snaplen)
        if conv not in (None, "end") and len(t):      # "end": stamps stay (skip the grouping)
            t, got = align_to_ppdu_end(t, conv)
            conv = got.get(s, "end")
        yield rec, t, conv


def _release_batch(rec) -> None:
    """Drop the mapped pages of a decoded batch (whole pages only: batches decoded
    beside it keep theirs); its bytes stay readable, mapped again when needed."""
    from sniffsync.io.capture import release
    if len(rec.data_off):
        release(rec, int(rec.data_off[-1]) + int(rec.caplen[-1]), int(rec.data_off[0]))


def _sample_every(paths, rec, anchor_cap: int) -> int:
    """``k``: fit the "unique" and Block-Ack anchors of one transmission in ``k`` (by key), so that the
    fit sees those of about ``anchor_cap`` frames at most; the capture's frames are
    estimated from the inputs' sizes and the first batch's bytes per frame."""
    n = len(rec.data_off)
    if n == 0:
        return 1
    per_frame = max(1.0, (int(rec.data_off[-1]) + int(rec.caplen[-1]) - int(rec.data_off[0])) / n)
    frames = sum(os.path.getsize(p) for p in paths) / per_frame
    return max(1, int(np.ceil(frames / anchor_cap)))


def _pass1(paths, want, tsft_at, anchors, say, batch_rows, anchor_cap, sample_cap, snaplen, spill_dir=None):
    ins, every = [], None
    for s, path in enumerate(paths):
        say(f"pass 1: {os.path.basename(path)}")
        inp, n = _Input(max(1, sample_cap // len(paths)), AnchorSpill(spill_dir, f"in{s}")), 0
        for rec, t, conv in _batches(path, s, want, tsft_at, batch_rows, snaplen):
            _release_batch(rec)
            every = _sample_every(paths, rec, anchor_cap) if every is None else every
            inp.conv = conv
            inp.linktype = _check_linktype(path, t, inp.linktype)
            local, seg = inp.clocks.add(t["ts_ns"].to_numpy(np.int64), t["tsft_us"].to_numpy(np.int64, na_value=-1))
            rows, kind, key = anchor_candidates(t, anchors)     # per row: as on the whole table
            beacon = list(anchors).index("beacon") if "beacon" in anchors else -1
            inp.n_beacon += int((kind == beacon).sum())
            if every > 1:          # by key: the same transmissions at every sniffer; beacons all
                keep = (kind == beacon) | ((key >> np.uint64(32)) % np.uint64(every) == 0)
                rows = rows[keep]
            rows = np.sort(rows)
            inp.anchors.add(t[list(ANCHOR_COLUMNS)].iloc[rows].assign(local_=local[rows], seg_=seg[rows]))
            n += len(t)
        if not n:
            raise CaptureError(f"{path}: no frames")
        inp.clocks.finish()
        inp.anchors.finish()
        ins.append(inp)
    ins[0].every = every
    if len({i.linktype for i in ins}) > 1:
        raise CaptureError("mismatched link types: " + ", ".join(
            f"{p}={i.linktype}" for p, i in zip(paths, ins)))
    return ins


def _fit(ins, reference, anchors, knot_s, allow_unsynced, names, tile_ns, spill_dir=None):
    """The clock fit on the anchor rows (with the clocks of every frame, as
    :func:`local_clocks`); the epoch map and host offsets from the sample; per clock the
    range of its stamps and the first clock id of each input."""
    clocks, base, ts_lo, ts_hi = joint_clocks([i.clocks for i in ins])

    def pieces():                        # (input, rows with their clock id), read from pass 1's spill
        for s, (i, b) in enumerate(zip(ins, base)):
            for df in i.anchors.pieces():                # a fresh table: changed in place
                df["clock_"] = i.clocks.glob(df.pop("seg_").to_numpy(np.int64), b)
                yield s, df

    res = fit_tiled(pieces, sum(len(i.anchors) for i in ins), clocks, reference=reference, anchors=anchors,
                    knot_s=knot_s, names=names, tile_ns=tile_ns, spill_dir=spill_dir,
                    n_beacon=sum(i.n_beacon for i in ins))   # hour by hour past 1.5 h
    # clocks without anchors placed via their sniffer's host clock, fitted on the stamp
    # sample (every frame while it holds them all: then as the one-pass merge)
    cs = [i.clocks for i in ins]
    place_via_host(res, np.concatenate([c.sample[1] for c in cs]),
                   np.concatenate([c.glob(c.sample[2], b) for c, b in zip(cs, base)]),
                   np.repeat(np.arange(len(cs)), [len(c.sample[0]) for c in cs]),
                   np.concatenate([c.sample[0] for c in cs]), allow_unsynced, names)
    to_epoch, res.host_us = sample_fits(cs, base, clocks, res.model, reference)
    tile_pair_stats(res, anchors)        # tiled: the report's pairs summed on the final model
    return res, to_epoch, base, (ts_lo, ts_hi)


class _Stream:
    """Pass 2 over one input: decoded batches with their common and output times,
    held from the first row a window may still need."""

    def __init__(self, path, s, want, conv, clocks, base, model, to_epoch, batch_rows, snaplen):
        self.it = _batches(path, s, want, conv, batch_rows, snaplen)
        self.clocks, self.base, self.model, self.to_epoch = clocks, base, model, to_epoch
        self.parts, self.done, self.floor, self.end_t, self.buf = [], False, None, None, None
        self.recs = []                   # the Records of each held batch (pages released with it)

    def pull(self) -> None:
        """Decode one more batch: its rows' common and output times, keys, packet places."""
        rec, t, _ = next(self.it, (None, None, None))      # rows as pass 1's (same batches)
        if t is None:
            self.done = True
            return
        tsft = t["tsft_us"].array          # stamps aligned as in pass 1: local time as local_clocks
        ts = t["ts_ns"].to_numpy(np.int64)
        has = ~np.asarray(tsft.isna())
        clock = self.clocks.clock_of(rec.row0, has, self.base)      # from the rows and pass 1's runs
        local = np.where(has, tsft.to_numpy(np.int64, na_value=0) * 1000, ts)
        synced = self.model.synced[clock]
        common = self.model.apply(local, clock)
        out_t = np.where(synced, self.to_epoch(common), t["ts_ns"].to_numpy(np.int64))
        if self.floor is not None and len(out_t) and out_t.min() < self.floor:
            raise SyncError("an input is not in time order (by more than half the window margin): "
                            "merge without --window-s")
        if len(out_t):
            self.end_t = max(self.end_t or out_t.max(), int(out_t.max()))
        self.buf = rec
        place = np.stack([np.asarray(rec.data_off, np.int64), np.asarray(rec.caplen, np.int64)], 1)
        self.parts.append((t, common, out_t, synced, hash_key(t, MERGE_KEY), place, clock))
        self.recs.append((rec,))

    def upto(self, t_ns: int) -> None:
        """Pull until a batch reaches output time ``t_ns`` (or the input ends)."""
        while not self.done and (self.end_t is None or self.end_t < t_ns):
            self.pull()

    def processed(self, hi: int, margin_ns: int) -> None:
        """A window ending at ``hi`` is written: no row may come before ``hi + margin``
        any more, and the batches whose rows all come before ``hi - margin`` are dropped."""
        keep = [len(p[2]) and p[2].max() >= hi - margin_ns for p in self.parts]
        for (rec, *_), k in zip(self.recs, keep):
            if not k:
                _release_batch(rec)
        self.parts = [p for p, k in zip(self.parts, keep) if k]
        self.recs = [r for r, k in zip(self.recs, keep) if k]
        self.floor = hi + margin_ns

    def rows(self) -> int:
        return sum(len(p[0]) for p in self.parts)


def merge_to_file(paths, output, *, window_s: float = 10.0, reference: int = 0,
                  allow_unsynced: bool = False, anchors=("beacon", "ba", "unique"),
                  keep_duplicates: bool = False, knot_s: float = 1.0, tsft_at="auto",
                  names=None, progress=None, margin_ns: int = MARGIN_NS, hook=None,
                  batch_rows: int = BATCH_ROWS, anchor_cap: int = ANCHOR_CAP,
                  sample_cap: int = SAMPLE_CAP, pass1_hook=None, tile_s: float = TILE_NS / 1e9) -> dict:
    """Merge capture files into ``output`` (a merged pcapng) in bounded memory.

    Parameters as :func:`sniffsync.sync.merge.merge`; ``window_s``: seconds of output
    time merged at a time; ``margin_ns``: rows matched either side of a window;
    ``hook(rows)`` is called after each window with the number of decoded rows held
    (tests); ``batch_rows``: frames decoded at a time; ``anchor_cap``: frames whose
    "unique" anchors are all fitted (beyond, a sample by key: the report's
    ``anchor_sample``); ``sample_cap``: frames (all inputs) whose stamps the epoch map
    and the host offsets see, beyond a sample by row (the report's ``frame_sample``);
    ``pass1_hook(sizes)`` gets per input the elements pass 1 keeps (tests); ``tile_s``: past
    1.5 tiles of common time the clocks are fitted tile by tile
    (:mod:`sniffsync.sync.streamfit`). Returns the
    report (also in the file's section header).
    """
    from sniffsync.sync.inputs import _validate
    from sniffsync.sync.merge import MIN_GATE_NS, NEEDED_COLUMNS, _window_ns
    from sniffsync.sync.report import merge_report
    say = progress or (lambda stage: None)
    paths = [os.fspath(p) for p in paths]
    if not paths:
        raise UsageError("merge needs at least one input")
    _validate(paths, [])
    from sniffsync.sync.mergedfile import file_meta
    for p in paths:
        if file_meta(p) is not None:
            raise UsageError(f"{p}: a merged file as input needs the in-memory merge (without --window-s)")
    if not 0 <= reference < len(paths):
        raise UsageError(f"reference {reference} is not an input index (0..{len(paths) - 1})")
    window_ns = _window_ns(window_s)
    names = names or [os.path.splitext(os.path.basename(p))[0] for p in paths]
    want = list(NEEDED_COLUMNS)
    snaplen = min_snaplen(paths)         # frames some input cut: no FCS in the keys
    spill = tempfile.mkdtemp(prefix=".merge-anchors-", dir=os.path.dirname(os.path.abspath(output)))
    try:                                 # anchor rows past SPILL_ROWS per input wait there
        ins = _pass1(paths, want, tsft_at, anchors, say, batch_rows, anchor_cap, sample_cap, snaplen, spill)
        every = ins[0].every
        if pass1_hook is not None:
            pass1_hook([i.clocks.sizes() | {"anchors": len(i.anchors), "anchors_held": i.anchors.held_max} for i in ins])
        say("sync clocks")
        res, to_epoch, base, (ts_lo, ts_hi) = _fit(ins, reference, anchors, knot_s, allow_unsynced, names,
                                                   int(tile_s * 1e9), spill)
        for i in ins:
            i.anchors.drop()             # the rows held below SPILL_ROWS too
    finally:
        shutil.rmtree(spill, ignore_errors=True)
    model = res.model
    st = held_stats(res)                 # one fit: its pairs, exact; tiles: their summary
    gate_ns = default_gate(res, MIN_GATE_NS, st)
    per_clock_err = clock_errors(res, st)
    clock_gates = copy_gates(res, gate_ns)
    # per window, retime needs each clock's error, not the anchor pairs: they are dropped
    fit = {"model": model, "anchors": None, "sigma_ns": getattr(res, "sigma_ns", None),
           "clock_err_ns": per_clock_err}
    # output times of the whole capture: its windows and the base of mean copy times
    t_lo, t_hi = output_range(model, to_epoch, model.clocks, ts_lo, ts_hi)
    report = merge_report(res, pd.DataFrame({"sniffer": np.zeros(0, np.int64), "signal_dbm": np.zeros(0)}),
                          np.zeros(0, np.int64), names, anchors, gate_ns, 0, keep_duplicates, np.zeros(0, np.int64),
                          host_us=res.host_us)
    model_clocks = model.clocks
    report["totals"]["host_placed_frames"] = int(model_clocks.frames.to_numpy(np.int64)[model.via_host >= 0].sum()) \
        if "frames" in model_clocks else 0
    if getattr(res, "tiles", 1) > 1:
        report["fit_tiles"] = f"{res.tiles} tiles of common time, {tile_s:g} s at most (sync.streamfit)"
    del res                              # only the clock model is needed from here
    gc.collect()                         # the fit's tables may sit in reference cycles
    release_free_heap()                  # the fit's freed heap back to the system
    if every > 1:
        report["anchor_sample"] = f"1/{every} of the unique and Block-Ack anchors (by content key)"
    stride = max(i.clocks.stride for i in ins)
    if stride > 1:
        report["frame_sample"] = f"1/{stride} of the frames (by row) for the epoch map and host offsets"
    if t_lo < 0:                         # as write_merged
        raise UsageError("ts_ns must be >= 0 (ns since the Unix epoch)")
    edges = window_bounds(np.array([t_lo, t_hi], np.int64), window_ns)
    frames = model.clocks.frames.to_numpy(np.int64)
    cnt = Counts(len(paths), [i.clocks.n for i in ins], int(frames[~model.synced].sum()))
    conv, linktypes = {names[s]: i.conv for s, i in enumerate(ins)}, [i.linktype for i in ins]
    streams = [_Stream(p, s, want, i.conv, i.clocks, int(b), model, to_epoch, batch_rows, snaplen)
               for s, (p, i, b) in enumerate(zip(paths, ins, base))]
    del ins
    say("match, merge and write, window by window")
    ctx = Ctx(streams, margin_ns, gate_ns, keep_duplicates, names, cnt,
               bool(model.clocks.tsft[model.reference]))
    ctx.clock_gates, ctx.fit, ctx.to_epoch = clock_gates, fit, to_epoch
    ctx.tally, ctx.ts_src = Tally(len(names)), {}
    fd, scratch = tempfile.mkstemp(prefix=".merge-", suffix=".part",
                                   dir=os.path.dirname(os.path.abspath(output)))
    try:
        with os.fdopen(fd, "wb") as body:
            for lo, hi in zip(edges[:-1], edges[1:]):    # per window
                window(ctx, int(lo), int(hi), body)
                release_free_heap()
                for st in streams:
                    st.processed(int(hi), margin_ns)
                if hook is not None:
                    hook(sum(st.rows() for st in streams))
        cnt.fill(report, keep_duplicates)
        ctx.tally.fill(report, per_clock_err, model.clocks)
        report["totals"]["ts_src"] = {k: ctx.ts_src.get(k, 0) for k in TS_SRC}
        if tsft_at is not None:
            report["tsft_at"] = conv
        _write(output, scratch, names, linktypes, "capture" if tsft_at is None else "end", report, cnt.out)
    finally:
        os.unlink(scratch)
    return report


def _write(output, scratch, names, linktypes, stamps, report, n_out) -> None:
    """The merged file: its head, then the packets written to ``scratch``."""
    from sniffsync.io.atomic import atomic_output
    from sniffsync.sync.pcapng import merged_head
    with atomic_output(output) as fh, open(scratch, "rb") as src:
        fh.write(merged_head(names, linktypes, stamps, report, n_out))
        shutil.copyfileobj(src, fh, 16 << 20)
