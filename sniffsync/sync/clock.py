"""Clock synchronisation of many sniffers: anchors, then one joint piecewise-linear fit.

This module holds the clocks (step 1) and the stages of :func:`sync`; the anchors of
step 2 are found by :mod:`sniffsync.sync.anchors`, the least squares of step 4 is
:mod:`sniffsync.sync.fit`.

Algorithm
---------
1. *Clocks.* Each sniffer's local time is its radiotap TSFT (µs hardware clock, in ns)
   or, without TSFT, its capture timestamp ``ts_ns`` (wider error). A TSF that resets or
   wraps shows as a jump of ``tsft - ts`` between frames adjacent in capture time; each
   jump starts a new *clock* (sniffer, segment), fitted on its own.
2. *Anchors.* Frames heard by >= 2 sniffers, found by content: a 64-bit hash key per
   anchor kind (:data:`sniffsync.sync.anchors.ANCHOR_KEYS`), sort by (key, estimated common time), cut into
   clusters where the key changes or the time gap exceeds a gate. A cluster with one
   frame from each of >= 2 clocks is an anchor; one with two copies from one clock is
   ambiguous and dropped (this is the "unique in a short window" rule).
3. *Coarse fit* (offsets of hours): clusters by key only (beacons: BSSID + TSF field are
   unique; other kinds: keys seen once per clock over the whole capture), per pair of
   clocks the densest offset, laid along the strongest links (a spanning tree from
   the reference), then solved jointly over the pairs that agree.
4. *Joint fit.* Every clock ``c`` maps local ``t`` to common time ``t + o_c + g_c(t)``;
   ``g_c`` is piecewise linear (hat basis, a knot per ``knot_s``). Every anchor pair
   gives ``g_a(t_i) - g_b(t_j) = (t_j + o_b) - (t_i + o_a)``; the reference clock has
   ``g = 0``. One weighted least-squares system over all pairs and all clocks (normal
   equations summed per pair of knot intervals, dense, numpy only), with a small
   second-difference penalty so knots without anchors interpolate. A pair weighs
   1 / (s_a^2 + s_b^2), shared among the pairs of one pair of stamps (an A-MPDU).
   Residuals are rejected by a MAD rule and the fit repeated; then each clock's own
   noise ``s_c`` is measured from the residuals (:func:`sniffsync.sync.fit.clock_sigma`).
5. Gates shrink (coarse -> linear -> piecewise), one per clock from its ``s_c``, and
   anchors are re-matched each time. Every 5th anchor cluster is held out of the final
   fit and its residuals reported.

Caveats: a clock needs >= ``min_anchors`` (8) anchor pairs spread over its span after
rejection, a quarter of its content-only matches in its gate and half of those kept,
else it is unsynced; drift must stay under ~300 ppm for the first gate.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from sniffsync import runtime
from sniffsync.errors import SyncError, UsageError
from sniffsync.sync.anchors import _cluster, _key_only_clusters, anchor_candidates, anchor_pairs, key_order
from sniffsync.sync.anchorsample import check_sample, sample_anchors
from sniffsync.sync.coarse import coarse_offsets
from sniffsync.sync.fit import ClockModel, _Pairs, _robust_fit, clock_sigma
from sniffsync.sync.viahost import place_by_host

__all__ = ["local_clocks", "reference_clock", "sync", "SyncResult", "place_via_host"]

TSFT_SIGMA_NS = 600.0      # 1 µs quantisation + jitter, per frame
HOST_SIGMA_NS = 20_000.0   # capture timestamps without TSFT
JUMP_NS = 5_000_000        # tsft - ts jump that starts a new clock segment (TSF reset/wrap)
NOISE_JUMPS = 20             # a TSF jump is > this x the median step of tsft - ts (host noise)
MIN_KEPT = 0.5             # share of a clock's in-gate anchor pairs the fit must keep
MIN_IN_GATE = 0.25         # share of its content-only matches that must fall in its gate


def local_clocks(df: pd.DataFrame, jump_ns: int = JUMP_NS):
    """Per frame: local time (ns), clock id, and per-clock table (sniffer, segment, source).

    TSFT frames of a sniffer split into segments where ``tsft*1000 - ts_ns`` jumps by more
    than ``jump_ns`` (and than :data:`NOISE_JUMPS` x the sniffer's median step of it, its
    host-stamp noise) between frames adjacent in capture time; frames without TSFT form one
    host-clock segment per sniffer.
    """
    n = len(df)
    sn = df["sniffer"].to_numpy(np.int64)
    ts = df["ts_ns"].to_numpy(np.int64)
    tsft = df["tsft_us"].array
    has = ~np.asarray(tsft.isna())
    tsft_ns = tsft.to_numpy(np.int64, na_value=0) * 1000
    local = np.where(has, tsft_ns, ts)
    k = sn * 2 + ~has                    # rows usually come sorted: skip the sort then
    done = n < 2 or ((np.diff(k) >= 0).all() and ((np.diff(ts) >= 0) | (np.diff(k) > 0)).all())
    order = None if done else np.lexsort((ts, ~has, sn))
    d = tsft_ns - ts
    d, s_o, h_o, local_o = (d, sn, has, local) if done else (d[order], sn[order], has[order], local[order])
    boundary = np.r_[True, (s_o[1:] != s_o[:-1]) | (h_o[1:] != h_o[:-1])]
    step = np.r_[0, np.abs(np.diff(d))]
    inner = h_o & ~boundary
    # a jump must stand out of the sniffer's own host-stamp noise: with jittery host stamps
    # (ms of latency) a fixed threshold would start a clock at nearly every frame
    gate = np.full(len(d), float(jump_ns))
    for s in np.unique(s_o[inner]):                      # per sniffer: <= 64
        mine = inner & (s_o == s)
        gate[mine] = max(float(jump_ns), NOISE_JUMPS * float(np.median(step[mine])))
    jump = (step > gate) & inner
    seg_o = np.cumsum(boundary | jump) - 1
    if done:
        clock = seg_o
    else:
        clock = np.empty(n, np.int64)
        clock[order] = seg_o
    first = np.flatnonzero(boundary | jump)
    run = np.r_[True, s_o[first][1:] != s_o[first][:-1]]
    segment = np.arange(len(first)) - np.maximum.accumulate(np.where(run, np.arange(len(first)), 0))
    clocks = pd.DataFrame({"sniffer": s_o[first], "segment": segment,
                           "tsft": h_o[first],
                           "frames": np.diff(np.r_[first, n])})
    # a clock's rows are one run in capture order: its first and last local times
    clocks["t0_ns"] = np.minimum.reduceat(local_o, first) if n else np.zeros(0, np.int64)
    clocks["t1_ns"] = np.maximum.reduceat(local_o, first) if n else np.zeros(0, np.int64)
    return local, clock, clocks


def reference_clock(clocks: pd.DataFrame, reference: int) -> int:
    """The common clock: the longest segment (most frames) of sniffer ``reference``."""
    if not (clocks.sniffer.to_numpy() == reference).any():
        raise SyncError(f"reference sniffer {reference} has no frames")
    return int(clocks.frames.where(clocks.sniffer == reference, -1).to_numpy().argmax())


@dataclass
class SyncResult:
    """Output of :func:`sync`: the model, per-frame common time and the fit's bookkeeping."""
    model: ClockModel
    local_ns: np.ndarray
    clock: np.ndarray
    common_ns: np.ndarray
    anchors: pd.DataFrame                # per anchor pair (star to the cluster's first copy): rows,
                                         # clocks, kind, used, held out, residual, cluster
    gate_ns: np.ndarray | None = None    # per clock: the final anchor gate (ns)
    anchor_sample: int = 1               # one "unique" candidate in this many fitted (anchorsample.py)

    @property
    def sigma_ns(self) -> np.ndarray:
        """Per clock: sd (ns) of one frame's stamp about the fitted model (its own noise)."""
        return self.model.sigma_ns

    @property
    def kind(self) -> np.ndarray:
        """Per clock: ``"tsft"`` or ``"host"``."""
        return self.model.kind

    def frame_sigma_ns(self) -> np.ndarray:
        """Per frame: its clock's ``sigma_ns`` (unsynced clocks: inf, their time is their own)."""
        return np.where(self.model.synced[self.clock], self.model.sigma_ns[self.clock], np.inf)


def _reachable(ca, cb, nclk, ref):
    """Clocks connected to ``ref`` through anchor pairs (label propagation over clocks)."""
    lab = np.arange(nclk)
    for _ in range(nclk):
        new = lab.copy()
        np.minimum.at(new, ca, lab[cb])
        np.minimum.at(new, cb, lab[ca])
        if (new == lab).all():
            break
        lab = new
    return lab == lab[ref]


def _knots(clocks, n_per_clock, knot_ns, max_knots, linear):
    span = (clocks.t1_ns - clocks.t0_ns).to_numpy(np.float64)
    out = []
    cap = max(2, max_knots // max(len(clocks), 1))
    for c in range(len(clocks)):          # per clock
        if span[c] <= 0:
            out.append(np.zeros(1))
            continue
        k = 1 if linear else int(np.clip(np.ceil(span[c] / knot_ns), 1,
                                         max(1, min(cap - 1, n_per_clock[c] // 4))))
        out.append(np.linspace(0.0, span[c], k + 1))
    return out


@dataclass
class _Fit:
    """What every stage of :func:`sync` works on: the anchor candidates (rows of the
    frame table, kind, content key, clock, local time, the key order) and the settings."""
    rows: np.ndarray
    kind: np.ndarray
    key: np.ndarray
    clock: np.ndarray
    local: np.ndarray
    by_key: tuple
    clocks: pd.DataFrame
    sigma: np.ndarray                    # per clock: noise sd (ns), prior then estimated
    prior: np.ndarray
    ref: int
    knot_ns: float
    max_knots: int
    holdout: int
    min_anchors: int
    offset: np.ndarray | None = None
    n_key: np.ndarray | None = None      # per clock: pairs matched by content alone (coarse)
    key_cid: object = None               # _key_only_clusters of the candidates, or a future of it
    weight: np.ndarray | None = None     # per candidate: pairs it stands for (anchorsample.py)


def _coarse(f: _Fit):
    """Steps 1-2: offsets from keys unique per clock over the whole capture, then a linear
    fit on the same pairs in a loose first gate (300 ppm of the span). Sets ``f.offset``;
    returns the model and the gate of the next stage."""
    nclk = len(f.clocks)
    span = (f.clocks.t1_ns - f.clocks.t0_ns).to_numpy(np.float64)
    cid = _key_only_clusters(f.key, f.clock, f.by_key) if f.key_cid is None else \
        (f.key_cid.result() if hasattr(f.key_cid, "result") else f.key_cid)
    f.key_cid = None
    sel = cid >= 0
    i, j = anchor_pairs(cid[sel], f.clock[sel])
    i, j = np.flatnonzero(sel)[i], np.flatnonzero(sel)[j]
    f.offset = np.zeros(nclk, np.int64)
    if len(i):
        f.offset = coarse_offsets(f.clock[i], f.clock[j], f.local[j] - f.local[i], nclk, f.ref)
    P = _Pairs(i, j, f.clock, f.local, f.kind, cid, f.offset, f.rows, share=False, weight=f.weight)   # a loose fit
    f.n_key = np.bincount(P.ca, minlength=nclk) + np.bincount(P.cb, minlength=nclk)
    loose = 3e-4 * np.maximum(span[P.ca], span[P.cb]) + 2e6
    ok = np.abs(P.y) <= loose
    knots = _knots(f.clocks, np.zeros(nclk, int) + 4, f.knot_ns, f.max_knots, linear=True)
    vals, ok, r = _robust_fit(P, f.clocks, f.sigma, knots, f.ref, ok, 20_000.0, 1e9)
    model = ClockModel(f.clocks, f.offset, knots, vals, np.ones(nclk, bool), f.sigma, f.ref)
    gate = float(np.quantile(np.abs(r[ok]), 0.999)) * 3 + 20_000 if ok.any() else 5e6
    return model, np.full(nclk, gate)


def _refine(f: _Fit, model: ClockModel, gate: np.ndarray, final: bool):
    """Steps 3-4: re-match every kind on the fitted time in ``gate`` (per clock), piecewise
    fit (the ``final`` stage holds every ``holdout``-th cluster out), then each clock's
    noise from its residuals (``f.sigma``: the next stage's weights and gates). Returns
    the model, the next gate per clock, the pairs and their held-out, used and residual
    arrays."""
    t_est = model.apply(f.local, f.clock)
    cid, by_cid = _cluster(f.key, t_est, f.clock, gate[f.clock], f.by_key, pairs=True)
    del t_est
    i, j = anchor_pairs(cid, f.clock, by_cid)
    del by_cid
    with runtime.pool(limit=1) as ex:    # the pairs' weight shares beside the fit's set-up
        P = _Pairs(i, j, f.clock, f.local, f.kind, cid, f.offset, f.rows, ex=ex, weight=f.weight)
        del cid, i, j                    # the fit's peak memory sets much of its time
        return _refit(f, P, gate, final)


def _refit(f: _Fit, P: _Pairs, gate: np.ndarray, final: bool):
    """The fit of :func:`_refine` on its pairs ``P`` (``gate``: kept when no pair is left)."""
    nclk = len(f.clocks)
    per_clock = np.bincount(P.ca, minlength=nclk) + np.bincount(P.cb, minlength=nclk)
    knots = _knots(f.clocks, per_clock, f.knot_ns, f.max_knots, linear=False)
    held = (P.cid % f.holdout == f.holdout - 1) if (final and f.holdout) else np.zeros(len(P.y), bool)
    synced = _reachable(P.ca, P.cb, nclk, f.ref)
    ok = ~held & synced[P.ca] & synced[P.cb]
    n_in = np.bincount(P.ca[~held], minlength=nclk) + np.bincount(P.cb[~held], minlength=nclk)
    # content alone matches a real copy's frames at one offset: most land in the gate;
    # look-alike frames of another network match at offsets spread over the capture
    n_gate = np.bincount(P.ca, minlength=nclk) + np.bincount(P.cb, minlength=nclk)
    found = n_gate >= MIN_IN_GATE * f.n_key
    for _ in range(nclk):              # drop clocks with too few anchors, refit
        vals, ok, r = _robust_fit(P, f.clocks, f.sigma, knots, f.ref, ok, 2_000.0, 100.0)
        n_ok = np.bincount(P.ca[ok], minlength=nclk) + np.bincount(P.cb[ok], minlength=nclk)
        # a real clock keeps most pairs found in its gate; content that merely looks alike
        # (another network with the same addresses) leaves a few chance fits in a wide gate
        good = _reachable(P.ca[ok], P.cb[ok], nclk, f.ref) & (
            ((n_ok >= f.min_anchors) & (n_ok >= MIN_KEPT * n_in) & found) | (np.arange(nclk) == f.ref))
        if (good >= synced).all():
            break
        synced &= good
        ok &= synced[P.ca] & synced[P.cb]
    if ok.any():
        s_pair = np.sqrt(f.sigma[P.ca[ok]] ** 2 + f.sigma[P.cb[ok]] ** 2)
        z99 = float(np.quantile(np.abs(r[ok]) / s_pair, 0.99))
        f.sigma = np.where(synced, clock_sigma(P.ca[ok], P.cb[ok], r[ok], f.prior), f.prior)
        # a pair's gap stays under 5 z99 sqrt(s_a^2 + s_b^2) <= 5 z99 sqrt(2) max(s_a, s_b)
        gate = np.maximum(2_000.0, 5 * z99 * np.sqrt(2) * f.sigma)
    model = ClockModel(f.clocks, f.offset, knots, vals, synced, f.sigma.copy(), f.ref)
    return model, gate, P, held, ok, r


def _require_synced(model: ClockModel, names, min_anchors: int) -> None:
    """:class:`SyncError` naming every clock that could not be synced."""
    if model.synced.all():
        return
    bad = model.clocks[~model.synced]
    raise SyncError("cannot sync sniffer(s) " + ", ".join(
        f"{names[s] if names else s} (TSF segment {g}, {f} frames)"
        for s, g, f in zip(bad.sniffer, bad.segment, bad.frames))
        + f": fewer than {min_anchors} shared anchors with the other sniffers "
          "(use --allow-unsynced to keep them on their own clock)")


def place_via_host(res: SyncResult, local, clock, sniffer, ts_ns, allow_unsynced=False, names=None,
                   min_anchors: int = 8) -> np.ndarray:
    """Place ``res``'s unsynced clocks through their sniffers' host clocks (per frame
    ``local``, ``clock``, ``sniffer``, ``ts_ns``: all frames, or those ``res`` was fitted
    on) -- :mod:`sniffsync.sync.viahost`; ``SyncError`` for any left unless
    ``allow_unsynced``. Returns the common time of those frames (``res.common_ns`` is
    redone on ``res``'s own frames)."""
    model = res.model
    common = model.apply(local, clock)
    if not model.synced.all() and place_by_host(model, local, clock, sniffer, ts_ns, common).size:
        common = model.apply(local, clock)
        if res.common_ns is not None:
            res.common_ns = model.apply(res.local_ns, res.clock)
    if not allow_unsynced:
        _require_synced(model, names, min_anchors)
    return common


def sync_candidates(df: pd.DataFrame, anchors) -> tuple:
    """``(rows, kind, key, key order)`` of the anchor candidates :func:`sync` fits on
    (:func:`sniffsync.sync.anchors.anchor_candidates`, then the one full key sort; a merge of
    paths finds them per input instead: :mod:`sniffsync.sync.perinput`)."""
    rows, kind, key = anchor_candidates(df, anchors)
    return rows, kind, key, key_order(key)


def sync(df: pd.DataFrame, reference: int = 0, anchors=("beacon", "ba", "unique"),
         knot_s: float = 1.0, min_anchors: int = 8, holdout: int = 5,
         max_knots: int = 1200, allow_unsynced: bool = False, names=None,
         clocks=None, via_host: bool = True, candidates=None, key_cid=None, sample=1,
         weight=None) -> SyncResult:
    """Fit every sniffer's clock to the reference sniffer's clock, jointly.

    Parameters
    ----------
    df : DataFrame
        Frame table of all sniffers (``sniffer`` = input index), any row order.
    reference : int
        Sniffer whose clock (its longest TSF segment) is the common clock.
    anchors : sequence of str
        Anchor kinds, keys of :data:`sniffsync.sync.anchors.ANCHOR_KEYS`, in order of preference.
    knot_s : float
        Knot spacing of the piecewise-linear clock model, seconds.
    min_anchors : int
        Anchor pairs (after rejection) below which a clock counts as unsynced.
    holdout : int
        Every ``holdout``-th anchor cluster is left out of the final fit and its
        residuals reported (0: use all).
    allow_unsynced : bool
        Keep unsynced clocks on their own time instead of raising :class:`SyncError`.
    names : list of str, optional
        Sniffer names for error messages.
    clocks : tuple, optional
        :func:`local_clocks` of ``df`` when already computed.
    via_host : bool
        Place clocks without anchors (a short TSF segment) through their sniffer's host
        clock (``ts_ns``) when its other clocks are fitted (:mod:`sniffsync.sync.viahost`):
        kind ``"host"``, ``sigma_ns`` the host clock's. Needs ``df["ts_ns"]``.
    candidates : tuple, optional
        :func:`sync_candidates` of ``df`` and ``anchors`` when already computed (e.g. on
        a thread beside :func:`local_clocks`).
    key_cid : array or future, optional
        ``sniffsync.sync.anchors._key_only_clusters(key, clock[rows], key order)`` of
        those candidates (the coarse stage's clusters by key alone), when computed
        beside other work.
    sample : "auto" or int
        Keep one "unique" anchor candidate in ``sample`` (a power of two; ``"auto"``: by
        the capture's density), :mod:`sniffsync.sync.anchorsample`; 1 keeps every one.
    weight : array, optional
        With ``candidates`` already sampled (``sample`` their ``k``): the pair weight of
        each, as :func:`sniffsync.sync.anchorsample.sample_anchors` gives it.

    Returns
    -------
    SyncResult
        ``common_ns`` per frame of ``df`` on the reference clock (ns; TSFT domain when
        the reference has TSFT), the model, the anchor pairs and a per-clock report.
    """
    local, clock, clocks = local_clocks(df) if clocks is None else clocks
    ref = reference_clock(clocks, reference)
    cand = sync_candidates(df, anchors) if candidates is None else candidates
    check_sample(sample)
    if weight is None and sample != 1:
        if key_cid is not None:
            raise UsageError("key_cid is of the candidates before sampling: sample them first")
        cand, weight, sample = sample_anchors(cand, clock[cand[0]], clocks, anchors, knot_s * 1e9, sample,
                                              local[cand[0]])
    elif weight is not None and sample == "auto":
        raise UsageError("sampled candidates (weight) need their sample k, not \"auto\"")
    rows, kind, key, by_key = cand
    del cand
    prior = np.where(clocks.tsft.to_numpy(), TSFT_SIGMA_NS, HOST_SIGMA_NS)
    f = _Fit(rows, kind, key, clock[rows], local[rows], by_key,
             clocks, prior.copy(), prior, ref, knot_s * 1e9, max_knots, holdout, min_anchors,
             key_cid=key_cid, weight=weight)
    del rows, kind, key, by_key, candidates, weight
    model, gate = _coarse(f)
    for final in (False, True):
        P = held = ok = r = None             # free the last stage's arrays before the next
        model, gate, P, held, ok, r = _refine(f, model, gate, final)
    res = SyncResult(model, local, clock, None, None, gate, int(sample))
    if via_host and "ts_ns" in df:
        res.common_ns = place_via_host(res, local, clock, df["sniffer"].to_numpy(np.int64),
                                       df["ts_ns"].to_numpy(np.int64), allow_unsynced, names, min_anchors)
    else:
        res.common_ns = model.apply(local, clock)
        if not allow_unsynced:
            _require_synced(model, names, min_anchors)
    res.anchors = pd.DataFrame({"row_a": P.ra, "row_b": P.rb, "clock_a": P.ca, "clock_b": P.cb,
                                "kind": pd.Categorical.from_codes(P.kind, list(anchors)),
                                "held_out": held, "used": ok, "residual_ns": r,
                                "ok": held & (np.abs(r) <= np.maximum(gate[P.ca], gate[P.cb])) | ok,
                                "cluster": P.cid},
                               copy=False)   # no second copy
    return res
