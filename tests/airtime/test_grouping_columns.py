"""``group_ppdus`` on a column mapping (numpy values + valid masks, categories as codes +
labels: :class:`airtime.framecols.Columns`, what the ``fairness`` command passes, no pandas)
gives the same PPDU table, frame -> PPDU map and stamp decision as on the frame-table
DataFrame, on ns-3 captures (cut A-MPDUs: Block-Ack, NAV, response and copies sources;
HT, VHT, HE; one sniffer and three merged) and with frames of bad FCS; the reader's narrow
columns (:func:`sniffsync.fairness.lean.read_lean`) group the same. The DataFrame grouping
itself is judged by ns-3's truth and tshark elsewhere (tests/airtime)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import airtime.ppdu as P
from airtime.columns import GROUPING_COLUMNS
from airtime.framecols import Columns
from sniffsync.decode.frames import read_capture
from sniffsync.decode.table import Cat

D = "tests/data/captures/"
CAPTURES = {"cut A": D + "ns3-hidden-cut/snifferA.pcap.gz", "cut B": D + "ns3-hidden-cut/snifferB.pcap.gz",
            "cut C": D + "ns3-hidden-cut/snifferC.pcap.gz", "vht80": D + "ns3-11ac-vht80-snifferA-s256.pcap",
            "he80": D + "ns3-11ax-he80-snifferA-s256.pcap"}


@pytest.fixture(scope="module")
def tables(request):
    return {k: read_capture(str(request.config.rootpath / p), sniffer=i)[list(GROUPING_COLUMNS)]
            for i, (k, p) in enumerate(CAPTURES.items())}


def _mapping(frames: pd.DataFrame) -> dict:
    """The table as ``{name: (values, valid) | Cat | array}`` (no pandas object left)."""
    out = {}
    for name in frames.columns:
        col = frames[name]
        if isinstance(col.dtype, pd.CategoricalDtype):
            out[name] = Cat(col.cat.codes.to_numpy(), list(col.cat.categories))
        elif col.hasnans:
            out[name] = (col.to_numpy(col.dtype.numpy_dtype, na_value=0), col.notna().to_numpy())
        else:
            out[name] = col.to_numpy(getattr(col.dtype, "numpy_dtype", col.dtype))
    return out


def _same(got, want):
    pd.testing.assert_frame_equal(got.ppdus, want.ppdus)
    np.testing.assert_array_equal(got.frame_ppdu, want.frame_ppdu)
    assert got.tsft_at == want.tsft_at


@pytest.mark.parametrize("name, tsft_at", [("cut A", "auto"), ("cut B", "start"), ("vht80", "auto"),
                                           ("he80", "end")])
def test_mapping_groups_as_the_table(tables, name, tsft_at):
    frames = tables[name]
    want = P.group_ppdus(frames, tsft_at)
    got = P.group_ppdus(_mapping(frames), tsft_at)
    for c in ("airtime_ns", "start_ns", "ta"):          # read before the table is built
        np.testing.assert_array_equal(got.column(c), want.ppdus[c].to_numpy(np.int64, na_value=-1))
    _same(got, want)
    released = P.group_ppdus(Columns.of(_mapping(frames)), tsft_at, release=True)
    _same(released, want)
    assert (want.ppdus["extent_src"] != "captured").any() or name != "cut A"   # the extent sources ran


def test_merged_sniffers_and_bad_fcs(tables):
    frames = pd.concat([tables[k] for k in ("cut A", "cut B", "cut C")], ignore_index=True)
    frames = frames.sort_values("ts_ns", kind="stable", ignore_index=True)   # sniffers interleaved
    for c in frames.columns[frames.dtypes == object]:    # (categories the captures did not share)
        frames[c] = frames[c].astype("category")
    bad = frames["fcs_bad"].copy()
    bad.iloc[::17] = True                                # (hand-marked: no PPDU for them)
    frames["fcs_bad"] = bad
    want = P.group_ppdus(frames)
    assert (want.frame_ppdu == -1).sum() == bad.sum() and len(want.tsft_at) == 3
    _same(P.group_ppdus(_mapping(frames)), want)


def test_narrow_reader_columns(request):
    from sniffsync.decode.frames import read_columns
    from sniffsync.fairness.lean import read_lean
    path = str(request.config.rootpath / CAPTURES["cut B"])
    n, cols, marks = read_lean(path, list(GROUPING_COLUMNS))
    want = P.group_ppdus(read_capture(path)[list(GROUPING_COLUMNS)])
    _same(P.group_ppdus(Columns(n, cols), release=True), want)
    n, cols, _ = read_columns(path, 0, list(GROUPING_COLUMNS), records=False)[1:]   # the reader's own
    _same(P.group_ppdus(Columns(n, cols)), want)


def _previous_ba_pandas(ctx):
    """The previous Block-Ack by ``pd.merge_asof`` (what airtime.extent_ba did before numpy)."""
    from airtime.extent_ba import _key
    c, n = ctx.c, len(ctx.data)
    out, t_out = np.full(n, -1, np.int64), np.full(n, np.iinfo(np.int64).min, np.int64)
    ba, d = np.flatnonzero(c.kind == ctx.kc["ba"]), np.flatnonzero(ctx.data)
    q = pd.DataFrame({"k": _key(c.ta[d], c.ra[d], c.clock[d]), "t": ctx.start[d], "i": d})
    b = pd.DataFrame({"k": _key(c.ra[ba], c.ta[ba], c.clock[ba]), "t": ctx.start[ba],
                      "row": c.first_frame[ba], "t_ba": c.t_ns[ba]})
    m = pd.merge_asof(q.sort_values("t"), b.sort_values("t"), on="t", by="k", allow_exact_matches=False)
    i = m["i"].to_numpy()
    out[i] = m["row"].fillna(-1).to_numpy(np.int64)
    t_out[i] = m["t_ba"].fillna(np.iinfo(np.int64).min).to_numpy(np.int64)
    return out, t_out


def test_previous_ba_is_merge_asof():
    from types import SimpleNamespace as NS
    from airtime.extent_ba import _previous_ba
    rng = np.random.default_rng(5)
    for n in (1, 50, 2000):
        kind = rng.choice([5, 7, 0], n)                   # ba, data, other
        start = rng.permutation(n) * 2                    # the BAs' stamps distinct (pandas sorts unstably)
        ba, data = np.flatnonzero(kind == 5), np.flatnonzero(kind == 7)
        if len(ba):                                       # some data PPDUs stamped with a BA: not "before" it
            start[data[::5]] = start[rng.choice(ba, len(data[::5]))]
        c = NS(kind=kind, ta=rng.integers(0, 3, n), ra=rng.integers(0, 3, n), clock=rng.integers(0, 2, n),
               first_frame=rng.permutation(n), t_ns=start + 5)
        ctx = NS(c=c, data=kind == 7, start=start, kc={"ba": 5})
        got, want = _previous_ba(ctx), _previous_ba_pandas(ctx)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
        assert n < 2000 or (got[0] >= 0).sum() > 100          # (matches found)


def test_cat_in_is_isin_on_labels_and_categoricals():
    """``framecols._cat_in`` (a lookup table over the codes): the rows whose label is one
    of those asked for; nulls (code -1) and labels asked for but absent match nothing."""
    from airtime.framecols import Labels, _cat_in
    codes, cats = np.array([0, 1, 2, -1, 1, 2], np.int8), ["ht", "legacy", "he"]
    want = [True, False, True, False, False, True]
    assert _cat_in(Labels(codes, cats), ("ht", "he", "vht")).tolist() == want
    assert _cat_in(pd.Categorical.from_codes(codes, cats), ("he", "ht")).tolist() == want
    assert not _cat_in(Labels(codes, cats), ()).any()


@pytest.mark.parametrize("name", ["cut A", "cut C", "he80"])
def test_timing_columns_place_the_ppdus_alike(tables, name):
    """``airtime.columns.TIMING_COLUMNS`` (what the fairness command reads): the same PPDUs,
    starts, ends, airtimes and extent sources as with every grouping column; only the table's
    ``signal_dbm`` is then unknown (a column the grouping starts reading for its times would
    have to be listed there, or this fails)."""
    from airtime.columns import TIMING_COLUMNS
    frames = tables[name]
    want = P.group_ppdus(_mapping(frames))
    got = P.group_ppdus(Columns.of(_mapping(frames[list(TIMING_COLUMNS)])), release=True)
    np.testing.assert_array_equal(got.frame_ppdu, want.frame_ppdu)
    assert got.tsft_at == want.tsft_at
    pd.testing.assert_frame_equal(got.ppdus.drop(columns="signal_dbm"), want.ppdus.drop(columns="signal_dbm"))
    assert got.ppdus["signal_dbm"].isna().all() and want.ppdus["signal_dbm"].notna().any()
