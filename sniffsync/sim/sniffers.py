"""What each sniffer decodes, and when its clock says it did (vectorised over all PPDUs).

Clock model of sniffer ``s`` (written to ``truth/clocks.json``)::

    clock_ns(t)  = round(t * (1 + ppm * 1e-6)) + offset_ns + jitter_ns
    pcap ts_ns   = start_unix_ns + clock_ns(end of PPDU)
    tsft_us      = tsf_base_us + floor(clock_ns(start or end of PPDU) / 1000)

with ``t`` the true time in ns since the start of the run and ``jitter_ns`` drawn
uniformly in ``[-jitter_us, +jitter_us]`` once per PPDU (all MPDUs of an A-MPDU share it,
as they share the TSFT). A sniffer decodes a PPDU iff it hears the transmitter (disc of
``range_m``) and no other PPDU it hears overlaps it; then each frame is independently
missed with probability ``miss``.
"""
from __future__ import annotations

import numpy as np

from sniffsync.sim.medium import hearing, rx_power_dbm

__all__ = ["sniffer_params", "decode_mask", "clock_ns", "observe"]

_KNOBS = ["snaplen", "tsft_at", "fcs", "ampdu_status"]


def sniffer_params(cfg: dict) -> list[dict]:
    """Each sniffer's full parameter set (scenario-level knobs as defaults)."""
    out = []
    for k, s in enumerate(cfg["sniffers"]):
        p = {"name": s["name"], "pos": list(s["pos"]), "offset_ns": int(s.get("offset_ns", 0)),
             "ppm": float(s.get("ppm", 0.0)), "jitter_us": float(s.get("jitter_us", 0.0)),
             "miss": float(s.get("miss", 0.0)),
             "tsf_base_us": int(s.get("tsf_base_us", 1_000_000_000 * (k + 1)))}
        for knob in _KNOBS:
            p[knob] = s.get(knob, cfg[knob])
        out.append(p)
    return out


def decode_mask(tx: np.ndarray, start: np.ndarray, end: np.ndarray, hears_tx: np.ndarray):
    """PPDUs a listener decodes: heard, and no other heard PPDU overlaps them.

    Parameters
    ----------
    tx, start, end : int64 arrays, one row per PPDU
    hears_tx : bool array indexed by transmitter
    """
    heard = hears_tx[tx]
    idx = np.flatnonzero(heard)
    order = idx[np.lexsort((end[idx], start[idx]))]
    s, e = start[order], end[order]
    prev_end = np.maximum.accumulate(e)
    clash = np.zeros(order.size, bool)
    clash[1:] |= s[1:] < prev_end[:-1]          # starts before an earlier one ended
    clash[:-1] |= e[:-1] > s[1:]                # a later one starts before this ends
    ok = np.zeros(tx.size, bool)
    ok[order[~clash]] = True
    return ok


def clock_ns(true_ns: np.ndarray, sn: dict, jitter_ns: np.ndarray) -> np.ndarray:
    """The sniffer clock reading at true time ``true_ns`` (see the module docstring)."""
    t = np.asarray(true_ns, np.int64)
    return (np.rint(t * (1.0 + sn["ppm"] * 1e-6)).astype(np.int64) + sn["offset_ns"]
            + np.asarray(jitter_ns, np.int64))


def observe(cfg: dict, sn: dict, ppdus: dict, frames: dict, node_pos: np.ndarray,
            rng: np.random.Generator) -> dict:
    """Rows of ``frames`` one sniffer writes, with their timestamps and radio fields.

    ``ppdus`` holds ``tx, start_ns, end_ns`` arrays; ``frames`` holds ``ppdu`` (row into
    ``ppdus``) per frame. Returns ``rows`` (sorted by capture time), ``ts_ns``,
    ``tsft_us``, ``signal_dbm`` and ``ampdu_ref`` per written frame.
    """
    me = np.asarray([sn["pos"]], float)
    hears_tx = hearing(me, node_pos, cfg["range_m"])[0]
    power = rx_power_dbm(me, node_pos, cfg["tx_power_dbm"], cfg["pathloss_exp"],
                         cfg["pathloss_1m_db"])[0]
    tx, start, end = ppdus["tx"], ppdus["start_ns"], ppdus["end_ns"]
    ok_ppdu = decode_mask(tx, start, end, hears_tx)
    jit = np.rint(rng.uniform(-1.0, 1.0, tx.size) * sn["jitter_us"] * 1000).astype(np.int64)
    noise = rng.normal(0.0, 1.0, tx.size)
    fp = frames["ppdu"]
    keep = ok_ppdu[fp] & (rng.random(fp.size) >= sn["miss"])
    rows = np.flatnonzero(keep)
    p = fp[rows]
    ref_ns = start if sn["tsft_at"] == "start" else end
    ts = cfg["start_unix_ns"] + clock_ns(end[p], sn, jit[p])
    tsft = sn["tsf_base_us"] + np.floor_divide(clock_ns(ref_ns[p], sn, jit[p]), 1000)
    order = np.lexsort((rows, ts))
    rows, p, ts, tsft = rows[order], p[order], ts[order], tsft[order]
    sig = np.clip(np.rint(power[tx[p]] + noise[p]), -127, 0).astype(np.int64)
    # A-MPDU reference: one number per PPDU this sniffer wrote, counted from 1
    uniq, inv = np.unique(p, return_inverse=True)
    return {"rows": rows, "ts_ns": ts, "tsft_us": tsft, "signal_dbm": sig,
            "ampdu_ref": inv.astype(np.int64) + 1, "jitter_ns": jit[p], "ppdu": p}
