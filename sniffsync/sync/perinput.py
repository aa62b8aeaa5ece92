"""What the merge computes per input while the next input is read, joined afterwards.

The clock fit needs, over the concatenated table: every frame's local clock
(:func:`sniffsync.sync.clock.local_clocks`), the anchor candidates with their key order
(:func:`sniffsync.sync.clock.sync_candidates`) and the copies' content key with its order
(``merge._merge_key``). Each is a function of one input's rows, or a sort: here each
input gets its own on the thread that prepares it (:func:`input_part`), and
:func:`join_clocks`, :func:`join_sorted` put them together exactly as the computation on
the concatenated table gives them. A sort is joined by a stable merge of the sorted
runs (timsort finds them: a few passes, not a sort of all keys); the stable sort of
keys is unique, so the joined order is the one :func:`sniffsync.sync.anchors.key_order`
gives (``tests/sync/test_merge.py`` compares both).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from sniffsync import runtime
from sniffsync.sync.anchors import anchor_candidates, hash_key, join_candidates, kind_blocks, kind_cuts
from sniffsync.sync.clock import local_clocks
from sniffsync.sync.copies import MERGE_KEY
from sniffsync.sync.order import order_by

__all__ = ["InputPart", "input_part", "content_part", "join_clocks", "join_sorted", "join_parts", "join_key"]


class InputPart:
    """One input's share: ``clocks`` (:func:`local_clocks` of its rows), ``cand`` (its
    anchor candidates), ``cuts`` (where each kind's candidates start,
    :func:`sniffsync.sync.anchors.kind_cuts`), ``cand_order`` (per kind, the stable key
    order of that kind's candidates), ``key``/``key_order`` (the copies' content key; its
    order or None)."""
    __slots__ = ("n", "clocks", "cand", "cuts", "cand_order", "key", "key_order")

    def __init__(self, n, clocks, cand, cuts, cand_order, key, key_order):
        self.n, self.clocks, self.cand, self.cuts, self.cand_order = n, clocks, cand, cuts, cand_order
        self.key, self.key_order = key, key_order


def input_part(t: pd.DataFrame, anchors, sort_key: bool = True, content=None) -> InputPart:
    """:class:`InputPart` of one input's (aligned) table ``t``: the candidates here, the
    clocks and the copies' key on a second thread (the last input's part is waited for).
    ``content``: :func:`content_part` of ``t`` when known (then only the clocks are computed)."""
    with runtime.pool(limit=1) as ex:
        clocks = ex.submit(local_clocks, t)
        content = content_part(t, anchors, sort_key) if content is None else content
        return InputPart(len(t), clocks.result(), *content)


def content_part(t: pd.DataFrame, anchors, sort_key: bool = True) -> tuple:
    """What :class:`InputPart` holds of the frames' content, not their times (so it may be
    computed on a table before its stamps are aligned): ``(cand, cuts, cand_order, key,
    key_order)``, the copies' key on a second thread."""
    def copies_key():
        key = hash_key(t, MERGE_KEY)
        return key, order_by(key) if sort_key else None
    with runtime.pool(limit=1) as ex:
        key = ex.submit(copies_key)
        cand = anchor_candidates(t, anchors)
        cuts = kind_cuts(cand[1])          # once: the joins below read them
        cand_order = [order_by(cand[2][a:b]) for a, b in zip(cuts[:-1], cuts[1:])]
        return (cand, cuts, cand_order, *key.result())


def join_clocks(parts) -> tuple:
    """:func:`local_clocks` of the concatenated inputs (their ``sniffer`` ascending, one
    per input) from each input's: clock ids offset by the clocks before."""
    local = np.concatenate([p.clocks[0] for p in parts])
    base = np.cumsum([0, *[len(p.clocks[2]) for p in parts[:-1]]])
    clock = np.concatenate([p.clocks[1] + b for p, b in zip(parts, base)])
    clocks = pd.concat([p.clocks[2] for p in parts], ignore_index=True)
    return local, clock, clocks


def join_sorted(keys, orders) -> tuple[np.ndarray, np.ndarray]:
    """``key_order(np.concatenate(keys))`` from each block's own stable order: rows sorted
    by key (ties by row) and the dense key rank along that order."""
    base = np.cumsum([0, *[len(k) for k in keys[:-1]]])
    runs = np.concatenate([k[o] for k, o in zip(keys, orders)])
    merged = np.argsort(runs, kind="stable")        # a merge of sorted runs (timsort)
    order = np.concatenate([o + b for o, b in zip(orders, base)])[merged]
    k = runs[merged]
    return order, np.cumsum(np.r_[False, k[1:] != k[:-1]])


def join_parts(parts) -> tuple:
    """``(clocks, candidates, key parts)`` of the concatenated inputs: the first two as
    :func:`local_clocks` and :func:`sniffsync.sync.clock.sync_candidates` give them on
    the concatenated table; the copies' keys and orders of every input, for
    :func:`join_key` (a thread joins them beside the fit)."""
    blocks = kind_blocks([p.cuts for p in parts])       # per kind, per input
    rows, kind, key = join_candidates([p.cand for p in parts], [p.n for p in parts], blocks)
    # the joined candidates' blocks, each with its own order
    orders = [parts[i].cand_order[k] for i, k, _, _ in blocks]
    keys = [parts[i].cand[2][lo:hi] for i, _, lo, hi in blocks]
    if not blocks:                       # no candidates: as key_order gives it
        keys, orders = [key], [np.zeros(0, np.int64)]
    by_key = join_sorted(keys, orders)
    return join_clocks(parts), (rows, kind, key, by_key), ([p.key for p in parts], [p.key_order for p in parts])


def join_key(keys, orders) -> tuple:
    """``merge._merge_key`` of the concatenated inputs from each input's key and order
    (None: unsorted) as :class:`InputPart` holds them."""
    key = np.concatenate(keys)
    return key, None if orders[0] is None else join_sorted(keys, orders)
