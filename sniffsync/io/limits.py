"""Read limits: ``--max-frames`` / ``--max-bytes`` stop a read early, keeping what came before.

A limit is not an error: the read stops, everything before the limit is analysed, and
one problem line (a warning on stderr from the CLI) says the rest was ignored.
:func:`read_limits` sets them for every read in its block (one process-wide setting, so
reads on worker threads and in every command's own code path obey it too).
"""
from __future__ import annotations

from contextlib import contextmanager

import numpy as np

__all__ = ["read_limits", "limits", "any_limit", "take_frames", "head_records"]

_LIMITS = {"max_frames": None, "max_bytes": None}


@contextmanager
def read_limits(max_frames: int | None = None, max_bytes: int | None = None):
    """Within the block, every capture read stops after ``max_frames`` records or
    ``max_bytes`` (inflated) bytes, unless a caller passes its own limits."""
    old = dict(_LIMITS)
    _LIMITS.update(max_frames=max_frames, max_bytes=max_bytes)
    try:
        yield
    finally:
        _LIMITS.update(old)


def limits(max_frames: int | None, max_bytes: int | None) -> tuple:
    """The limits in force: the given ones, else those of :func:`read_limits`."""
    return (_LIMITS["max_frames"] if max_frames is None else max_frames,
            _LIMITS["max_bytes"] if max_bytes is None else max_bytes)


def any_limit() -> bool:
    return any(v is not None for v in _LIMITS.values())


def take_frames(batches, max_frames: int, path):
    """The first ``max_frames`` records of consecutive ``Records`` batches; when more
    follow, the last batch kept carries a problem line."""
    seen, held = 0, None
    for rec in batches:
        n = len(rec.data_off)
        if seen + n <= max_frames:                 # wholly kept
            if held is not None:
                yield held
            held, seen = rec, seen + n
            continue
        if seen < max_frames or held is None:      # part of this batch is kept
            if held is not None:
                yield held
            held = head_records(rec, max_frames - seen)
        held = held._replace(problems=[*held.problems, f"{path}: stopped after {max_frames} frames "
                                       "(--max-frames); the rest is ignored"])
        batches.close()
        break
    if held is not None:
        yield held


def head_records(rec, k: int):
    """The first ``k`` records of a ``Records`` (marks kept for those rows)."""
    marks = [(np.asarray(r, np.int64), why) for r, why in rec.marks]
    return rec._replace(data_off=rec.data_off[:k], caplen=rec.caplen[:k], wirelen=rec.wirelen[:k],
                        ts_ns=rec.ts_ns[:k], linktype=rec.linktype[:k], iface=rec.iface[:k],
                        marks=[(r[r < k], why) for r, why in marks if (r < k).any()],
                        problems=list(rec.problems))
