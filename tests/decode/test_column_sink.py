"""ColumnSink (chunks copied into columns allocated once) against concat_cols (the oracle)."""
import numpy as np
import pytest

from sniffsync.decode.table import Cat, ColumnSink, concat_cols


def _chunk(rng, k, present, dtypes):
    cols = {}
    for name in present:
        if name == "addr":
            cats = list(rng.choice(["a", "b", "c", "d"], size=rng.integers(1, 4), replace=False))
            cols[name] = (Cat(rng.integers(-1, len(cats), k).astype(np.int32), cats),
                          rng.random(k) < 0.8 if rng.random() < 0.5 else None)
        else:
            v = rng.integers(0, 1000, k).astype(dtypes[name])
            cols[name] = (v, (rng.random(k) < 0.7) if rng.random() < 0.5 else None)
    return cols


def _same(a, b):
    assert list(a) == list(b)
    for name in a:
        (va, oa), (vb, ob) = a[name], b[name]
        if isinstance(vb, Cat):
            assert isinstance(va, Cat)
            va, vb = np.asarray(va), np.asarray(vb)
        va, vb = np.asarray(va), np.asarray(vb)
        assert va.dtype == vb.dtype, name
        assert np.array_equal(va, vb), name          # null rows are zero/None in both
        # no mask means every row valid (the sink drops masks that are all True)
        oa = np.ones(len(va), bool) if oa is None else np.asarray(oa)
        ob = np.ones(len(vb), bool) if ob is None else np.asarray(ob)
        assert np.array_equal(oa, ob), name


def test_sink_drops_all_valid_masks_until_a_null_comes():
    sink = ColumnSink(8)
    sink.add({"a": (np.array([1, 2]), np.array([True, True]))}, 2)
    assert sink.result()["a"][1] is None
    sink.add({"a": (np.array([3]), np.array([False]))}, 1)
    sink.add({"a": (np.array([4]), np.array([True]))}, 1)
    assert sink.result()["a"][1].tolist() == [True, True, False, True]


@pytest.mark.parametrize("seed", range(40))
def test_sink_equals_concat(seed):
    rng = np.random.default_rng(seed)
    names = ["x", "y", "z", "addr"]
    chunks = []
    for _ in range(rng.integers(1, 7)):
        k = int(rng.integers(0, 300))
        present = [c for c in names if rng.random() < 0.75] or ["x"]
        dtypes = {"x": np.int64, "y": rng.choice([np.uint8, np.int16, np.int32]),
                  "z": rng.choice([np.float32, np.int64])}
        chunks.append((_chunk(rng, k, present, dtypes), k))
    # a small capacity forces growth (copy of the rows so far) on most seeds
    sink = ColumnSink(int(rng.integers(0, 200)))
    for cols, k in chunks:
        sink.add(dict(cols), k)
    assert sink.n == sum(k for _, k in chunks)
    _same(sink.result(), concat_cols([c for c, _ in chunks]))


def test_sink_promotes_and_nulls_late_columns():
    sink = ColumnSink(4)
    sink.add({"a": (np.array([1, 2], np.uint8), None)}, 2)
    sink.add({"a": (np.array([300], np.int16), None), "b": (np.array([7], np.int32), None)}, 1)
    sink.add({"b": (np.array([8, 9], np.int32), np.array([True, False]))}, 2)
    out = sink.result()
    assert out["a"][0].dtype == np.int16 and out["a"][0].tolist() == [1, 2, 300, 0, 0]
    assert out["a"][1].tolist() == [True, True, True, False, False]
    assert out["b"][0].tolist() == [0, 0, 7, 8, 9]
    assert out["b"][1].tolist() == [False, False, True, True, False]


def test_read_columns_matches_concatenated_batches(captures):
    """A capture read in many batches: the sink's columns equal the concatenated batches."""
    import sniffsync.decode.frames as fr
    src = captures / "ns3-11ac-vht80-snifferA-s256.pcap"
    parts, n = [], 0
    for rec, k, cols, _m in fr.iter_columns(src, 0, None, batch_rows=1000):   # 13 batches of 12,045
        parts.append(cols)
        n += k
    _rec, n2, cols2, _m = fr.read_columns(src, 0, None, records=False, batch_rows=1000)
    assert len(parts) > 5 and n2 == n
    _same(cols2, concat_cols(parts))


def test_inline_pool_runs_at_once_and_raises_from_result():
    from sniffsync.runtime import Inline
    calls = []
    with Inline() as pool:
        fut = pool.submit(lambda a, b=0: calls.append(a + b) or a + b, 2, b=3)
        assert calls == [5] and fut.done() and fut.result() == 5     # ran before submit returned
        bad = pool.submit(lambda: 1 // 0)
        with pytest.raises(ZeroDivisionError):
            bad.result()
        assert list(pool.map(lambda x: x * x, [1, 2, 3])) == [1, 4, 9]


@pytest.mark.parametrize("threads", ["1", "3"])
def test_read_columns_workers_add_in_file_order_and_stop_on_a_failed_batch(captures, monkeypatch, threads):
    """The workers copy batches into the sink in file order even when a later batch is
    decoded first (the first one delayed), and a batch that fails raises its own error
    instead of leaving the batches after it waiting (a hang)."""
    import time

    import sniffsync.decode.frames as fr
    monkeypatch.setenv("SNIFFSYNC_THREADS", threads)
    src = captures / "ns3-11ac-vht80-snifferA-s256.pcap"
    want = fr.read_columns(src, 0, None, records=False)
    decode = fr.decode_columns

    def slow_first(rec, *a, **k):
        if rec.row0 == 0:
            time.sleep(0.05)
        return decode(rec, *a, **k)
    monkeypatch.setattr(fr, "decode_columns", slow_first)
    got = fr.read_columns(src, 0, None, records=False, batch_rows=1000)
    assert got[1] == want[1]
    _same(got[2], want[2])

    def fail_third(rec, *a, **k):
        if 2000 <= rec.row0 < 3000:
            raise ValueError("batch 3")
        return slow_first(rec, *a, **k)
    monkeypatch.setattr(fr, "decode_columns", fail_third)
    with pytest.raises(ValueError, match="batch 3"):
        fr.read_columns(src, 0, None, records=False, batch_rows=1000)
