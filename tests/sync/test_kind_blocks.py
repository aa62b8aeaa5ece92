"""The per-input anchor candidates joined kind by kind (anchors.join_candidates, kind_blocks),
degenerate inputs included: an input without candidates, inputs missing a kind. Oracle: the
concatenated candidates (rows offset by the rows before) stably sorted by kind."""
from __future__ import annotations

import numpy as np
import pytest

from sniffsync.sync.anchors import join_candidates, kind_blocks, kind_cuts


def _part(kinds, n_rows, rng):
    kind = np.sort(np.asarray(kinds, np.int8))
    rows = np.sort(rng.choice(n_rows, len(kind), replace=False)).astype(np.int64)
    return rows, kind, rng.integers(0, 2**63, len(kind)).astype(np.uint64)


@pytest.mark.parametrize("kinds", [
    ([0, 0, 2, 2, 2], [], [1, 1, 2]),       # an input without candidates, kinds missing
    ([2], [0, 1], [0, 0, 0]),
    ([], [], []),                           # none at all
])
def test_joined_kind_by_kind(kinds):
    rng = np.random.default_rng(3)
    sizes = [10, 7, 12]
    parts = [_part(k, n, rng) for k, n in zip(kinds, sizes)]
    got = join_candidates(parts, sizes)
    base = np.cumsum([0, *sizes[:-1]])
    kind = np.concatenate([p[1] for p in parts])
    o = np.argsort(kind, kind="stable")
    want = (np.concatenate([p[0] + b for p, b in zip(parts, base)])[o], kind[o],
            np.concatenate([p[2] for p in parts])[o])
    assert all(np.array_equal(g, w) for g, w in zip(got, want))
    assert got[0].dtype == np.int64 and got[2].dtype == np.uint64
    blocks = kind_blocks([kind_cuts(p[1]) for p in parts])
    assert join_candidates(parts, sizes, blocks)[0].tolist() == got[0].tolist()
