"""Column helpers of the TCP analysis: the lazy column store, grouped running values on
sorted keys, 32-bit sequence arithmetic, and reading decoded frame columns.

Every TCP table is a mapping of equal-length numpy arrays, rows sorted by a group key
(usually the flow direction); "grouped" helpers take the key and restart at its changes.
"""
from __future__ import annotations

import numpy as np

from sniffsync.nomask import distinct

__all__ = ["SEQ_SPAN", "Lazy", "group_starts", "sorted_unique", "dense_codes", "sorted_within", "grouped_cummax",
           "group_median", "is_sorted", "lex_order", "pair_order", "fd_slices", "FD_CHUNK_ROWS", "flow_parts",
           "rank_span", "restart_cumsum", "wrap32", "diff32", "unwrap32", "frame_getter", "cat_codes"]

SEQ_SPAN = np.int64(1) << 40     # composite key (fd, seq) = fd * SEQ_SPAN + seq; 1 TB per flow
FD_CHUNK_ROWS = 1 << 20          # rows per group of whole flow directions (:func:`fd_slices`)


class Lazy(dict):
    """Columns by name; those in ``thunks`` are computed on first access and kept."""

    def __init__(self, cols=(), thunks=None):
        super().__init__(cols)
        self.thunks = dict(thunks or {})

    def __missing__(self, name):
        if name not in self.thunks:
            raise KeyError(name)
        value = self[name] = self.thunks.pop(name)()
        return value


def group_starts(key: np.ndarray) -> np.ndarray:
    """Boolean mask of rows whose ``key`` differs from the previous row's (sorted input)."""
    start = np.ones(len(key), bool)
    start[1:] = key[1:] != key[:-1]
    return start


sorted_unique = distinct                 # np.unique(a) of a 1-D array, without numpy.ma


_BUCKET_BITS = 16


def dense_codes(key: np.ndarray):
    """``(codes, count)``: dense codes (any order) of the non-negative int64 ``key`` by one
    multiplicative hash into 2**16 buckets, in place (a few directions over many rows: no
    sort); None when two distinct keys share a bucket."""
    h = key.view(np.uint64) * np.uint64(0x9E3779B97F4A7C15)     # Fibonacci hashing
    h >>= np.uint64(64 - _BUCKET_BITS)
    b = h.view(np.int64)
    table = np.full(1 << _BUCKET_BITS, -1, np.int64)
    table[b] = key
    if not np.array_equal(table[b], key):
        return None
    used = np.flatnonzero(table >= 0)
    rank = np.zeros(1 << _BUCKET_BITS, np.int64)
    rank[used] = np.arange(len(used))
    return rank[b], len(used)


def fd_slices(fd: np.ndarray, rows: int | None = None) -> list:
    """Slices of a table sorted by ``fd`` into groups of whole flow directions of about
    ``rows`` rows (one fd larger than that is a group of its own): a per-fd analysis run
    group by group holds its temporaries for one group at a time. One slice when the
    table is small or not sorted by fd."""
    n = len(fd)
    rows = FD_CHUNK_ROWS if rows is None else rows
    if n <= rows or not is_sorted(fd):
        return [slice(0, n)]
    bounds = np.append(np.flatnonzero(group_starts(fd)), n)
    out, a = [], 0
    while a < n:
        b = int(bounds[np.searchsorted(bounds, a + rows, side="right") - 1])
        b = b if b > a else int(bounds[np.searchsorted(bounds, a, side="right")])
        out.append(slice(a, b))
        a = b
    return out


def flow_parts(fd: np.ndarray, parts: int, min_rows: int = 1) -> list:
    """Slices of a table sorted by ``fd`` into at most ``parts`` groups of whole flows (both
    directions: the ACK analysis pairs fd with fd ^ 1) of about equal rows, each analysable
    on its own thread. One slice when the table has fewer than ``min_rows`` rows, one
    flow, is not sorted by fd, or no cut would leave its largest group under 90 % of the rows."""
    n = len(fd)
    if parts < 2 or n < max(min_rows, 2) or not is_sorted(fd) or fd[0] >> 1 == fd[-1] >> 1:
        return [slice(0, n)]
    b = np.append(np.flatnonzero(group_starts(fd >> 1)), n)     # first row of each flow, and n
    t = np.arange(1, parts, dtype=np.int64) * n // parts
    i = np.clip(np.searchsorted(b, t), 1, len(b) - 1)
    near = np.where(b[i] - t < t - b[i - 1], b[i], b[i - 1])    # the flow boundary nearest each target
    cuts = sorted_unique(np.concatenate([[0], near, [n]]))
    if np.diff(cuts).max() > 0.9 * n:
        return [slice(0, n)]
    return [slice(int(a), int(c)) for a, c in zip(cuts[:-1], cuts[1:])]


def rank_span(tr: np.ndarray) -> int:
    """Multiplier of a (fd, time rank) composite key ``fd * span + tr``: above every rank
    (a table of some flows keeps the ranks of the whole capture: no re-ranking)."""
    return int(tr.max()) + 1 if len(tr) else 1


def sorted_within(starts: np.ndarray, v: np.ndarray) -> bool:
    """True when ``v`` is non-decreasing within each group (``starts``: group start mask)."""
    return bool(len(v) < 2 or ((v[1:] >= v[:-1]) | starts[1:]).all())


def grouped_cummax(key: np.ndarray, values: np.ndarray, copy: bool = True) -> np.ndarray:
    """Running maximum of ``values`` restarting at each new ``key`` (rows sorted by key);
    ``copy=False``: ``values`` itself when it already is (a caller that only reads it)."""
    if len(values) == 0:
        return values.copy() if copy else values
    starts = group_starts(key)
    if sorted_within(starts, values):          # already running maxima (e.g. ACK numbers)
        return values.copy() if copy else values
    lo = values.min()
    # shift every group onto its own non-overlapping band, then one global cummax
    band = np.cumsum(starts) - 1
    span = int(values.max()) - int(lo) + 1
    if span * (int(band[-1]) + 1) >= 1 << 62:
        # the bands would overflow int64 (e.g. -inf sentinels): run on dense ranks instead
        uniq, rank = np.unique(values, return_inverse=True)
        return uniq[grouped_cummax(key, rank.ravel().astype(np.int64))]
    span = np.int64(span)
    return np.maximum.accumulate((values - lo) + band * span) - band * span + lo


def group_median(key: np.ndarray, values: np.ndarray):
    """``(keys, medians)`` per distinct ``key`` (ascending), as pandas' groupby median.

    The median of an even group is ``(a + b) / 2`` of its two middle values in float64.
    """
    if not len(key):
        return key[:0], np.zeros(0)
    if is_sorted(key) and key[-1] - key[0] < 64:
        # few groups, already together: select the middle values of each (no sort)
        head = np.flatnonzero(group_starts(key))
        bounds = np.append(head, len(key))
        med = np.empty(len(head))
        for g, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
            c = b - a
            mid = np.partition(values[a:b], [(c - 1) // 2, c // 2])
            med[g] = (float(mid[(c - 1) // 2]) + float(mid[c // 2])) / 2
        return key[head], med
    vmin = int(values.min())
    span = int(values.max()) - vmin + 1
    if values.dtype.kind in "iu" and span <= 256:
        return _median_by_counts(key, values, vmin, span)
    if int(key.min()) >= 0 and (int(key.max()) + 1) * span < 1 << 62:
        comp = np.sort(key * np.int64(span) + (values - vmin))
        k, v = comp // span, comp % span + vmin
    else:
        o = np.lexsort((values, key))
        k, v = key[o], values[o]
    head = np.flatnonzero(group_starts(k))
    cnt = np.diff(np.append(head, len(k)))
    a = v[head + (cnt - 1) // 2].astype(np.float64)
    b = v[head + cnt // 2].astype(np.float64)
    return k[head], (a + b) / 2


def _median_by_counts(key: np.ndarray, values: np.ndarray, vmin: int, span: int):
    """:func:`group_median` of integer values within ``span`` (<= 256) of ``vmin`` (an MCS, a
    retry count): a histogram per key, the middle values read off its running counts (no
    sort of the rows)."""
    from sniffsync.decode.table import factorize
    codes, keys = factorize(key)
    cell = codes * span
    cell += values - vmin
    cum = np.cumsum(np.bincount(cell, minlength=len(keys) * span).reshape(len(keys), span), axis=1)
    n = cum[:, -1]
    # the i-th smallest value of a key is the first bin whose running count passes i
    a = (cum <= ((n - 1) // 2)[:, None]).sum(axis=1) + vmin
    b = (cum <= (n // 2)[:, None]).sum(axis=1) + vmin
    return keys, (a.astype(np.float64) + b.astype(np.float64)) / 2


def is_sorted(a: np.ndarray) -> bool:
    """True when ``a`` is non-decreasing."""
    return bool(len(a) < 2 or (a[1:] >= a[:-1]).all())


def _lex_sorted(keys) -> bool:
    bad = np.zeros(max(len(keys[0]) - 1, 0), bool)
    eq = np.ones_like(bad)
    for k in keys:
        bad |= eq & (k[1:] < k[:-1])
        eq &= k[1:] == k[:-1]
    return not bad.any()


def lex_order(*keys) -> np.ndarray:
    """Stable order by ``keys`` (most significant first): ``np.lexsort(keys[::-1])``.

    Fast paths: already in order (no sort); first key small and non-negative (one
    16-bit radix sort, when the other keys are then in order within its groups).
    """
    keys = [np.asarray(k) for k in keys]
    n = len(keys[0])
    if _lex_sorted(keys):
        return np.arange(n)
    k0 = keys[0]
    if k0.dtype.kind in "iub" and k0.min() >= 0 and k0.max() < 1 << 16:
        o = np.argsort(k0.astype(np.uint16), kind="stable")
        if len(keys) == 1 or _lex_sorted([k0[o]] + [k[o] for k in keys[1:]]):
            return o
    return np.lexsort(keys[::-1])


def pair_order(major: np.ndarray, minor: np.ndarray) -> np.ndarray:
    """Stable order by (``major``, ``minor``), as ``lex_order(major, minor)``: one stable sort
    of a composite int64 key when both fit (timsort: cheap on rows nearly in order, as
    (fd, time)-sorted rows usually are by sequence number or transmitter)."""
    if len(major) and major.dtype.kind in "iu" and minor.dtype.kind in "iu":
        lo = int(minor.min())
        span = int(minor.max()) - lo + 1
        if int(major.min()) >= 0 and (int(major.max()) + 1) * span < 1 << 62:
            key = major.astype(np.int64) * span
            key += minor.astype(np.int64) - lo
            return np.argsort(key, kind="stable")
    return lex_order(major, minor)


def restart_cumsum(x: np.ndarray, starts: np.ndarray, inplace: bool = False) -> np.ndarray:
    """Cumulative sum of ``x`` restarting at every ``starts`` row (the start row included);
    ``inplace``: written over ``x`` (no new array)."""
    sp = np.flatnonzero(starts)
    first = x[sp]
    cs = np.cumsum(x, out=x if inplace else None)
    if not len(sp):
        return cs
    before = cs[sp] - first                        # the running total before each group
    if len(sp) <= 64:                              # few groups (flow directions): in place
        for a, b, v in zip(sp, np.append(sp[1:], len(x)), before):
            cs[a:b] -= v
        return cs
    before = np.repeat(before, np.diff(np.append(sp, len(x))))
    if sp[0] > 0:                                  # rows before the first start: no restart
        before = np.concatenate([np.zeros(sp[0], before.dtype), before])
    cs -= before
    return cs


def wrap32(d: np.ndarray) -> np.ndarray:
    """Differences of 32-bit sequence numbers taken modulo 2**32 into [-2**31, 2**31), in place."""
    d += 1 << 31
    d &= 0xFFFFFFFF
    d -= 1 << 31
    return d


def diff32(raw: np.ndarray) -> np.ndarray:
    """Successive differences of 32-bit sequence numbers (:func:`wrap32`); the first is 0."""
    d = np.empty(len(raw), np.int64)
    d[:1] = 0
    np.subtract(raw[1:], raw[:-1], out=d[1:])
    return wrap32(d)


def unwrap32(raw: np.ndarray, starts: np.ndarray, first=0) -> np.ndarray:
    """32-bit sequence numbers unwrapped per group (successive values differ by < 2**31).

    Each group starts at ``first`` (0, or one value per group start) and moves by the
    wrapped differences of ``raw``.
    """
    d = diff32(raw)
    d[starts] = first
    return restart_cumsum(d, starts, inplace=True)


def frame_getter(n: int, cols: dict, consume: bool = False):
    """``get(name, fill, dtype, rows=None)`` over decoded columns
    (:func:`sniffsync.decode.frames.decode_columns`).

    Values are cast through the schema dtype and nulls replaced by ``fill``, exactly as
    the frame table's nullable column ``.to_numpy(dtype, na_value=fill)`` gives them.
    With ``consume``, a column is removed from ``cols`` once read (its memory goes back
    to the analysis: a lower peak for a capture analysed once) and reading it again
    raises KeyError. ``get.peek`` reads without consuming, ``get.drop(name)`` consumes
    (frees) a column without reading it.
    """
    from sniffsync.decode.schema import COLUMNS
    schema = {c.name: c.dtype for c in COLUMNS}

    all_valid, consumed = {}, set()

    def read(name, fill, dtype, rows=None, keep=False):
        if rows is not None and len(rows) == n and (n == 0 or rows[-1] == n - 1):
            rows = None                   # every frame, in order: no gather
        size = n if rows is None else len(rows)
        if name in consumed:
            raise KeyError(f"frame column {name} was read already (consumed)")
        if name not in cols:              # e.g. 802.11 fields of a wired capture: no memory
            return np.broadcast_to(np.asarray(fill, dtype), (size,))
        if consume and not keep:
            consumed.add(name)
        v, ok = cols.pop(name) if consume and not keep else cols[name]
        if ok is not None and all_valid.setdefault(name, bool(ok.all())):
            ok = None
        v = np.asarray(v) if rows is None else np.asarray(v)[rows]
        sd = schema.get(name, "")
        sd = "bool" if sd == "boolean" else sd.lower()
        if sd and not np.can_cast(v.dtype, sd, "safe"):   # (held narrow: every value fits, no copy)
            v = v.astype(sd, copy=False)
        v = v.astype(dtype, copy=False)
        if ok is None:
            return v
        ok = ok if rows is None else ok[rows]
        return v if ok.all() else np.where(ok, v, np.asarray(fill, dtype))

    def get(name, fill, dtype, rows=None):
        return read(name, fill, dtype, rows)

    def drop(name):
        if consume and name in cols:
            consumed.add(name)
            del cols[name]
    # several threads may each gather their rows of a column (peek), then drop it once
    get.peek = lambda name, fill, dtype, rows=None: read(name, fill, dtype, rows, keep=True)
    get.drop = drop
    return get


def cat_codes(n: int, cols: dict, rows: np.ndarray, consume: bool = False):
    """Codes of ``ip_src``/``ip_dst`` on ``rows`` in one shared list of names (-1 = null);
    with ``consume``, both columns are removed from ``cols``."""
    from sniffsync.decode.table import as_cat
    names, index, out = [], {}, []
    for name in ("ip_src", "ip_dst"):
        if name not in cols:
            out.append(np.full(len(rows), -1, np.int64))
            continue
        cat = as_cat(*(cols.pop(name) if consume else cols[name]))
        remap = np.full(len(cat.categories) + 1, -1, np.int32 if len(cat.categories) < 1 << 30 else np.int64)
        for i, v in enumerate(cat.categories):
            remap[i] = index.setdefault(v, len(names))
            if remap[i] == len(names):
                names.append(v)
        codes = np.asarray(cat.codes)
        out.append(remap[codes if len(rows) == n else codes[rows]])
    return out[0], out[1], names
