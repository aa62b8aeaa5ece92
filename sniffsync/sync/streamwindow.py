"""Pass 2 of the streamed merge (:mod:`sniffsync.sync.stream`), one window at a time: the
held rows of every input whose output time falls in the window and its margins are
matched (with each clock's copy gate), re-timed, merged and written; the report's frame
counts are added up window by window."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd

from sniffsync.sync.copies import best_copy, match_copies, merged_table
from sniffsync.sync.retime import Retimed, provenance_totals, retime
from sniffsync.sync.windows import keep_window, output_rank

__all__ = ["Ctx", "Counts", "window"]


class Ctx:
    """What every window needs."""

    def __init__(self, streams, margin_ns, gate_ns, keep_duplicates, names, cnt, ref_tsft):
        self.streams, self.margin_ns, self.gate_ns = streams, margin_ns, gate_ns
        self.keep_duplicates, self.names, self.cnt, self.ref_tsft = keep_duplicates, names, cnt, ref_tsft


def _held_rows(ctx, lo, hi):
    """The held rows with output time in the window and its margins, in input order:
    ``(table, common, out_t, synced, key, place, clock)``, or None."""
    m_ns = ctx.margin_ns
    parts = []
    for st in ctx.streams:
        st.upto(hi + m_ns + m_ns // 2)
        for p in st.parts:
            r = np.flatnonzero((p[2] >= lo - m_ns) & (p[2] < hi + m_ns))
            if len(r):
                parts.append((p[0].iloc[r].reset_index(drop=True), *(a[r] for a in p[1:])))
    if not parts:
        return None
    return (_stack([p[0] for p in parts]), *(np.concatenate([p[k] for p in parts]) for k in range(1, 7)))


def _stack(tables) -> pd.DataFrame:
    """The tables one after the other (categories united), one column at a time."""
    from pandas.api.types import union_categoricals

    from sniffsync.sync.tables import str_categories
    if len(tables) == 1:
        return tables[0]
    tables = [str_categories(t) for t in tables]
    out = {}
    for c in tables[0].columns:          # per column
        parts = [t[c] for t in tables]
        out[c] = (union_categoricals(parts, ignore_order=True) if isinstance(parts[0].dtype, pd.CategoricalDtype)
                  else pd.concat(parts, ignore_index=True))
    return pd.DataFrame(out, copy=False)


def window(ctx, lo, hi, body) -> None:
    """Match, merge and write the transmissions whose output time falls in ``[lo, hi)``."""
    from sniffsync.sync.merge import merged_ids
    from sniffsync.sync.pcapng import write_rows
    held = _held_rows(ctx, lo, hi)
    if held is None:
        return
    t, common, out_t, synced, key, place, clock = held
    g = match_copies(t, common, synced, ctx.gate_ns, key, clock, ctx.clock_gates)
    rows, g_own = keep_window(g, t["sniffer"].to_numpy(np.int64), out_t, (lo, hi), ctx.margin_ns)
    if not len(rows):
        return
    # best time per copy (sync.retime) with the window's rows and margins as neighbours
    rt = retime(t, SimpleNamespace(common_ns=common, clock=clock, **ctx.fit), g, synced)
    rt = Retimed(*(a[rows] for a in rt))
    ctx.tally.add(rt, t["sniffer"].to_numpy(np.int64)[rows])
    sub = t.iloc[rows].reset_index(drop=True).assign(place_=np.arange(len(rows)))
    best = common[rows] + rt.shift_ns
    place, syn_own = place[rows], synced[rows]
    t_own = np.where(syn_own, ctx.to_epoch(best), out_t[rows])
    tsft = np.rint(best / 1000).astype(np.int64) if ctx.ref_tsft else None
    ctx.cnt.add(g_own, sub)
    rank = output_rank(sub["sniffer"].to_numpy(np.int64), t_own, g_own) \
        if ctx.keep_duplicates else None
    out = merged_table(sub, t_own, tsft, g_own, syn_own, len(ctx.names), ctx.keep_duplicates,
                       consume=True, retimed=rt)
    for k, v in provenance_totals(out).items():
        ctx.ts_src[k] = ctx.ts_src.get(k, 0) + v
    out["merged_id"] = merged_ids(out["merged_id"].to_numpy(np.int64), rank) + ctx.cnt.ids
    ctx.cnt.ids += int(g_own.max()) + 1
    ctx.cnt.out += len(out)
    at = place[out.pop("place_").to_numpy(np.int64)]
    write_rows(body, out, [st.buf for st in ctx.streams], at[:, 0], at[:, 1], ctx.names)


class Counts:
    """The report's frame counts, added up window by window."""

    def __init__(self, n_sniffers, frames_in, unsynced):
        self.frames_in, self.unsynced = frames_in, unsynced
        self.merged, self.dup = np.zeros(n_sniffers, np.int64), np.zeros(n_sniffers, np.int64)
        self.trans = self.multi = self.out = self.ids = 0

    def add(self, g, sub) -> None:
        sniffer = sub["sniffer"].to_numpy(np.int64)
        nh = np.bincount(g)
        is_best = np.zeros(len(g), bool)
        is_best[best_copy(g, sniffer, sub["signal_dbm"].to_numpy(np.float64, na_value=-1e9))] = True
        self.merged += np.bincount(sniffer[nh[g] > 1], minlength=len(self.merged))
        self.dup += np.bincount(sniffer[~is_best], minlength=len(self.dup))
        self.trans += len(nh)
        self.multi += int((nh > 1).sum())

    def fill(self, rep, keep_duplicates) -> None:
        """Put these counts in ``rep`` (:func:`sniffsync.sync.report.merge_report` of the
        fit, without frames)."""
        for s, row in enumerate(rep["sniffers"]):
            row.update(frames_in=int(self.frames_in[s]), frames_merged=int(self.merged[s]),
                       duplicates=int(self.dup[s]))
        n_in = int(sum(self.frames_in))
        dup = 0 if keep_duplicates else n_in - self.out
        rep["totals"].update(frames_in=n_in, frames_out=int(self.out), duplicates_removed=int(dup),
                             transmissions=int(self.trans), heard_by_2_or_more=int(self.multi),
                             unsynced_frames=int(self.unsynced), conserved=n_in == self.out + dup)
