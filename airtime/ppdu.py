"""Group the MPDUs of a frame table into PPDUs and place each PPDU on its sniffer's clock.

Vectorised throughout: one stable sort by sniffer, a boundary mask from the
A-MPDU reference (or the TSF patterns drivers use when there is none), cumsum
for the group ids and ``np.add.reduceat`` for the per-PPDU sums.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, NamedTuple

import numpy as np

from airtime.extent import FRAME_CHUNK, PpduCols, estimate_extent
from airtime.kinds import _K, KIND_NAMES, decide_tsft_at as _decide_tsft_at, detect_tsft_at, kind_codes  # noqa: F401  (re-exported)
from airtime.framecols import Columns, _cat, _cat_in, _cat_rows, _keep_only, _median_by_arrays, _np, _np_rows, mpdu_bytes
from airtime.framecols import _median_by  # noqa: F401  (the tests read it here)
from airtime.phy import ppdu_duration_ns
from airtime.ppdutable import PpduGrouping, _group_sum, first_columns, ppdu_table
from sniffsync.errors import UsageError
from sniffsync.runtime import Inline, pool

if TYPE_CHECKING:                # pandas is imported where a table is read or built
    import pandas as pd

__all__ = ["group_ppdus", "PpduGrouping", "Pending", "align_to_ppdu_end", "ppdu_end_shift_ns", "KIND_NAMES", "kind_codes", "mpdu_bytes",
           "detect_tsft_at"]

TSFT_UNSET = -1                                  # QCA: TSFT all-ones until the last subframe
# frame columns the extent estimate (airtime.extent, airtime.extent_ba, airtime.blockack)
# reads: ``group_ppdus(release=True)`` frees the others before it (a test checks the result)
EXTENT_READS = frozenset({"seq", "ampdu_ref", "ampdu_last", "duration_us", "type_subtype", "ba_ssn",
                          "ba_bitmap", "ba_bitmap_lo", "ba_info"})
MPDU_READS = frozenset({"wirelen", "mpdu_len", "rt_len", "rt_flags"})     # airtime.framecols.mpdu_bytes


def _group_starts(frames, order, sniffer):
    """Boundary mask (in sorted order): True where a new PPDU begins; computed
    :data:`FRAME_CHUNK` positions at a time (each reads its predecessor)."""
    n = len(order)
    start = np.ones(n, bool)
    modern = _cat_in(_cat(frames, "phy", ""), ("ht", "vht", "he"))
    for lo in range(1, n, FRAME_CHUNK):
        rows = order[lo - 1:lo + FRAME_CHUNK]
        start[lo:lo + FRAME_CHUNK] = _starts_after(frames, rows, sniffer[rows], modern[rows])[1:]
    return start


def _starts_after(frames, rows, s, phy_modern):
    """:func:`_group_starts` of frame ``rows`` (in sorted order; the first is only read)."""
    def col(name, fill, dtype=np.int64):
        return _np_rows(frames, name, fill, rows, dtype)
    ref, last, ts = col("ampdu_ref", -1), col("ampdu_last", 0, bool), col("type_subtype", -1)
    start = np.ones(len(ref), bool)
    if len(ref) < 2:
        return start
    same_snf = s[1:] == s[:-1]
    joined = (ref[1:] >= 0) & (ref[1:] == ref[:-1])
    # Fallback for HT/VHT/HE data frames without a reference (Wireshark's patterns):
    # all share TSFT (Broadcom), first has TSFT and the rest 0 (Intel), or TSFT -1
    # until the last (QCA).
    modern = phy_modern & ((ts >> 4) == 2) & (ref < 0)
    both = modern[1:] & modern[:-1]
    if both.any():               # (else no pattern joins two frames: ta, ra, tsft unread)
        tsft, ta, ra = col("tsft_us", -2), col("ta", -1), col("ra", -1)
        pair = both & (ta[1:] == ta[:-1]) & (ra[1:] == ra[:-1])
        pattern = (((tsft[1:] == tsft[:-1]) & (tsft[1:] > 0))
                   | ((tsft[1:] == 0) & (tsft[:-1] > 0))
                   | ((tsft[1:] == 0) & (tsft[:-1] == 0))
                   | (tsft[:-1] == TSFT_UNSET))
        joined |= pair & pattern
    start[1:] = ~(same_snf & ~last[:-1] & joined)
    return start


def _reference_ns(frames, sniffer, tsft, g) -> np.ndarray:
    """Per-PPDU timestamp on each sniffer's clock (TSFT in ns, else ts_ns mapped onto it);
    per-frame temporaries :data:`FRAME_CHUNK` rows (or whole PPDUs) at a time."""
    low = np.iinfo(np.int64).min
    # The PPDU's TSFT: the largest valid one (covers the share/first/last patterns).
    best = np.empty(len(g.starts), np.int64)
    bounds = np.r_[g.starts, len(g.order)]
    step = max(1, FRAME_CHUNK // 64)
    for p0 in range(0, len(g.starts), step):
        p1 = min(p0 + step, len(g.starts))
        t = tsft[g.order[bounds[p0]:bounds[p1]]]
        best[p0:p1] = np.maximum.reduceat(np.where(t > 0, t * 1000, low), g.starts[p0:p1] - bounds[p0])
    none = np.flatnonzero(best == low)
    if len(none):                        # PPDUs without a TSFT: their first frame's ts_ns, mapped
        rows = g.first[none]
        best[none] = _np_rows(frames, "ts_ns", 0, rows) + _tsft_offset(frames, sniffer, tsft)(sniffer[rows])
    return best


def _reference_of(frames, sniffer, g) -> np.ndarray:
    """:func:`_reference_ns` with the frames' ``tsft_us``."""
    return _reference_ns(frames, sniffer, _np(frames, "tsft_us", -2), g)


def _own(frames, names):
    """A :class:`Columns` of ``frames``' columns ``names`` for another thread (the caller may
    delete them from ``frames`` meanwhile); None for a DataFrame (read on the caller's thread)."""
    if not isinstance(frames, Columns):
        return None
    return Columns(len(frames), {k: frames.cols[k] for k in names if k in frames.cols})


def _tsft_offset(frames, sniffer, tsft):
    """Per sniffer, the offset TSFT*1000 - ts_ns (median) that maps rows without TSFT onto the
    TSFT clock, as a function of sniffer ids (0 for a sniffer with no TSFT at all: it keeps
    ts_ns); the values read :data:`FRAME_CHUNK` rows at a time."""
    n = len(frames)
    has = tsft > 0
    vals = np.empty(int(np.count_nonzero(has)), np.float64)   # (float64 as pandas' median takes them)
    at = 0
    for lo in range(0, n, FRAME_CHUNK):
        rows = slice(lo, min(lo + FRAME_CHUNK, n))
        v = (tsft[rows] * 1000 - _np_rows(frames, "ts_ns", 0, rows))[has[rows]]
        vals[at:at + len(v)] = v
        at += len(v)
    keys, meds = _median_by_arrays(vals, sniffer[has])
    keys = keys.astype(np.int64)

    def shift(s):
        if not len(keys):
            return np.zeros(len(s), np.int64)
        at = np.minimum(np.searchsorted(keys, s), len(keys) - 1)
        return np.where(keys[at] == s, meds[at], 0.0).astype(np.int64)
    return shift


def group_ppdus(frames: pd.DataFrame, tsft_at="auto", *, stamps: str = "capture",
                keep_bad_fcs: bool = False, release: bool = False, defer: bool = False) -> PpduGrouping | Pending:
    """Group MPDUs into PPDUs and give each its start, end and exact airtime.

    Parameters
    ----------
    frames : pd.DataFrame or mapping
        Frame table (``sniffsync.decode.schema`` columns), frames of each sniffer in
        capture order; or its columns without pandas (:class:`airtime.framecols.Columns`,
        or a dict ``{name: array | (values, valid) | Cat}``, categories as codes + labels).
    tsft_at : {"auto", "start", "end"} or dict
        What the sniffers' timestamps mark; ``"auto"`` decides per sniffer from
        response gaps (see :func:`detect_tsft_at`); a dict gives it per sniffer.
    stamps : {"capture", "end"}
        ``"end"``: the table's stamps already mark PPDU ends (a merged table), so
        ``tsft_at`` is ignored.
    keep_bad_fcs : bool
        Group frames that failed their FCS too (``--keep-bad-fcs``); by default they get
        no PPDU (``frame_ppdu`` -1, :mod:`sniffsync.decode.quality`).
    release : bool
        The caller gives ``frames`` up: the columns only the first steps read are deleted
        from it before the extent estimate, the grouping's peak (a lower memory peak; the
        result is the same).
    defer : bool
        Return a :class:`Pending` once the stamps are decided (``tsft_at`` and
        ``frame_ppdu`` known); its ``finish()`` gives the grouping (the extent estimate,
        ~60 % of the work, may then run beside work that needs only the decision).

    Returns
    -------
    PpduGrouping
        ``(ppdus, frame_ppdu, tsft_at)``; ``ppdus`` (a DataFrame) is built when first read
        (``column(name)`` reads one PPDU column without it, and without pandas).
    """
    if isinstance(frames, dict):
        frames = Columns.of(frames)
    return _group_ppdus(frames, tsft_at, stamps, keep_bad_fcs, release=release, defer=defer)


class Pending(NamedTuple):
    """A grouping up to the stamps' decision (``group_ppdus(defer=True)``): what each sniffer's
    stamps mark and the frame -> PPDU map are known; ``finish()`` estimates the extents and
    builds the table (the costlier half), e.g. on another thread while the stamps are used."""
    tsft_at: dict
    frame_ppdu: np.ndarray
    finish: Callable[[], PpduGrouping]


def _group_ppdus(frames, tsft_at, stamps, keep_bad_fcs, only_if_start=False, release=False,
                 defer=False) -> PpduGrouping | Pending:
    """:func:`group_ppdus`; ``only_if_start``: stop once the stamps are decided when no
    sniffer stamps PPDU starts (``ppdus`` None: aligning them moves nothing); ``defer``:
    a :class:`Pending` once they are decided."""
    if not (tsft_at in ("auto", "start", "end") or isinstance(tsft_at, dict)):
        raise UsageError(f"tsft_at must be auto, start or end, not {tsft_at!r}")
    if stamps not in ("capture", "end"):
        raise UsageError(f"stamps must be capture or end, not {stamps!r}")
    if stamps == "end":
        tsft_at = "end"          # a merged table: the merge already moved every stamp to PPDU ends
    # (good_fcs_mask's rule, fcs_bad null = good, on a DataFrame or columns alike)
    good = np.ones(len(frames), bool) if keep_bad_fcs else ~_np(frames, "fcs_bad", False, bool)
    if not good.all():           # corrupt frames make no PPDU (sniffsync.decode.quality)
        part = frames.take(good) if isinstance(frames, Columns) else frames[good]
        sub = _group_ppdus(part, tsft_at, stamps, False, only_if_start, release, defer)
        rows = np.flatnonzero(good)
        frame_ppdu = np.full(len(frames), -1, np.int64)
        frame_ppdu[rows] = sub.frame_ppdu

        def of_all(sub) -> PpduGrouping:     # (the rows of the good frames' grouping: all frames')
            return PpduGrouping(None if sub.table is None else
                                sub.table.with_column("first_frame", rows[sub.column("first_frame")]),
                                frame_ppdu, sub.tsft_at)
        if isinstance(sub, Pending):
            return Pending(sub.tsft_at, frame_ppdu, lambda: of_all(sub.finish()))
        return of_all(sub)
    sniffer = _np(frames, "sniffer", 0, np.int32)        # (held through the grouping: 4 bytes a frame)
    g = _groups(frames, sniffer)
    # each PPDU's reference time on a thread of its own, beside the first MPDUs' columns, the
    # lengths and TXTIMEs (it reads its own view of two columns: they may leave ``frames``)
    own = _own(frames, ("ts_ns", "tsft_us"))
    with pool(2, limit=1) if own is not None else Inline() as ex:
        ref = ex.submit(_reference_of, frames if own is None else own, sniffer, g)
        del own
        phy = _cat(frames, "phy", "unknown")

        def at(name, fill, dtype=np.int64):
            return _np_rows(frames, name, fill, g.first, dtype)

        freq = at("freq_mhz", 5180)
        # the first MPDU's PHY parameters, gathered once (the extent asks for more TXTIMEs)
        # (those only TXTIME reads held narrow: it casts them to int64, the same values)
        phy_args = dict(rate_kbps=at("rate_kbps", -1), mcs=at("mcs", -1), nss=_narrow(at("nss", 1)),
                        bw_mhz=_narrow(at("bw_mhz", -1)), gi_ns=_narrow(at("gi_ns", 800)), ldpc=at("ldpc", 0, bool),
                        stbc=_narrow(at("stbc", 0)), short_preamble=at("short_preamble", 0, bool),
                        ht_format=_cat_rows(frames, "ht_format", "mf", g.first),
                        ness=_narrow(at("ness", 0)), freq_mhz=freq,
                        he_format=_cat_rows(frames, "he_format", "su", g.first),
                        he_ltf_size=_narrow(at("he_ltf_size", 2)), he_n_ltf=_narrow(at("he_n_ltf", 0)))
        table = first_columns(frames, g)
        kind = kind_codes(at("type_subtype", -1))
        snf = sniffer[g.first].astype(np.int64)
        ta, ra = at("ta", -1), at("ra", -1)
        if release:                  # what only the boundaries and the first MPDUs were read for
            _keep_only(frames, EXTENT_READS | MPDU_READS | {"tsft_us", "ts_ns"})
        mpdu = mpdu_bytes(frames)
        psdu = _psdu_bytes(mpdu, frames, g, phy)
        if len(mpdu) and -np.iinfo(np.int32).max <= mpdu.min() and mpdu.max() <= np.iinfo(np.int32).max:
            mpdu = mpdu.astype(np.int32)              # held through the extent: 4 bytes a frame
        if release:
            _keep_only(frames, EXTENT_READS | {"tsft_us", "ts_ns"})
        phy_first = phy[g.first]
        del phy

        def txtime(psdu_bytes, rows=None):
            """TXTIME of each PPDU (or of PPDUs ``rows``) for a PSDU length, with its first MPDU's
            PHY parameters."""
            if rows is None:
                return ppdu_duration_ns(phy_first, psdu_bytes, **phy_args)
            return ppdu_duration_ns(phy_first[rows], psdu_bytes, **{k: v[rows] for k, v in phy_args.items()})

        airtime = txtime(psdu)
        if release:
            _keep_only(frames, EXTENT_READS | {"ts_ns"})
        t_ns = ref.result()
    if release:                  # the rest is per PPDU, but for the extent's own columns
        _keep_only(frames, EXTENT_READS)
        del sniffer
        g = g._replace(order=None)
    decided = _decide_tsft_at(tsft_at, snf, t_ns, airtime, kind, ta, ra, freq)
    if only_if_start and "start" not in decided.values():
        return PpduGrouping(None, g.frame_ppdu, decided)
    ends_here = np.isin(snf, [s for s, v in decided.items() if v == "end"])
    # the extent of cut A-MPDUs from the other sources (airtime.extent); unknown airtime: zero-length
    clock = np.zeros_like(snf) if stamps == "end" else snf        # a merged table: one clock
    cols = PpduCols(t_ns, ends_here, airtime, kind, ta, ra, clock, freq, phy_first,
                    phy_args["mcs"], phy_args["rate_kbps"], g.first)
    held = [mpdu]                # (freed once the extent is estimated, as before the table)
    del mpdu

    def finish() -> PpduGrouping:
        ext = estimate_extent(frames, g.frame_ppdu, cols, psdu, txtime, _K, held.pop())
        ppdus = ppdu_table(table, g, snf, ext.start_ns, ext.end_ns, ext.airtime_ns, kind, psdu)
        ppdus.cols.update(captured_airtime_ns=airtime, complete=ext.complete, extent_src=ext.source)
        return PpduGrouping(ppdus, g.frame_ppdu, decided)
    return Pending(decided, g.frame_ppdu, finish) if defer else finish()


def _narrow(v: np.ndarray) -> np.ndarray:
    """int64 ``v`` in the narrowest signed integer holding its values (the same values)."""
    if not len(v):
        return v
    lo, hi = int(v.min()), int(v.max())
    for t in (np.int8, np.int16, np.int32):
        if np.iinfo(t).min <= lo and hi <= np.iinfo(t).max:
            return v.astype(t)
    return v


class _InOrder:
    """The row order 0..n-1 (frames already in sniffer order) without its n-row array."""

    def __init__(self, n: int):
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, rows):
        if isinstance(rows, slice):          # a slice: numpy and _np_rows read it without a gather
            return slice(*rows.indices(self.n))
        return np.array(rows, np.int64)


class _Groups(NamedTuple):
    order: np.ndarray          # frame rows in (sniffer, capture) order (or :class:`_InOrder`)
    starts: np.ndarray         # positions in ``order`` where a PPDU begins
    first: np.ndarray          # frame row of each PPDU's first / last MPDU
    last: np.ndarray
    counts: np.ndarray         # MPDUs per PPDU
    frame_ppdu: np.ndarray


def _groups(frames, sniffer) -> _Groups:
    """PPDU boundaries: frames in capture order per sniffer, cut by :func:`_group_starts`."""
    n = len(frames)
    # (frames already in sniffer order, e.g. one sniffer: the stable sort is the identity)
    order = _InOrder(n) if (sniffer[1:] >= sniffer[:-1]).all() else np.lexsort((np.arange(n), sniffer))
    if "merged_id" in frames and "frame" in frames:
        # A merged table is in common-time order and the subframes of one A-MPDU share
        # that time: restore their capture order (the last-subframe flag ends a PPDU).
        order = np.lexsort((_np(frames, "frame", 0), _np(frames, "ts_ns", 0), sniffer))
    start_mask = _group_starts(frames, order, sniffer)
    ids = np.cumsum(start_mask, dtype=np.int64)
    ids -= 1                                     # (in place: one per-frame temporary)
    if isinstance(order, _InOrder):
        frame_ppdu = ids                         # rows already in order
    else:
        frame_ppdu = np.empty(n, np.int64)
        frame_ppdu[order] = ids
        del ids
    starts = np.flatnonzero(start_mask)
    first = order[starts]
    last = order[np.r_[starts[1:], n] - 1] if n else first
    return _Groups(order, starts, first, last, np.diff(np.r_[starts, n]), frame_ppdu)


def _psdu_bytes(L, frames, g: _Groups, phy: pd.Categorical) -> np.ndarray:
    """PSDU length per PPDU: A-MPDU subframes are delimiter (4) + MPDU padded to 4, except
    the last; -1 when a frame's length is unknown."""
    if not len(g.order):
        return np.zeros(0, np.int64)
    first, last = g.first, g.last
    aggregated = (_np_rows(frames, "ampdu_ref", -1, first) >= 0) | _cat_in(phy, ("vht", "he"))[first]
    # padded subframe (4 + L rounded up to 4) summed per PPDU, in one temporary
    padded = L + 7
    padded //= 4
    padded *= 4
    psdu_agg = _group_sum(padded, g) - padded[last] + (4 + L[last])
    del padded
    is_agg = aggregated | (g.counts > 1)
    bad_len = _group_sum(L < 0, g) > 0
    return np.where(bad_len, -1, np.where(is_agg, psdu_agg, L[first])).astype(np.int64, copy=False)


def align_to_ppdu_end(frames: pd.DataFrame, tsft_at="auto", grouped: PpduGrouping | None = None, *,
                      stamps: str = "capture") -> tuple[pd.DataFrame, dict]:
    """Copy of ``frames`` whose ``ts_ns``/``tsft_us`` mark the END of each frame's PPDU.

    Sniffers disagree on what TSFT marks (radiotap says the first bit; ns-3 and many
    drivers stamp the end). Before the copies of one transmission heard by several
    sniffers can be matched in time, every sniffer must mean the same instant: this
    moves start-stamping sniffers forward by each PPDU's computed airtime. ``grouped``
    is an already computed :func:`group_ppdus` result (callers that also need the PPDU
    table pass it to avoid grouping twice).

    Returns
    -------
    (frames, tsft_at)
        The moved copy and the per-sniffer decision ``{sniffer: "start" | "end"}``.
    """
    if grouped is None:                  # the PPDU extents only when some stamps move
        grouped = _group_ppdus(frames, tsft_at, stamps, False, only_if_start=True)
    shift = ppdu_end_shift_ns(_np(frames, "sniffer", 0), grouped)
    out = frames.copy(deep=False)
    out["ts_ns"] = frames["ts_ns"].to_numpy(np.int64) + shift
    if "tsft_us" in frames:
        out["tsft_us"] = frames["tsft_us"] + np.rint(shift / 1000).astype(np.int64)
    return out, grouped.tsft_at


def ppdu_end_shift_ns(sniffer: np.ndarray, grouped: PpduGrouping) -> np.ndarray:
    """Per frame, what :func:`align_to_ppdu_end` adds to its stamp (int64 ns): its PPDU's
    airtime on a sniffer that stamps starts, else 0 (frames in no PPDU stay)."""
    frame_ppdu, conv = grouped.frame_ppdu, grouped.tsft_at
    starts = np.array([s for s, c in conv.items() if c == "start"], np.int64)
    shift = np.zeros(len(frame_ppdu), np.int64)
    if not len(starts):
        return shift
    air = grouped.column("airtime_ns", np.int64, -1)
    move = np.isin(sniffer, starts) & (frame_ppdu >= 0)      # frames in no PPDU (bad FCS) stay
    shift[move] = np.maximum(air[frame_ppdu[move]], 0)
    return shift
