"""Decoded columns parked in an anonymous temporary file until a stage reads them.

The fairness command reads an 802.11 capture once, but its PPDU grouping and its TCP
analysis read different columns: the TCP-only ones (addresses, ports, TCP header
fields: ~38 bytes a frame held narrow) are written out batch by batch as the reader
streams, so neither the read nor the grouping holds them, and each comes back only when
the TCP analysis first asks for it (which frees it once read). The columns both stages read are
written there too (and kept), so the grouping may free its own. Values come back exactly
as written (each batch's raw bytes, promoted to the widest batch dtype as the in-memory
sink does); the file is deleted when closed. Batches may be parked from the decoding
threads, in any order (each part's offset is recorded; positioned writes).
"""
from __future__ import annotations

import os
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
        self.n = 0                      # rows: the end of the furthest batch added
        self.end = 0                    # bytes reserved in the file
        self.parts = {}                 # name -> [(row0, k, dtype, has_mask, file offset)]
        self.file = None
        self.closed = False
        self.lock = threading.Lock()    # offsets reserved, parts recorded, one load at a time

    def add(self, cols: dict, k: int, row0: int | None = None) -> None:
        """Parks the batch of rows ``row0 .. row0 + k`` (default: after the rows so far).
        Thread-safe: batches may come in any order from any thread (each part's file
        offset is reserved under the lock, the bytes written outside it)."""
        take = []
        for name in sorted(self.names & cols.keys()):
            v, ok = cols[name] if name in self.copy else cols.pop(name)
            v = np.ascontiguousarray(v)
            if v.dtype == object:
                raise TypeError(f"cannot spill the object column {name}")
            take.append((name, v, None if ok is None else np.ascontiguousarray(ok, bool)))
        with self.lock:
            row0 = self.n if row0 is None else row0
            self.n = max(self.n, row0 + k)
            if not take:
                return
            fd, at = self._reserve(sum(v.nbytes + (0 if ok is None else ok.nbytes) for _, v, ok in take))
            writes = []
            for name, v, ok in take:
                self.parts.setdefault(name, []).append((row0, k, v.dtype, ok is not None, at))
                for a in (v, ok)[:1 + (ok is not None)]:
                    writes.append((a, at))
                    at += a.nbytes
        try:
            for a, at in writes:
                _write_at(fd, _bytes_of(a), at)           # the array's own buffer: no copy
        except OSError as exc:             # (the CLI prints it as one line)
            raise _no_room(exc) from exc

    def _reserve(self, size: int) -> tuple:
        """``(fd, offset)`` of ``size`` fresh bytes in the file (opened on first use); under the lock."""
        if self.closed:
            raise ValueError("the parked columns' file is closed")
        if self.file is None:
            try:
                self.file = tempfile.TemporaryFile(prefix="sniffsync-spill-")
            except OSError as exc:
                raise _no_room(exc) from exc
        at, self.end = self.end, self.end + size
        return self.file.fileno(), at

    def load(self, name: str) -> tuple:
        """``(values, valid or None)`` of ``name``, all rows: values promoted as
        ``numpy.concatenate`` would; a mask where some batch had one or missed the column."""
        parts = self.parts[name]
        n = self.n
        dt = np.result_type(*[p[2] for p in parts])
        masked = sum(p[1] for p in parts) < n or any(p[3] for p in parts)
        v, ok = np.zeros(n, dt), (np.zeros(n, bool) if masked else None)
        with self.lock:
            if self.closed:
                raise ValueError("the parked columns' file is closed")
            self._read_into(parts, v, ok)
        return v, ok

    def _read_into(self, parts, v, ok) -> None:
        fd = self.file.fileno()
        for row0, k, pdt, has_mask, at in parts:
            same = pdt == v.dtype
            into = v[row0:row0 + k] if same else np.empty(k, pdt)   # same dtype: no copy
            _read_at(fd, into, at)
            if not same:
                v[row0:row0 + k] = into
            if has_mask:
                _read_at(fd, ok[row0:row0 + k], at + into.nbytes)
            elif ok is not None:
                ok[row0:row0 + k] = True

    def close(self) -> None:
        """Deletes the file (idempotent); no column can be parked or read back after."""
        with self.lock:
            self.closed = True
            if self.file is not None:
                self.file.close()
                self.file = None


def _bytes_of(a: np.ndarray) -> memoryview:
    """The bytes of a contiguous array, without a copy."""
    return memoryview(a.reshape(-1).view(np.uint8))


def _no_room(exc: OSError) -> OSError:
    return OSError(exc.errno, f"cannot park decoded columns in a temporary file in "
                   f"{tempfile.gettempdir()} (set TMPDIR to a disk with room): {exc.strerror}")


def _write_at(fd: int, buf: memoryview, at: int) -> None:
    """All of ``buf`` at offset ``at`` of ``fd`` (positioned: writers need no common file position)."""
    while len(buf):
        k = os.pwrite(fd, buf, at)
        buf, at = buf[k:], at + k


def _read_at(fd: int, into: np.ndarray, at: int) -> None:
    """Fills the contiguous array ``into`` from offset ``at`` of ``fd`` (what was written there)."""
    buf = _bytes_of(into)
    got = 0
    while got < len(buf):
        k = os.preadv(fd, [buf[got:]], at + got)
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

    def close(self) -> None:
        """Deletes the parked columns' file (the owner's ``finally``: also on an error)."""
        self.spill.close()

    def restore(self) -> None:
        """Every parked column into memory now (e.g. before a frame table is built)."""
        for name in sorted(self.parked):
            self._load(name)
