"""The merge report: per sniffer its anchors, clock model (per TSF segment: noise σ,
offset, drift, or the host clock when unsynced), held-out residuals and frame counts;
per pair of clocks the anchors they share and their residuals; totals that show no frame
was lost (``frames_in = frames_out + duplicates``)."""
from __future__ import annotations

import numpy as np

from sniffsync.sync.copies import best_copy
from sniffsync.sync.streamstats import pair_stats

__all__ = ["merge_report", "pair_report", "clock_names", "host_offsets_us"]


PCT = [50, 95, 99]


def _pct(q):
    """Quantiles (µs) as the report prints them; None: no value."""
    return np.round(q, 3).tolist() if q is not None else [None, None, None]


def clock_names(clocks, names) -> list:
    """Per clock: the sniffer's name, ``name#k`` for its TSF segment k > 0."""
    return [names[s] + (f"#{g}" if g else "") for s, g in zip(clocks.sniffer, clocks.segment)]


MAX_PAIRS_LISTED = 32        # the report lists the pairs with the fewest anchors (weakest links)


def pair_report(res, names, st=None) -> list:
    """Per pair of clocks that share anchors (two copies in one anchor cluster, kept by the
    fit or held out of it): how many, and |common time of the one − of the other| p50/p95
    (µs), over all of them and over the held-out clusters (not fitted: the honest figure).
    From :func:`sniffsync.sync.streamstats.pair_stats` (a tiled fit's: summed per tile), or
    ``st`` when the caller has it already."""
    st = pair_stats(res) if st is None else st
    nclk = len(res.model.clocks)
    cn = clock_names(res.model.clocks, names)
    out = []
    for key in st.pairs():               # per pair of clocks: <= 64 * 63 / 2
        x, y = divmod(int(key), nclk)
        out.append({"clocks": [cn[x], cn[y]], "anchors": int(st.pair_n[key]),
                    "abs_residual_us_p50_p95": _pct(st.pair_all.quantiles([key], PCT, 1000))[:2],
                    "heldout": int(st.pair_held[key]),
                    "heldout_abs_residual_us_p50_p95": _pct(st.pair_h.quantiles([key], PCT, 1000))[:2]})
    return out


def host_offsets_us(res, df, n) -> np.ndarray:
    """Per sniffer: median (capture stamp - common time) of its synced frames, minus the
    reference's (µs; NaN if none): how far its host clock is from the reference host's.
    The spread over synced sniffers bounds from below the error of a sniffer merged on
    its host clock alone (another channel: no anchors)."""
    sn = df["sniffer"].to_numpy(np.int64)
    ok = res.model.fitted[res.clock]     # clocks placed via the host clock would echo it
    d = df["ts_ns"].to_numpy(np.int64) - res.common_ns
    med = np.array([np.median(d[(sn == s) & ok]) if ((sn == s) & ok).any() else np.nan
                    for s in range(n)])                       # per sniffer: <= 64
    ref = int(res.model.clocks.sniffer[res.model.reference])
    return (med - med[ref]) / 1000


def _time_source(model, c) -> str:
    """How clock ``c`` reaches the common time: its anchors (``common``), its sniffer's host
    clock tied by fitted segment k (``host clock via segment k``), or not (``host clock``)."""
    if not model.synced[c]:
        return "host clock"
    via = int(model.via_host[c])
    return "common" if via < 0 else f"host clock via segment {int(model.clocks.segment[via])}"


def merge_report(res, df, group, names, anchors, gate_ns, frames_out, keep_duplicates,
                 best=None, host_us=None) -> dict:
    """Per sniffer: anchors by kind, clock model per segment, held-out residuals, frame counts."""
    model, st = res.model, pair_stats(res)
    cl = model.clocks
    sniffer = df["sniffer"].to_numpy(np.int64)
    sig = df["signal_dbm"].to_numpy(np.float64, na_value=-1e9)
    nh = np.bincount(group)
    is_best = np.zeros(len(df), bool)
    is_best[best_copy(group, sniffer, sig) if best is None else best] = True
    kinds = st.kinds
    clock_sn = cl.sniffer.to_numpy()
    host = host_offsets_us(res, df, len(names)) if host_us is None else host_us   # streamed: from pass 1
    host_bound = float(np.nanmax(np.abs(host))) if np.isfinite(host).any() else None
    out = []
    for s, name in enumerate(names):    # per sniffer: a handful
        mine_c = np.flatnonzero(clock_sn == s)
        mine = clock_sn == s
        touch = st.keys_touching(mine)   # pairs of clocks with one of its own
        n_kind = st.used[touch].sum(0)
        segs = []
        for c in mine_c:
            k, v = model.knots[c], model.values[c]
            span = float(k[-1])
            segs.append({"segment": int(cl.segment[c]), "clock": "tsft" if cl.tsft[c] else "capture",
                         "frames": int(cl.frames[c]), "synced": bool(model.synced[c]),
                         # synced: a frame's sd about the model; else on its host clock, off by
                         # at least what the synced sniffers' host clocks are (µs)
                         "sigma_us": round(float(model.sigma_ns[c]) / 1000, 3) if model.synced[c] else None,
                         "time": _time_source(model, c),
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
            "heldout": {"n": int(st.held_ok[touch].sum()), "outliers": int(st.held_bad[touch].sum()),
                        "abs_residual_us_p50_p95_p99": _pct(st.res.quantiles(touch, PCT, 1000))},
            "frames_in": int(m.sum()),
            "frames_merged": int((nh[group[m]] > 1).sum()),
            "duplicates": int((m & ~is_best).sum())})
    n_in = len(df)
    dup = 0 if keep_duplicates else n_in - frames_out
    pairs = pair_report(res, names, st)
    cn = clock_names(cl, names)
    n_pair = np.zeros((len(cn), len(cn)), np.int64)
    at = {c: k for k, c in enumerate(cn)}
    for q in pairs:                      # per pair of clocks
        a, b = at[q["clocks"][0]], at[q["clocks"][1]]
        n_pair[a, b] = n_pair[b, a] = q["anchors"]
    weakest = set(sorted(range(len(pairs)), key=lambda k: pairs[k]["anchors"])[:MAX_PAIRS_LISTED])
    return {"sniffers": out, "pairs": [q for k, q in enumerate(pairs) if k in weakest],
            "pairs_sharing_anchors": len(pairs),
            "pair_anchors": {"clocks": cn, "n": n_pair.tolist()}, "totals": {
        "frames_in": n_in, "frames_out": int(frames_out), "duplicates_removed": int(dup),
        "transmissions": int(len(nh)), "heard_by_2_or_more": int((nh > 1).sum()),
        "unsynced_frames": int((~model.synced[res.clock]).sum()),
        "host_placed_frames": int((model.via_host >= 0)[res.clock].sum()),
        "gate_us": round(gate_ns / 1000, 3), "reference": names[cl.sniffer[model.reference]],
        "anchor_sample": int(getattr(res, "anchor_sample", 1)),   # 1 "unique" anchor in this many fitted
        "conserved": n_in == frames_out + dup}}
