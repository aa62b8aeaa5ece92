"""Free heap pages back to the system between the stages of one fairness run.

Each stage of an 802.11 run (reading, PPDU grouping, TCP analysis) frees hundreds of MB
of arrays, many of them chunk-sized ones that glibc keeps in its heap rather than
unmapping: the next stage then grows the process on top of memory nobody uses (measured
on the 5M-frame benchmark capture: ~300 MB between the grouping and the TCP analysis).
``malloc_trim(0)`` returns those free pages; it changes no allocator setting, so it leaves
the host process as it was. A no-op where the C library has no ``malloc_trim`` (not glibc).
"""
from __future__ import annotations

import ctypes

__all__ = ["release_free_heap"]

_TRIM = []


def _malloc_trim():
    if not _TRIM:
        try:
            _TRIM.append(getattr(ctypes.CDLL(None), "malloc_trim"))
        except (OSError, AttributeError, TypeError):      # not glibc, or no C library by name
            _TRIM.append(None)
    return _TRIM[0]


def release_free_heap() -> bool:
    """Give the C heap's free pages back to the system; True if the C library could."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
