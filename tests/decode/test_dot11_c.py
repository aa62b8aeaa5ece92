"""The 802.11 MAC and LLC/SNAP headers read by the C extension (``sniffsync.io._walk.dot11``,
:mod:`sniffsync.decode.dot11c`) against the Python decoder (the fallback, checked against
hand-worked bytes in test_dot11.py and against tshark in test_frames_vs_tshark.py): every
column, mask, mark and the LLC / network-layer offsets, on random headers of every frame
type (control wrappers, extension frames, four addresses, QoS, +HTC, A-MSDU, Block Ack and
BAR bodies, beacons, association responses), cut anywhere, with and without an FCS, and
past the end of the buffer. Every test capture: test_radiotap_c.py compares the whole
frame table both ways (the backend switch selects every C pass)."""
import random
import struct

import numpy as np
import pytest

from sniffsync.decode import dot11c
from sniffsync.decode.dot11 import decode_dot11
from sniffsync.decode.payload import decode_llc
from sniffsync.io import walk

from tests.decode.test_radiotap_c import packed, same_cols

pytestmark = pytest.mark.skipif(getattr(walk._c, "dot11", None) is None,
                                reason="sniffsync.io._walk not built (no compiler)")

SNAP_IP = bytes([0xAA, 0xAA, 0x03, 0, 0, 0, 0x08, 0x00])
# what the fairness command asks for (no address roles, no FCS, no beacon body)
FAIRNESS = {"type_subtype", "retry", "duration_us", "ta", "ra", "seq", "frag", "tid", "aid", "assoc_aid",
            "ba_type", "ba_ssn", "ba_bitmap", "ba_bitmap_lo", "ba_info", "bad"}


def rand_bytes(rng, k):
    return bytes(rng.randrange(256) for _ in range(k))


def body(rng, fc0) -> bytes:
    ftype, sub = fc0 >> 2 & 3, fc0 >> 4
    if ftype == 1 and sub in (8, 9):                     # BA / BAR: control, SSC, bitmap
        ctl = rng.choice([0x0004, 0x0005, 0x0000, 0x0006, 0x3006, rng.randrange(1 << 16)])
        return struct.pack("<HH", ctl, rng.randrange(1 << 16)) + rand_bytes(rng, rng.choice([0, 8, 32, 128]))
    if ftype == 0 and sub in (5, 8):                     # beacon / probe response: TSF, interval, SSID
        ssid = rand_bytes(rng, rng.randrange(12))
        return rand_bytes(rng, 12) + bytes([0, len(ssid)]) + ssid + bytes([1, 2, 3, 4])
    if ftype == 0 and sub in (1, 3):
        return struct.pack("<HHH", 1, 0, 0xC000 | rng.randrange(2008))
    if ftype == 2:
        payload = rng.choice([SNAP_IP, SNAP_IP, SNAP_IP[:5] + b"\xf8" + SNAP_IP[6:], rand_bytes(rng, 8)])
        if rng.random() < 0.3:                           # an A-MSDU subframe header first
            payload = rand_bytes(rng, 12) + struct.pack(">H", rng.choice([20, 200, 3])) + payload
        return payload + rand_bytes(rng, rng.randrange(30))
    return rand_bytes(rng, rng.randrange(20))


def frame(rng) -> bytes:
    ftype = rng.choice([0, 1, 2, 2, 2, 3])
    sub = rng.randrange(16) if rng.random() < 0.5 else {0: 8, 1: rng.choice([7, 8, 9, 10, 6]), 2: 8, 3: 0}[ftype]
    fc0 = sub << 4 | ftype << 2 | (rng.randrange(4) if rng.random() < 0.05 else 0)
    fc1 = rng.randrange(256) & rng.choice([0xFF, 0x0B, 0x88, 0x03, 0x80, 0x40])
    hdr = bytes([fc0, fc1]) + rand_bytes(rng, 34)
    if ftype == 1 and sub == 7:                          # a control wrapper: the carried frame's FC at 10
        hdr = hdr[:10] + bytes([rng.choice([0x84, 0x94, 0xA4, rng.randrange(256)]), 0]) + hdr[12:]
    if ftype == 2 and fc1 & 3 != 3 and rng.random() < 0.5:
        hdr = hdr[:24 + 2 * bool(sub & 8)]               # no 4th address: the body follows at once
        if sub & 8 and rng.random() < 0.3:
            hdr = hdr[:24] + bytes([rng.choice([0x80, 0x05, 0x87]), 0])      # A-MSDU bit, TID
    elif ftype == 1:
        hdr = hdr[:16]
    else:
        hdr = hdr[:24]
    f = hdr + body(rng, fc0) + rand_bytes(rng, 4)        # (an FCS or not)
    return f[:rng.randrange(len(f) + 1)] if rng.random() < 0.15 else f


def decoded(backend, buf, off, end, fcs, cut, columns):
    with walk.use_backend(backend):
        cols, llc_off, llc_end, marks = decode_dot11(buf, off, end, fcs, cut, columns)
    return cols, llc_off, llc_end, [(np.asarray(r).tolist(), w) for r, w in marks]


def check(buf, off, end, fcs, cut, columns=None):
    c, py = (decoded(b, buf, off, end, fcs, cut, columns) for b in ("c", "python"))
    same_cols(c[0], py[0])
    assert list(c[0]) == list(py[0])                     # the same column order
    assert np.array_equal(c[1], py[1]) and np.array_equal(c[2], py[2]) and c[3] == py[3]
    # the LLC/SNAP outputs: decode_llc on the rows with an LLC payload
    with walk.use_backend("c"):
        *_, (l3_off, eth, eth_ok) = dot11c.decode_dot11_c(buf, off, end, fcs, cut, columns)
    has = py[1] >= 0
    llc_cols, py_l3 = decode_llc(buf, py[1][has], py[2][has])
    py_eth, py_ok = llc_cols["ethertype"]
    assert np.array_equal(l3_off[has], py_l3) and (l3_off[~has] == -1).all()
    assert np.array_equal(eth[has], py_eth) and np.array_equal(eth_ok[has], py_ok)
    assert not eth[~has].any() and not eth_ok[~has].any()
    return c


def test_random_headers():
    rng = random.Random(11)
    frames = [frame(rng) for _ in range(3000)]
    buf, off, lens = packed(frames)
    fcs = np.array([rng.random() < 0.5 for _ in frames])
    cut = np.array([rng.random() < 0.1 for _ in frames])
    for columns in (None, FAIRNESS, {"seq"}):
        cols, llc_off, _, marks = check(buf, off, off + lens, fcs, cut, columns)
    cols, llc_off, _, marks = check(buf, off, off + lens, fcs, None)
    # the kinds of rows the C pass must get right all occur
    for name in ("duration_us", "aid", "ta", "sa", "amsdu", "tid", "ba_ssn", "ssid", "assoc_aid"):
        assert cols[name][1].any() and not cols[name][1].all(), name
    assert {w for _, w in marks} >= {"802.11: header truncated"} and (llc_off >= 0).sum() > 300
    assert (cols["type_subtype"][0][cols["type_subtype"][1]] >= 0x160).any()       # extension control
    # the last frames of the buffer, shorter than the 40 bytes the C pass reads of each
    for k in range(0, 60, 7):
        b = buf[:int(off[-1]) + k]
        check(b, off[-3:], np.minimum(off[-3:] + 60, b.size), np.ones(3, bool), np.zeros(3, bool))


def test_qos_data_by_hand():
    # QoS data, to DS, retry; seq 0x123 frag 2; TID 5; LLC/SNAP IPv4; FCS at the end
    mac = [bytes([i] * 6) for i in (1, 2, 3)]
    f = (bytes([0x88, 0x09]) + struct.pack("<H", 44) + b"".join(mac) + struct.pack("<H", 0x123 << 4 | 2)
         + bytes([0x05, 0]) + SNAP_IP + bytes(20) + b"FCS!")
    buf = np.frombuffer(f, np.uint8)
    with walk.use_backend("c"):
        cols, llc_off, llc_end, marks = dot11c.decode_dot11_c(buf, np.array([0]), np.array([len(f)]),
                                                              np.array([True]), None)[:4]
    got = {k: int(v[0]) for k, (v, ok) in cols.items() if ok[0] and not hasattr(v, "codes")}
    assert got == {"type": 2, "subtype": 8, "type_subtype": 0x28, "fc_flags": 0x09, "to_ds": 1, "from_ds": 0,
                   "retry": 1, "protected": 0, "htc": 0, "duration_us": 44, "ra": 0x010101010101,
                   "ta": 0x020202020202, "bssid": 0x010101010101, "sa": 0x020202020202,
                   "da": 0x030303030303, "seq": 0x123, "frag": 2, "amsdu": 0, "tid": 5,
                   "fcs": int.from_bytes(b"FCS!", "little")}
    assert (llc_off[0], llc_end[0], marks) == (26, len(f) - 4, [])


def test_outputs_table_matches_the_extension():
    # a list of the wrong length or size is refused, not written past
    z = np.zeros(2, np.int64)
    with pytest.raises(ValueError):
        walk._c.dot11(b"", z, z, np.zeros(2, np.uint8), np.zeros(2, np.uint8), [], False)
    o = [np.zeros(2 if k < len(dot11c.OUTPUTS) - 6 else 0, dt) for k, (_, dt) in enumerate(dot11c.OUTPUTS)]
    walk._c.dot11(b"", z, z, np.zeros(2, np.uint8), np.zeros(2, np.uint8), o, False)
    with pytest.raises(ValueError):                      # roles asked for, their outputs empty
        walk._c.dot11(b"", z, z, np.zeros(2, np.uint8), np.zeros(2, np.uint8), o, True)
    o[3] = np.zeros(1, np.uint16)
    with pytest.raises(ValueError):
        walk._c.dot11(b"", z, z, np.zeros(2, np.uint8), np.zeros(2, np.uint8), o, False)


def test_extension_built_before_the_pass(monkeypatch):
    # an older build of sniffsync.io._walk (no dot11): the Python decoder answers
    f = bytes([0x88, 0x01]) + bytes(24) + SNAP_IP + bytes(20)
    buf = np.frombuffer(f * 2, np.uint8)
    off = np.array([0, len(f)], np.int64)
    args = (buf, off, off + len(f), np.zeros(2, bool))
    with walk.use_backend("python"):
        py = decode_dot11(*args)
    monkeypatch.setattr(walk, "_c", type("Old", (), {"pcap": walk._c.pcap})())
    assert not dot11c.dot11_c_ready() and dot11c.decode_dot11_c(*args) is None
    with walk.use_backend("c"):
        same_cols(decode_dot11(*args)[0], py[0])
