"""The fairness command's narrow 802.11 columns (sniffsync.fairness.lean): the same values
as the frame table, and the same report bytes as before they were narrowed."""
from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

from sniffsync.cli.fairness import COLUMNS
from sniffsync.decode.frames import read_columns
from sniffsync.decode.table import Cat, frame_table
from sniffsync.fairness.lean import lean_frame, narrow, read_lean

DATA = os.path.join(os.path.dirname(__file__), "..", "data")
CAP = os.path.join(DATA, "captures", "ns3-11n-ht20-hidden-sniffer{}.pcap")
SNIFFERS = ("A-nearAP", "B-nearSTA1", "C-nearSTA2")


@pytest.fixture(scope="module")
def both():
    path = CAP.format("A-nearAP")
    _, n, cols, marks = read_columns(path, 0, COLUMNS, records=False)
    return (n, cols, marks), read_lean(path, COLUMNS)


def test_narrow_columns_hold_the_frame_tables_values(both):
    (n, cols, marks), (n2, lean, marks2) = both
    assert n2 == n and [r.tolist() for r, _ in marks2] == [r.tolist() for r, _ in marks]
    names = [c for c in COLUMNS if c in cols] + ["bad"]
    wide, thin = frame_table(n, cols, marks, names), lean_frame(n2, lean, marks2, names)
    assert list(thin.columns) == list(wide.columns)
    for c in wide.columns:
        w, t = wide[c], thin[c]
        if isinstance(w.dtype, pd.CategoricalDtype):
            assert w.astype(object).equals(t.astype(object)), c
            continue
        assert (w.isna().to_numpy() == t.isna().to_numpy()).all(), c
        kind = np.uint64 if w.dtype.name.lower() == "uint64" else np.int64
        assert np.array_equal(w.to_numpy(kind, na_value=0), t.to_numpy(kind, na_value=0)), c
    widths = {c: (np.asarray(v.codes) if isinstance(v, Cat) else v).itemsize for c, (v, _) in lean.items()}
    assert widths["ampdu_ref"] < 8 and widths["rt_len"] == 1 and widths["phy"] == 1 and widths["frame"] < 8
    assert sum(widths.values()) < 0.6 * sum((np.asarray(v.codes) if isinstance(v, Cat) else np.asarray(v)).itemsize
                                            for v, _ in cols.values())


def test_narrow_keeps_signedness_and_drops_all_valid_masks():
    out = narrow({"signal_dbm": (np.array([-90, 10], np.int64), np.array([True, True])),
                  "tcp_seq": (np.array([0, 2**32 - 1], np.uint64), np.array([True, False])),
                  "mpdu_len": (np.array([14, 40000], np.int64), None)})
    assert out["signal_dbm"][0].dtype == np.int8 and out["signal_dbm"][1] is None
    assert out["tcp_seq"][0].dtype == np.uint32 and out["tcp_seq"][1].tolist() == [True, False]
    assert out["mpdu_len"][0].dtype == np.int32 and out["mpdu_len"][0].tolist() == [14, 40000]


@pytest.mark.parametrize("sniffer", SNIFFERS)
def test_report_bytes_unchanged(sniffer, tmp_path):
    from sniffsync.cli.main import main
    out = tmp_path / "r.json"
    assert main(["fairness", CAP.format(sniffer), "-o", str(out)]) == 0
    with open(os.path.join(DATA, "fairness_reports", f"ns3-11n-ht20-hidden-sniffer{sniffer}.json"), "rb") as fh:
        assert out.read_bytes() == fh.read()


def test_consumed_columns_move_into_the_table(both):
    _, (n, lean, marks) = both
    cols = {k: (v, None if ok is None else ok.copy()) for k, (v, ok) in lean.items()}
    names = ["seq", "tsft_us", "ta"]
    ref = lean_frame(n, cols, marks, names)
    got = lean_frame(n, cols, marks, names, consume={"seq", "ta"})
    assert "seq" not in cols and "ta" not in cols and "tsft_us" in cols
    assert ref["seq"].isna().any()
    for c in names:
        assert ref[c].equals(got[c]), c


def test_batches_of_any_width_give_the_narrowest_column(both, monkeypatch):
    """Read in batches of 256 frames (their widths differ: e.g. ``frame``): every integer
    column is as narrow as its values allow, whether its batches had one width (no scan)
    or several (narrowed at the end), and holds the values of the one-batch read."""
    import sniffsync.fairness.lean as L
    _, (n, one, marks) = both
    monkeypatch.setattr(L, "LEAN_ROWS", 256)
    n2, cols, _ = read_lean(CAP.format("A-nearAP"), COLUMNS)
    assert n2 == n > 4 * 256
    ints = [c for c, (v, _) in cols.items() if not isinstance(v, Cat) and np.asarray(v).dtype.kind in "iu"]
    assert "frame" in ints and len(ints) > 20
    for c in ints:
        v = np.asarray(cols[c][0])
        assert v.dtype == L._smallest(v) or v.dtype.itemsize == 1, c
        np.testing.assert_array_equal(v, np.asarray(one[c][0]), c)
