"""Run a scenario: the event model, then the sniffers' views, captures and truth files."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from sniffsync.errors import UsageError
from sniffsync.sim.encode import KINDS, SERVER_MAC, assemble, mpdu_bytes, radiotap_headers
from sniffsync.sim.engine import Engine
from sniffsync.sim.mac import FCS, LLC, QOS_HDR
from sniffsync.sim.medium import BA_BYTES, CTS_BYTES, RTS_BYTES, mac_int, positions
from sniffsync.sim.sniffers import observe, sniffer_params
from sniffsync.sim.traffic import Traffic
from sniffsync.sim.truth import (clocks_doc, flow_table, mpdu_table, ppdu_table, rts_table, write_table,
                                 write_truth)

__all__ = ["run_model", "frame_table", "simulate"]

BROADCAST = 0xFFFFFFFFFFFF


def _check(cfg: dict) -> None:
    if cfg["phy"] not in ("ht", "vht", "he"):
        raise UsageError(f"phy must be ht, vht or he, not {cfg['phy']!r}")
    if sum(bool(n.get("ap")) for n in cfg["nodes"]) != 1:
        raise UsageError("a scenario needs exactly one node with ap=true")
    if cfg["seconds"] <= 0:
        raise UsageError("seconds must be > 0")
    for s in cfg["sniffers"]:
        if s.get("tsft_at", cfg["tsft_at"]) not in ("start", "end"):
            raise UsageError("tsft_at must be 'start' or 'end'")


def run_model(cfg: dict):
    """Run the discrete-event model; returns ``(engine, traffic)`` with all truth in memory."""
    _check(cfg)
    rng = np.random.default_rng(cfg["seed"])
    eng = Engine(cfg, rng)
    tr = Traffic(eng, cfg["flows"])
    eng.push(0, eng.mac.tbtt)
    end = int(round(cfg["seconds"] * 1e9))
    eng.run(end)
    # keep only PPDUs that ended inside the run (the rest are half on the air)
    eng.ppdus = [p for p in eng.ppdus if p["end_ns"] <= end]
    keep = {p["ppdu"] for p in eng.ppdus}
    eng.mac.mpdus = [m for m in eng.mac.mpdus if m[0] < 0 or m[0] in keep]
    return eng, tr


def _ep_mac(ep: np.ndarray, server: int) -> np.ndarray:
    return np.where(ep == server, SERVER_MAC, mac_int(ep))


def frame_table(eng, pk: dict, pp: pd.DataFrame, mp: pd.DataFrame) -> dict:
    """Every frame on the air (one per non-data PPDU, one per MPDU) as numpy columns."""
    ap, server = eng.ap, eng.n
    ctrl = pp[pp["kind"] != "data"]
    sent = mp[mp["ppdu"] >= 0]
    ids = pp["ppdu"].to_numpy()
    by_id = np.argsort(ids, kind="stable")
    at = by_id[np.searchsorted(ids[by_id], sent["ppdu"].to_numpy())]     # row of each MPDU's PPDU
    tx_c, rx_c = ctrl["tx"].to_numpy(), ctrl["rx"].to_numpy()
    kind_c = ctrl["kind"].map(KINDS).to_numpy()
    tx_d, rx_d = sent["tx"].to_numpy(), sent["rx"].to_numpy()
    pkt = sent["pkt"].to_numpy()
    up = rx_d == ap
    n_c, n_d = len(ctrl), len(sent)
    lens_c = np.select([kind_c == KINDS["beacon"], kind_c == KINDS["rts"], kind_c == KINDS["cts"]],
                       [eng.mac.beacon_bytes, RTS_BYTES, CTS_BYTES], BA_BYTES)
    fr = {
        "ppdu": np.concatenate([ctrl["ppdu"], sent["ppdu"]]).astype(np.int64),
        "index": np.concatenate([np.zeros(n_c, np.int64), sent["index"]]).astype(np.int64),
        "n_mpdus": np.concatenate([np.ones(n_c, np.int64), pp["n_mpdus"].to_numpy()[at]]).astype(np.int64),
        "kind": np.concatenate([kind_c, np.full(n_d, KINDS["data"])]).astype(np.int64),
        "fc1": np.concatenate([np.zeros(n_c, np.int64),
                               np.where(up, 1, 2) | np.where(sent["retry"], 0x08, 0)]),
        "dur_us": np.concatenate([ctrl["dur_us"], pp["dur_us"].to_numpy()[at]]).astype(np.int64),
        "ra": np.concatenate([np.where(rx_c < 0, BROADCAST, mac_int(rx_c)), mac_int(rx_d)]).astype(np.int64),
        "ta": np.concatenate([mac_int(tx_c), mac_int(tx_d)]),
        "a3": np.concatenate([np.full(n_c, mac_int(ap)),
                              np.where(up, _ep_mac(pk["dst"][pkt], server),
                                       _ep_mac(pk["src"][pkt], server))]).astype(np.int64),
        "seq": np.concatenate([ctrl["mgmt_seq"].clip(lower=0), sent["seq"]]).astype(np.int64),
        "tid": np.concatenate([ctrl["tid"].clip(lower=0), sent["tid"]]).astype(np.int64),
        "pkt": np.concatenate([np.zeros(n_c, np.int64), pkt]).astype(np.int64),
        "beacon_tsf_us": np.concatenate([ctrl["beacon_tsf_us"].clip(lower=0),
                                         np.zeros(n_d)]).astype(np.int64),
        "ba_ssn": np.concatenate([ctrl["ba_ssn"].clip(lower=0), np.zeros(n_d)]).astype(np.int64),
        "ba_bitmap": np.concatenate([ctrl["ba_bitmap"].to_numpy(np.uint64),
                                     np.zeros(n_d, np.uint64)]),
        "length": np.concatenate([lens_c, QOS_HDR + LLC + pk["ip_len"][pkt] + FCS]).astype(np.int64),
        "rate_kbps": np.concatenate([ctrl["rate_kbps"], np.zeros(n_d)]).astype(np.int64),
    }
    fr["mpdu_row"] = np.concatenate([np.full(n_c, -1), sent.index.to_numpy()]).astype(np.int64)
    return fr


def _ip_of(ep: np.ndarray, server: int) -> np.ndarray:
    return np.where(ep == server, (10 << 24) | (1 << 8) | 1, (10 << 24) | (ep + 1))


def _write_sniffer(out: Path, cfg: dict, sn: dict, ob: dict, fr: dict, wire_bytes, ppa: dict):
    """One sniffer's pcap and ``captured_<name>.csv`` (thread-safe: numpy and Arrow work)."""
    from sniffsync.io.writers import write_pcap
    buf, off = wire_bytes
    rows = ob["rows"]
    ob["last"] = fr["index"][rows] == fr["n_mpdus"][rows] - 1
    parts = radiotap_headers(cfg, sn, fr["kind"][rows] == KINDS["data"], fr["rate_kbps"][rows], ob)
    data, doff, wire = assemble(parts, buf, off, rows, sn["fcs"], int(sn["snaplen"]))
    write_pcap(out / f"{sn['name']}.pcap", 127, ob["ts_ns"], data, doff, wirelen=wire,
               nanosecond=True)
    del data, doff, wire                  # before the table: lower peak memory
    captured = pd.DataFrame({
        "frame": np.arange(1, rows.size + 1), "ppdu": fr["ppdu"][rows], "index": fr["index"][rows],
        "kind": np.array(list(KINDS))[fr["kind"][rows]], "mpdu_row": fr["mpdu_row"][rows],
        "true_start_ns": ppa["start_ns"][ob["ppdu"]], "true_end_ns": ppa["end_ns"][ob["ppdu"]],
        "jitter_ns": ob["jitter_ns"], "ts_ns": ob["ts_ns"], "tsft_us": ob["tsft_us"]})
    write_table(out / "truth", f"captured_{sn['name']}", captured)
    return int(rows.size)


def simulate(cfg: dict, out: str | Path) -> dict:
    """Run ``cfg`` and write ``out/<sniffer>.pcap``, ``out/truth/*``, ``out/scenario.json``.

    Returns a small summary dict (counts per sniffer, unanswered RTS, ...). The sniffers'
    views are drawn in order (one random stream); their files are written on a thread
    pool beside the truth tables.
    """
    from sniffsync.runtime import pool
    out = Path(out)
    (out / "truth").mkdir(parents=True, exist_ok=True)
    eng, tr = run_model(cfg)
    pk = tr.table()
    pp = ppdu_table(eng)
    mp = mpdu_table(eng, pk)
    fr = frame_table(eng, pk, pp, mp)
    wire_bytes = mpdu_bytes(fr, pk, cfg, lambda ep: _ip_of(ep, eng.n))
    order = np.argsort(pp["ppdu"].to_numpy())
    ppa = {c: pp[c].to_numpy(np.int64)[order] for c in ("tx", "start_ns", "end_ns")}
    pos = np.searchsorted(pp["ppdu"].to_numpy()[order], fr["ppdu"])
    frames_idx = {"ppdu": pos}
    sn_rng = np.random.default_rng([cfg["seed"], 1])
    sniffers = sniffer_params(cfg)
    views = [observe(cfg, sn, ppa, frames_idx, positions(cfg["nodes"]), sn_rng) for sn in sniffers]
    with pool(len(sniffers) + 1) as ex:
        counts = [ex.submit(_write_sniffer, out, cfg, sn, ob, fr, wire_bytes, ppa)
                  for sn, ob in zip(sniffers, views)]
        rts = rts_table(pp)
        pp_out = pp.drop(columns=["tx", "rx"]).assign(
            ba_bitmap=[f"{v:016x}" for v in pp["ba_bitmap"].to_numpy(np.uint64).tolist()])
        tables = {"ppdus": pp_out, "mpdus": mp, "rts": rts,
                  "flows": flow_table(tr, cfg, int(round(cfg["seconds"] * 1e9)))}
        write_truth(out, cfg, tables, clocks_doc(cfg, sniffers))
        summary = {"sniffers": {sn["name"]: c.result() for sn, c in zip(sniffers, counts)}}
    summary.update(ppdus=len(pp), mpdus=len(mp), rts=len(rts),
                   rts_unanswered=int((~rts["answered"]).sum()) if len(rts) else 0)
    return summary
