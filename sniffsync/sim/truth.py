"""Ground-truth tables of a run (DataFrames) and their files under ``truth/``.

``ppdus.csv``  every PPDU on the air (true start/end, PHY, whether its addressee decoded it)
``mpdus.csv``  every data-MPDU transmission with its fate at the receiver and what the
               transmitter did next (``rx_fate``: ok / mpdu_error / collided / deaf /
               not_heard / not_sent; ``outcome``: acked / retry / dropped; ``why``)
``rts.csv``    every RTS: answered or not, and why
``flows.csv``  bytes delivered to each flow's application per ``bin_ns``
``clocks.json`` each sniffer's clock parameters and their definition
``captured_<sniffer>.csv`` which true PPDU/MPDU each pcap record is
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from sniffsync.io.atomic import atomic_output
from sniffsync.sim.mac import MPDU_COLS

__all__ = ["ppdu_table", "mpdu_table", "rts_table", "flow_table", "clocks_doc", "write_truth", "write_table"]

CLOCK_DEFINITION = (
    "clock_ns(t) = round(t_ns * (1 + ppm * 1e-6)) + offset_ns + jitter_ns, t_ns = true ns since "
    "the run start; jitter_ns uniform in [-jitter_us, +jitter_us] * 1000, one draw per PPDU; "
    "pcap ts_ns = start_unix_ns + clock_ns(true PPDU end); radiotap tsft_us = tsf_base_us + "
    "floor(clock_ns(true PPDU start or end per tsft_at) / 1000); each frame missed with "
    "probability miss")


def ppdu_table(eng) -> pd.DataFrame:
    """One row per PPDU; node names resolved, PHY columns filled per kind."""
    cfg = eng.cfg
    df = pd.DataFrame(eng.ppdus)
    if df.empty:
        return df
    names = np.array(eng.names + ["*"], dtype=object)
    df["tx_name"] = names[df["tx"].to_numpy()]
    df["rx_name"] = names[df["rx"].to_numpy()]
    acs = np.array(["bk", "be", "vi", "vo", "beacon"], dtype=object)
    df["ac"] = acs[df["ac"].to_numpy()]
    data = (df["kind"] == "data").to_numpy()
    df["airtime_ns"] = df["end_ns"] - df["start_ns"]
    df["phy"] = np.where(data, cfg["phy"], "ofdm")
    for c in ("mcs", "nss", "bw_mhz", "gi_ns"):
        df[c] = np.where(data, cfg[c], -1)
    df["rate_kbps"] = np.where(data, 0, np.where(df["kind"] == "beacon", cfg["beacon_rate_kbps"],
                                                 cfg["ctrl_rate_kbps"]))
    df["ba_bitmap"] = df["ba_bitmap"].astype(np.uint64)
    for c in ("beacon_tsf_us", "mgmt_seq", "tid"):
        df[c] = df[c].fillna(-1).astype(np.int64) if c in df else -1
    df["why"] = df["why"].fillna("") if "why" in df else ""
    return df


def mpdu_table(eng, pk: dict) -> pd.DataFrame:
    """One row per data-MPDU transmission (plus ``not_sent`` drops, ppdu = -1)."""
    df = pd.DataFrame(eng.mac.mpdus, columns=MPDU_COLS)
    names = np.array(eng.names, dtype=object)
    df["tx_name"], df["rx_name"] = names[df["tx"].to_numpy()], names[df["rx"].to_numpy()]
    df["seq"] = df["seq_abs"] % 4096
    pkt = df["pkt"].to_numpy()
    for c in ("flow", "proto", "tcp_seq", "tcp_ack", "payload"):
        df[c] = pk[c][pkt] if len(pkt) else []
    return df


def rts_table(pp: pd.DataFrame) -> pd.DataFrame:
    """Every RTS with its CTS (if any) and why it went unanswered."""
    rts = pp[pp["kind"] == "rts"][["ppdu", "tx_name", "rx_name", "start_ns", "end_ns", "rx_ok",
                                   "collided_with", "why"]].copy()
    cts = pp[pp["kind"] == "cts"].set_index("answers")
    rts["cts_ppdu"] = cts["ppdu"].reindex(rts["ppdu"]).fillna(-1).astype(np.int64).to_numpy()
    rts["answered"] = rts["cts_ppdu"] >= 0
    cts_ok = cts["rx_ok"].reindex(rts["ppdu"]).fillna(False).astype(bool).to_numpy()
    rts["cts_ok"] = cts_ok
    rts.loc[rts["answered"] & ~rts["cts_ok"], "why"] = "cts_lost"
    ppdu_tx = pp.set_index("ppdu")["tx_name"]

    def who(ids: str) -> str:
        return " ".join(f"{i}:{ppdu_tx.get(int(i), 'after_end')}" for i in ids.split()) if ids else ""
    rts["collided_with"] = [who(s) for s in rts["collided_with"]]   # few rows: RTS only
    return rts.reset_index(drop=True)


def flow_table(traffic, cfg: dict, end_ns: int) -> pd.DataFrame:
    """Bytes delivered to each flow's application per ``bin_ns`` bin (all bins, zeros kept)."""
    bin_ns = int(cfg["bin_ns"])
    nb = max(1, -(-end_ns // bin_ns))
    nf = len(traffic.flows)
    d = np.array(traffic.delivered, np.int64).reshape(-1, 3)
    b = np.minimum(d[:, 1] // bin_ns, nb - 1)
    tot = np.bincount(d[:, 0] * nb + b, weights=d[:, 2], minlength=nf * nb).astype(np.int64)
    names = [f["name"] for f in traffic.flows]
    out = pd.DataFrame({
        "flow": np.repeat(np.arange(nf), nb), "name": np.repeat(names, nb),
        "kind": np.repeat([f["kind"] for f in traffic.flows], nb),
        "bin_start_ns": np.tile(np.arange(nb, dtype=np.int64) * bin_ns, nf), "bytes": tot})
    out["goodput_bps"] = out["bytes"] * 8 * 1_000_000_000 // bin_ns
    return out


def clocks_doc(cfg: dict, sniffers: list[dict]) -> dict:
    """``clocks.json``: the clock definition and every sniffer's parameters."""
    return {"definition": CLOCK_DEFINITION, "start_unix_ns": cfg["start_unix_ns"],
            "sniffers": {s["name"]: s for s in sniffers}}


def write_truth(out: Path, cfg: dict, tables: dict, clocks: dict) -> None:
    """Write ``scenario.json`` and every ``truth/`` file (deterministic formatting)."""
    td = out / "truth"
    td.mkdir(parents=True, exist_ok=True)
    for path, doc in ((out / "scenario.json", cfg), (td / "clocks.json", clocks)):
        with atomic_output(path, "w") as fh:
            fh.write(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    for name, df in tables.items():
        write_table(td, name, df)


def write_table(folder: Path, name: str, df: pd.DataFrame) -> None:
    """``folder/name.csv`` as ``df.to_csv(index=False)`` writes it."""
    with atomic_output(Path(folder) / f"{name}.csv") as fh:
        if not _arrow_csv(df, fh):
            fh.write(df.to_csv(index=False, lineterminator="\n").encode())


_SPECIAL = (",", '"', "\n", "\r")


def _plain(values) -> bool:
    """Strings that CSV writes as they are (no quoting)."""
    return all(type(x) is str for x in values) and not any(c in "\0".join(values) for c in _SPECIAL)


def _arrow_csv(df: pd.DataFrame, fh) -> bool:
    """Write ``df`` exactly as ``df.to_csv(index=False)`` would, through Arrow's CSV writer
    (3-6x faster); False (nothing written) unless every column is int, bool or plain text."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    names = [str(c) for c in df.columns]
    if len(names) < 2 or not _plain(names):
        return False
    arrays = []
    for j in range(len(names)):
        v = df.iloc[:, j].to_numpy()
        if v.dtype == bool:
            v = np.where(v, "True", "False")             # pandas' spelling, not Arrow's
        elif v.dtype == object:
            v = v.tolist()
            if not _plain(v):
                return False
        elif v.dtype.kind not in "iu":
            return False
        arrays.append(pa.array(v, pa.string() if isinstance(v, list) else None))
    fh.write((",".join(names) + "\n").encode())
    if len(df):
        pacsv.write_csv(pa.Table.from_arrays(arrays, names=names), fh,
                        pacsv.WriteOptions(include_header=False, quoting_style="none"))
    return True
