"""Capture writers: exact bytes against hand-built hex, round trips, tshark/dpkt open the output."""
import os
import shutil
import subprocess

import numpy as np
import pytest

from sniffsync.io import writers
from sniffsync.io.capture import read_records
from sniffsync.errors import CaptureError, UsageError
from sniffsync.io.writers import write_pcap, write_pcapng


def h(text: str) -> bytes:
    """Bytes from commented hex: everything after '#' on a line is a comment."""
    return bytes.fromhex("".join(line.split("#")[0] for line in text.splitlines()))


def u8(b: bytes) -> np.ndarray:
    return np.frombuffer(b, np.uint8)


def need_tshark():
    if shutil.which("tshark") is None:
        pytest.skip("tshark not installed")


def tshark(path, *fields):
    res = subprocess.run(["tshark", "-r", str(path), "-T", "fields", *sum((["-e", f] for f in fields), [])],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "corrupt" not in res.stderr and "damaged" not in res.stderr
    return [line.split("\t") for line in res.stdout.splitlines()]


# two packets: "aa bb cc" at 1700000002.000000007 s (wire 3), "01 02 03 04" at 5 ns (wire 100)
TS = [1_700_000_002_000_000_007, 5]
DATA = u8(b"\xaa\xbb\xcc\x01\x02\x03\x04")
OFF = [0, 3, 7]
WIRE = [3, 100]

PCAP_NS = h("""
4d 3c b2 a1   # magic 0xa1b23c4d little-endian: nanosecond timestamps
02 00 04 00   # version 2.4
00 00 00 00   # thiszone
00 00 00 00   # sigfigs
00 01 00 00   # snaplen 256
01 00 00 00   # linktype 1
02 f1 53 65   # ts_sec 0x6553f102 = 1700000002
07 00 00 00   # ts_nsec 7
03 00 00 00   # incl_len 3
03 00 00 00   # orig_len 3
aa bb cc      # packet 0
00 00 00 00   # ts_sec 0
05 00 00 00   # ts_nsec 5
04 00 00 00   # incl_len 4
64 00 00 00   # orig_len 100
01 02 03 04   # packet 1
""")


def test_pcap_bytes_match_hand_built(tmp_path):
    write_pcap(tmp_path / "a.pcap", 1, TS, DATA, OFF, WIRE, nanosecond=True, snaplen=256)
    assert (tmp_path / "a.pcap").read_bytes() == PCAP_NS


def test_pcap_microseconds_truncates_and_raises_snaplen(tmp_path):
    write_pcap(tmp_path / "us.pcap", 1, TS, DATA, OFF, WIRE, nanosecond=False, snaplen=2)
    raw = (tmp_path / "us.pcap").read_bytes()
    assert raw[:4] == h("d4 c3 b2 a1  # microsecond magic")
    assert raw[16:20] == h("04 00 00 00  # snaplen raised to the longest packet, 4")
    assert raw[24:32] == h("02 f1 53 65  00 00 00 00  # 1700000002 s, 0 us (7 ns dropped)")


PCAPNG_ONE = h("""
0a 0d 0d 0a   # SHB
30 00 00 00   # total length 48
4d 3c 2b 1a   # byte-order magic, little-endian
01 00 00 00   # version 1.0
ff ff ff ff ff ff ff ff   # section length unknown
04 00 09 00 73 6e 69 66 66 73 79 6e 63 00 00 00   # shb_userappl, len 9 "sniffsync" (+3 pad)
00 00 00 00   # opt_endofopt
30 00 00 00   # total length 48
01 00 00 00   # IDB
28 00 00 00   # total length 40
01 00 00 00   # linktype 1, reserved
00 00 00 00   # snaplen 0 (none)
02 00 04 00 65 74 68 30   # if_name, len 4, "eth0"
09 00 01 00 09 00 00 00   # if_tsresol, len 1, 9 -> ns (+3 pad)
00 00 00 00   # opt_endofopt
28 00 00 00   # total length 40
06 00 00 00   # EPB
30 00 00 00   # total length 48 = 28 + 3 data + 1 pad + 12 options + 4
00 00 00 00   # interface 0
fe 9c 97 17   # ts high 0x17979cfe
07 94 5f ad   # ts low 0xad5f9407 -> 1700000002000000007 ns
03 00 00 00   # caplen 3
03 00 00 00   # orig len 3
aa bb cc 00   # data + 1 pad byte
01 00 02 00 68 69 00 00   # opt_comment, len 2, "hi" (+2 pad)
00 00 00 00   # opt_endofopt
30 00 00 00   # total length 48
06 00 00 00   # EPB
24 00 00 00   # total length 36 = 28 + 4 data + 4
00 00 00 00   # interface 0
00 00 00 00   # ts high
05 00 00 00   # ts low: 5 ns
04 00 00 00   # caplen 4
64 00 00 00   # orig len 100
01 02 03 04   # data (no pad, no options)
24 00 00 00   # total length 36
""")


def test_pcapng_bytes_match_hand_built(tmp_path):
    write_pcapng(tmp_path / "a.pcapng", [{"name": "eth0", "linktype": 1}], [0, 0], TS, DATA, OFF,
                 WIRE, comments=["hi", None])
    assert (tmp_path / "a.pcapng").read_bytes() == PCAPNG_ONE


def random_packets(n, seed=1):
    rng = np.random.default_rng(seed)
    lens = rng.integers(0, 300, n)
    lens[:3] = [0, 1, 2]                              # empty and unpadded packets
    off = np.concatenate([[0], np.cumsum(lens)])
    data = rng.integers(0, 256, off[-1], dtype=np.uint8)
    ts = 1_700_000_000 * 10**9 + np.cumsum(rng.integers(0, 10**7, n))
    wire = lens + rng.integers(0, 50, n)
    return ts, data, off, wire


def packets(rec):
    return [bytes(rec.buf[o:o + c]) for o, c in zip(rec.data_off, rec.caplen)]


@pytest.mark.parametrize("ns", [True, False])
def test_pcap_round_trip(tmp_path, ns):
    ts, data, off, wire = random_packets(3000)
    write_pcap(tmp_path / "r.pcap", 127, ts, data, off, wire, nanosecond=ns)
    rec = read_records(tmp_path / "r.pcap")
    assert rec.ts_ns.tolist() == (ts if ns else ts // 1000 * 1000).tolist()
    assert packets(rec) == [data[a:b].tobytes() for a, b in zip(off[:-1], off[1:])]
    assert rec.wirelen.tolist() == wire.tolist() and rec.marks == [] and rec.problems == []
    assert (rec.linktype == 127).all()


def test_pcap_opens_in_dpkt(tmp_path):
    dpkt = pytest.importorskip("dpkt")
    ts, data, off, wire = random_packets(500)
    write_pcap(tmp_path / "d.pcap", 1, ts, data, off, wire, nanosecond=False)
    with open(tmp_path / "d.pcap", "rb") as fh:
        got = list(dpkt.pcap.Reader(fh))
    assert [round(t * 1e6) for t, _ in got] == (ts // 1000).tolist()
    assert [b for _, b in got] == [data[a:b].tobytes() for a, b in zip(off[:-1], off[1:])]


IFACES = [{"name": "snifferA", "linktype": 127, "snaplen": 65535},
          {"name": "eth1", "linktype": 1, "description": "wired side"},
          {"name": "tun0", "linktype": 101}]


def comments_for(n):
    com = np.full(n, None, object)
    com[::97] = [f"note {i} é" for i in range(len(com[::97]))]   # non-ASCII too
    com[5] = ""                                                     # empty: no option
    return com


def test_pcapng_round_trip_many_chunks(tmp_path, monkeypatch):
    n = 3000
    ts, data, off, wire = random_packets(n, seed=2)
    iface = np.arange(n) % 3
    com = comments_for(n)
    write_pcapng(tmp_path / "one.pcapng", IFACES, iface, ts, data, off, wire, com)
    monkeypatch.setattr(writers, "_CHUNK_BYTES", 1000)          # ~ 4 records per chunk
    write_pcapng(tmp_path / "many.pcapng", IFACES, iface, ts, data, off, wire, com)
    assert (tmp_path / "one.pcapng").read_bytes() == (tmp_path / "many.pcapng").read_bytes()
    rec = read_records(tmp_path / "many.pcapng")
    assert rec.ts_ns.tolist() == ts.tolist() and rec.iface.tolist() == iface.tolist()
    assert rec.linktype.tolist() == [IFACES[i]["linktype"] for i in iface]
    assert packets(rec) == [data[a:b].tobytes() for a, b in zip(off[:-1], off[1:])]
    assert rec.wirelen.tolist() == wire.tolist() and rec.problems == []
    assert [i["name"] for i in rec.interfaces] == ["snifferA", "eth1", "tun0"]
    assert [i["description"] for i in rec.interfaces] == ["", "wired side", ""]


def test_pcap_chunked_equals_whole(tmp_path, monkeypatch):
    ts, data, off, wire = random_packets(400, seed=3)
    write_pcap(tmp_path / "one.pcap", 1, ts, data, off, wire)
    monkeypatch.setattr(writers, "_CHUNK_BYTES", 333)
    write_pcap(tmp_path / "many.pcap", 1, ts, data, off, wire)
    assert (tmp_path / "one.pcap").read_bytes() == (tmp_path / "many.pcap").read_bytes()


def test_pcapng_opens_in_tshark_with_names_and_comments(tmp_path):
    need_tshark()
    n = 300
    ts, data, off, wire = random_packets(n, seed=4)
    iface = np.arange(n) % 3
    com = comments_for(n)
    write_pcapng(tmp_path / "t.pcapng", IFACES, iface, ts, data, off, wire, com)
    rows = tshark(tmp_path / "t.pcapng", "frame.interface_name", "frame.comment",
                  "frame.time_epoch", "frame.cap_len", "frame.len")
    assert [r[0] for r in rows] == [IFACES[i]["name"] for i in iface]
    assert [r[1] for r in rows] == [c or "" for c in com]
    assert [r[2] for r in rows] == [f"{t // 10**9}.{t % 10**9:09d}" for t in ts]
    assert [int(r[3]) for r in rows] == np.diff(off).tolist()
    assert [int(r[4]) for r in rows] == wire.tolist()


@pytest.mark.parametrize("ns", [True, False])
def test_pcap_opens_in_tshark(tmp_path, ns):
    need_tshark()
    ts, data, off, wire = random_packets(300, seed=5)
    write_pcap(tmp_path / "t.pcap", 1, ts, data, off, wire, nanosecond=ns)
    rows = tshark(tmp_path / "t.pcap", "frame.time_epoch", "frame.cap_len")
    want = ts if ns else ts // 1000 * 1000
    assert [r[0] for r in rows] == [f"{t // 10**9}.{t % 10**9:09d}" for t in want]
    assert [int(r[1]) for r in rows] == np.diff(off).tolist()


def test_empty_capture(tmp_path):
    write_pcapng(tmp_path / "e.pcapng", IFACES[:1], [], [], u8(b""), [0])
    write_pcap(tmp_path / "e.pcap", 1, [], u8(b""), [0])
    assert len(read_records(tmp_path / "e.pcapng").ts_ns) == 0
    assert len(read_records(tmp_path / "e.pcap").ts_ns) == 0
    assert read_records(tmp_path / "e.pcapng").interfaces[0]["name"] == "snifferA"


def test_failed_write_leaves_nothing_behind(tmp_path, monkeypatch):
    target = tmp_path / "keep.pcap"
    target.write_bytes(b"old content")

    def broken(fh, n, pieces):
        fh.write(b"partial")
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(writers, "_assemble", broken)
    with pytest.raises(CaptureError, match=r"keep\.pcap: cannot write: No space left on device"):
        write_pcap(target, 1, TS, DATA, OFF)
    assert target.read_bytes() == b"old content"
    assert os.listdir(tmp_path) == ["keep.pcap"]


def test_unwritable_directory(tmp_path):
    with pytest.raises(CaptureError, match="cannot write"):
        write_pcap(tmp_path / "no" / "such" / "dir.pcap", 1, TS, DATA, OFF)


@pytest.mark.parametrize("kwargs, what", [
    (dict(off=[0, 3]), "off must have"),
    (dict(off=[0, 5, 3]), "non-decreasing"),
    (dict(ts_ns=[-1, 5]), ">= 0"),
    (dict(wirelen=[1]), "wirelen"),
])
def test_bad_arguments(tmp_path, kwargs, what):
    args = dict(ts_ns=TS, data=DATA, off=OFF, wirelen=None) | kwargs
    with pytest.raises(UsageError, match=what):
        write_pcap(tmp_path / "x.pcap", 1, **args)
    with pytest.raises(UsageError, match=what):
        write_pcapng(tmp_path / "x.pcapng", IFACES, [0, 0], **args)
    assert not os.listdir(tmp_path)


def test_pcapng_bad_interface_index(tmp_path):
    with pytest.raises(UsageError, match="iface"):
        write_pcapng(tmp_path / "x.pcapng", IFACES, [0, 3], TS, DATA, OFF)
