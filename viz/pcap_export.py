"""The selected range and filters as pcapng, bytes copied from the run's input captures.

Several sniffers: the rows of the merged table (:class:`sniffsync.sync.merge.Merged`) are
written by :func:`sniffsync.sync.pcapng.write_merged`, so the file carries the merge's
provenance (sniffer names, report, "heard by" comments, source record numbers) and reads
back with ``read_merged``. One capture: its own records, one interface per interface of
the input, the provenance (file, range, filters) in each interface's description.

A frame is selected by its own stamp (``ts_ns``, what Wireshark shows as its time), by
its station -- the transmitter, or for frames without one (CTS, ACK) the receiver, as
the timeline's station lanes place them -- and by the kind of the PPDU it belongs to.
The source (merged table, records) is loaded on the first export and kept.
"""
from __future__ import annotations

import dataclasses
import os
import tempfile
import threading
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["PcapExport"]


def _station(frames: pd.DataFrame) -> np.ndarray:
    """Per frame, the station of its lane: TA, else RA (-1: none)."""
    ta = frames["ta"].to_numpy(np.int64, na_value=-1) if "ta" in frames else np.full(len(frames), -1)
    ra = frames["ra"].to_numpy(np.int64, na_value=-1) if "ra" in frames else np.full(len(frames), -1)
    return np.where(ta >= 0, ta, ra)


class PcapExport:
    """Exports of one run. ``paths``: its inputs; ``t0_abs_ns``: the UI's time origin;
    ``merged``: the run's :class:`Merged` when still in memory; ``options``: the merge's
    (``reference``, ``allow_unsynced``, ``tsft_at``) to redo it after a cached start."""

    def __init__(self, paths, t0_abs_ns: int, merged=None, options: dict | None = None):
        self.paths = [str(p) for p in paths]
        self.t0_abs_ns = int(t0_abs_ns)
        self.options = dict(options or {})
        self._merged = merged
        self._src = None
        self._kinds = None
        self._lock = threading.Lock()

    def _source(self):
        """``(merged or None, records or None, frames)``, loaded once."""
        with self._lock:
            if self._src is None:
                self._src = self._load()
            return self._src

    def frames(self):
        """The source's frame table (merged or the capture's), loaded once."""
        return self._source()[2]

    def _load(self):
        from sniffsync.sync.mergedfile import read_merged
        if len(self.paths) > 1:
            m = self._merged
            if m is None or m.records is None:
                from sniffsync.sync.merge import merge       # as the pipeline's load_merged does
                m = merge(self.paths, **{k: v for k, v in self.options.items()
                                         if k in ("reference", "allow_unsynced", "tsft_at")})
            return m, None, m.frames
        m = read_merged(self.paths[0], records=True)
        if m is not None:
            return m, None, m.frames
        from sniffsync.decode.frames import read_capture
        from sniffsync.io.capture import read_records
        return None, read_records(self.paths[0]), read_capture(self.paths[0])

    def _frame_kinds(self, merged, frames) -> np.ndarray:
        """Per frame, the kind of its PPDU ("other" when it has none), grouped once."""
        with self._lock:
            if self._kinds is None:
                from airtime.ppdu import group_ppdus
                stamps = merged.stamps if merged is not None else "capture"
                g = group_ppdus(frames, tsft_at=self.options.get("tsft_at", "auto"), stamps=stamps)
                kind = g.ppdus["kind"].astype(str).to_numpy()
                fp = np.asarray(g.frame_ppdu, np.int64)
                self._kinds = np.where(fp >= 0, kind[np.maximum(fp, 0)] if len(kind) else "other", "other")
            return self._kinds

    def select(self, t0_ns=None, t1_ns=None, stations=None, kinds=None) -> np.ndarray:
        """Row positions (in the source's frame table) of the selection; times run-relative."""
        merged, _, frames = self._source()
        ts = frames["ts_ns"].to_numpy(np.int64)
        keep = np.ones(len(frames), bool)
        if t0_ns is not None:
            keep &= (ts >= self.t0_abs_ns + t0_ns) & (ts < self.t0_abs_ns + t1_ns)
        if stations is not None:
            want = np.array([int(s.replace(":", ""), 16) for s in stations], np.int64)
            keep &= np.isin(_station(frames), want)
        if kinds is not None:
            keep &= np.isin(self._frame_kinds(merged, frames), list(kinds))
        return np.flatnonzero(keep)

    def export(self, t0_ns=None, t1_ns=None, stations=None, kinds=None) -> tuple[bytes, int]:
        """``(pcapng bytes, packets)`` of the selection (see :meth:`select`)."""
        rows = self.select(t0_ns, t1_ns, stations, kinds)
        merged, rec, frames = self._source()
        with tempfile.TemporaryDirectory(prefix="sniffsync-export-") as d:
            out = Path(d) / "export.pcapng"
            if merged is not None:
                from sniffsync.sync.pcapng import write_merged
                n = write_merged(out, dataclasses.replace(merged, frames=frames.iloc[rows]))
            else:
                n = self._write_capture(out, rec, frames.iloc[rows], t0_ns, t1_ns, stations, kinds)
            return out.read_bytes(), n

    def _write_capture(self, out, rec, frames, t0_ns, t1_ns, stations, kinds) -> int:
        """One capture's records of ``frames`` (its ``frame`` column: 1-based record number)."""
        from sniffsync.io.writers import write_pcapng
        idx = frames["frame"].to_numpy(np.int64) - 1
        start = np.asarray(rec.data_off, np.int64)[idx]
        caplen = np.asarray(rec.caplen, np.int64)[idx]
        off = np.r_[0, np.cumsum(caplen)]
        # every packet's bytes gathered in one index: its start, then +1 per byte
        gather = np.repeat(start - off[:-1], caplen) + np.arange(int(off[-1]))
        data = np.asarray(rec.buf)[gather]
        name = os.path.basename(self.paths[0])
        what = f"sniffsync export of {name}"
        if t0_ns is not None:
            what += f", run time [{t0_ns}, {t1_ns}) ns after {self.t0_abs_ns} ns since the epoch"
        if stations is not None:
            what += f", stations {','.join(stations) or 'none'}"
        if kinds is not None:
            what += f", kinds {','.join(kinds) or 'none'}"
        ifs = rec.interfaces or [{"linktype": int(np.asarray(rec.linktype)[0]) if len(rec.linktype) else 127}]
        interfaces = [{"name": i.get("name") or Path(name).stem, "linktype": int(i["linktype"]),
                       "snaplen": int(i.get("snaplen") or 0), "description": what} for i in ifs]
        iface = np.asarray(rec.iface, np.int64)[idx] if len(idx) else np.zeros(0, np.int64)
        write_pcapng(out, interfaces, np.maximum(iface, 0), np.asarray(rec.ts_ns, np.int64)[idx], data, off,
                     np.asarray(rec.wirelen, np.int64)[idx])
        return len(idx)
