"""The merge report: per sniffer its anchors, clock model, held-out residuals and frame
counts; totals that show no frame was lost (``frames_in = frames_out + duplicates``)."""
from __future__ import annotations

import numpy as np

from sniffsync.sync.copies import best_copy

__all__ = ["merge_report"]


def _pct(x):
    return np.percentile(x, [50, 95, 99]).round(3).tolist() if len(x) else [None, None, None]


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
                         "offset_ns": int(model.offset_ns[c] + round(v[0])),
                         "drift_ppm": round(float((v[-1] - v[0]) / span * 1e6), 4) if span > 0 else 0.0,
                         "knots": int(len(k)), "span_s": round(span / 1e9, 6)})
        m = sniffer == s
        out.append({
            "name": name, "reference": bool(cl.sniffer[model.reference] == s),
            "synced": bool(model.synced[mine_c].all()),
            "anchors": {a: int(n_kind[kinds.index(a)]) if a in kinds else 0 for a in anchors},
            "model": segs,
            "heldout": {"n": int((hold & ok_p).sum()), "outliers": int((hold & ~ok_p).sum()),
                        "abs_residual_us_p50_p95_p99": _pct(res_us[hold & ok_p])},
            "frames_in": int(m.sum()),
            "frames_merged": int((nh[group[m]] > 1).sum()),
            "duplicates": int((m & ~is_best).sum())})
    n_in = len(df)
    dup = 0 if keep_duplicates else n_in - frames_out
    return {"sniffers": out, "totals": {
        "frames_in": n_in, "frames_out": int(frames_out), "duplicates_removed": int(dup),
        "transmissions": int(len(nh)), "heard_by_2_or_more": int((nh > 1).sum()),
        "unsynced_frames": int((~model.synced[res.clock]).sum()),
        "gate_us": round(gate_ns / 1000, 3), "reference": names[cl.sniffer[model.reference]],
        "conserved": n_in == frames_out + dup}}
