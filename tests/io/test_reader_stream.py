"""The streamed reader: the record walk, batches decoded while the walk goes, streamed exports.

Oracles: a plain one-record-at-a-time Python walk written here (no windows, no unrolling),
the reader with streaming switched off (one batch), and pandas reading the exports back.
"""
import struct
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from sniffsync.decode import frames
from sniffsync.decode.frames import iter_columns, read_capture, read_columns
from sniffsync.decode.schema import COLUMNS
from sniffsync.decode.table import bad_column
from sniffsync.export.stream import BatchWriter
from sniffsync.io.capture import MAX_RECORD, iter_records, read_records
from sniffsync.cli.main import main
from sniffsync.io.writers import write_pcap

CAPTURES = Path(__file__).parents[1] / "data" / "captures"
HT20_A = CAPTURES / "ns3-11n-ht20-hidden-snifferA-nearAP.pcap"
HT20_B = CAPTURES / "ns3-11n-ht20-hidden-snifferB-nearSTA1.pcap"


def reference_walk(raw: bytes):
    """Record offsets of a little-endian classic pcap, one record at a time, and where it stopped."""
    offs, pos = [], 24
    while pos + 16 <= len(raw):
        incl = struct.unpack_from("<I", raw, pos + 8)[0]
        if incl > MAX_RECORD:
            break
        offs.append(pos)
        pos += 16 + incl
    return offs, pos


def norm(df):
    out = df.copy()
    for c in out.columns:
        if isinstance(out[c].dtype, pd.CategoricalDtype):
            s = out[c].astype(object)
            out[c] = s.where(s.notna(), None)
    return out.reset_index(drop=True)


SMALL = dict(window_bytes=3000, batch_rows=37)   # many batches, boundaries everywhere
NAMES = [c.name for c in COLUMNS]


def stream_export(out, inputs, **sizes):
    """What ``sniffsync frames INPUTS -o OUT`` does (every column), at the given sizes."""
    with BatchWriter(str(out), NAMES) as writer:
        def post(rec, n, cols, marks):
            cols["bad"] = (bad_column(n, marks), None)
            return writer.convert(n, cols)
        for i, path in enumerate(inputs):
            for converted in iter_columns(path, i, NAMES, post=post, **sizes):
                writer.write(converted)
    return out


def _with_bad_length(tmp_path, at: int, incl: int, cut_tail: int = 0) -> Path:
    raw = bytearray(HT20_A.read_bytes())
    offs, _ = reference_walk(bytes(raw))
    struct.pack_into("<I", raw, offs[at] + 8, incl)
    p = tmp_path / f"bad{at}_{incl}_{cut_tail}.pcap"
    p.write_bytes(bytes(raw[:len(raw) - cut_tail]))
    return p


@pytest.mark.parametrize("window", [10, 3000, 1 << 40])
def test_walk_matches_reference_walk(window):
    raw = HT20_A.read_bytes()
    want, pos = reference_walk(raw)
    rec = read_records(HT20_A, window_bytes=window)
    np.testing.assert_array_equal(rec.data_off - 16, want)
    assert pos == len(raw) and rec.problems == []


@pytest.mark.parametrize("window", [10, 3000, 1 << 40])
def test_corrupt_length_mid_file_stops_there(tmp_path, window):
    # the record after a corrupt length is never trusted: its garbage successors are dropped
    at = len(reference_walk(HT20_A.read_bytes())[0]) // 2
    p = _with_bad_length(tmp_path, at, 0x7FFF_FFF0)
    want, pos = reference_walk(p.read_bytes())
    assert len(want) == at > 1000
    rec = read_records(p, window_bytes=window)
    np.testing.assert_array_equal(rec.data_off - 16, want)
    assert rec.problems == [f"{p}: offset {pos}: corrupt record length {0x7FFF_FFF0}; stopped after {at} records"]


@pytest.mark.parametrize("present", [9, 12, 13, 15])
@pytest.mark.parametrize("window", [10, 1 << 40])
def test_header_cut_at_every_length(tmp_path, present, window):
    # 12..15 header bytes hold the length field: the unrolled walk reads it, then must still stop
    raw = HT20_A.read_bytes()
    offs, _ = reference_walk(raw)
    p = tmp_path / f"cut{present}.pcap"
    p.write_bytes(raw[:offs[700] + present])
    rec = read_records(p, window_bytes=window)
    assert len(rec.data_off) == 700
    assert rec.problems == [f"{p}: offset {offs[700]}: record header cut short ({present} of 16 bytes); "
                            f"stopped after 700 records"]


def test_batches_partition_the_file():
    whole = read_records(HT20_A)
    batches = list(iter_records(HT20_A, window_bytes=3000))
    assert len(batches) > 50
    assert [b.row0 for b in batches] == list(np.cumsum([0] + [len(b.data_off) for b in batches[:-1]]))
    np.testing.assert_array_equal(np.concatenate([b.data_off for b in batches]), whole.data_off)


def test_streamed_decode_equals_one_batch():
    want = read_capture(HT20_B)                  # one window, one batch
    got = read_capture(HT20_B, **SMALL)
    pd.testing.assert_frame_equal(norm(got), norm(want), check_exact=True)
    parts = list(iter_columns(HT20_B, 3, ["frame", "sniffer"], ahead=1, **SMALL))
    assert len(parts) > 50
    frame = np.concatenate([c["frame"][0] for _, _, c, _ in parts])
    np.testing.assert_array_equal(frame, np.arange(1, len(want) + 1))
    assert {int(s) for _, _, c, _ in parts for s in np.unique(c["sniffer"][0])} == {3}


def test_marks_of_cut_records_land_on_the_right_rows(tmp_path):
    # a record longer than the snaplen in a late batch: its mark must stay on its own row
    raw = bytearray(HT20_A.read_bytes())
    offs, _ = reference_walk(bytes(raw))
    snaplen = struct.unpack_from("<I", raw, 16)[0]
    struct.pack_into("<I", raw, 16, 60)         # snaplen 60: every longer record is marked
    p = tmp_path / "snap.pcap"
    p.write_bytes(bytes(raw))
    incl = np.array([struct.unpack_from("<I", raw, o + 8)[0] for o in offs])
    want = np.flatnonzero(incl > 60)
    assert 0 < want.size < len(offs) and snaplen != 60
    rec, n, cols, marks = read_columns(p, 0, ["bad"], **SMALL)
    rows = np.concatenate([r for r, why in marks if why == "caplen > snaplen"])
    np.testing.assert_array_equal(np.sort(rows), want)
    assert rec.problems == [f"{p}: offset {offs[want[0]]}: {want.size} record(s) with caplen > snaplen 60"]


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_streamed_export_equals_table(tmp_path, suffix):
    inputs = [HT20_A, CAPTURES / "wltrace_trace.pcap"]
    out = stream_export(tmp_path / f"x{suffix}", inputs, **SMALL)
    want = pd.concat([read_capture(p, sniffer=i) for i, p in enumerate(inputs)], ignore_index=True)
    if suffix == ".parquet":
        assert pq.ParquetFile(out).metadata.num_row_groups > 50     # really streamed
        back = pd.read_parquet(out)
        one = read_capture(HT20_A)                  # (concat turns differing categoricals to object)
        for c in want.columns:
            want_dtype = "category" if c in ("ra", "ta", "bssid", "sa", "da") else str(one[c].dtype)
            assert str(back[c].dtype) == want_dtype, c
        assert back["ra"].dropna().iloc[0].count(":") == 5
        back["ra"] = back["ra"].astype(object)
        want["ra"] = [None if pd.isna(v) else ":".join(f"{b:02x}" for b in int(v).to_bytes(6, "big"))
                      for v in want["ra"]]
        for c in want.columns:
            a, b = norm(back[[c]])[c], norm(want[[c]])[c]
            if c in ("ta", "bssid", "sa", "da"):
                continue                            # MAC text: checked on 'ra'
            assert a.astype(object).where(a.notna(), None).tolist() == \
                b.astype(object).where(b.notna(), None).tolist(), c
    else:
        back = pd.read_csv(out, dtype=str, keep_default_na=False)
        assert len(back) == len(want)
        assert back["frame"].tolist() == [str(v) for v in want["frame"]]
        assert back["ts_ns"].tolist() == [str(v) for v in want["ts_ns"]]
        assert back["sniffer"].tolist() == [str(v) for v in want["sniffer"]]


def test_streamed_csv_is_byte_identical_to_one_batch(tmp_path):
    big, small = tmp_path / "big.csv", tmp_path / "small.csv"
    assert main(["frames", "-q", str(HT20_B), "-o", str(big)]) == 0      # one batch
    stream_export(small, [HT20_B], **SMALL)
    assert big.read_bytes() == small.read_bytes()


def test_parquet_bad_column_is_categorical_without_bad_frames(tmp_path):
    out = tmp_path / "x.parquet"
    assert main(["frames", "-q", str(HT20_A), "-o", str(out), "--columns", "frame,bad"]) == 0
    back = pd.read_parquet(out)
    assert isinstance(back["bad"].dtype, pd.CategoricalDtype) and back["bad"].isna().all()


def test_failed_stream_leaves_no_file(tmp_path, monkeypatch):
    out = tmp_path / "x.parquet"
    calls = {"n": 0}
    real = frames.decode_columns

    def flaky(*a, **k):
        calls["n"] += 1
        if calls["n"] == 20:
            raise MemoryError("simulated")
        return real(*a, **k)
    monkeypatch.setattr(frames, "decode_columns", flaky)
    with pytest.raises(MemoryError, match="simulated"):
        stream_export(out, [HT20_A], **SMALL)        # fails after batches were written
    assert calls["n"] >= 20 and list(tmp_path.iterdir()) == []
    calls["n"] = 19                                  # the command: its one batch fails
    assert main(["frames", "-q", str(HT20_A), "-o", str(out)]) != 0
    assert list(tmp_path.iterdir()) == []


def test_empty_pcap_streams_header_only(tmp_path):
    p = tmp_path / "empty.pcap"
    write_pcap(p, 127, np.zeros(0, np.int64), np.zeros(0, np.uint8), np.zeros(1, np.int64))
    out = tmp_path / "e.parquet"
    assert main(["frames", "-q", str(p), "-o", str(out), "--columns", "frame,ra"]) == 0
    back = pd.read_parquet(out)
    assert list(back.columns) == ["frame", "ra"] and len(back) == 0
    csv = tmp_path / "e.csv"
    assert main(["frames", "-q", str(p), "-o", str(csv), "--columns", "frame,ra"]) == 0
    assert csv.read_text() == '"frame","ra"\n'


# --- pcapng ----------------------------------------------------------------------------------
def _block(order, btype, body):
    body += b"\0" * (-len(body) % 4)
    blen = 12 + len(body)
    return struct.pack(order + "II", btype, blen) + body + struct.pack(order + "I", blen)


def _shb(order):
    return _block(order, 0x0A0D0D0A, struct.pack(order + "IHHq", 0x1A2B3C4D, 1, 0, -1))


def _idb(order, linktype=127, snaplen=65535):
    return _block(order, 1, struct.pack(order + "HHI", linktype, 0, snaplen))


def _epb(order, iface, ts_us, data, wire):
    return _block(order, 6, struct.pack(order + "IIIII", iface, ts_us >> 32, ts_us & 0xFFFFFFFF,
                                         len(data), wire) + data)


@pytest.fixture(scope="module")
def mixed_pcapng(tmp_path_factory):
    """Two sections (little- then big-endian), an IDB in mid-section, SPB / PB / statistics blocks
    between EPBs, a trailing cut header: everything the careful path handles, in long EPB runs."""
    rec = read_records(HT20_A)
    pkts = [bytes(rec.buf[o:o + c]) for o, c in zip(rec.data_off.tolist(), rec.caplen.tolist())]
    ts = (rec.ts_ns // 1000).tolist()
    out, want = [_shb("<"), _idb("<")], []           # want: (wirelen, ts_us or None)
    for i, (p, t) in enumerate(zip(pkts, ts)):
        order = "<" if i < len(pkts) // 2 else ">"
        if i == len(pkts) // 2:
            out += [_shb(">"), _idb(">", 105), _idb(">")]
        if i == 300:
            out.append(_idb("<", 1))                 # a new interface mid-section
        if i % 97 == 5:
            out.append(_block(order, 3, struct.pack(order + "I", len(p)) + p))   # SPB
            want.append((len(p), None))
            continue
        if i % 89 == 7:
            out.append(_block(order, 5, struct.pack(order + "III", 0, 0, 0)))    # ISB: skipped
        if i % 131 == 11:
            out.append(_block(order, 2, struct.pack(order + "HHIIII", 0, 0, t >> 32, t & 0xFFFFFFFF,
                                                     len(p), len(p)) + p))        # obsolete PB
            want.append((len(p), t))
            continue
        out.append(_epb(order, 0 if order == "<" else 1, t, p, len(p)))
        want.append((len(p), t))
    path = tmp_path_factory.mktemp("ng") / "mixed.pcapng"
    path.write_bytes(b"".join(out) + b"\x06\0\0\0\x40")          # 5 bytes of a cut block header
    return path, want


@pytest.mark.parametrize("window", [10, 3000, 1 << 40])
def test_pcapng_walk_against_construction(mixed_pcapng, window):
    path, want = mixed_pcapng
    rec = read_records(path, window_bytes=window)
    assert rec.wirelen.tolist() == [w for w, _ in want]
    has_ts = np.array([t is not None for _, t in want])
    assert (rec.ts_ns[has_ts] // 1000).tolist() == [t for _, t in want if t is not None]
    assert set(rec.iface.tolist()) == {0, 2, 3}        # section 2: local 0 -> global 2, local 1 -> 3
    assert rec.problems == [f"{path}: offset {path.stat().st_size - 5}: 5 trailing bytes (block header cut)"]
    assert sum(len(r) for r, why in rec.marks if why.startswith("no timestamp")) == int((~has_ts).sum())


def test_pcapng_streamed_decode_equals_one_batch(mixed_pcapng):
    path, _ = mixed_pcapng
    want = read_capture(path)
    assert len(list(iter_records(path, window_bytes=3000))) > 20
    pd.testing.assert_frame_equal(norm(read_capture(path, **SMALL)), norm(want), check_exact=True)


def test_pcapng_walk_agrees_with_tshark(mixed_pcapng):
    import shutil
    import subprocess
    if shutil.which("tshark") is None:
        pytest.skip("tshark not installed (.ci/run installs it)")
    path, want = mixed_pcapng
    text = subprocess.run(["tshark", "-r", str(path), "-T", "fields", "-e", "frame.len"],
                          capture_output=True, text=True).stdout.split()
    assert [int(v) for v in text] == [w for w, _ in want]


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_frames_export_never_imports_pandas(tmp_path, suffix):
    # pandas' import alone is a third of a 1M-frame export: the streamed path must not pay it
    import subprocess
    import sys
    code = ("import sys\nfrom sniffsync.cli import main\n"
            f"rc = main(['frames', '-q', {str(HT20_A)!r}, '-o', {str(tmp_path / ('x' + suffix))!r}])\n"
            "print(rc, 'pandas' in sys.modules, 'pyarrow.fs' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    # nor pyarrow.fs (cloud filesystems, ssl: ~9 MB of a run's memory)
    assert out.split() == ["0", "False", "False"]


def test_parquet_writer_writes_pyarrow_parquets_bytes(tmp_path):
    # the writer without pyarrow.parquet's import writes what pyarrow.parquet.ParquetWriter does
    import io

    from sniffsync.export.stream import dictionary_columns, parquet_writer, stream_schema
    from sniffsync.export.tables import arrow_columns
    n, cols, _ = read_columns(HT20_A, columns=NAMES, records=False)[1:]
    schema = stream_schema(NAMES)
    table = arrow_columns(n, cols, NAMES, np.int32).cast(schema)
    got, want = io.BytesIO(), io.BytesIO()
    plain = {"frame", "ts_ns", "tsft_us", "ampdu_ref"}
    assert plain <= set(NAMES) - set(dictionary_columns(schema))
    assert {"ra", "ta", "bad", "mcs", "seq"} <= set(dictionary_columns(schema))
    for sink, make in ((got, parquet_writer),
                       (want, lambda f, s: pq.ParquetWriter(f, s, use_dictionary=dictionary_columns(s)))):
        w = make(sink, schema)
        w.write_table(table.slice(0, 1000))
        w.write_table(table.slice(1000))
        w.close()
    assert got.getvalue() == want.getvalue()
