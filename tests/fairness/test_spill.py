"""Columns parked on disk while the PPDUs are grouped (sniffsync.fairness.spill): they come
back with the values, masks and nulls the in-memory columns hold, one by one as read."""
from __future__ import annotations

import os

import numpy as np
import pytest

from sniffsync.cli.fairness import COLUMNS
from sniffsync.decode.table import Cat, ColumnSink, as_cat
from sniffsync.fairness.capture import PPDU_AND_TCP, TCP_ONLY
from sniffsync.fairness.lean import read_lean
from sniffsync.fairness.spill import Spill, SpilledCols

CAP = os.path.join(os.path.dirname(__file__), "..", "data", "captures", "ns3-11n-ht20-hidden-snifferA-nearAP.pcap")

BATCHES = [  # widths change between batches, masks come and go, a column misses a batch
    ({"a": (np.array([1, -2, 3], np.int8), None),
      "b": (np.array([7, 8, 9], np.uint16), np.array([1, 0, 1], bool)),
      "c": (np.array([0.5, 1.5, 2.5]), None)}, 3),
    ({"a": (np.array([300, 4], np.int16), None), "c": (np.array([3.5, 4.5]), None)}, 2),
    ({"a": (np.array([5], np.int8), np.array([False])), "b": (np.array([70000], np.uint32), None),
      "c": (np.array([5.5]), None)}, 1),
]


def _batches():
    return [({k: (v.copy(), None if ok is None else ok.copy()) for k, (v, ok) in cols.items()}, k) for cols, k in BATCHES]


def test_spilled_columns_come_back_as_the_sink_holds_them():
    sink, spill = ColumnSink(), Spill({"a", "b"}, copy={"c"})
    want = ColumnSink()
    for cols, k in _batches():
        want.add({name: col for name, col in cols.items()}, k)
        spill.add(cols, k)
        assert "a" not in cols and "c" in cols          # parked / copied and kept
        sink.add(cols, k)
    want = want.result()
    for name in ("a", "b", "c"):
        v, ok = spill.load(name)
        wv, wok = want[name]
        assert v.dtype == wv.dtype and v.tolist() == wv.tolist(), name
        assert (ok is None) == (wok is None) and (ok is None or ok.tolist() == wok.tolist()), name
    assert spill.load("b")[1].tolist() == [True, False, True, False, False, True]   # missed batch: null


def test_spilled_cols_read_back_one_by_one_and_again_after_a_pop():
    spill = Spill({"a"}, copy={"c"})
    for cols, k in _batches():
        spill.add(cols, k)
    cols = SpilledCols({"c": (np.zeros(6), None)}, spill, finish=lambda name, col: (col[0] * 2, col[1]))
    assert "a" in cols and dict.__contains__(cols, "a") is False      # parked, not read yet
    assert cols["a"][0].tolist() == [2, -4, 6, 600, 8, 10]              # read back, finished
    assert cols.pop("c")[0].tolist() == [0] * 6                          # the in-memory copy first
    assert cols.get("c")[0].tolist() == [1, 3, 5, 7, 9, 11]             # then the parked one
    assert cols.get("zz", 5) == 5 and "zz" not in cols
    fresh = SpilledCols({}, spill)
    spill.load = None                    # a parked column freed by del is never read back
    del fresh["a"], fresh["c"]
    assert "a" not in fresh and "c" not in fresh
    with pytest.raises(KeyError):
        del fresh["zz"]


@pytest.fixture(scope="module")
def lean_both():
    """One capture read narrow in one batch, and in batches of 500 frames with columns parked."""
    import functools

    import sniffsync.decode.frames as F
    import sniffsync.fairness.lean as lean
    whole = read_lean(CAP, COLUMNS)
    mp = pytest.MonkeyPatch()
    mp.setattr(F, "iter_columns", functools.partial(F.iter_columns, batch_rows=500, chunk_rows=500))
    mp.setattr(lean, "LEAN_ROWS", 500)        # (read_lean's own batch size)
    try:
        batched = read_lean(CAP, COLUMNS, spill=TCP_ONLY, spill_copy=PPDU_AND_TCP)
    finally:
        mp.undo()
    assert batched[1].spill.n == whole[0] and len(batched[1].spill.parts["tcp_seq"]) > 3   # several batches
    return whole, batched


def test_read_lean_with_parked_columns_is_read_lean(lean_both):
    (n, cols, marks), (n2, parked, marks2) = lean_both
    assert n2 == n and len(marks2) == len(marks) and TCP_ONLY and PPDU_AND_TCP
    assert not TCP_ONLY & dict.keys(parked) and PPDU_AND_TCP <= dict.keys(parked)   # not held
    assert set(cols) == set(parked) | parked.parked
    for name, (v, ok) in cols.items():
        pv, pok = parked[name]
        if isinstance(v, Cat):                     # (batches list the categories in another order)
            v, pv = (np.append(np.asarray(c.categories, object), None)[np.asarray(c.codes)]
                     for c in (as_cat(v, ok), as_cat(pv, pok)))
            ok = pok = None
        valid = np.ones(n, bool) if ok is None else ok
        assert np.array_equal(valid, np.ones(n, bool) if pok is None else pok), name
        assert np.array_equal(v[valid], pv[valid]), name


def test_a_full_temporary_disk_is_one_clear_error(monkeypatch):
    import tempfile

    def full(*a, **k):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(tempfile, "TemporaryFile", full)
    with pytest.raises(OSError, match="temporary file .*TMPDIR.*No space left"):
        Spill({"a"}).add(_batches()[0][0], 3)


def test_parked_columns_read_by_two_threads_at_once_come_back_whole():
    """Flow groups on threads peek the same parked columns together: each read seeks the
    one temporary file, so reads must not interleave (they did: other columns' bytes)."""
    import threading
    names = [f"c{i}" for i in range(8)]
    spill = Spill(set(names))
    for b in range(64):
        spill.add({name: (np.arange(b * 500, b * 500 + 500) * (i + 1), None) for i, name in enumerate(names)}, 500)
    cols = SpilledCols({}, spill)
    start, got = threading.Barrier(2), {}

    def read(t):
        start.wait()
        got[t] = [cols[name][0] for name in (names if t else names[::-1])]
    threads = [threading.Thread(target=read, args=(t,)) for t in (0, 1)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for i, name in enumerate(names):
        want = np.arange(64 * 500) * (i + 1)
        assert np.array_equal(got[1][i], want) and np.array_equal(got[0][len(names) - 1 - i], want), name


def test_batches_parked_out_of_order_from_threads_come_back_in_row_order():
    """Batches are parked on the decoding workers as they finish: any order, any thread."""
    import threading
    inorder, shuffled = Spill({"a", "b"}, copy={"c"}), Spill({"a", "b"}, copy={"c"})
    row0s = np.cumsum([0] + [k for _, k in BATCHES[:-1]])
    for cols, k in _batches():
        inorder.add(cols, k)
    threads = [threading.Thread(target=shuffled.add, args=(cols, k, int(r0)))
               for (cols, k), r0 in reversed(list(zip(_batches(), row0s)))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert shuffled.n == inorder.n == 6
    for name in ("a", "b", "c"):
        (v, ok), (wv, wok) = shuffled.load(name), inorder.load(name)
        assert v.dtype == wv.dtype and v.tolist() == wv.tolist(), name
        assert (ok is None) == (wok is None) and (ok is None or ok.tolist() == wok.tolist()), name


def test_category_codes_numbered_in_file_order_whatever_the_batch_order():
    """Workers number a batch's categories as it finishes; the final numbering is the one
    a reading in file order gives (first seen first), so results do not depend on timing."""
    from sniffsync.fairness.lean import _Codes
    batches = [(0, Cat(np.array([0, 1, -1, 1], np.int8), ["x", "y"])),
               (4, Cat(np.array([1, 0, 2], np.int8), ["y", "z", "w"])),
               (7, Cat(np.array([0, 1], np.int8), ["v", "x"]))]
    want = ["x", "y", None, "y", "z", "y", "w", "v", "x"]
    for order in ([0, 1, 2], [2, 1, 0], [1, 2, 0]):
        codes, got = _Codes(), {}
        for i in order:
            row0, cat = batches[i]
            got[row0] = codes.remap("ip_src", cat, row0)
        cats, perm = codes.final()["ip_src"]
        assert cats == ["x", "y", "z", "w", "v"], order
        allc = np.concatenate([got[r] for r, _ in batches])
        allc = allc if perm is None else perm[allc]
        assert [None if c < 0 else cats[c] for c in allc] == want, order


class _Recorded(Spill):
    made = []

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        _Recorded.made.append(self)


@pytest.fixture
def recorded(monkeypatch):
    import sniffsync.fairness.spill as spill_mod
    _Recorded.made = []
    monkeypatch.setattr(spill_mod, "Spill", _Recorded)
    return _Recorded.made


def test_a_read_failing_midway_closes_its_parked_columns(recorded, monkeypatch):
    import functools

    import sniffsync.decode.frames as F
    import sniffsync.fairness.lean as lean
    monkeypatch.setattr(F, "iter_columns", functools.partial(F.iter_columns, batch_rows=500, chunk_rows=500))
    monkeypatch.setattr(lean, "LEAN_ROWS", 500)
    calls, narrow = [], lean.narrow

    def failing(cols):                       # the third batch fails on its worker
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("injected")
        return narrow(cols)
    monkeypatch.setattr(lean, "narrow", failing)
    with pytest.raises(RuntimeError, match="injected"):
        read_lean(CAP, COLUMNS, spill=TCP_ONLY, spill_copy=PPDU_AND_TCP)
    (spill,) = recorded
    assert spill.parts and spill.closed and spill.file is None    # parked some, then deleted


@pytest.mark.parametrize("fail", [False, True])
def test_the_fairness_command_closes_its_parked_columns(recorded, monkeypatch, tmp_path, fail):
    """After the analysis (or its failure) the temporary file is deleted, not left to the GC."""
    from sniffsync.cli.main import main
    from sniffsync.errors import NoDataError
    if fail:
        def boom(*a, **k):
            raise NoDataError("injected")
        monkeypatch.setattr("sniffsync.fairness.core.run_tables", boom)
        with pytest.raises(NoDataError):     # (--traceback: the frames, and the reader, stay alive)
            main(["fairness", CAP, "-o", str(tmp_path / "r.json"), "--traceback"])
    else:
        assert main(["fairness", CAP, "-o", str(tmp_path / "r.json")]) == 0
    (spill,) = recorded
    assert spill.parts and spill.closed and spill.file is None
