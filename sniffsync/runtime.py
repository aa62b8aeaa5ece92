"""How work is spread over the machine: one worker count, one pool factory, one switch.

Decoding, export and merge hand independent numpy work (which releases the GIL) to a
thread pool sized by :func:`workers`: ``os.cpu_count()`` by default, or the value of the
environment variable ``SNIFFSYNC_THREADS`` (``1`` runs everything in the calling
thread, which is also what a library host that manages its own threads may want).
Nothing here retunes the process (allocator, page advice, I/O flags): a library must
not change its host, and such tricks paid off only on one benchmark machine.
:func:`release_free_heap` changes no setting: it hands pages already freed back.
"""
from __future__ import annotations

import os
from concurrent.futures import Future, ThreadPoolExecutor

__all__ = ["workers", "pool", "Inline", "ENV_THREADS", "release_free_heap"]

ENV_THREADS = "SNIFFSYNC_THREADS"


def workers(tasks: int | None = None) -> int:
    """Threads to use for ``tasks`` independent pieces of work (at least 1).

    ``SNIFFSYNC_THREADS`` if set to a positive integer, else ``os.cpu_count()``; never
    more than ``tasks`` when that is given.
    """
    text = os.environ.get(ENV_THREADS, "").strip()
    n = int(text) if text.isdigit() and int(text) > 0 else (os.cpu_count() or 1)
    return max(1, min(n, tasks) if tasks is not None else n)


def pool(tasks: int | None = None, limit: int | None = None):
    """A thread pool for ``tasks`` pieces of work, or :class:`Inline` when one thread is all.

    ``limit`` caps the threads (e.g. 1 for one background helper beside the caller).
    Use as ``with pool(len(chunks)) as ex: ex.map(...)``.
    """
    n = workers(tasks)
    if limit is not None:
        n = min(n, limit)
    return ThreadPoolExecutor(n) if n > 1 or (limit == 1 and workers() > 1) else Inline()


class Inline:
    """``map`` and ``submit`` of a pool, run in the calling thread."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    @staticmethod
    def map(fn, items):
        return map(fn, items)

    @staticmethod
    def submit(fn, *args, **kwargs) -> Future:
        done = Future()
        try:
            done.set_result(fn(*args, **kwargs))
        except BaseException as exc:          # as a pool does: raised by result()
            done.set_exception(exc)
        return done


_TRIM = []


def release_free_heap() -> bool:
    """Give the C heap's free pages back to the system (glibc ``malloc_trim(0)``); True if
    the C library could. Between big stages: glibc keeps many freed chunk-sized arrays in
    its heap, and the next stage would grow the process on top of them. No-op elsewhere."""
    if not _TRIM:
        try:
            import ctypes
            _TRIM.append(getattr(ctypes.CDLL(None), "malloc_trim"))
        except (OSError, AttributeError, TypeError):      # not glibc, or no C library by name
            _TRIM.append(None)
    if _TRIM[0] is None:
        return False
    _TRIM[0](0)
    return True
