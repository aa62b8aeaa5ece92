"""Decoded columns parked in an anonymous temporary file until a stage reads them.

The fairness command reads an 802.11 capture once, but its PPDU grouping and its TCP
analysis read different columns: the TCP-only ones (addresses, ports, TCP header
fields: ~38 bytes a frame held narrow) are written out batch by batch as the reader
streams, so neither the read nor the grouping holds them, and each comes back only when
the TCP analysis first asks for it (which frees it once read). The columns both stages read are
written there too (and kept), so the grouping may free its own. Values come back exactly
as written (each batch's raw bytes, promoted to the widest batch dtype as the in-memory
sink does); the file is deleted when closed.
"""
from __future__ import annotations

import tempfile
import threading

import numpy as np

__all__ = ["Spill", "SpilledCols"]


class Spill:
    """Columns ``{name: (values, valid or None)}`` appended batch by batch, read back by name.

    ``add(cols, k)`` takes the spilled names out of ``cols`` (a batch of ``k`` rows) and
    appends them (those in ``copy`` are written and left in ``cols``: the caller may hand
    its in-memory columns to a stage that frees them); ``load(name)`` reads one whole
    column back. A name missing from a batch is null there (as
    :class:`sniffsync.decode.table.ColumnSink`).
    """

    def __init__(self, names, copy=()):
        self.copy = frozenset(copy)     # written, but left in the batch too
        self.names = frozenset(names) | self.copy
        self.n = 0
        self.parts = {}                 # name -> [(row0, k, dtype, has_mask, file offset)]
        self.file = None
        self.lock = threading.Lock()    # load: one seek + read at a time (group threads)

    def add(self, cols: dict, k: int) -> None:
        for name in sorted(self.names & cols.keys()):
            v, ok = cols[name] if name in self.copy else cols.pop(name)
            v = np.ascontiguousarray(v)
            if v.dtype == object:
                raise TypeError(f"cannot spill the object column {name}")
            ok = None if ok is None else np.ascontiguousarray(ok, bool)
            try:
                if self.file is None:
                    self.file = tempfile.TemporaryFile(prefix="sniffsync-spill-")
                at = self.file.tell()
                self.file.write(_bytes_of(v))          # the array's own buffer: no copy
                if ok is not None:
                    self.file.write(_bytes_of(ok))
            except OSError as exc:         # (the CLI prints it as one line)
                raise OSError(exc.errno, f"cannot park decoded columns in a temporary file in "
                              f"{tempfile.gettempdir()} (set TMPDIR to a disk with room): {exc.strerror}") from exc
            self.parts.setdefault(name, []).append((self.n, k, v.dtype, ok is not None, at))
        self.n += k

    def load(self, name: str) -> tuple:
        """``(values, valid or None)`` of ``name``, all rows: values promoted as
        ``numpy.concatenate`` would; a mask where some batch had one or missed the column."""
        parts = self.parts[name]
        n = self.n
        dt = np.result_type(*[p[2] for p in parts])
        masked = sum(p[1] for p in parts) < n or any(p[3] for p in parts)
        v, ok = np.zeros(n, dt), (np.zeros(n, bool) if masked else None)
        with self.lock:
            self._read_into(parts, v, ok)
        return v, ok

    def _read_into(self, parts, v, ok) -> None:
        for row0, k, pdt, has_mask, at in parts:
            self.file.seek(at)
            if pdt == v.dtype:                     # straight into the column: no copy
                _read_exactly(self.file, v[row0:row0 + k])
            else:
                v[row0:row0 + k] = np.fromfile(self.file, pdt, k)
            if has_mask:
                _read_exactly(self.file, ok[row0:row0 + k])
            elif ok is not None:
                ok[row0:row0 + k] = True

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None


def _bytes_of(a: np.ndarray) -> memoryview:
    """The bytes of a contiguous array, without a copy."""
    return memoryview(a.reshape(-1).view(np.uint8))


def _read_exactly(fh, into: np.ndarray) -> None:
    """Fills the contiguous array ``into`` from ``fh``'s position (what was written there)."""
    buf = _bytes_of(into)
    got = 0
    while got < len(buf):
        k = fh.readinto(buf[got:])
        if not k:
            raise OSError(f"the temporary file of parked columns ended early ({got} of {len(buf)} bytes)")
        got += k


class SpilledCols(dict):
    """Columns ``{name: (values, valid)}`` of which the names in ``spill`` not held here
    are read back from it when first asked for (``[]``, ``get``, ``pop``, ``in``), then
    passed through ``finish(name, column)``. A column asked for again after it was popped
    is read again (the grouping frees its copies of the shared columns)."""

    def __init__(self, cols: dict, spill: Spill, finish=None):
        super().__init__(cols)
        self.spill, self.finish = spill, finish
        self.parked = set(spill.parts)
        self.lock = threading.RLock()   # flow groups on threads read the same columns (peek)

    def _load(self, name) -> bool:
        with self.lock:
            return self._load_locked(name)

    def _load_locked(self, name) -> bool:
        if dict.__contains__(self, name) or name not in self.parked:
            return dict.__contains__(self, name)
        col = self.spill.load(name)
        dict.__setitem__(self, name, self.finish(name, col) if self.finish else col)
        if name not in self.spill.copy:
            self.parked.discard(name)
        return True

    def __contains__(self, name) -> bool:
        return dict.__contains__(self, name) or name in self.parked

    def __getitem__(self, name):
        with self.lock:
            self._load(name)
            return dict.__getitem__(self, name)

    def get(self, name, default=None):
        with self.lock:
            return dict.__getitem__(self, name) if self._load(name) else default

    def pop(self, name, *default):
        with self.lock:
            self._load(name)
            return dict.pop(self, name, *default)

    def __delitem__(self, name) -> None:
        """Frees a column without reading it back (a parked one is forgotten)."""
        with self.lock:
            if not dict.__contains__(self, name) and name not in self.parked:
                raise KeyError(name)
            dict.pop(self, name, None)
            self.parked.discard(name)

    def restore(self) -> None:
        """Every parked column into memory now (e.g. before a frame table is built)."""
        for name in sorted(self.parked):
            self._load(name)
