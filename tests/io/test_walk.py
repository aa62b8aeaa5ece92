"""The C record walk (sniffsync.io._walk) against the Python walk: the same offsets and stop
positions on random buffers, and the same Records on every test capture, crash reproducer,
truncated and garbled file (the Python walk is the reference: it is the documented
fallback, and test_capture.py checks it against tshark, dpkt and hand-read bytes)."""
import random
import struct
from pathlib import Path

import numpy as np
import pytest

from sniffsync.errors import CaptureError
from sniffsync.io import walk
from sniffsync.io.capture import read_records

DATA = Path(__file__).parents[1] / "data"
FILES = sorted(p for d in ("captures", "crashes") for p in (DATA / d).rglob("*")
               if p.is_file() and p.suffix in (".pcap", ".pcapng", ".gz") and "bomb" not in p.name)

needs_c = pytest.mark.skipif(walk._c is None, reason="sniffsync.io._walk not built (no compiler)")
pytestmark = needs_c


def records(path, backend, window=None):
    with walk.use_backend(backend):
        try:
            return read_records(path, **({"window_bytes": window} if window else {}))
        except CaptureError as exc:
            return str(exc)


def same(a, b):
    """Two read_records results (or error lines) are identical."""
    assert type(a) is type(b)
    if isinstance(a, str):
        assert a == b
        return
    for f in ("data_off", "caplen", "wirelen", "ts_ns", "linktype", "iface"):
        x, y = getattr(a, f), getattr(b, f)
        assert x.dtype == y.dtype and np.array_equal(x, y), f
    assert [(np.asarray(r).tolist(), w) for r, w in a.marks] == [(np.asarray(r).tolist(), w) for r, w in b.marks]
    assert (a.problems, a.interfaces, a.row0) == (b.problems, b.interfaces, b.row0)


def test_default_backend_is_c_when_built():
    assert walk.backend() == "c"
    with walk.use_backend("python"):
        assert walk.backend() == "python"
    assert walk.backend() == "c"


def test_files_exist():
    assert len(FILES) >= 20


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_test_capture_same_records(path):
    c = records(path, "c")
    same(c, records(path, "python"))
    if not isinstance(c, str) and len(c.data_off) > 8 and path.stat().st_size < 300_000:
        # small windows: many window edges
        same(records(path, "c", 4096), records(path, "python", 4096))


@pytest.fixture(scope="module")
def sources():
    """A classic pcap and a pcapng from the test data, as bytes."""
    pcap = (DATA / "captures" / "ns3-11n-ht20-hidden-snifferA-nearAP.pcap").read_bytes()[:60_000]
    ng = (DATA / "captures" / "fragattacks_ping_D_BP_bcast_ra-fromap.pcapng").read_bytes()
    return {"pcap": pcap, "pcapng": ng}


def to_big_endian_pcap(data: bytes) -> bytes:
    """The same classic pcap written big-endian (all header words swapped), nanosecond magic."""
    out = bytearray(struct.pack(">IHHiIII", 0xA1B23C4D, *struct.unpack_from("<HHiIII", data, 4)))
    pos = 24
    while pos + 16 <= len(data):
        sec, frac, incl, orig = struct.unpack_from("<IIII", data, pos)
        out += struct.pack(">IIII", sec, frac * 1000, incl, orig) + data[pos + 16:pos + 16 + incl]
        pos += 16 + incl
    return bytes(out)


def test_truncated_and_garbled_files_same_records(sources, tmp_path):
    rng = random.Random(17)
    cases = []
    for name, data in [*sources.items(), ("be.pcap", to_big_endian_pcap(sources["pcap"]))]:
        cases += [data[:k] for k in sorted(rng.sample(range(len(data)), 12))]     # cut anywhere
        for _ in range(12):                                                       # garbled bytes
            b = bytearray(data)
            for _ in range(rng.choice([1, 4, 32])):
                b[rng.randrange(len(b))] = rng.randrange(256)
            cases.append(bytes(b))
        for _ in range(8):                                                        # a wild length
            b = bytearray(data)
            at = rng.randrange(24, len(b) - 4)
            b[at:at + 4] = struct.pack("<I", rng.choice([0, 1, 12, 0xFFFFFFFF, 16 << 20, 0x7FFFFFFF]))
            cases.append(bytes(b))
    p = tmp_path / "x.cap"
    for i, data in enumerate(cases):
        p.write_bytes(data)
        for window in (None, 1000):
            same(records(p, "c", window), records(p, "python", window))


@pytest.mark.parametrize("fn", ["pcap", "pcapng"])
def test_windows_same_on_random_buffers(fn):
    """Offsets and stop position, on random bytes with small lengths, at every kind of
    start/stop (before, inside and past the buffer) and in both byte orders."""
    rng = np.random.default_rng(5)
    ours = getattr(walk, fn + "_window")
    py = getattr(walk, "_" + fn + "_py")
    steps = walk._PCAP if fn == "pcap" else walk._PCAPNG
    for _ in range(1500):
        n = int(rng.integers(0, 300))
        raw = rng.integers(0, 256, n, dtype=np.uint8)
        raw[3::4] = 0                                 # small lengths, so walks go on
        raw[rng.random(n) < 0.5] = 0
        mv = memoryview(raw)
        pos, stop = int(rng.integers(0, n + 20)), int(rng.integers(-5, n + 40))
        for order in "<>":
            with walk.use_backend("c"):
                got = ours(mv, pos, stop, order)
            want = py(mv, pos, stop, steps[order])
            assert (got[0].tolist(), got[1]) == (want[0].tolist(), want[1]), (raw.tobytes().hex(), pos, stop)


def test_headers_copied_by_the_walk_are_the_gathered_ones():
    """The C walk's copy of each record's 16 header bytes (zero past the buffer) is what
    bytecols.gather reads at the offsets; the Python walk leaves them to gather (None)."""
    from sniffsync.io.bytecols import gather
    rng = np.random.default_rng(8)
    for _ in range(800):
        n = int(rng.integers(0, 200))
        raw = rng.integers(0, 256, n, dtype=np.uint8)
        raw[3::4] = 0
        raw[rng.random(n) < 0.6] = 0
        pos, stop = int(rng.integers(0, 40)), int(rng.integers(-5, n + 20))
        for order in "<>":
            with walk.use_backend("c"):
                offs, end, heads = walk.pcap_window_heads(memoryview(raw), pos, stop, order)
                ref_offs, ref_end = walk.pcap_window(memoryview(raw), pos, stop, order)
            assert offs.tolist() == ref_offs.tolist() and end == ref_end
            off = np.frombuffer(offs, np.int64) if len(offs) else np.zeros(0, np.int64)
            assert np.array_equal(np.frombuffer(heads, np.uint8).reshape(-1, 16), gather(raw, off, 16))
    with walk.use_backend("python"):
        assert walk.pcap_window_heads(memoryview(raw), 0, 10, "<")[2] is None


def test_walk_reads_nothing_past_the_buffer():
    """A length field ending exactly at the end is read; one byte short of it stops the walk
    (the extension gets a buffer exactly as long as the slice, nothing after it)."""
    rec = struct.pack("<IIII", 0, 0, 4, 4) + b"abcd"            # 20-byte pcap record
    big = np.frombuffer(rec * 3, np.uint8)
    for k in range(big.size + 1):
        mv = memoryview(big[:k])
        with walk.use_backend("c"):
            got = walk.pcap_window(mv, 0, k, "<")
        want = walk._pcap_py(mv, 0, k, walk._PCAP["<"])
        assert (got[0].tolist(), got[1]) == (want[0].tolist(), want[1])
        assert all(o + 12 <= k for o in got[0])


def test_unknown_backend():
    with pytest.raises(ValueError):
        with walk.use_backend("rust"):
            pass


def test_hand_built_pcapng_cut_at_every_byte(tmp_path):
    """test_capture.py's hand-read pcapng (two sections LE/BE, if_tsresol 2^-10 and 10^-9,
    if_tsoffset, EPB/SPB/PB, an unknown block) and pcap, whole and cut at every byte."""
    from tests.io.test_capture import PCAP_LE_US, PCAPNG
    p = tmp_path / "x.cap"
    for data in (PCAPNG, PCAP_LE_US):
        for k in range(len(data) + 1):
            p.write_bytes(data[:k])
            same(records(p, "c"), records(p, "python"))
