"""The merged-pcapng writer and merge helpers, against the generic writer and plain oracles."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import sniffsync.sync.pcapng as W
from sniffsync.io import walk
from sniffsync.io.capture import Records
from sniffsync.sync.copies import best_copy
from sniffsync.sync.tables import concat_columns, str_categories
from sniffsync.io.writers import _idb, _shb, write_pcapng

CAPS = Path(__file__).parents[1] / "data" / "captures"


def _records(rng, n, shift):
    """A fake capture: n packets of 0..300 bytes (many of 0..12) with gaps."""
    lens = rng.integers(0, 300, n)
    small = rng.random(n) < 0.2
    lens[small] = rng.integers(0, 13, small.sum())
    lens[:5] = [0, 1, 4, 12, 13]
    gaps = rng.integers(0, 20, n)
    off = shift + np.cumsum(np.r_[0, (lens + gaps)[:-1]])
    buf = rng.integers(0, 256, int(off[-1] + lens[-1] + 50), dtype=np.uint8)
    empty = np.zeros(0, np.int32)
    return Records(buf, off.astype(np.int64), lens.astype(np.int32), empty, empty.astype(np.int64),
                   np.full(n, 127, np.int32), empty.astype(np.int16), [], [], [], None)


@pytest.mark.parametrize("kind", ["array", "memoryview", "strided"])
def test_gather_equals_slices_of_any_buffer(kind):
    rng = np.random.default_rng(7)
    raw = rng.integers(0, 256, 400, dtype=np.uint8)
    src = {"array": raw[:200], "memoryview": memoryview(raw[:200].tobytes()), "strided": raw[::2]}[kind]
    flat = np.array(src, np.uint8)
    for w in (1, 3, 8, 200):
        at = rng.integers(0, 201 - w, 9)
        got = W._gather(src, w, at)
        assert got.dtype.itemsize == w and got.shape == (9,)
        assert got.tobytes() == b"".join(flat[a:a + w].tobytes() for a in at)


@pytest.mark.parametrize("backend", ["c", "python"])
@pytest.mark.parametrize("chunk", [1, 700, 1 << 20])
@pytest.mark.parametrize("mapped", [False, True])
def test_write_epbs_is_byte_identical_to_write_pcapng(tmp_path, monkeypatch, chunk, mapped, backend):
    """Written (``write``) and built in a map of the file (``_reserve``: an O_RDWR regular
    file, as atomic_output's), every chunk size, the packet bytes copied by the C pass or
    by numpy: the generic writer's bytes."""
    if backend == "c" and walk.backend() != "c":
        pytest.skip("the C extension is not built")
    monkeypatch.setitem(walk._state, "c", backend == "c")
    copied = []                          # the C pass's calls: it ran, not the fallback

    class Spy:
        def __getattr__(self, name, real=walk._c):
            return getattr(real, name)

        def pieces(self, *a, real=walk._c):
            copied.append(len(a[1]))
            return real.pieces(*a)
    monkeypatch.setattr(walk, "_c", Spy())
    monkeypatch.setattr(W, "MAP_MIN_BYTES", 0 if mapped else 1 << 62)
    taken = []
    monkeypatch.setattr(W, "_build_mapped", lambda *a, f=W._build_mapped: taken.append(f(*a)))
    rng = np.random.default_rng(chunk)
    recs = [_records(rng, 400, 24), _records(rng, 300, 5000)]
    n = 600
    sn = rng.integers(0, 2, n)
    idx = np.where(sn == 0, rng.integers(0, 400, n), rng.integers(0, 300, n))
    start = np.array([recs[s].data_off[i] for s, i in zip(sn, idx)], np.int64)
    caplen = np.array([recs[s].caplen[i] for s, i in zip(sn, idx)], np.int64)
    wirelen = caplen + rng.integers(0, 5, n)
    ts = rng.integers(0, 2**62, n)
    texts = ["", "x", "heard by: A(-41 dBm) B(? dBm)", "abcd" * 40]   # none, tiny, long
    inv = rng.integers(0, len(texts), n)
    head = _shb() + _idb({"name": "a", "linktype": 127}) + _idb({"name": "b", "linktype": 127})
    got = tmp_path / "got.pcapng"
    with open(got, "w+b") as fh:
        fh.write(head)
        W.write_epbs(fh, recs, sn, start, caplen, wirelen, ts, W.comment_blob(texts) + (inv,), chunk)
        fh.write(b"tail")                # the file position is after the blocks
    assert len(taken) == mapped
    data = np.concatenate([recs[s].buf[o:o + c] for s, o, c in zip(sn, start, caplen)])
    want = tmp_path / "want.pcapng"
    write_pcapng(want, [{"name": "a", "linktype": 127}, {"name": "b", "linktype": 127}], sn, ts, data,
                 np.r_[0, np.cumsum(caplen)], wirelen=wirelen, comments=[texts[i] for i in inv])
    assert got.read_bytes() == want.read_bytes() + b"tail"
    assert (sum(copied) >= n) == (backend == "c")           # every packet's bytes by the C pass


def test_the_c_copy_checks_every_piece_before_copying():
    """A piece outside either buffer (or a negative length) raises, and nothing is copied."""
    if walk.backend() != "c":
        pytest.skip("the C extension is not built")
    src, i64 = np.arange(20, dtype=np.uint8), (lambda *v: np.array(v, np.int64))
    out = np.zeros(10, np.uint8)
    assert walk.copy_pieces(out, i64(0, 5, 9), src, i64(3, 10, 19), i64(2, 3, 1))
    assert out.tolist() == [3, 4, 0, 0, 0, 10, 11, 12, 0, 19]
    for dst, off, ln in [((0, 9), (0, 0), (1, 2)), ((0, 0), (0, 19), (1, 2)), ((0, -1), (0, 0), (1, 1)),
                         ((0, 0), (0, 0), (1, -1))]:
        out[:] = 0
        with pytest.raises(ValueError, match="piece 1 is outside"):
            walk.copy_pieces(out, i64(*dst), src, i64(*off), i64(*ln))
        assert not out.any()
    with pytest.raises(ValueError, match="int64"):
        walk.copy_pieces(out, np.zeros(1, np.int32), src, i64(0), i64(1))


def test_a_failed_mapped_build_raises_its_own_error(tmp_path, monkeypatch):
    """An error while a chunk is built in the file's map is the error the caller sees (not the
    map's BufferError: the traceback still holds a view of it)."""
    monkeypatch.setattr(W, "MAP_MIN_BYTES", 0)

    def boom(*a):
        raise ValueError("bad chunk")
    monkeypatch.setattr(W, "_blocks", boom)
    rng = np.random.default_rng(3)
    recs = [_records(rng, 50, 24)]
    sn = np.zeros(50, np.int64)
    with open(tmp_path / "x.pcapng", "w+b") as fh, pytest.raises(ValueError, match="bad chunk"):
        W.write_epbs(fh, recs, sn, recs[0].data_off.astype(np.int64), recs[0].caplen.astype(np.int64),
                     recs[0].caplen.astype(np.int64), np.arange(50, dtype=np.int64),
                     W.comment_blob([""]) + (np.zeros(50, np.int64),), 7)


def test_reserve_only_where_a_map_can_write(tmp_path, monkeypatch):
    """A write-only file, a pipe or BytesIO are written, not mapped; a full disk is the
    caller's error (atomic_output turns it into a CaptureError), not a fallback."""
    import errno
    import io
    import os
    monkeypatch.setattr(W, "MAP_MIN_BYTES", 0)
    with open(tmp_path / "w", "wb") as fh:
        assert W._reserve(fh, 100) is None
    assert W._reserve(io.BytesIO(), 100) is None
    r, w = os.pipe()
    with os.fdopen(r, "rb"), os.fdopen(w, "w+b", buffering=0) as wf:
        assert W._reserve(wf, 100) is None
    with open(tmp_path / "rw", "w+b") as fh:
        fh.write(b"abc")
        assert W._reserve(fh, 100) == (fh.fileno(), 3)
        assert os.fstat(fh.fileno()).st_size == 103

    def no_map(*a, **k):
        raise OSError(errno.ENODEV, "No such device")
    with monkeypatch.context() as m, open(tmp_path / "nomap", "w+b") as fh:
        m.setattr(W.mmap, "mmap", no_map)
        assert W._reserve(fh, 100) is None

    def full(*a):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(os, "posix_fallocate", full)
    with open(tmp_path / "rw2", "w+b") as fh, pytest.raises(OSError):
        W._reserve(fh, 100)


def test_write_merged_needs_no_hidden_state(tmp_path):
    """A caller filters the merged rows and rebuilds the table (a new DataFrame: nothing
    rides along in ``attrs``); ``write_merged`` takes all it needs from the ``Merged``."""
    from sniffsync.io.capture import read_records
    from sniffsync.sync.merge import merge, write_merged
    paths = [CAPS / f"ns3-11n-ht20-hidden-sniffer{x}.pcap" for x in ("A-nearAP", "B-nearSTA1", "C-nearSTA2")]
    m = merge([str(p) for p in paths], columns=[])
    assert m.frames.attrs == {} and m.sniffers == [p.stem for p in paths] and m.stamps == "end"
    heard = m.frames[m.frames["n_heard"] >= 2]
    frames = pd.DataFrame({c: heard[c].to_numpy() for c in heard.columns})
    assert frames.attrs == {} and 0 < len(frames) < len(m.frames)
    out = tmp_path / "heard.pcapng"
    assert write_merged(out, dataclasses.replace(m, frames=frames)) == len(frames)
    rec = read_records(out)
    assert len(rec.data_off) == len(frames)
    assert [i["name"] for i in rec.interfaces] == m.sniffers
    assert rec.iface.tolist() == frames["sniffer"].tolist()
    assert rec.ts_ns.tolist() == frames["ts_ns"].tolist()
    for k, (s, f) in enumerate(zip(frames["sniffer"], frames["frame"])):   # bytes from the inputs
        src, o = m.records[s], int(rec.data_off[k])
        a, c = int(src.data_off[f - 1]), int(src.caplen[f - 1])
        assert rec.caplen[k] == c and bytes(rec.buf[o:o + c]) == bytes(src.buf[a:a + c])


def _best_oracle(group, sniffer, sig):
    order = np.lexsort((sniffer, -sig, group))
    g = group[order]
    first = np.r_[True, g[1:] != g[:-1]] if len(g) else np.zeros(0, bool)
    best = np.zeros(int(group.max()) + 1 if len(group) else 0, np.int64)
    best[g[first]] = order[first]
    return best


@pytest.mark.parametrize("seed", range(4))
def test_best_copy_equals_lexsort_oracle(seed):
    rng = np.random.default_rng(seed)
    n = 3000
    group = rng.integers(0, 900, n)
    sniffer = rng.integers(0, 3, n)      # repeats in a group: ties broken by row
    sig = rng.integers(-95, -20, n).astype(float)
    sig[rng.random(n) < 0.2] = -1e9      # nulls
    if seed == 3:
        sig[::5] += 0.25                 # fractional dBm: the lexsort path
    assert best_copy(group, sniffer, sig).tolist() == _best_oracle(group, sniffer, sig).tolist()
    assert len(best_copy(group[:0], sniffer[:0], sig[:0])) == 0


def test_concat_columns_equals_concat_tables():
    from sniffsync import read_capture
    from sniffsync.decode.frames import concat_tables
    files = ["ns3-11n-ht20-hidden-snifferA-nearAP.pcap", "wltrace_trace.pcap",
             "fragattacks_ping_D_BP_bcast_ra-fromap.pcapng"]
    tables = [read_capture(CAPS / f, sniffer=i) for i, f in enumerate(files)]
    want = concat_tables([str_categories(t) for t in tables])
    got = concat_columns([str_categories(t) for t in tables])
    assert list(got.columns) == list(want.columns)
    assert (got.dtypes == want.dtypes).all()
    assert got.equals(want)
    for c in want.columns:
        if isinstance(want[c].dtype, pd.CategoricalDtype):
            assert list(got[c].cat.categories) == list(want[c].cat.categories)


def test_merge_leaves_the_callers_tables_whole():
    from sniffsync import read_capture
    from sniffsync.sync.merge import merge
    tables = [read_capture(CAPS / f"ns3-11n-ht20-hidden-sniffer{x}.pcap", sniffer=i)
              for i, x in enumerate(["A-nearAP", "B-nearSTA1"])]
    before = [t.copy() for t in tables]
    merge(tables, anchors=("beacon", "ba", "unique"))
    assert all(t.equals(b) and list(t.columns) == list(b.columns) for t, b in zip(tables, before))
