"""The reader's fast paths against its straightforward ones.

Oracles: the same reader with its fast path switched off (one chunk, one window,
in-memory bytes, every column decoded), numpy's own ``np.unique`` for ``factorize``,
and an independent Python MAC formatter for the exports. Synthetic files are real
records tiled, cut and re-linked with :func:`sniffsync.writers.write_pcap(ng)`.
"""
import gzip
import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sniffsync.io.capture import read_records
from sniffsync.cli.main import main
from sniffsync.decode.frames import CHUNK_ROWS, read_capture, read_captures, read_columns
from sniffsync.decode.schema import COLUMNS, DTYPES
from sniffsync.decode import table
from sniffsync.decode.table import GOLDEN64, Cat, bad_column, factorize
from sniffsync.io.writers import write_pcap, write_pcapng

CAPTURES = Path(__file__).parents[1] / "data" / "captures"
REAL = sorted(p for p in CAPTURES.iterdir() if p.suffix in (".pcap", ".pcapng"))
NAMES = [c.name for c in COLUMNS]
MACS = ("ra", "ta", "bssid", "sa", "da")
HT20_A = CAPTURES / "ns3-11n-ht20-hidden-snifferA-nearAP.pcap"
WLTRACE = CAPTURES / "wltrace_trace.pcap"

RECORD = ["sniffer", "frame", "ts_ns", "caplen", "wirelen", "linktype"]
RADIOTAP = [c.name for c in COLUMNS if c.source.startswith("radiotap")] + ["rt_len", "mpdu_len", "phy"]
PAYLOAD = NAMES[NAMES.index("ethertype"):]
DOT11 = [c for c in NAMES[NAMES.index("type"):NAMES.index("ethertype")]]


# --- helpers ------------------------------------------------------------------------------
def norm(df: pd.DataFrame) -> pd.DataFrame:
    """Categoricals as plain objects (None for null): category order is not a value."""
    out = df.copy()
    for c in out.columns:
        if isinstance(out[c].dtype, pd.CategoricalDtype):
            s = out[c].astype(object)
            out[c] = s.where(s.notna(), None)
    return out


def assert_same(a: pd.DataFrame, b: pd.DataFrame) -> None:
    assert list(a.columns) == list(b.columns)
    pd.testing.assert_frame_equal(norm(a).reset_index(drop=True), norm(b).reset_index(drop=True),
                                  check_exact=True)


def packets(rec, rows=None):
    """(data, off) of the records' captured bytes, in ``rows`` order."""
    rows = np.arange(len(rec.data_off)) if rows is None else np.asarray(rows)
    parts = [rec.buf[o:o + c] for o, c in zip(rec.data_off[rows].tolist(), rec.caplen[rows].tolist())]
    off = np.concatenate([[0], np.cumsum([len(p) for p in parts])]).astype(np.int64)
    return np.concatenate(parts).astype(np.uint8), off


WHOLE = dict(chunk_rows=1 << 40, window_bytes=1 << 40)   # one chunk, one window: the straightforward path


def first_records(src: Path, k: int, folder: Path) -> Path:
    """``src`` cut before its record ``k`` (a clean end: at that record's header or block)."""
    rec = read_records(src)
    if len(rec.data_off) <= k:
        return src
    head = 16 if src.suffix == ".pcap" else 28          # pcap record header, pcapng EPB header
    dst = folder / f"first{k}-{src.name}"
    dst.write_bytes(src.read_bytes()[:int(rec.data_off[k]) - head])
    return dst


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    """Files with bad frames and mixed link types, built from real records.

    * ``cut.pcap``: records of three real captures shuffled, every 5th one cut
      (caplen shortened to a random length, wirelen kept), so marks of every
      stage (radiotap, 802.11, payload) fall in every chunk.
    * ``mixed.pcapng``: the same records on two interfaces, odd ones with their
      radiotap header stripped as LINKTYPE_IEEE802_11 (105), so each stage
      decodes a scattered subset of rows.
    """
    d = tmp_path_factory.mktemp("synthetic")
    rng = np.random.default_rng(7)
    recs = [read_records(p) for p in (HT20_A, WLTRACE, CAPTURES / "tcpdump_ieee802.11_exthdr.pcap")]
    pieces, ts, wire = [], [], []
    for r in recs:
        data, off = packets(r)
        pieces += [data[a:b] for a, b in zip(off[:-1], off[1:])]
        ts += r.ts_ns.tolist()
        wire += r.wirelen.tolist()
    order = rng.permutation(len(pieces))[:2500]
    pieces = [pieces[i].copy() for i in order]
    ts = np.sort(np.asarray(ts, np.int64)[order])
    wire = np.asarray(wire, np.int64)[order]
    for i in range(0, len(pieces), 5):
        pieces[i] = pieces[i][:rng.integers(0, len(pieces[i]) + 1)]
    off = np.concatenate([[0], np.cumsum([len(p) for p in pieces])]).astype(np.int64)
    data = np.concatenate(pieces).astype(np.uint8)
    write_pcap(d / "cut.pcap", 127, ts, data, off, wirelen=wire)

    strip = []
    for i, p in enumerate(pieces):
        if i % 2 and len(p) >= 4:
            rt = int(p[2]) | int(p[3]) << 8
            strip.append(p[min(rt, len(p)):])
        else:
            strip.append(p)
    iface = np.array([1 if (i % 2 and len(p) >= 4) else 0 for i, p in enumerate(pieces)])
    wire2 = wire - np.array([len(p) - len(s) for p, s in zip(pieces, strip)])
    off2 = np.concatenate([[0], np.cumsum([len(p) for p in strip])]).astype(np.int64)
    write_pcapng(d / "mixed.pcapng", [{"name": "rt", "linktype": 127}, {"name": "raw", "linktype": 105}],
                 iface, ts, np.concatenate(strip).astype(np.uint8), off2, wirelen=np.maximum(wire2, 0))
    return d


def all_inputs(synthetic):
    return REAL + [synthetic / "cut.pcap", synthetic / "mixed.pcapng"]


# --- chunked decode == one-chunk decode -----------------------------------------------------
def test_synthetic_files_have_marks_and_both_link_types(synthetic):
    # the comparisons below are only worth something if these files exercise marks and scatter
    cut = read_capture(synthetic / "cut.pcap", columns=["bad"])
    assert cut["bad"].notna().sum() > 100
    assert cut["bad"].nunique() >= 3
    mixed = read_capture(synthetic / "mixed.pcapng", columns=["linktype", "type"])
    assert set(mixed["linktype"]) == {105, 127}
    assert mixed["type"].notna().sum() > 2000


def same_columns(a, b) -> None:
    """Two :func:`read_columns` results hold the same table: per column the same dtype,
    validity and values where valid (categoricals by value), and the same ``bad`` reasons."""
    (_, n, ca, ma), (_, m, cb, mb) = a, b
    assert n == m and list(ca) == list(cb)
    for name in ca:
        (va, oka), (vb, okb) = ca[name], cb[name]
        oka, okb = (np.ones(n, bool) if ok is None else np.asarray(ok, bool) for ok in (oka, okb))
        if isinstance(va, Cat) and isinstance(vb, Cat):       # a null is also a code of -1
            oka, okb = oka & (va.codes >= 0), okb & (vb.codes >= 0)
        np.testing.assert_array_equal(oka, okb, err_msg=name)
        assert isinstance(va, Cat) == isinstance(vb, Cat) and np.asarray(va).dtype == np.asarray(vb).dtype, name
        np.testing.assert_array_equal(np.asarray(va)[oka], np.asarray(vb)[okb], err_msg=name)
    np.testing.assert_array_equal(np.asarray(bad_column(n, ma)), np.asarray(bad_column(n, mb)))


def test_tiny_chunks_and_windows_decode_like_one_chunk(synthetic, tmp_path):
    # the first 100 records of every real input (all of the small ones) and 300 of the
    # synthetic ones (records of three captures shuffled): both containers, marks of every
    # stage and both link types, few enough records to decode fast at these sizes
    inputs = [first_records(p, 300 if p.parent == synthetic else 100, tmp_path)
              for p in all_inputs(synthetic)]
    cut, mixed = inputs[-2:]
    assert read_capture(cut, columns=["bad"])["bad"].nunique() >= 3
    assert set(read_capture(mixed, columns=["linktype"])["linktype"]) == {105, 127}
    for p in inputs:
        whole, index = read_columns(p, **WHOLE), read_records(p, window_bytes=1 << 40)
        assert whole[1] > 0
        # a 10-byte window is smaller than any record, so every window boundary is inside a
        # record or its header, and every streamed batch holds one to four records
        small = read_records(p, window_bytes=10)
        for f in ("data_off", "caplen", "wirelen", "ts_ns", "linktype", "iface"):
            np.testing.assert_array_equal(getattr(small, f), getattr(index, f), err_msg=f"{p.name} {f}")
        assert small.problems == index.problems
        same_columns(read_columns(p, window_bytes=10), whole)
        # one batch in chunks of 7 frames: chunk ends fall everywhere
        same_columns(read_columns(p, chunk_rows=7, window_bytes=1 << 40), whole)


@pytest.mark.parametrize("chunk,name", [(1, "wltrace"), (2, "wltrace"), (64, "mixed"), (1000, "mixed")])
def test_other_chunk_sizes(synthetic, chunk, name):
    p = WLTRACE if name == "wltrace" else synthetic / "mixed.pcapng"
    want = read_capture(p)                      # 318 or 2500 frames: one default chunk
    assert len(want) < CHUNK_ROWS
    assert_same(read_capture(p, chunk_rows=chunk), want)


def test_window_walk_cut_file(tmp_path):
    # a file cut inside the last record's header: the windowed walk must stop in the same place
    raw = HT20_A.read_bytes()
    rec = read_records(HT20_A)
    cut = int(rec.data_off[1000]) - 7                # 9 of the 16 header bytes present
    p = tmp_path / "hdrcut.pcap"
    p.write_bytes(raw[:cut])
    want = read_records(p, window_bytes=WHOLE["window_bytes"])
    assert len(want.data_off) == 1000 and "record header cut short" in want.problems[0]
    got = read_records(p, window_bytes=1)
    np.testing.assert_array_equal(got.data_off, want.data_off)
    assert got.problems == want.problems


# --- column subsets -------------------------------------------------------------------------
def in_schema_order(cols):
    return [c for c in NAMES if c in set(cols)]


SUBSETS = {
    "record": RECORD,
    "radiotap": RADIOTAP,
    "dot11": DOT11,
    "payload": PAYLOAD,
    "bad": ["bad"],
    "bad+radiotap": ["bad", "tsft_us", "phy"],
    "bad+dot11": ["bad", "ra"],
    "macs": list(MACS),
}


@pytest.mark.parametrize("name", SUBSETS)
def test_stage_boundary_subsets(synthetic, name):
    cols = SUBSETS[name]
    for p in all_inputs(synthetic):
        full = read_capture(p)
        got = read_capture(p, columns=cols)
        assert_same(got, full[in_schema_order(cols)])


def test_random_subsets(synthetic):
    rng = np.random.default_rng(20240611)
    inputs = all_inputs(synthetic)
    full = {p: read_capture(p) for p in inputs}
    for k in range(60):
        p = inputs[k % len(inputs)]
        cols = list(rng.choice(NAMES, size=int(rng.integers(1, 12)), replace=False))
        assert_same(read_capture(p, columns=cols), full[p][in_schema_order(cols)])


def test_read_captures_subset(synthetic):
    paths = [HT20_A, synthetic / "mixed.pcapng"]
    cols = ["sniffer", "bad", "ip_src", "ta"]
    full = read_captures(paths)
    assert_same(read_captures(paths, columns=cols), full[in_schema_order(cols)])
    assert set(full["sniffer"]) == {0, 1}


# --- mmap vs in-memory ----------------------------------------------------------------------
def test_gzip_in_memory_equals_mmap(tmp_path, synthetic):
    for p in REAL + [synthetic / "cut.pcap"]:
        gz = tmp_path / (p.name + ".gz")
        gz.write_bytes(gzip.compress(p.read_bytes(), compresslevel=1))
        plain, packed = read_records(p), read_records(gz)
        # the gzip is inflated into a mapped temporary file, as big as the plain capture
        assert plain.mapping is not None and len(packed.mapping) == p.stat().st_size
        assert_same(read_capture(gz), read_capture(p))


@pytest.mark.parametrize("src", [HT20_A, WLTRACE])
def test_truncated_file_both_paths(tmp_path, src):
    full = read_capture(src)
    rec = read_records(src)
    k = len(rec.data_off) // 2
    cut = int(rec.data_off[k]) + int(rec.caplen[k]) // 2     # mid-way through frame k's bytes
    raw = src.read_bytes()[:cut]
    plain = tmp_path / "cut.pcap"
    plain.write_bytes(raw)
    gz = tmp_path / "cut.pcap.gz"
    gz.write_bytes(gzip.compress(raw))
    got = {}
    for p in (plain, gz):
        df = read_capture(p)
        assert len(df) == k + 1
        assert df["caplen"].iloc[k] == int(rec.caplen[k]) // 2
        assert df["bad"].iloc[k] == "truncated record"
        assert df["bad"].iloc[:k].isna().all()
        before = df.iloc[:k].drop(columns=["bad"])
        assert_same(before, full.iloc[:k].drop(columns=["bad"]))
        got[p] = df
    assert read_records(plain).mapping is not None and len(read_records(gz).mapping) == len(raw)
    assert_same(got[plain], got[gz])


# --- export ---------------------------------------------------------------------------------
def mac(v: int) -> str:
    return ":".join(f"{b:02x}" for b in int(v).to_bytes(6, "big"))


def expected_values(df: pd.DataFrame) -> dict:
    """Per column, the Python values an export must hold (None for null, MACs colon-hex)."""
    out = {}
    for c in df.columns:
        s = df[c].astype(object)
        vals = [None if pd.isna(v) else v for v in s.tolist()]
        if c in MACS:
            vals = [None if v is None else mac(v) for v in vals]
        elif DTYPES[c] == "boolean":
            vals = [None if v is None else bool(v) for v in vals]
        elif DTYPES[c] not in ("category", "string"):
            vals = [None if v is None else int(v) for v in vals]
        else:
            vals = [None if v is None else str(v) for v in vals]
        out[c] = vals
    return out


def export(tmp_path, inputs, suffix, extra=()):
    out = tmp_path / f"x{suffix}"
    assert main(["frames", "-q", *map(str, inputs), "-o", str(out), *extra]) == 0
    return out


@pytest.fixture(scope="module")
def export_inputs(synthetic):
    return [HT20_A, synthetic / "cut.pcap", CAPTURES / "fragattacks_ping_D_BP_bcast_ra-fromap.pcapng"]


@pytest.fixture(scope="module")
def export_expected(export_inputs):
    df = read_captures(export_inputs)
    assert df["bad"].notna().any() and df["ra"].notna().any() and df["ra"].isna().any()
    return expected_values(df)


def test_export_parquet(tmp_path, export_inputs, export_expected):
    back = pd.read_parquet(export(tmp_path, export_inputs, ".parquet"))
    assert list(back.columns) == NAMES
    for c in NAMES:
        vals = [None if pd.isna(v) else v for v in back[c].astype(object).tolist()]
        if DTYPES[c] == "boolean":
            vals = [None if v is None else bool(v) for v in vals]
        elif DTYPES[c] not in ("category", "string") and c not in MACS:
            vals = [None if v is None else int(v) for v in vals]
        assert vals == export_expected[c], c


def test_export_csv(tmp_path, export_inputs, export_expected):
    back = pd.read_csv(export(tmp_path, export_inputs, ".csv"), dtype=str, keep_default_na=False)
    assert list(back.columns) == NAMES
    text = {True: "true", False: "false", None: ""}
    for c in NAMES:
        want = [text[v] if v is None or isinstance(v, bool) else str(v) for v in export_expected[c]]
        assert back[c].tolist() == want, c


def test_export_jsonl(tmp_path, export_inputs, export_expected):
    lines = export(tmp_path, export_inputs, ".jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    assert len(rows) == len(export_expected["frame"])
    for c in NAMES:
        assert [r[c] for r in rows] == export_expected[c], c


@pytest.mark.parametrize("suffix", [".csv", ".parquet", ".jsonl"])
def test_export_columns_order(tmp_path, suffix):
    cols = ["ts_ns", "ra", "bad", "frame", "tcp_seq"]
    out = export(tmp_path, [HT20_A], suffix, ["--columns", ",".join(cols)])
    if suffix == ".csv":
        back = pd.read_csv(out, dtype=str, keep_default_na=False)
    elif suffix == ".parquet":
        back = pd.read_parquet(out)
    else:
        back = pd.read_json(out, lines=True, dtype=False)
    assert list(back.columns) == cols
    want = expected_values(read_capture(HT20_A, columns=cols))
    assert [str(v) for v in back["frame"].tolist()] == [str(v) for v in want["frame"]]
    assert [str(v) for v in back["ts_ns"].tolist()] == [str(v) for v in want["ts_ns"]]
    ra = [None if (pd.isna(v) or v == "") else v for v in back["ra"].astype(object).tolist()]
    assert ra == want["ra"]


def test_export_unknown_column(tmp_path, capsys):
    out = tmp_path / "x.csv"
    code = main(["frames", str(HT20_A), "-o", str(out), "--columns", "ts_ns,nosuch"])
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "nosuch" in err
    assert not out.exists()


def test_export_stdout_csv(capsysbinary):
    assert main(["frames", "-q", str(WLTRACE), "--columns", "frame,ta"]) == 0
    back = pd.read_csv(io.BytesIO(capsysbinary.readouterr().out), dtype=str, keep_default_na=False)
    want = expected_values(read_capture(WLTRACE, columns=["frame", "ta"]))
    assert back["frame"].tolist() == [str(v) for v in want["frame"]]
    assert back["ta"].tolist() == ["" if v is None else v for v in want["ta"]]


# --- factorize ------------------------------------------------------------------------------
def check_factorize(keys):
    # each path: the sort (few keys, the default below table._SORT_BELOW) and the tables
    for sort_below in (table._SORT_BELOW, 0, 1 << 40):
        old, table._SORT_BELOW = table._SORT_BELOW, sort_below
        try:
            codes, uniq = factorize(keys)
        finally:
            table._SORT_BELOW = old
        want_u, want_c = np.unique(keys, return_inverse=True)
        np.testing.assert_array_equal(uniq, want_u)
        np.testing.assert_array_equal(codes, want_c.ravel())
        assert uniq.dtype == want_u.dtype
        assert codes.shape == (len(keys),)
        np.testing.assert_array_equal(uniq[codes], keys)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                                   np.uint32, np.uint64])
def test_factorize_like_unique(dtype):
    rng = np.random.default_rng(3)
    info = np.iinfo(dtype)
    for n_distinct, n in [(1, 1), (1, 50), (5, 1000), (300, 5000), (3000, 20000)]:
        pool = rng.integers(info.min, info.max, size=n_distinct, dtype=dtype, endpoint=True)
        check_factorize(pool[rng.integers(0, n_distinct, n)])
    check_factorize(np.zeros(0, dtype))


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                                   np.uint32, np.uint64])
def test_factorize_dense_range_at_the_type_limits(dtype):
    # keys within 65536 of each other take the direct-table path: at both ends of the type
    rng = np.random.default_rng(4)
    info = np.iinfo(dtype)
    for lo, span in [(info.min, 10), (info.max - 5, 6), (0, 1), (0, 65536), (0, 65537),
                     (info.min, 65536), (info.max - 65535, 65536), (info.min, 2**40)]:
        lo = max(lo, info.min)
        hi = min(info.max, lo + span - 1)
        keys = rng.integers(lo, hi, 1000, endpoint=True, dtype=dtype) if hi > lo else np.full(1000, lo, dtype)
        keys[:2] = lo, hi
        check_factorize(keys)


def test_factorize_collisions_and_edges():
    rng = np.random.default_rng(5)
    # more distinct keys than buckets: two must share one (the fallback path)
    check_factorize(rng.integers(0, 2**48, 70_000, dtype=np.uint64))
    # MAC-like keys, extremes, negatives
    check_factorize(np.array([2**48 - 1, 0, 2**48 - 1, 0x0010FEEDE58C97], np.uint64))
    check_factorize(np.array([np.iinfo(np.int64).min, -1, 0, np.iinfo(np.int64).max, -1], np.int64))
    check_factorize(np.array([2**64 - 1, 2**63, 1], np.uint64))
    # keys that collide in the 16-bit hash: same top bits of key * golden
    g = int(GOLDEN64)
    inv = pow(g, -1, 2**64)
    a, b = (inv * (5 << 48)) % 2**64, (inv * ((5 << 48) + 1)) % 2**64
    check_factorize(np.array([a, b, a, 7], np.uint64))
    check_factorize(np.array([], np.int64))
    check_factorize(np.array([], np.float64))
