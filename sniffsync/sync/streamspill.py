"""Pass 1's anchor rows on disk, one tile of them in memory at fit time (issue 18).

An :class:`AnchorSpill` takes anchor rows a batch at a time; past ``spill_rows`` rows
held it writes them to one pickle in a scratch directory beside the output, so pass 1
holds at most ``spill_rows`` anchor rows per input whatever the capture's length.
Below that (short captures, the tests) nothing touches the disk. :func:`join` builds
the fit's table from pieces as the in-memory merge did (per input, then across
inputs), so an unspilled merge is unchanged byte for byte.
"""
from __future__ import annotations

import os

import numpy as np
import pandas as pd

__all__ = ["AnchorSpill", "SPILL_ROWS", "join"]

SPILL_ROWS = 1 << 18         # anchor rows held per input (and per tile) before a write


class AnchorSpill:
    """Anchor rows in arrival order: a few in memory, the rest in pickles under ``dirname``
    (None: all in memory)."""

    def __init__(self, dirname, tag: str, spill_rows=None):
        self.dir, self.tag, self.spill_rows = dirname, tag, spill_rows or SPILL_ROWS
        self.buf, self.held, self.files, self.n = [], 0, [], 0
        self.held_max = 0                # rows ever held at once (tests)

    def add(self, df: pd.DataFrame) -> None:
        self.buf.append(df)              # empty too: the columns' dtypes stand
        self.held += len(df)
        self.n += len(df)
        self.held_max = max(self.held_max, self.held)
        if self.dir is not None and self.held >= self.spill_rows:
            self._flush()

    def finish(self) -> None:
        """After the last :meth:`add`: the held rows to disk too (the fit reads every
        piece from there, so pass 1's rows are not held beside their copies)."""
        if self.dir is not None and self.buf:
            self._flush()

    def _flush(self) -> None:
        path = os.path.join(self.dir, f"{self.tag}-{len(self.files)}.pkl")
        concat(self.buf).to_pickle(path)
        self.files.append(path)
        self.buf, self.held = [], 0

    def __len__(self) -> int:
        return self.n

    def pieces(self):
        """The rows, a piece (a file or the held rows) at a time, in arrival order."""
        for p in self.files:
            yield pd.read_pickle(p)
        if self.buf:
            yield concat([b.copy(deep=False) for b in self.buf]).copy()      # the caller may change it

    def drop(self) -> None:
        for p in self.files:
            os.unlink(p)
        self.buf, self.held, self.files = [], 0, []


def concat(tables: list) -> pd.DataFrame:
    """Row-wise concatenation, column by column (each dropped from its table once copied):
    categoricals with different categories joined as categoricals (``pd.concat`` would
    give objects, and a later join would mix the two)."""
    from pandas.api.types import union_categoricals
    from sniffsync.sync.tables import str_categories
    if len(tables) == 1:
        return tables[0].reset_index(drop=True)
    tables = [str_categories(t) for t in tables]
    out = {}
    for c in list(tables[0].columns):
        parts = [t.pop(c) for t in tables]
        cat = [isinstance(p.dtype, pd.CategoricalDtype) for p in parts]
        if all(cat):
            out[c] = union_categoricals(parts, ignore_order=True)
        else:
            out[c] = pd.concat([p.astype(object) if k else p for p, k in zip(parts, cat)] if any(cat) else parts,
                               ignore_index=True)
        del parts
    return pd.DataFrame(out, copy=False)


def join(parts):
    """``(at, local, clock)`` from ``(input, rows)`` pieces (rows with ``local_`` and
    ``clock_`` columns), inputs in order: each input's rows concatenated, then the
    inputs column by column (:func:`sniffsync.sync.tables.concat_columns`)."""
    from sniffsync.sync.tables import str_categories
    by = {}
    for s, df in parts:
        by.setdefault(s, []).append(df)
    tabs = [str_categories(concat(by.pop(s))) for s in sorted(by)]
    local = np.concatenate([t.pop("local_").to_numpy(np.int64) for t in tabs])
    clock = np.concatenate([t.pop("clock_").to_numpy(np.int64) for t in tabs])
    return concat(tabs), local, clock
