"""The merge report: per sniffer its anchors, clock model, held-out residuals and frame
counts; totals that show no frame was lost (``frames_in = frames_out + duplicates``)."""
from __future__ import annotations

import numpy as np

from sniffsync.sync.copies import best_copy

__all__ = ["merge_report", "pair_report", "clock_names"]


def _pct(x):
    return np.percentile(x, [50, 95, 99]).round(3).tolist() if len(x) else [None, None, None]


def clock_names(clocks, names) -> list:
    """Per clock: the sniffer's name, ``name#k`` for its TSF segment k > 0."""
    return [names[s] + (f"#{g}" if g else "") for s, g in zip(clocks.sniffer, clocks.segment)]


def pair_report(res, names) -> list:
    """Per pair of clocks that share anchors: anchors used in the fit, held-out anchors
    and the |residual| p50/p95 (µs) of each (held-out: not fitted, the honest figure)."""
    p = res.anchors
    nclk = len(res.model.clocks)
    ca, cb = p.clock_a.to_numpy(np.int64), p.clock_b.to_numpy(np.int64)
    key = np.minimum(ca, cb) * nclk + np.maximum(ca, cb)
    used, held = p.used.to_numpy(bool), (p.held_out & p.ok).to_numpy(bool)
    r_us = np.abs(p.residual_ns.to_numpy(np.float64)) / 1000
    cn = clock_names(res.model.clocks, names)
    out = []
    for k in np.unique(key[used | held]):          # per pair of clocks: a few, <= 64 * 63 / 2
        m = key == k
        a, b = divmod(int(k), nclk)
        out.append({"clocks": [cn[a], cn[b]], "anchors": int((m & used).sum()),
                    "fit_abs_residual_us_p50_p95": _pct(r_us[m & used])[:2],
                    "heldout": int((m & held).sum()),
                    "heldout_abs_residual_us_p50_p95": _pct(r_us[m & held])[:2]})
    return out


def host_offsets_us(res, df, n) -> np.ndarray:
    """Per sniffer: median (capture stamp - common time) of its synced frames, minus the
    reference's (µs; NaN if none): how far its host clock is from the reference host's.
    The spread over synced sniffers bounds from below the error of a sniffer merged on
    its host clock alone (another channel: no anchors)."""
    sn = df["sniffer"].to_numpy(np.int64)
    ok = res.model.synced[res.clock]
    d = df["ts_ns"].to_numpy(np.int64) - res.common_ns
    med = np.array([np.median(d[(sn == s) & ok]) if ((sn == s) & ok).any() else np.nan
                    for s in range(n)])                       # per sniffer: <= 64
    ref = int(res.model.clocks.sniffer[res.model.reference])
    return (med - med[ref]) / 1000


def merge_report(res, df, group, names, anchors, gate_ns, frames_out, keep_duplicates,
                 best=None) -> dict:
    """Per sniffer: anchors by kind, clock model per segment, held-out residuals, frame counts."""
    model, pairs = res.model, res.anchors
    cl = model.clocks
    sniffer = df["sniffer"].to_numpy(np.int64)
    sig = df["signal_dbm"].to_numpy(np.float64, na_value=-1e9)
    nh = np.bincount(group)
    is_best = np.zeros(len(df), bool)
    is_best[best_copy(group, sniffer, sig) if best is None else best] = True
    ca, cb = pairs.clock_a.to_numpy(np.int64), pairs.clock_b.to_numpy(np.int64)
    used_p, held_p, ok_p = (pairs[c].to_numpy(bool) for c in ("used", "held_out", "ok"))
    kinds = list(pairs.kind.cat.categories)
    kind_p = pairs.kind.cat.codes.to_numpy(np.int64)
    res_us = np.abs(pairs.residual_ns.to_numpy(np.float64)) / 1000
    clock_sn = cl.sniffer.to_numpy()
    host = host_offsets_us(res, df, len(names))
    host_bound = float(np.nanmax(np.abs(host))) if np.isfinite(host).any() else None
    out = []
    for s, name in enumerate(names):    # per sniffer: a handful
        mine_c = np.flatnonzero(clock_sn == s)
        mine = clock_sn == s
        touch = mine[ca] | mine[cb]
        used, hold = touch & used_p, touch & held_p
        n_kind = np.bincount(kind_p[used], minlength=len(kinds))
        segs = []
        for c in mine_c:
            k, v = model.knots[c], model.values[c]
            span = float(k[-1])
            segs.append({"segment": int(cl.segment[c]), "clock": "tsft" if cl.tsft[c] else "capture",
                         "frames": int(cl.frames[c]), "synced": bool(model.synced[c]),
                         # synced: a frame's sd about the model; else on its host clock, off by
                         # at least what the synced sniffers' host clocks are (µs)
                         "sigma_us": round(float(model.sigma_ns[c]) / 1000, 3) if model.synced[c] else None,
                         "time": "common" if model.synced[c] else "host clock",
                         "host_offset_bound_us": None if model.synced[c] or host_bound is None
                         else round(host_bound, 1),
                         "knots": int(len(k)), "span_s": round(span / 1e9, 6)})
            if model.synced[c]:          # an unsynced clock has no fitted offset or drift
                segs[-1].update(offset_ns=int(model.offset_ns[c] + round(v[0])),
                                drift_ppm=round(float((v[-1] - v[0]) / span * 1e6), 4) if span > 0 else 0.0)
        m = sniffer == s
        out.append({
            "name": name, "reference": bool(cl.sniffer[model.reference] == s),
            "synced": bool(model.synced[mine_c].all()),
            "anchors": {a: int(n_kind[kinds.index(a)]) if a in kinds else 0 for a in anchors},
            "model": segs,
            "host_offset_us": None if np.isnan(host[s]) else round(float(host[s]), 1),
            "heldout": {"n": int((hold & ok_p).sum()), "outliers": int((hold & ~ok_p).sum()),
                        "abs_residual_us_p50_p95_p99": _pct(res_us[hold & ok_p])},
            "frames_in": int(m.sum()),
            "frames_merged": int((nh[group[m]] > 1).sum()),
            "duplicates": int((m & ~is_best).sum())})
    n_in = len(df)
    dup = 0 if keep_duplicates else n_in - frames_out
    return {"sniffers": out, "pairs": pair_report(res, names), "totals": {
        "frames_in": n_in, "frames_out": int(frames_out), "duplicates_removed": int(dup),
        "transmissions": int(len(nh)), "heard_by_2_or_more": int((nh > 1).sum()),
        "unsynced_frames": int((~model.synced[res.clock]).sum()),
        "gate_us": round(gate_ns / 1000, 3), "reference": names[cl.sniffer[model.reference]],
        "conserved": n_in == frames_out + dup}}
