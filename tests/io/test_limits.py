"""Bounded reading: a gzip capture is inflated as a stream (memory does not grow with the
inflated size), read limits stop a read with a problem line, and wild timestamps are
marked ``ts_outlier`` by a rule checked against a slow, obvious oracle."""
import gzip
import struct
import subprocess
import sys

import numpy as np
import pytest

from sniffsync.io.capture import iter_records, read_records, concat_records
from sniffsync.io.stamps import NEIGHBOURS, TS_OUTLIER_NS, outlier_rows


def _pcap(stamps_ns, payload=b"\x00" * 8) -> bytes:
    out = struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1)       # ns resolution
    for t in stamps_ns:
        out += struct.pack("<IIII", t // 10**9, t % 10**9, len(payload), len(payload)) + payload
    return out


def _oracle(ts):
    """Slow and obvious: per frame, the median of the 17 frames around it (window shifted
    to stay inside the file; the lower median of the whole file when shorter)."""
    n, size = len(ts), 2 * NEIGHBOURS + 1
    if n < 3:
        return []
    out = []
    for i in range(n):
        if n < size:
            win = sorted(ts)
            med = win[(n - 1) // 2]
        else:
            s = min(max(i - NEIGHBOURS, 0), n - size)
            med = sorted(ts[s:s + size])[NEIGHBOURS]
        if abs(ts[i] - med) > TS_OUTLIER_NS:
            out.append(i)
    return out


@pytest.mark.parametrize("seed", range(12))
def test_outliers_match_the_oracle_whatever_the_batches(tmp_path, seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 120))
    ts = np.cumsum(rng.choice([0, 1_000, 2_000_000, 600 * 10**9], n)) + 1_700_000_000 * 10**9
    wild = rng.random(n) < 0.1                  # some stamps 1970-ish or decades late, some runs of them
    ts[wild] = rng.choice([0, 16 * 10**9, 4_000_000_000 * 10**9], wild.sum())
    ts = [int(t) for t in ts]
    path = tmp_path / "t.pcap"
    path.write_bytes(_pcap(ts))
    want = _oracle(ts)
    for rows in (None, 3, 16, 17):
        batches = list(iter_records(path, batch_rows=rows, window_bytes=64 if rows else 1 << 20))
        rec = concat_records(batches)
        got = sorted(int(r) for m, why in rec.marks if why == "ts_outlier" for r in m)
        assert got == want, (rows, len(batches))
        assert sum("ts_outlier" in p for p in rec.problems) == (1 if want else 0)


def test_in_order_frames_are_never_flagged_mid_file():
    # a monotonic run is its own median mid-file, however long the pauses
    ts = np.cumsum(np.full(40, 10 * TS_OUTLIER_NS))
    assert outlier_rows(ts, 0, NEIGHBOURS, 40 - NEIGHBOURS, 40).size == 0


def test_gzip_is_read_whole_and_equal(tmp_path):
    raw = _pcap([1_700_000_000 * 10**9 + i * 1000 for i in range(300)], bytes(range(256)) * 5)
    (tmp_path / "a.pcap").write_bytes(raw)
    (tmp_path / "a.pcap.gz").write_bytes(gzip.compress(raw[:len(raw) // 2]) + gzip.compress(raw[len(raw) // 2:]))
    a, b = read_records(tmp_path / "a.pcap"), read_records(tmp_path / "a.pcap.gz")
    assert b.buf.tobytes() == raw and b.data_off.tolist() == a.data_off.tolist() and b.problems == []


@pytest.mark.parametrize("cut", [10, 2000, -3])
def test_cut_gzip_keeps_what_inflated(tmp_path, cut):
    raw = _pcap([1_700_000_000 * 10**9 + i * 1000 for i in range(300)], bytes(range(256)) * 5)
    gz = gzip.compress(raw)
    (tmp_path / "c.pcap.gz").write_bytes(gz[:cut])
    try:
        rec = read_records(tmp_path / "c.pcap.gz")
    except Exception as exc:                     # nothing inflated: the project's own error
        assert type(exc).__name__ == "CaptureError"
        return
    assert any("gzip stream is truncated" in p for p in rec.problems)
    assert raw.startswith(rec.buf.tobytes())


def test_max_bytes_and_max_frames(tmp_path):
    raw = _pcap([1_700_000_000 * 10**9 + i * 1000 for i in range(50)])    # 24 + 50 * 24 bytes
    for name, data in (("p.pcap", raw), ("p.pcap.gz", gzip.compress(raw))):
        path = tmp_path / name
        path.write_bytes(data)
        rec = concat_records(iter_records(path, max_bytes=24 + 10 * 24))
        assert len(rec.data_off) == 10 and any("--max-bytes" in p for p in rec.problems)
        rec = concat_records(iter_records(path, batch_rows=4, window_bytes=64, max_frames=7))
        assert len(rec.data_off) == 7 and sum("--max-frames" in p for p in rec.problems) == 1
        rec = concat_records(iter_records(path, max_frames=50, max_bytes=len(raw)))
        assert len(rec.data_off) == 50 and rec.problems == []


CHILD = """
import resource, sys
from sniffsync.decode.frames import read_columns

def data_bytes():
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmData:")) * 1024

small, bomb, room = sys.argv[1], sys.argv[2], int(sys.argv[3])
read_columns(small, columns=["frame", "caplen"])          # imports, thread pools
limit = data_bytes() + room                               # private memory from here on: at most room
resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
try:
    _, n, _, _ = read_columns(bomb, columns=["frame", "caplen"])
except MemoryError:
    n = "MemoryError"
print(n)
"""


def _bomb(path, records: int) -> None:
    """A gzip of ``records`` records of 64 KiB of zeros (``records`` x 64 KiB inflated)."""
    rec = struct.pack("<IIII", 1_700_000_000, 0, 65535, 65535) + bytes(65535)
    with gzip.open(path, "wb", compresslevel=1) as z:
        z.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 127))
        for _ in range(records):
            z.write(rec)


def test_gzip_bomb_memory_is_bounded(tmp_path):
    # a child process may take only 64 MiB more private memory (RLIMIT_DATA; memory, not
    # time) while it reads 128 MiB of inflated capture: inflating in memory ran out
    # (MemoryError); streamed into a mapped temporary file only chunks are held (the mapped
    # pages are page cache, shared and dropped as decoded)
    _bomb(tmp_path / "small.pcap.gz", 4)
    _bomb(tmp_path / "bomb.pcap.gz", 2048)                 # 128 MiB inflated
    p = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "small.pcap.gz"), str(tmp_path / "bomb.pcap.gz"),
                        str(64 << 20)], capture_output=True, text=True, timeout=300)
    assert p.stdout.split() == ["2048"], p.stdout + p.stderr
