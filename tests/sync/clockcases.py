"""Sniffer clocks of known shape on frame tables: the oracle of the clock-model tests.

The three ns-3 hidden-node sniffers share one true clock (their TSFT is the end of the
PPDU, the same instant at every sniffer). :func:`tiled` repeats a table on that clock to
make a longer run (each tile's frames distinct, as real FCS make them); :func:`sniffer` gives a table the clock of an imperfect sniffer:
offset, drift (constant or ramping linearly from ``ppm`` to ``ppm_end``: a temperature
change), jitter, a TSF counter that restarts, a time window (late join / early leave),
or no TSFT at all (the host clock stamps the frame, jittered per frame). Each kept row's
true time (ns) and its noise-free local time come back with it, so a fitted clock is
scored against what was applied, never against our own code.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

CAPS = Path(__file__).parents[1] / "data" / "captures"
HIDDEN = [CAPS / f"ns3-11n-ht20-hidden-sniffer{x}.pcap" for x in ("A-nearAP", "B-nearSTA1", "C-nearSTA2")]
# what sync() reads (anchors.ANCHOR_KEYS, local_clocks, anchor_candidates)
COLUMNS = ["sniffer", "ts_ns", "tsft_us", "type_subtype", "bad", "fcs_bad", "ta", "ra", "seq", "frag",
           "retry", "wirelen", "mpdu_len", "duration_us", "fcs", "bssid", "beacon_tsf_us", "ba_ssn", "ba_bitmap_lo"]
EPOCH_NS = 1_700_000_000_000_000_000


def read_hidden():
    from sniffsync import read_capture
    return [read_capture(p, sniffer=i, columns=COLUMNS) for i, p in enumerate(HIDDEN)]


def tiled(df: pd.DataFrame, n: int, span_us: int) -> pd.DataFrame:
    """``df`` repeated ``n`` times, tile k shifted by ``k * span_us`` on the true clock
    (beacon Timestamp fields too, so beacon keys stay unique as in a real run; ``fcs``
    = k)."""
    k = np.repeat(np.arange(n, dtype=np.int64), len(df)) * span_us
    out = pd.concat([df] * n, ignore_index=True)
    out["tsft_us"] = pd.array(out.tsft_us.to_numpy(np.int64) + k, dtype="Int64")
    out["ts_ns"] = out.ts_ns.to_numpy(np.int64) + k * 1000
    b = out.beacon_tsf_us
    out["beacon_tsf_us"] = b + pd.array(k.astype(np.uint64), dtype=b.dtype)   # null stays null
    # a real FCS differs between transmissions (ns-3 writes 0): the tile number stands in,
    # else a frame of tile 1 and its replay in tile 2 would look like one transmission
    out["fcs"] = pd.array(np.repeat(np.arange(n, dtype=np.uint64), len(df)), dtype=out.fcs.dtype)
    return out


def sniffer(df: pd.DataFrame, s: int, *, offset_ns: int = 0, ppm: float = 0.0, ppm_end=None,
            jitter_ns: float = 0.0, host: bool = False, window=None, reset_at=None,
            t0_us=None, seed: int = 0, host_ppm=None, host_latency_ns: float = 0.0):
    """``df`` as sniffer ``s`` sees it; returns (table, true_ns, clean local ns).

    The clock reads ``true + offset + drift phase + jitter``: drift ``ppm`` (ramping
    linearly to ``ppm_end`` over the run when given) counted from ``t0_us`` (default:
    the first frame). ``host``: no TSFT; ``ts_ns`` is that clock (on the epoch), with
    per-frame Gaussian jitter ``jitter_ns``. Else TSFT (µs, rounded) carries it, jitter
    per PPDU, and ``ts_ns`` is the host stamp (true + 1 ms, never used by sync).
    ``window=(lo, hi)``: only frames with lo <= (true - t0) / span < hi.
    ``reset_at``: fraction(s) of the run at which the TSF restarts near 0 (driver reload).
    ``host_ppm`` (TSFT sniffers): ``ts_ns`` is a host clock of its own instead, on the
    epoch: ``host_ppm`` drift, latency exponential with mean ``host_latency_ns``, stamps
    non-decreasing in arrival order (as a kernel gives them); it runs on across resets.
    """
    rng = np.random.default_rng(seed)
    true_us = df.tsft_us.to_numpy(np.int64)
    t0 = int(true_us.min()) if t0_us is None else t0_us
    x = (true_us - t0).astype(np.float64) * 1000           # ns since t0
    span = float(x.max()) or 1.0
    p1 = ppm if ppm_end is None else ppm_end
    phase = (ppm * x + (p1 - ppm) * x ** 2 / (2 * span)) * 1e-6   # integral of the drift
    clean = true_us * 1000 + offset_ns + phase
    keep = np.ones(len(df), bool)
    if window is not None:
        keep = (x / span >= window[0]) & (x / span < window[1])
    out = df.loc[keep].copy()
    out["sniffer"] = np.int16(s)
    clean, true_ns = clean[keep], true_us[keep] * 1000
    if host:
        out["ts_ns"] = np.rint(clean + EPOCH_NS + rng.normal(0, jitter_ns, len(out))).astype(np.int64)
        out["tsft_us"] = pd.array(np.full(len(out), None), dtype="Int64")
        return out, true_ns, np.rint(clean + EPOCH_NS).astype(np.int64)
    uniq, inv = np.unique(true_ns, return_inverse=True)
    jit = rng.normal(0, jitter_ns, len(uniq))[inv] if jitter_ns else 0.0
    tsft = np.rint((clean + jit) / 1000).astype(np.int64)
    clean_local = np.rint(clean / 1000).astype(np.int64) * 1000
    for r in np.atleast_1d(reset_at if reset_at is not None else []):   # TSF restarts at 1000 µs
        cut = x[keep] >= r * span
        first = tsft[cut].min() if cut.any() else 0
        tsft = np.where(cut, tsft - first + 1000, tsft)
        clean_local = np.where(cut, clean_local - first * 1000 + 1_000_000, clean_local)
    out["tsft_us"] = pd.array(tsft, dtype="Int64")
    out["ts_ns"] = true_ns + 1_000_000
    if host_ppm is not None:
        lat = rng.exponential(host_latency_ns, len(out)) if host_latency_ns else 0.0
        host_ns = true_ns + EPOCH_NS + host_ppm * 1e-6 * x[keep] + lat
        o = np.argsort(true_ns, kind="stable")
        host_ns[o] = np.maximum.accumulate(host_ns[o])
        out["ts_ns"] = np.rint(host_ns).astype(np.int64)
    return out, true_ns, clean_local


def build(parts):
    """Concatenate :func:`sniffer` outputs: (table, true_ns, clean_local)."""
    return (pd.concat([p[0] for p in parts], ignore_index=True),
            np.concatenate([p[1] for p in parts]), np.concatenate([p[2] for p in parts]))


def model_error_ns(res, clean_local, true_ns):
    """Per frame: the fitted model at the noise-free local time minus the true time: the
    clock model's error (the jitter of one stamp is not the model's)."""
    return res.model.apply(clean_local, res.clock) - true_ns


def drift_ppm(res, c):
    """Fitted drift of clock ``c`` as the sniffer's own ppm (local runs fast by ppm):
    the model's slope is common/local - 1 = -ppm / (1 + ppm)."""
    k, v = res.model.knots[c], res.model.values[c]
    g = (v[-1] - v[0]) / k[-1]
    return -g / (1 + g) * 1e6
