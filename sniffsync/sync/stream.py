"""Merging hours of capture in bounded memory: two streamed passes over the inputs.

:func:`merge_to_file` writes what :func:`sniffsync.sync.merge.merge` followed by
:func:`sniffsync.sync.pcapng.write_merged` writes, byte for byte, without holding the
frame table:

1. *Pass 1* decodes each input a batch at a time, moves its stamps to PPDU ends and
   keeps per frame only its stamp and local clock (20 bytes), plus the columns of the
   frames that can be anchors (what :func:`sniffsync.sync.clock.sync` fits on). The
   clocks are fitted on those rows alone: the fit is that of the whole table.
2. *Pass 2* decodes the inputs again, in step, and merges one window of output time
   at a time (:mod:`sniffsync.sync.windows`: the window plus a margin either side is
   matched; it keeps the transmissions whose time falls in it). Each window's merged
   rows are written at once; rows a later window cannot need are dropped.

The report must stand in the section header, before the packets, but its counts are
known only at the end: the packets go to a scratch file beside the output first and
are then copied behind the header (the output's size in extra I/O).

Caveats: the stamps convention of an input (``tsft_at="auto"``) is decided on its first
batch, and a start-stamped PPDU cut by a batch edge gets the airtime of its part
(whole-table merging sees it whole); inputs must be in time order to within half the
margin (:class:`SyncError` otherwise). Per frame, 20 bytes and the anchor columns stay
in memory until the fit is done: the fit's inputs grow with the capture.
"""
from __future__ import annotations

import os
import shutil
import tempfile

import numpy as np
import pandas as pd

from sniffsync.errors import CaptureError, SyncError, UsageError
from sniffsync.sync.anchors import ANCHOR_KEYS, anchor_candidates, hash_key
from sniffsync.sync.clock import local_clocks, reference_clock, sync
from sniffsync.sync.copies import MERGE_KEY, best_copy, match_copies, merged_table
from sniffsync.sync.windows import MARGIN_NS, keep_window, window_bounds

__all__ = ["merge_to_file"]

# what anchor_candidates reads of an anchor row
ANCHOR_COLUMNS = tuple(dict.fromkeys(("sniffer", "type_subtype", "bad", "fcs_bad", "ta", "beacon_tsf_us",
                                      *(c for _, cols in ANCHOR_KEYS.values() for c in cols))))


class _Input:
    """Pass 1's keep of one input: per frame its aligned stamp and TSFT (null: -1)."""

    def __init__(self):
        self.ts, self.tsft, self.anchors, self.linktype, self.conv = [], [], [], None, None


def _check_linktype(path, t, linktype):
    from sniffsync.sync.merge import RADIO_LINKTYPES
    lt = np.unique(t["linktype"].to_numpy())
    if not np.isin(lt, RADIO_LINKTYPES).all():
        raise CaptureError(f"{path}: not an 802.11 capture (link type {', '.join(map(str, lt))});"
                           " merge needs 802.11 (+radiotap) captures")
    return int(lt[0]) if linktype is None else linktype


def _batches(path, s, want, conv):
    """``(rec, table)`` per batch of input ``s``, stamps moved to PPDU ends (``conv``:
    the stamps convention, or "auto" for the first batch to decide)."""
    from airtime.ppdu import align_to_ppdu_end
    from sniffsync.decode.frames import iter_columns
    from sniffsync.decode.table import frame_table
    for rec, n, cols, marks in iter_columns(path, s, want):
        t = frame_table(n, cols, marks, want)
        if conv is not None and len(t):
            t, got = align_to_ppdu_end(t, conv if isinstance(conv, str) else {s: conv})
            conv = got.get(s, "end") if isinstance(conv, str) else conv
        yield rec, t, conv


def _pass1(paths, want, tsft_at, anchors, say):
    ins = []
    for s, path in enumerate(paths):
        say(f"pass 1: {os.path.basename(path)}")
        inp = _Input()
        for _, t, conv in _batches(path, s, want, tsft_at):
            inp.conv = conv
            inp.linktype = _check_linktype(path, t, inp.linktype)
            inp.ts.append(t["ts_ns"].to_numpy(np.int64))
            inp.tsft.append(t["tsft_us"].to_numpy(np.int64, na_value=-1))
            rows = np.sort(anchor_candidates(t, anchors)[0])       # per row: as on the whole table
            inp.anchors.append(t[list(ANCHOR_COLUMNS)].iloc[rows].assign(
                row=rows + sum(len(x) for x in inp.ts[:-1])))
        if not inp.ts:
            raise CaptureError(f"{path}: no frames")
        inp.ts, inp.tsft = np.concatenate(inp.ts), np.concatenate(inp.tsft)
        ins.append(inp)
    if len({i.linktype for i in ins}) > 1:
        raise CaptureError("mismatched link types: " + ", ".join(
            f"{p}={i.linktype}" for p, i in zip(paths, ins)))
    return ins


def _fit(ins, reference, anchors, knot_s, allow_unsynced, names):
    """The clock fit on the anchor rows; per input its rows' local time and clock."""
    from sniffsync.sync.merge import _concat_columns, _epoch_map, _str_categories
    n = [len(i.ts) for i in ins]
    off = np.r_[0, np.cumsum(n)]
    tsft = np.concatenate([i.tsft for i in ins])
    table = pd.DataFrame({"sniffer": np.repeat(np.arange(len(ins), dtype=np.int16), n),
                          "ts_ns": np.concatenate([i.ts for i in ins]),
                          "tsft_us": pd.arrays.IntegerArray(tsft, tsft < 0)})
    del tsft
    local, clock, clocks = local_clocks(table)
    del table
    parts = [_str_categories(pd.concat(i.anchors, ignore_index=True)) for i in ins]
    for i in ins:
        i.anchors = None
    rows = np.concatenate([p.pop("row").to_numpy(np.int64) + o for p, o in zip(parts, off)])
    at = _concat_columns(parts) if len(parts) > 1 else parts[0]
    res = sync(at, reference=reference, anchors=anchors, knot_s=knot_s, allow_unsynced=allow_unsynced,
               names=names, clocks=(local[rows], clock[rows], clocks))
    del at, rows
    ts = np.concatenate([i.ts for i in ins])
    to_epoch = _epoch_map(ts, local, clock == reference_clock(clocks, reference))
    return res, to_epoch, [(local[a:b], clock[a:b]) for a, b in zip(off[:-1], off[1:])]


class _Stream:
    """Pass 2 over one input: decoded batches with their common and output times,
    buffered from the first row a window may still need."""

    def __init__(self, path, s, want, conv, local, clock, model, to_epoch, key_of):
        self.it = _batches(path, s, want, conv)
        self.local, self.clock, self.model, self.to_epoch = local, clock, model, to_epoch
        self.key_of, self.parts, self.done, self.floor, self.end_t = key_of, [], False, None, None

    def pull(self) -> None:
        """Decode one more batch (its common times, output times, keys)."""
        rec, t, _ = next(self.it, (None, None, None))
        if t is None:
            self.done = True
            return
        r = slice(rec.row0, rec.row0 + len(t))
        local, clock = self.local[r], self.clock[r]
        synced = self.model.synced[clock]
        has = self.model.clocks.tsft.to_numpy()[clock]
        common = self.model.apply(local, clock)
        t["tsft_us"] = pd.arrays.IntegerArray(np.where(has, local // 1000, 0), ~has)
        out_t = np.where(synced, self.to_epoch(common), t["ts_ns"].to_numpy(np.int64))
        if self.floor is not None and len(out_t) and out_t.min() < self.floor:
            raise SyncError("an input is not in time order (by more than half the window margin): "
                            "merge without --window-s")
        self.end_t = int(out_t.max()) if len(out_t) else self.end_t
        self.parts.append((rec, t, common, out_t, synced, self.key_of(t)))

    def upto(self, t_ns: int) -> None:
        """Pull until every row before output time ``t_ns`` (up to the slack) is held."""
        while not self.done and (self.end_t is None or self.end_t < t_ns):
            self.pull()

    def drop_before(self, t_ns: int) -> None:
        """Forget the batches whose rows all come before ``t_ns``."""
        self.parts = [p for p in self.parts if p[3].max(initial=t_ns) >= t_ns]
        self.floor = t_ns if self.floor is None else max(self.floor, t_ns)

    def rows(self) -> int:
        return sum(len(p[1]) for p in self.parts)


def merge_to_file(paths, output, *, window_s: float = 10.0, reference: int = 0,
                  allow_unsynced: bool = False, anchors=("beacon", "ba", "unique"),
                  keep_duplicates: bool = False, knot_s: float = 1.0, tsft_at="auto",
                  names=None, progress=None, margin_ns: int = MARGIN_NS, hook=None) -> dict:
    """Merge capture files into ``output`` (a merged pcapng) in bounded memory.

    Parameters as :func:`sniffsync.sync.merge.merge` (``window_s``: seconds of output
    time merged at a time); ``hook(rows)`` is called with the number of decoded rows
    held in memory at each window (tests). Returns the report.
    """
    from sniffsync.io.atomic import atomic_output
    from sniffsync.sync.merge import NEEDED_COLUMNS, _first_seen, _validate, _window_ns
    from sniffsync.sync.pcapng import merged_head, write_rows
    from sniffsync.sync.report import merge_report
    say = progress or (lambda stage: None)
    paths = [os.fspath(p) for p in paths]
    if not paths:
        raise UsageError("merge needs at least one input")
    _validate(paths, [])
    if not 0 <= reference < len(paths):
        raise UsageError(f"reference {reference} is not an input index (0..{len(paths) - 1})")
    window_ns = _window_ns(window_s)
    names = names or [os.path.splitext(os.path.basename(p))[0] for p in paths]
    want = list(NEEDED_COLUMNS)
    ins = _pass1(paths, want, tsft_at, anchors, say)
    say("sync clocks")
    res, to_epoch, lc = _fit(ins, reference, anchors, knot_s, allow_unsynced, names)
    model = res.model
    held = res.anchors[res.anchors.held_out & res.anchors.ok].residual_ns.abs()
    from sniffsync.sync.merge import MIN_GATE_NS
    gate_ns = max(MIN_GATE_NS, 2 * float(held.quantile(0.99))) if len(held) else MIN_GATE_NS
    # output times over the whole capture: the windows and the mean's base
    t_all = [np.where(model.synced[c], to_epoch(model.apply(lo, c)), i.ts) for i, (lo, c) in zip(ins, lc)]
    t_lo, t_hi = min(int(t.min()) for t in t_all), max(int(t.max()) for t in t_all)
    del t_all
    edges = window_bounds(np.array([t_lo, t_hi], np.int64), window_ns)
    streams = [_Stream(p, s, want, ins[s].conv if tsft_at is not None else None, lo, c, model, to_epoch,
                       lambda t: hash_key(t, MERGE_KEY)) for s, (p, (lo, c)) in enumerate(zip(paths, lc))]
    frames_in = [len(i.ts) for i in ins]
    conv = {names[s]: i.conv for s, i in enumerate(ins)}
    del ins
    n_sn = len(paths)
    cnt = {"merged": np.zeros(n_sn, np.int64), "dup": np.zeros(n_sn, np.int64), "trans": 0, "multi": 0,
           "out": 0, "unsynced": 0, "ids": 0}
    say("match, merge and write in windows")
    scratch = tempfile.NamedTemporaryFile(prefix=".merge-", suffix=".part",
                                          dir=os.path.dirname(os.path.abspath(output)) or ".", delete=False)
    try:
        with scratch as body:
            for lo, hi in zip(edges[:-1], edges[1:]):    # per window
                _window(streams, (lo, hi), margin_ns, gate_ns, t_lo, n_sn, keep_duplicates, body, names,
                        cnt, _first_seen, write_rows)
                for st in streams:
                    st.drop_before(int(hi) - margin_ns)
                if hook is not None:
                    hook(sum(st.rows() for st in streams))
        report = merge_report(res, pd.DataFrame({"sniffer": np.zeros(0, np.int64),
                                                 "signal_dbm": np.zeros(0, np.float64)}),
                              np.zeros(0, np.int64), names, anchors, gate_ns, cnt["out"], keep_duplicates,
                              np.zeros(0, np.int64))
        _fill_counts(report, frames_in, cnt, keep_duplicates)
        if tsft_at is not None:
            report["tsft_at"] = conv
        head = merged_head(names, [int(st.linktype) for st in _linktypes(paths)], "capture" if tsft_at is None
                           else "end", report, cnt["out"])
        with atomic_output(output) as fh, open(scratch.name, "rb") as src:
            fh.write(head)
            shutil.copyfileobj(src, fh, 16 << 20)
    finally:
        os.unlink(scratch.name)
    return report


def _linktypes(paths):
    from sniffsync.io.capture import head_linktypes

    class _L:
        def __init__(self, lt):
            self.linktype = lt
    return [_L(int(head_linktypes(p)[0])) for p in paths]


def _window(streams, core, margin_ns, gate_ns, t_base, n_sn, keep_duplicates, body, names, cnt,
            first_seen, write_rows):
    """Match, merge and write the transmissions whose time falls in ``core``."""
    from sniffsync.sync.merge import _concat_columns, _str_categories
    lo, hi = (int(x) for x in core)
    for st in streams:
        st.upto(hi + margin_ns + margin_ns // 2)
    parts, recs = [], []
    for s, st in enumerate(streams):             # rows of the window and its margins, input order
        for rec, t, common, out_t, synced, key in st.parts:
            m = (out_t >= lo - margin_ns) & (out_t < hi + margin_ns)
            if m.any():
                r = np.flatnonzero(m)
                parts.append((t.iloc[r].reset_index(drop=True), common[r], out_t[r], synced[r], key[r],
                              np.full(len(r), s), rec.row0 + r))
        recs.append(st.parts[0][0] if st.parts else None)
    if not parts:
        return
    t = _concat_columns([_str_categories(p[0]) for p in parts]) if len(parts) > 1 else parts[0][0]
    common, out_t, synced, key, sn, idx = (np.concatenate([p[k] for p in parts]) for k in range(1, 7))
    g = match_copies(t, common, synced, gate_ns, key)
    rows, g_own = keep_window(g, t["sniffer"].to_numpy(np.int64), out_t, (lo, hi), margin_ns, t_base)
    if not len(rows):
        return
    sub = t.iloc[rows].reset_index(drop=True)
    idx_own, t_own, syn_own = idx[rows], out_t[rows], synced[rows]
    # the mean copy time is rounded from the capture's first time: shift this window's
    # times by one ns when its first time is an odd distance from it (rint ties to even)
    shift = (int(t_own.min()) - t_base) % 2
    tsft = np.rint(common[rows] / 1000).astype(np.int64) if synced.any() or True else None
    out = merged_table(sub.assign(row_=idx_own), t_own - shift, _tsft_common(streams, tsft), g_own, syn_own,
                       n_sn, keep_duplicates, consume=True)
    out["ts_ns"] = out["ts_ns"].to_numpy(np.int64) + shift
    out["merged_id"] = first_seen(out["merged_id"].to_numpy(np.int64)) + cnt["ids"]
    _count(cnt, g_own, sub, out, keep_duplicates)
    row_idx = out.pop("row_").to_numpy(np.int64)
    write_rows(body, out, [st.parts[0][0] if st.parts else r for st, r in zip(streams, recs)],
               row_idx, names)


def _tsft_common(streams, tsft):
    """The common TSFT column when the reference clock has TSFT (else None)."""
    m = streams[0].model
    return tsft if bool(m.clocks.tsft[m.reference]) else None


def _count(cnt, g, sub, out, keep_duplicates):
    """Add one window's transmissions and copies to the report's counts."""
    sniffer = sub["sniffer"].to_numpy(np.int64)
    nh = np.bincount(g)
    best = best_copy(g, sniffer, sub["signal_dbm"].to_numpy(np.float64, na_value=-1e9))
    is_best = np.zeros(len(g), bool)
    is_best[best] = True
    n_sn = len(cnt["merged"])
    cnt["merged"] += np.bincount(sniffer[nh[g] > 1], minlength=n_sn)
    cnt["dup"] += np.bincount(sniffer[~is_best], minlength=n_sn)
    cnt["trans"] += len(nh)
    cnt["multi"] += int((nh > 1).sum())
    cnt["out"] += len(out)
    cnt["unsynced"] += int(out["unsynced"].to_numpy(bool).sum()) if not keep_duplicates else 0
    cnt["ids"] += len(nh)
