"""Ground truth of the ns-3 hidden-node captures (bench/ns3/hidden_node.py), and scoring.

The truth is ns-3's own: ``truth_tx.csv`` holds one row per PPDU a station sent (start from
the simulator clock, duration from ns-3's ``WifiPhy::CalculateTxDuration``, MPDU headers and
sequence numbers), written by the transmitters' ``PhyTxPsduBegin`` trace. Nothing here uses
sniffsync's airtime code: sniffer records are tied to a true PPDU by receiver address and
end time (ns-3 stamps a received PPDU at its end, in whole µs), and collisions are found by
a slow loop over true intervals.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

SIFS_NS = 16_000
KINDS = {"CTL_RTS": "rts", "CTL_CTS": "cts", "CTL_ACK": "ack", "CTL_BACKRESP": "ba", "CTL_BACKREQ": "bar",
         "QOSDATA": "data"}
FRAME_KINDS = {0x1b: "rts", 0x1c: "cts", 0x1d: "ack", 0x19: "ba", 0x18: "bar"}     # type_subtype


def mac_int(s) -> np.ndarray:
    return np.array([int(str(x).replace(":", ""), 16) for x in s], np.uint64)


def load(path) -> pd.DataFrame:
    """The true PPDUs: ppdu, start_ns, end_ns, ta, ra (uint64), kind, n_mpdus, seqs, nav_us."""
    t = pd.read_csv(Path(path), keep_default_na=False)
    t = t.sort_values("tx_start_ns", kind="stable").reset_index(drop=True)
    return pd.DataFrame({
        "ppdu": np.arange(len(t)), "start_ns": t["tx_start_ns"].to_numpy(np.int64),
        "end_ns": (t["tx_start_ns"] + t["duration_ns"]).to_numpy(np.int64),
        "ta": mac_int(t["ta"]), "ra": mac_int(t["ra"]), "node": t["node"].to_numpy(),
        "kind": t["type"].map(KINDS).fillna("mgmt").to_numpy(object),
        "n_mpdus": t["n_mpdus"].to_numpy(np.int64), "seqs": t["seqs"].astype(str).to_numpy(object),
        "nav_us": t["nav_us"].to_numpy(np.int64)})


def truth_of_frames(frames: pd.DataFrame, truth: pd.DataFrame) -> np.ndarray:
    """True PPDU of every frame row (-1 if none): same receiver address, and the record's
    TSFT (µs, truncated, at the end of reception) within [end - 1 µs, end + 1 µs]."""
    ts = frames["type_subtype"].to_numpy(np.int64, na_value=-1)
    kind = np.where((ts >> 4) == 2, "data", pd.Series(ts).map(FRAME_KINDS).fillna("mgmt").to_numpy(object))
    ra = frames["ra"].to_numpy(np.uint64, na_value=0)
    t_ns = frames["tsft_us"].to_numpy(np.int64) * 1000
    out = np.full(len(frames), -1, np.int64)
    by_ra = {int(r): g.sort_values("end_ns") for r, g in truth.groupby("ra")}
    for r, rows in pd.Series(np.arange(len(frames))).groupby(ra):
        g = by_ra.get(int(r))
        if g is None:
            continue
        ends = g["end_ns"].to_numpy()
        idx = rows.to_numpy()
        k = np.searchsorted(ends, t_ns[idx])
        for cand in (np.clip(k + d, 0, len(ends) - 1) for d in (-1, 0, 1, 2)):   # ends may tie
            ok = (np.abs(ends[cand] - t_ns[idx]) <= 1500) & (g["kind"].to_numpy()[cand] == kind[idx])
            out[idx[ok & (out[idx] < 0)]] = g["ppdu"].to_numpy()[cand[ok & (out[idx] < 0)]]
    return out


def answered(truth: pd.DataFrame) -> np.ndarray:
    """Per true PPDU: for an RTS, whether a CTS to its TA started SIFS (±1 µs) after it."""
    cts = truth[truth["kind"] == "cts"]
    key = set(zip(cts["ra"].tolist(), (cts["start_ns"] // 1000).tolist()))
    out = np.zeros(len(truth), bool)
    for i in np.flatnonzero(truth["kind"].to_numpy() == "rts"):
        t = (truth["end_ns"].iat[i] + SIFS_NS) // 1000
        out[i] = any((int(truth["ta"].iat[i]), t + d) in key for d in (-1, 0, 1))
    return out


def collisions(truth: pd.DataFrame) -> dict:
    """Unanswered RTS -> true PPDUs it overlapped that were sent by its receiver or sent to
    its receiver by another station (slow loop, true times)."""
    ans = answered(truth)
    st, en = truth["start_ns"].to_numpy(), truth["end_ns"].to_numpy()
    ta, ra = truth["ta"].to_numpy(), truth["ra"].to_numpy()
    out = {}
    for i in np.flatnonzero((truth["kind"].to_numpy() == "rts") & ~ans):
        parts = [j for j in range(max(0, i - 50), min(len(truth), i + 50))
                 if j != i and st[j] < en[i] and st[i] < en[j] and (ta[j] == ra[i] or (ra[j] == ra[i] and ta[j] != ta[i]))]
        if parts:
            out[i] = parts
    return out


def prec_rec(detected: set, truth: set, observable: set):
    tp = len(detected & truth)
    return (tp / len(detected) if detected else 1.0,
            len(detected & observable) / len(observable) if observable else 1.0, len(detected), len(observable))


def score(frames, ppdus, events, truth) -> dict:
    """Precision/recall of RTS/CTS collisions and unanswered RTS over what the table holds."""
    tp_row = truth_of_frames(frames, truth)
    seen = set(tp_row[tp_row >= 0].tolist())
    ours = tp_row[ppdus["first_frame"].to_numpy()]

    def det(kind):
        rows = events.loc[events["kind"] == kind, "ppdu"].to_numpy(np.int64)
        pos = np.searchsorted(ppdus["ppdu"].to_numpy(), rows)
        return set(ours[pos].tolist()) - {-1}

    coll = collisions(truth)
    obs = {r for r, parts in coll.items() if r in seen and any(p in seen for p in parts)}
    ans = answered(truth)
    un = set(np.flatnonzero((truth["kind"].to_numpy() == "rts") & ~ans).tolist())
    return {"rts_cts_collision": prec_rec(det("rts_cts_collision"), set(coll), obs),
            "rts_unanswered": prec_rec(det("rts_unanswered"), un, un & seen)}


def extent_errors(frames, ppdus, truth) -> pd.DataFrame:
    """Per data PPDU of the table: captured MPDUs vs true MPDUs, and start/end errors (ns)."""
    tp_row = truth_of_frames(frames, truth)
    t = tp_row[ppdus["first_frame"].to_numpy()]
    d = ppdus[(ppdus["kind"] == "data").to_numpy() & (t >= 0)].copy()
    tt = truth.iloc[t[(ppdus["kind"] == "data").to_numpy() & (t >= 0)]]
    d["true_n"] = tt["n_mpdus"].to_numpy()
    d["start_err_ns"] = d["start_ns"].to_numpy() - tt["start_ns"].to_numpy()
    d["end_err_ns"] = d["end_ns"].to_numpy() - tt["end_ns"].to_numpy()
    d["cut"] = d["n_mpdus"].to_numpy() < d["true_n"].to_numpy()
    return d
