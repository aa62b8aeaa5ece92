"""Pass 1 of the streamed merge: the clocks of an input without a per-frame array.

:func:`sniffsync.sync.clock.local_clocks` needs every frame of the table at once. An
:class:`InputClocks` sees an input one batch at a time and keeps what the merge needs of
it, O(clock segments + a bounded sample), whatever the capture's length:

- TSF jumps found per batch, the batch's TSFT frames in capture-time order, carrying the
  last frame's ``tsft - ts`` into the next batch;
- per TSFT segment (and the host clock) its frame count and the min/max of its local
  time and of its capture stamps (the model's spans, the output-time range);
- which TSFT segment each row is in, as runs over the rows (a TSF reset is rare): pass 2
  finds a row's clock from its row index and whether it has TSFT (:meth:`clock_of`);
- a sample of ``(ts, local, segment)`` (20 B a frame): every frame up to ``cap`` rows,
  then 1 in 2, 4, ... by row index (the epoch map and the host-clock offsets are fitted on it; below the cap
  they see every frame, as the one-pass merge does).

Caveat: a frame out of capture-time order across a batch edge is compared with the last
frame of the previous batch, not with its neighbour in time (one-pass: a global sort); the
two differ only if a TSF jump falls there.
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd

from sniffsync.sync.clock import JUMP_NS, NOISE_JUMPS, reference_clock

__all__ = ["InputClocks", "joint_clocks"]

I64_MAX, I64_MIN = np.iinfo(np.int64).max, np.iinfo(np.int64).min
STATS = ("frames", "t0_ns", "t1_ns", "ts_lo", "ts_hi")       # per segment, running


def _new_stats(n: int) -> np.ndarray:
    s = np.zeros((n, 5), np.int64)
    s[:, 1], s[:, 3] = I64_MAX, I64_MAX
    s[:, 2], s[:, 4] = I64_MIN, I64_MIN
    return s


def _fold(stats, at, local, ts) -> None:
    """Add the rows ``at`` (segment index, sorted) to ``stats`` (one reduce per segment run)."""
    start = np.flatnonzero(np.r_[True, at[1:] != at[:-1]])
    seg = at[start]
    stats[seg, 0] += np.diff(np.r_[start, len(at)])
    stats[seg, 1] = np.minimum(stats[seg, 1], np.minimum.reduceat(local, start))
    stats[seg, 2] = np.maximum(stats[seg, 2], np.maximum.reduceat(local, start))
    stats[seg, 3] = np.minimum(stats[seg, 3], np.minimum.reduceat(ts, start))
    stats[seg, 4] = np.maximum(stats[seg, 4], np.maximum.reduceat(ts, start))


class InputClocks:
    """One input's clocks, fed batch by batch (:meth:`add`), in file order."""

    def __init__(self, sample_cap: int, jump_ns: int = JUMP_NS):
        self.n, self.jump_ns, self.cap, self.stride = 0, jump_ns, max(2, sample_cap), 1
        self.prev_d = None               # tsft - ts of the last TSFT frame in capture-time order
        self.tsft = _new_stats(0)        # per TSFT segment: STATS
        self.host = _new_stats(1)        # the host clock (frames without TSFT)
        self.run_row, self.run_seg, self.last_seg = [], [], -1
        self.sample, self.kept = [], 0   # (ts, local, segment: -1 host) per batch; its rows

    def add(self, ts: np.ndarray, tsft_us: np.ndarray):
        """A batch's aligned stamps and TSFT (µs, -1: none): per row local time (ns) and
        TSFT segment (-1: host clock), as :func:`local_clocks` on the whole input."""
        has = tsft_us >= 0
        local = np.where(has, tsft_us * 1000, ts)
        seg = np.full(len(ts), -1, np.int64)
        idx = np.flatnonzero(has)
        if len(idx):
            o = idx[np.argsort(ts[idx], kind="stable")]
            d = local[o] - ts[o]
            step = np.abs(np.diff(d))
            # the jump gate of local_clocks, with this batch's host-stamp noise (the whole
            # input's median is not known yet: equal while the noise is under 5 ms / 20)
            gate = max(self.jump_ns, NOISE_JUMPS * float(np.median(step))) if len(step) else self.jump_ns
            first = self.prev_d is None or abs(int(d[0]) - self.prev_d) > gate
            s_o = len(self.tsft) - 1 + np.cumsum(np.r_[first, step > gate])
            self.prev_d = int(d[-1])
            seg[o] = s_o
            self.tsft = np.concatenate([self.tsft, _new_stats(int(s_o[-1]) + 1 - len(self.tsft))])
            _fold(self.tsft, s_o, local[o], ts[o])
            sf = seg[idx]                # runs over the TSFT rows in file order
            change = np.r_[sf[0] != self.last_seg, sf[1:] != sf[:-1]]
            if change.any():             # a list entry per run, not per batch
                self.run_row.append(self.n + idx[change])
                self.run_seg.append(sf[change])
            self.last_seg = int(sf[-1])
        if not has.all():
            _fold(self.host, np.zeros(int((~has).sum()), np.int64), local[~has], ts[~has])
        self._keep(ts, local, seg)
        self.n += len(ts)
        return local, seg

    def _keep(self, ts, local, seg) -> None:
        """Rows ``k * stride`` (implicit: the sample holds no row index), thinned when full."""
        first = -self.n % self.stride
        self.sample.append((ts[first::self.stride], local[first::self.stride],
                            seg[first::self.stride].astype(np.int32)))
        self.kept += len(self.sample[-1][0])
        if len(self.sample) >= 64:       # few arrays, not one per batch
            self.sample = [tuple(np.concatenate(c) for c in zip(*self.sample))]
        while self.kept > self.cap:      # keep 1 in 2 x stride: the even ones of the sample
            self.stride *= 2
            self.sample = [tuple(np.concatenate(c)[::2] for c in zip(*self.sample))]
            self.kept = len(self.sample[0][0])

    def finish(self) -> None:
        """Join the kept batches (after the last :meth:`add`)."""
        self.run_row = np.concatenate(self.run_row) if self.run_row else np.zeros(0, np.int64)
        self.run_seg = np.concatenate(self.run_seg) if self.run_seg else np.zeros(0, np.int64)
        cols = list(zip(*self.sample)) or [[np.zeros(0, np.int64)]] * 3
        self.sample = tuple(np.concatenate(c) for c in cols)

    def segments(self) -> np.ndarray:
        """Per clock of this input (its TSFT segments, then the host clock if any): STATS."""
        return np.concatenate([self.tsft, self.host[self.host[:, 0] > 0]])

    def sizes(self) -> dict:
        """Elements held (tests: independent of the capture's length past the cap)."""
        return {"runs": len(self.run_row), "segments": len(self.segments()), "sample": len(self.sample[0])}

    def clock_of(self, row0: int, has: np.ndarray, base: int) -> np.ndarray:
        """Clock id of a batch's rows (first row ``row0``; ``has``: rows with TSFT)."""
        r = row0 + np.arange(len(has), dtype=np.int64)
        j = np.searchsorted(self.run_row, r, "right") - 1
        tsft_seg = self.run_seg[np.maximum(j, 0)] if len(self.run_seg) else np.zeros(len(r), np.int64)
        return np.where(has, base + tsft_seg, base + len(self.tsft))

    def glob(self, seg: np.ndarray, base: int) -> np.ndarray:
        """Clock ids of rows given their segment from :meth:`add` (-1: host)."""
        return np.where(seg >= 0, base + seg, base + len(self.tsft))


def joint_clocks(ins: list):
    """The clocks table of :func:`local_clocks` over all inputs, the first clock id of
    each input, and per clock the range of its capture stamps (``ts_lo``, ``ts_hi``)."""
    parts = [i.segments() for i in ins]
    base = np.r_[0, np.cumsum([len(p) for p in parts])][:-1].astype(np.int64)
    st = np.concatenate(parts)
    clocks = pd.DataFrame({"sniffer": np.repeat(np.arange(len(ins), dtype=np.int64), [len(p) for p in parts]),
                           "segment": np.concatenate([np.arange(len(p), dtype=np.int64) for p in parts]),
                           "tsft": np.concatenate([np.arange(len(p)) < len(i.tsft) for p, i in zip(parts, ins)]),
                           "frames": st[:, 0], "t0_ns": st[:, 1], "t1_ns": st[:, 2]})
    return clocks, base, st[:, 3], st[:, 4]


def sample_fits(ins, base, clocks, model, reference: int):
    """The epoch map (:func:`sniffsync.sync.fit.epoch_map` on the reference clock's
    sampled frames) and the per-sniffer host offsets (µs, :func:`host_offsets_us` on
    the sample): those of every frame while the sample holds them all."""
    from sniffsync.sync.fit import epoch_map
    from sniffsync.sync.report import host_offsets_us
    ref = reference_clock(clocks, reference)
    s = ins[reference]
    ts, local, seg = s.sample
    to_epoch = epoch_map(ts, local, s.glob(seg, base[reference]) == ref)
    clock = np.concatenate([i.glob(i.sample[2], b) for i, b in zip(ins, base)])
    local = np.concatenate([i.sample[1] for i in ins])
    every = SimpleNamespace(model=model, clock=clock, common_ns=model.apply(local, clock))
    df = pd.DataFrame({"sniffer": np.repeat(np.arange(len(ins)), [len(i.sample[0]) for i in ins]),
                       "ts_ns": np.concatenate([i.sample[0] for i in ins])})
    return to_epoch, host_offsets_us(every, df, len(ins))


def output_range(model, to_epoch, clocks, ts_lo, ts_hi):
    """Min and max output time over every frame, from each clock's ends: common time on
    the epoch is non-decreasing in local time (drift << 1); unsynced: the stamps."""
    c = np.arange(len(clocks), dtype=np.int64)
    lo = to_epoch(model.apply(clocks.t0_ns.to_numpy(np.int64), c))
    hi = to_epoch(model.apply(clocks.t1_ns.to_numpy(np.int64), c))
    syn = model.synced[c]
    return int(np.where(syn, lo, ts_lo).min()), int(np.where(syn, hi, ts_hi).max())
