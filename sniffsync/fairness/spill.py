"""Decoded columns parked in an anonymous temporary file while other stages run.

The fairness command reads an 802.11 capture once, but its PPDU grouping and its TCP
analysis read different columns: the TCP-only ones (addresses, ports, TCP header
fields: ~38 bytes a frame held narrow) are written out batch by batch as the reader
streams and read back only when the grouping is over, so the read and the grouping never
hold them (and the columns both read are copied there, so the grouping may free its
own). The values come back exactly as written (each batch's raw bytes, promoted to
the widest batch dtype as the in-memory sink does); the file is deleted when closed.
"""
from __future__ import annotations

import tempfile

import numpy as np

__all__ = ["Spill", "SpilledCols"]


class Spill:
    """Columns ``{name: (values, valid or None)}`` appended batch by batch, read back once.

    ``add(cols, k)`` takes the spilled names out of ``cols`` (a batch of ``k`` rows) and
    appends them (those in ``copy`` are written and left in ``cols``: the caller may hand
    its in-memory columns to a stage that frees them); ``load_into(cols)`` puts the whole
    columns back into ``cols`` and closes.
    A name missing from a batch is null there (as :class:`sniffsync.decode.table.ColumnSink`).
    """

    def __init__(self, names, copy=()):
        self.copy = frozenset(copy)     # written, but left in the batch too
        self.names = frozenset(names) | self.copy
        self.n = 0
        self.parts = {}                 # name -> [(row0, k, dtype, has_mask)]
        self.file = None
        self.loaded = False

    def add(self, cols: dict, k: int) -> None:
        for name in sorted(self.names & cols.keys()):
            v, ok = cols[name] if name in self.copy else cols.pop(name)
            v = np.ascontiguousarray(v)
            if v.dtype == object:
                raise TypeError(f"cannot spill the object column {name}")
            ok = None if ok is None else np.ascontiguousarray(ok, bool)
            if self.file is None:
                self.file = tempfile.TemporaryFile(prefix="sniffsync-spill-")
            self.file.write(v.tobytes())
            if ok is not None:
                self.file.write(ok.tobytes())
            self.parts.setdefault(name, []).append((self.n, k, v.dtype, ok is not None))
        self.n += k

    def load_into(self, cols: dict, finish=None) -> None:
        """Every spilled column into ``cols`` (values promoted as ``numpy.concatenate``
        would; a mask only where some batch had one or missed the column), passed through
        ``finish(name, (values, valid))`` when given; then closes."""
        if self.loaded:
            return
        n = self.n
        order = []                      # (file position, name, part) in the order written
        for name, parts in self.parts.items():
            order.extend((name, p) for p in parts)
        order.sort(key=lambda x: (x[1][0], x[0]))
        out = {}
        for name, parts in self.parts.items():
            dt = np.result_type(*[p[2] for p in parts])
            covered = sum(p[1] for p in parts)
            masked = covered < n or any(p[3] for p in parts)
            out[name] = (np.zeros(n, dt), np.zeros(n, bool) if masked else None)
        if self.file is not None:
            self.file.seek(0)
        for name, (row0, k, dt, has_mask) in order:
            v, ok = out[name]
            v[row0:row0 + k] = np.fromfile(self.file, dt, k)
            if has_mask:
                ok[row0:row0 + k] = np.fromfile(self.file, bool, k)
            elif ok is not None:
                ok[row0:row0 + k] = True
        for name, col in out.items():
            cols[name] = finish(name, col) if finish else col
        self.close()
        self.loaded = True

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None


class SpilledCols(dict):
    """Columns ``{name: (values, valid)}`` of which those in ``spill.names`` are parked in
    ``spill`` until :meth:`restore` (a plain dict otherwise)."""

    def __init__(self, cols: dict, spill: Spill, finish=None):
        super().__init__(cols)
        self.spill, self.finish = spill, finish

    def restore(self) -> None:
        """Read the spilled columns back (once)."""
        self.spill.load_into(self, self.finish)
