"""The record walk: the reader's one per-record loop, in C when it is built, else in Python.

A record's position depends on the previous record's length, so offsets are found one
record after another. :func:`pcap_window` and :func:`pcapng_window` do that for one window
of a file; everything else about a record is read afterwards, vectorised. The C
extension ``sniffsync.io._walk`` (built by ``pip install``, optional: without a compiler
the package installs and runs on the Python walks) gives the same offsets and stop
position as the Python walks, byte for byte (the tests compare both on every test
capture); the loop is about 7x faster (docs/benchmarks.md, issue 17).
The extension also reads the radiotap headers of clean chunks
(:func:`sniffsync.decode.radiotap.decode_radiotap`; their PHY columns: source ``_rtphy.c``), the
802.11 MAC and LLC/SNAP headers (:mod:`sniffsync.decode.dot11c`, source ``_dot11.c``) and the
IP / TCP / UDP / ICMP headers (:mod:`sniffsync.decode.l3c`, source ``_l3.c``), and copies the
merged pcapng's packet bytes (:func:`copy_pieces`, source ``_pieces.c``). ``SNIFFSYNC_WALK=python`` in the
environment, or :func:`use_backend`, selects the Python walk and decoders.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import struct
from array import array
from contextlib import contextmanager

# built or not (no compiler at install time: the Python walk does it); a built extension
# that fails to load is a broken install and raises
_c = importlib.import_module("sniffsync.io._walk") if importlib.util.find_spec("sniffsync.io._walk") else None

__all__ = ["pcap_window", "pcap_window_heads", "pcapng_window", "copy_pieces", "backend", "use_backend",
           "ENV_WALK"]

ENV_WALK = "SNIFFSYNC_WALK"
_state = {"c": _c is not None and os.environ.get(ENV_WALK, "").strip().lower() != "python"}
_PCAP = {o: struct.Struct(o + "8xI").unpack_from for o in "<>"}
_PCAPNG = {o: struct.Struct(o + "4xI").unpack_from for o in "<>"}


def backend() -> str:
    """``"c"`` or ``"python"``: the walk in use."""
    return "c" if _state["c"] else "python"


@contextmanager
def use_backend(name: str):
    """Within the block, walk with ``name`` (``"c"`` needs the built extension)."""
    if name not in ("c", "python"):
        raise ValueError(f"walk backend {name!r}: 'c' or 'python'")
    if name == "c" and _c is None:
        raise RuntimeError("sniffsync.io._walk is not built (no compiler at install time?)")
    old = _state["c"]
    _state["c"] = name == "c"
    try:
        yield
    finally:
        _state["c"] = old


def _from_c(result):
    raw, pos = result
    offs = array("q")
    offs.frombytes(raw)
    return offs, pos


def pcap_window(mv, pos: int, stop: int, order: str):
    """Classic pcap record offsets from ``pos`` while ``pos <= stop`` (overshooting by up to
    3 records), as ``array('q')``, and the next position. Stops silently at a header the
    buffer cannot hold; the caller checks the last offset against the file's end and every
    length against ``MAX_RECORD``. ``order``: ``"<"`` or ``">"``."""
    if _state["c"]:
        return _from_c(_c.pcap(mv, pos, stop, order == ">"))
    return _pcap_py(mv, pos, stop, _PCAP[order])


def pcap_window_heads(mv, pos: int, stop: int, order: str):
    """:func:`pcap_window`, and each record's 16 header bytes as ``bytes`` (zero past the
    buffer) when the C walk copied them as it went, else None (the caller gathers them)."""
    if _state["c"] and hasattr(_c, "pcap_heads"):
        raw, heads, pos = _c.pcap_heads(mv, pos, stop, order == ">")
        return *_from_c((raw, pos)), heads
    return *pcap_window(mv, pos, stop, order), None


def pcapng_window(mv, pos: int, stop: int, order: str):
    """pcapng block offsets as :func:`pcap_window`, stepping by each block's length (a zero
    length steps 12 bytes so the walk always moves; checked later)."""
    if _state["c"]:
        return _from_c(_c.pcapng(mv, pos, stop, order == ">"))
    return _pcapng_py(mv, pos, stop, _PCAPNG[order])


def copy_pieces(out, dst, src, src_off, ln) -> bool:
    """``out[dst[i]:dst[i] + ln[i]] = src[src_off[i]:src_off[i] + ln[i]]`` for every ``i``
    by the C extension (bytes; one ``memmove`` each; native int64 offsets the caller leaves
    alone meanwhile; every range checked first, ValueError): True, or False when the Python
    backend is in use (the caller copies)."""
    if not (_state["c"] and hasattr(_c, "pieces")):
        return False
    _c.pieces(out, dst, src, src_off, ln)
    return True


def _pcap_py(mv, pos: int, stop: int, step):
    offs = array("q")
    app = offs.append
    try:
        while pos <= stop:              # unrolled: one bounds test per four records
            app(pos)
            pos += 16 + step(mv, pos)[0]
            app(pos)
            pos += 16 + step(mv, pos)[0]
            app(pos)
            pos += 16 + step(mv, pos)[0]
            app(pos)
            pos += 16 + step(mv, pos)[0]
    except struct.error:                # the length field of the last offset is past the end
        pos = offs.pop()
    return offs, pos


def _pcapng_py(mv, pos: int, stop: int, step):
    offs = array("q")
    app = offs.append
    try:
        while pos <= stop:
            app(pos)
            pos += step(mv, pos)[0] or 12
            app(pos)
            pos += step(mv, pos)[0] or 12
            app(pos)
            pos += step(mv, pos)[0] or 12
            app(pos)
            pos += step(mv, pos)[0] or 12
    except struct.error:            # length field past the end of the buffer
        pos = offs.pop()
    return offs, pos
