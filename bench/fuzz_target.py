"""What one fuzz input goes through: the reader, then the stage functions.

:func:`read_bytes` is the whole reader (container walk, every decoder, the ``bad``
column) on a file holding the input; :func:`stages` runs PPDU grouping, detection and
the fairness core on the frame table. An input passes when it ends in a table (whose
invariants :func:`check_table` asserts) or in the project's own error
(:class:`sniffsync.errors.SniffsyncError`); anything else is a crash. With the C record
walk built (the default then), every input is walked again in Python
(:func:`check_walks`): records that differ are a crash too; and decoded again with the
Python radiotap and IP decoders (:func:`check_decode`, the C ones reading 64-frame chunks so that
a damaged frame sends few others to Python): any column or mark that differs is a crash.
"""
from __future__ import annotations

import os

import numpy as np

from sniffsync.decode.frames import decode_columns
from sniffsync.decode.table import bad_column, frame_table
from sniffsync.errors import NoDataError, SniffsyncError
from sniffsync.io import walk
from sniffsync.io.capture import concat_records, iter_records

__all__ = ["read_bytes", "stages", "check_table", "run_one", "record_starts", "scratch_path", "SniffsyncError"]


def read_bytes(data: bytes, path: str, table: bool = True):
    """Records and frame table of ``data`` written to ``path`` (one worker thread, no
    pools); without ``table`` the numpy columns and the ``bad`` column (no pandas)."""
    with open(path, "wb") as fh:
        fh.write(data)
    rec = concat_records(iter_records(path))     # the C walk when built
    check_walks(path, rec)
    n, cols, marks = decode_columns(rec, threads=1)
    check_decode(rec)
    if table:
        return rec, frame_table(n, cols, marks, None)
    cols["bad"] = (bad_column(n, marks), None)
    return rec, cols


def check_walks(path, rec) -> None:
    """With the C walk in use: the Python walk (the fallback) indexes the same records."""
    if walk.backend() != "c":
        return
    with walk.use_backend("python"):
        py = concat_records(iter_records(path))
    for f in ("data_off", "caplen", "wirelen", "ts_ns", "linktype", "iface"):
        assert np.array_equal(getattr(rec, f), getattr(py, f)), f"C and Python walks differ: {f}"
    assert rec.problems == py.problems, "C and Python walks differ: problems"
    assert [(np.asarray(r).tolist(), w) for r, w in rec.marks] == \
        [(np.asarray(r).tolist(), w) for r, w in py.marks], "C and Python walks differ: marks"


def check_decode(rec) -> None:
    """With the C extension in use: its radiotap and IP passes and the Python decoders (the fallbacks)
    give the same columns and marks, in 64-frame chunks (a damaged frame sends its chunk
    to Python: small chunks leave the others to the C pass)."""
    if walk.backend() != "c":
        return
    from sniffsync.decode.table import Cat
    c_n, c_cols, c_marks = decode_columns(rec, threads=1, chunk_rows=64)
    with walk.use_backend("python"):
        n, cols, marks = decode_columns(rec, threads=1, chunk_rows=64)
    assert c_n == n and c_cols.keys() == cols.keys(), "C and Python decoders differ: columns"
    for k, (v, ok) in cols.items():
        cv, cok = c_cols[k]
        if isinstance(v, Cat):
            same = list(v.categories) == list(cv.categories) and np.array_equal(v.codes, cv.codes)
        else:
            same = v.dtype == cv.dtype and np.array_equal(v, cv)
        assert same and (ok is None) == (cok is None) and (ok is None or np.array_equal(ok, cok)), \
            f"C and Python decoders differ: {k}"
    assert [(np.asarray(r).tolist(), w) for r, w in c_marks] == \
        [(np.asarray(r).tolist(), w) for r, w in marks], "C and Python decoders differ: marks"


def check_table(rec, frames) -> None:
    """Invariants of any decoded input: one row per record, lengths within the file."""
    n = len(rec.data_off)
    frame = frames["frame"].to_numpy() if hasattr(frames, "columns") else frames["frame"][0]
    assert len(frame) == n and (np.asarray(frame) == np.arange(1, n + 1)).all()
    caplen, off = np.asarray(rec.caplen, np.int64), np.asarray(rec.data_off, np.int64)
    # bytes read are inside the file (a record indexed past its end has no bytes)
    assert (caplen >= 0).all() and (off >= 0).all() and (off + caplen <= np.maximum(rec.buf.size, off)).all()


def stages(frames) -> None:
    """PPDUs, detection and the fairness core on one frame table (their errors: NoDataError)."""
    from airtime.detect import detect
    from airtime.ppdu import group_ppdus
    from sniffsync.fairness.frames import fairness
    ppdus, frame_ppdu, _ = group_ppdus(frames)
    detect(frames, ppdus, frame_ppdu)
    try:
        fairness(frames, 400_000_000, 200_000_000, ppdus=ppdus, stamps="capture")
    except NoDataError:
        pass


def run_one(data: bytes, path: str, with_stages: bool = True) -> str:
    """``"ok"`` or ``"error"`` (a SniffsyncError: the one-line error); raises on a crash."""
    try:
        rec, frames = read_bytes(data, path, with_stages)
    except SniffsyncError:
        return "error"
    check_table(rec, frames)
    if with_stages and len(frames):
        try:
            stages(frames)
        except SniffsyncError:
            return "error"
    del rec
    return "ok"


def record_starts(path) -> list:
    """Where each record's bytes start in the file at ``path`` (for structure-aware mutants)."""
    rec = concat_records(iter_records(path))
    return [int(v) for v in rec.data_off[:64]] if rec.buf.size == os.path.getsize(path) else []


def scratch_path(tag: str = "") -> str:
    """A per-process file for the inputs (in RAM when /dev/shm exists)."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") else os.environ.get("TMPDIR", "/tmp")
    return os.path.join(base, f"sniffsync-fuzz-{os.getpid()}{tag}.bin")
