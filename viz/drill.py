"""Drill-down of one PPDU: its MPDUs and their fates, the Block-Ack that answered it (bitmap bit
by bit), how complete its capture is, and the frame exchange around it (RTS, CTS, data, BA).

Built once per run from ``run.mpdus``, ``run.ppdus`` and ``run.frames``; a request reads
``searchsorted`` slices, never scans the run.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from sniffsync.decode.macs import mac_text

__all__ = ["DrillIndex", "bitmap_bits"]

EXCHANGE_NS = 1_000_000          # where the exchange is looked for: 1 ms either side
GAP_NS = 60_000                  # a gap up to this joins two PPDUs into one exchange (SIFS 16 µs + slack)
MAX_EXCHANGE = 12


def bitmap_bits(hex_bitmap: str | None) -> str:
    """'0300..' (bytes as hex, first byte first) -> '1100000000..': bit i acknowledges SSN + i
    (802.11 Block-Ack bitmap: bit i of byte i // 8 counted from its least significant bit)."""
    if not isinstance(hex_bitmap, str) or not hex_bitmap:
        return ""
    b = np.frombuffer(bytes.fromhex(hex_bitmap), np.uint8)
    return "".join(map(str, np.unpackbits(b, bitorder="little")))


def _v(x):
    if x is None or (not isinstance(x, str) and pd.isna(x)):
        return None
    return x.item() if hasattr(x, "item") else x


class DrillIndex:
    """``detail(ppdu_id)`` -> extra fields for ``/api/ppdu/<id>`` (``mpdus``, ``ba``, ``exchange``,
    ``capture``)."""

    def __init__(self, run):
        p = run.ppdus.sort_values("start_ns", kind="stable").reset_index(drop=True)
        self.base = int(p["start_ns"].min()) if len(p) else 0
        self.p = p
        self.start = p["start_ns"].to_numpy(np.int64)
        self.row_of = pd.Series(np.arange(len(p)), index=p["ppdu"].to_numpy(np.int64))
        f = run.frames if run.frames is not None else pd.DataFrame()   # None: run loaded from the cache
        ff = p["first_frame"].to_numpy(np.int64) if "first_frame" in p else None
        ok = ff is not None and len(f) and len(ff) and ff.max() < len(f)
        # the frame facts: columns the pipeline attached (sniffsync.pipeline.uicols), else the frames
        self.has_frames = "nav_us" in p or bool(ok)

        def col(pcol, fcol, dtype=float):
            if pcol in p:
                return p[pcol].to_numpy(dtype=dtype, na_value=np.nan if dtype is float else None)
            if ok and fcol in f:
                return f[fcol].to_numpy(dtype=dtype, na_value=np.nan if dtype is float else None)[ff]
            return np.full(len(p), np.nan if dtype is float else None, dtype=dtype)
        self.nav_us, self.ba_ssn = col("nav_us", "duration_us"), col("ba_ssn", "ba_ssn")
        self.ba_bitmap = col("ba_bitmap", "ba_bitmap", object)
        m = getattr(run, "mpdus", None)
        if m is None or not len(m):
            m = pd.DataFrame({"ppdu": np.zeros(0, np.int64), "seq": np.zeros(0, np.int64)})
        m = m.sort_values(["ppdu", "seq"], kind="stable").reset_index(drop=True)
        if "mpdu_len" in m:
            m = m.assign(length=m["mpdu_len"].to_numpy(dtype=float, na_value=np.nan))
        elif "frame" in m and "mpdu_len" in f and len(m):
            m = m.assign(length=f["mpdu_len"].to_numpy(dtype=float, na_value=np.nan)[m["frame"].to_numpy(np.int64)])
        self.m = m
        self.m_ppdu = m["ppdu"].to_numpy(np.int64)

    def ppdu_with_seq(self, seq: int, after_ns: int) -> int | None:
        """The first PPDU (by start, at or after ``after_ns`` run-relative) holding an MPDU with
        sequence number ``seq``."""
        if "seq" not in self.m or not len(self.m):
            return None
        ids = self.m_ppdu[self.m["seq"].to_numpy(dtype=float, na_value=np.nan) == seq]
        if not len(ids):
            return None
        rows = self.row_of.reindex(np.unique(ids)).dropna().to_numpy(np.int64)
        t = self.start[rows]
        ok = t >= after_ns + self.base
        return int(self.p["ppdu"].iloc[rows[ok][np.argmin(t[ok])]]) if ok.any() else None

    def detail(self, ppdu_id: int) -> dict:
        if ppdu_id not in self.row_of.index:
            return {}
        i = int(self.row_of[ppdu_id])
        row = self.p.iloc[i]
        a, b = np.searchsorted(self.m_ppdu, ppdu_id, "left"), np.searchsorted(self.m_ppdu, ppdu_id, "right")
        cols = [c for c in ("seq", "tid", "retry", "length", "fate") if c in self.m]
        mp = self.m.iloc[a:b]
        mpdus = [{c: _v(r[c]) for c in cols} for _, r in mp.iterrows()]   # one PPDU's MPDUs: <= 256 rows
        ex = self._exchange(i)
        ba = next((e for e in ex if e["kind"] == "ba" and e["start_ns"] > int(row["start_ns"]) - self.base), None)
        out = {"mpdus": mpdus, "exchange": ex, "frames_loaded": self.has_frames,
               "capture": {k: _v(row[k]) for k in ("complete", "extent_src", "captured_airtime_ns") if k in row}}
        if ba is not None and ba.get("bitmap"):
            seqs = {int(s) for s in mp["seq"].dropna()} if "seq" in mp else set()
            out["ba"] = {"ppdu": ba["ppdu"], "ssn": ba["ssn"], "bits": ba["bitmap"], "seqs": sorted(seqs)}
        return out

    def _exchange(self, i: int) -> list:
        """The PPDUs chained to this one by short gaps (SIFS-like, <= GAP_NS) between its two
        stations (CTS/ACK carry only the RA: they count when addressed to one of the two)."""
        p = self.p
        pair = {int(v) for v in (p["ta"].iloc[i], p["ra"].iloc[i]) if not pd.isna(v)}
        lo = int(np.searchsorted(self.start, self.start[i] - EXCHANGE_NS))
        hi = int(np.searchsorted(self.start, int(p["end_ns"].iloc[i]) + EXCHANGE_NS))
        sub = p.iloc[lo:hi]
        t, r = sub["ta"].to_numpy(dtype=float, na_value=np.nan), sub["ra"].to_numpy(dtype=float, na_value=np.nan)
        keys = np.array(sorted(pair), dtype=float) if pair else np.zeros(0)
        rows = lo + np.flatnonzero(np.isin(r, keys) & (np.isnan(t) | np.isin(t, keys)))
        s, e = self.start[rows], p["end_ns"].to_numpy(np.int64)[rows]
        k = int(np.flatnonzero(rows == i)[0]) if (rows == i).any() else None
        if k is None:
            return []
        linked = np.concatenate([[False], s[1:] - np.maximum.accumulate(e)[:-1] <= GAP_NS])   # joined to the previous
        a = k
        while a > 0 and linked[a]:
            a -= 1
        b = k
        while b + 1 < len(rows) and linked[b + 1]:
            b += 1
        return [self._item(int(j)) for j in rows[a:b + 1][:MAX_EXCHANGE]]

    def _item(self, j: int) -> dict:
        p = self.p
        e = {"ppdu": int(p["ppdu"].iloc[j]), "kind": str(p["kind"].iloc[j]),
             "start_ns": int(self.start[j]) - self.base, "end_ns": int(p["end_ns"].iloc[j]) - self.base,
             "ta": mac_text(_v(p["ta"].iloc[j])), "ra": mac_text(_v(p["ra"].iloc[j])),
             "nav_us": _v(self.nav_us[j]) if np.isfinite(self.nav_us[j]) else None}
        if e["kind"] == "ba" and np.isfinite(self.ba_ssn[j]):
            e["ssn"], e["bitmap"] = int(self.ba_ssn[j]), bitmap_bits(self.ba_bitmap[j])
        return e
