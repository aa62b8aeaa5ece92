"""A stand-in for a thread pool that runs every call at once, in the calling thread.

Where work may go to a ``concurrent.futures`` pool (numpy releases the GIL) but sometimes
must not (one core, one chunk, columns that are not thread-safe), the code keeps one
shape: ``with pool_or_inline as pool: pool.map(...)`` / ``pool.submit(...).result()``.
"""
from __future__ import annotations

from concurrent.futures import Future

__all__ = ["Inline"]


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
