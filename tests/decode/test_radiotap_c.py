"""The radiotap headers read by the C extension (``sniffsync.io._walk.radiotap``) against the
Python decoder, which stays the fallback: every decoded column and mark, C path and Python
path, on every test capture, crash reproducer, header-damaged file and random header.

The Python decoder is the reference (test_radiotap.py checks it against hand-worked bytes
and tshark; those hand-built headers now also take the C path, as the default backend).
The C pass decides no mark: a chunk with any frame the Python decoder marks goes to Python.
"""
import random
import struct
from pathlib import Path

import numpy as np
import pytest

from sniffsync.decode import radiotap
from sniffsync.decode.frames import read_columns
from sniffsync.decode.radiotap import FIELDS, decode_radiotap
from sniffsync.decode.radiotap_values import fields_for
from sniffsync.decode.table import Cat
from sniffsync.errors import CaptureError
from sniffsync.io import walk

DATA = Path(__file__).parents[1] / "data"
FILES = sorted(p for d in ("captures", "crashes") for p in (DATA / d).rglob("*")
               if p.is_file() and p.suffix in (".pcap", ".pcapng", ".gz") and "bomb" not in p.name
               and not p.name.endswith(".csv.gz"))
HT20 = DATA / "captures" / "ns3-11n-ht20-hidden-snifferA-nearAP.pcap"

pytestmark = pytest.mark.skipif(walk._c is None, reason="sniffsync.io._walk not built (no compiler)")


def packed(records):
    """``(buf, off, lens)``: the byte strings back to back, where each starts, their lengths."""
    buf = np.frombuffer(b"".join(records), np.uint8)
    lens = np.array([len(r) for r in records], np.int64)
    return buf, np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64), lens


def same_cols(a, b, where=""):
    assert a.keys() == b.keys(), where
    for k in a:
        (va, oka), (vb, okb) = a[k], b[k]
        if isinstance(va, Cat):
            assert list(va.categories) == list(vb.categories) and np.array_equal(va.codes, vb.codes), (where, k)
        else:
            assert va.dtype == vb.dtype and np.array_equal(va, vb), (where, k)
        assert (oka is None and okb is None) or np.array_equal(oka, okb), (where, k)


def decoded(path, backend):
    with walk.use_backend(backend):
        try:
            return read_columns(path, chunk_rows=4096)[1:]
        except CaptureError as exc:
            return str(exc)


def same_decode(path):
    c, py = decoded(path, "c"), decoded(path, "python")
    assert type(c) is type(py)
    if isinstance(c, str):
        assert c == py
        return
    assert c[0] == py[0]
    same_cols(c[1], py[1], path.name)
    assert list(c[1]) == list(py[1]), path.name           # the same column order
    assert [(np.asarray(r).tolist(), w) for r, w in c[2]] == [(np.asarray(r).tolist(), w) for r, w in py[2]]


def test_every_test_capture_every_column():
    assert len(FILES) >= 20
    for path in FILES:
        same_decode(path)


def test_header_damaged_files(tmp_path, monkeypatch):
    # bytes garbled inside the radiotap headers (present words, it_len, fields) of a real capture
    data = HT20.read_bytes()
    starts, pos = [], 24
    while pos < 30_000:
        starts.append(pos + 16)
        pos += 16 + struct.unpack_from("<I", data, pos + 8)[0]
    data = data[:pos]
    rng = random.Random(5)
    p = tmp_path / "x.pcap"
    c_used = []
    c_fields = radiotap._c_fields
    monkeypatch.setattr(radiotap, "_c_fields", lambda *a: c_used.append(c_fields(*a)) or c_used[-1])
    for _ in range(25):
        b = bytearray(data)
        for at in rng.sample(starts, 3):
            b[at + rng.randrange(2, 40)] = rng.randrange(256)
        p.write_bytes(bytes(b))
        same_decode(p)
    assert any(r is not None for r in c_used)    # damaged yet clean headers took the C path


def random_header(rng) -> bytes:
    """A radiotap header of random present words (namespaces, Ext chains, vendor data) and
    random field bytes, its it_len sometimes too short."""
    words = []
    for k in range(rng.choice([1, 1, 1, 2, 3])):
        w = 0
        for b in rng.sample(range(29), rng.randrange(0, 10)):
            w |= 1 << b
        if rng.random() < 0.2:
            w |= 1 << rng.choice([29, 30])
        words.append(w)
    for k in range(len(words) - 1):
        words[k] |= 1 << 31
    body = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 90)))
    it_len = 4 + 4 * len(words) + len(body)
    if rng.random() < 0.15:
        it_len = rng.randrange(0, it_len + 4)
    return struct.pack("<BBH", 0, 0, it_len & 0xFFFF) + b"".join(struct.pack("<I", w) for w in words) + body


def test_random_headers():
    rng = random.Random(11)
    hdrs = [random_header(rng) for _ in range(3000)]
    buf, off, lens = packed(hdrs)
    end = off + lens
    with walk.use_backend("python"):
        _, _, _, marks = decode_radiotap(buf, off, end)
    marked = np.zeros(len(hdrs), bool)
    for rows, _why in marks:
        marked[rows] = True
    need = fields_for(None)
    for i in np.flatnonzero(marked):        # the C pass never decides a mark
        assert radiotap._c_fields(buf, off[i:i + 1], end[i:i + 1], need) is None
    clean = np.flatnonzero(~marked)
    assert 500 < clean.size < len(hdrs)
    assert radiotap._c_fields(buf, off[clean], end[clean], need) is not None
    results = []
    for backend in ("c", "python"):
        with walk.use_backend(backend):
            results.append(decode_radiotap(buf, off[clean], end[clean]))
    (ca, ha, fa, ma), (cb, hb, fb, mb) = results
    same_cols(ca, cb)
    assert np.array_equal(ha, hb) and np.array_equal(fa, fb) and ma == mb == []
    # every field a column reads occurs on the C path
    present = radiotap._c_fields(buf, off[clean], end[clean], need)[2]
    assert need and all(present[name].any() for name in need)
    assert not any(present[f.name].any() for f in FIELDS.values() if f.name not in need)
