"""Block-Ack bitmaps read in full (issue 13, item 3): hand-checked bytes, and an ns-3 HE capture
whose 256-bit bitmaps acknowledge MPDUs past bit 63, checked against tshark's TCP analysis."""
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from airtime.blockack import acked_in_block_ack as _in_bitmap

CAPS = Path(__file__).parents[1] / "data" / "captures"
HE80 = CAPS / "ns3-11ax-he80-snifferA-s256.pcap"


def _ba_rows(bitmaps_hex, ssns):
    """A frame table of Block-Ack rows: the bitmap bytes as hex text (as the decoder keeps them)."""
    return pd.DataFrame({"ba_ssn": pd.array(ssns, dtype="UInt16"),
                         "ba_bitmap": pd.Categorical(bitmaps_hex),
                         "ba_bitmap_lo": pd.array([0] * len(ssns), dtype="UInt64")})


def test_256_bit_bitmap_acknowledges_past_bit_63():
    # the PPDU 94: SSN 0, bitmap ff x 10 then 07 (bits 0-82 set), 32 bytes in all
    bm = "ff" * 10 + "07" + "00" * 21
    f = _ba_rows([bm], [0])
    seq = np.arange(0, 100)
    got = _in_bitmap(f, np.zeros(100, np.int64), seq)
    assert got[:83].all() and not got[83:].any()


@pytest.mark.parametrize("nbytes", [8, 32, 64, 128])        # 64, 256, 512, 1024-bit bitmaps
def test_every_bitmap_size_against_a_bit_loop(nbytes):
    rng = np.random.default_rng(nbytes)
    raw = [rng.integers(0, 256, nbytes, dtype=np.uint8).tobytes() for _ in range(5)]
    ssn = rng.integers(0, 4096, 5)
    f = _ba_rows([r.hex() for r in raw], ssn)
    frame = rng.integers(0, 5, 400)
    seq = (ssn[frame] + rng.integers(-50, 8 * nbytes + 50, 400)) % 4096     # wraps, outside too
    want = []
    for k, s in zip(frame, seq):
        off = (int(s) - int(ssn[k])) % 4096
        want.append(off < 8 * nbytes and bool(raw[k][off // 8] >> (off % 8) & 1))
    assert _in_bitmap(f, frame, seq).tolist() == want


def test_rows_without_bitmap_bytes_use_the_first_64_bits():
    f = _ba_rows(["ff" * 8, None], [0, 0])
    f["ba_bitmap_lo"] = pd.array([0, 0b100001], dtype="UInt64")   # bits 0 and 5
    assert _in_bitmap(f, np.array([1, 1, 1, 0]), np.array([0, 5, 6, 5])).tolist() == [True, True, False, True]


@pytest.mark.tshark
@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")
def test_he80_capture_no_failed_mpdus_where_tcp_saw_no_retransmission():
    import sniffsync
    from airtime.detect import detect
    from airtime.ppdu import group_ppdus
    out = subprocess.run(["tshark", "-r", str(HE80), "-n", "-Y", "tcp.analysis.retransmission",
                          "-T", "fields", "-e", "frame.number"], capture_output=True, text=True, check=True)
    retx = len(out.stdout.split())
    f = sniffsync.read_capture(HE80)
    g = group_ppdus(f)
    res = detect(f, g.ppdus, g.frame_ppdu)
    assert (res.mpdus["seq"].to_numpy() % 4096 >= 0).all() and len(res.mpdus) > 10_000
    assert (f["ba_bitmap"].dropna().str.len() == 64).all()      # 256-bit bitmaps in this capture
    # before the fix 8943 MPDUs failed (bits 64+ read as "not acknowledged"), 4959 of them for
    # good. An MPDU lost for good needs a TCP retransmission (tshark counts them); one that
    # failed and was delivered later needs a MAC retry (the retry bit of a captured frame)
    assert (res.mpdus["fate"] == "lost").sum() <= retx <= 5
    retries = int(f["retry"].fillna(False).sum())
    assert (res.events["kind"] == "mpdu_failed").sum() <= retries


def test_records_read_back_as_plain_text_give_the_same_answer():
    # a table read back from CSV / JSON holds ba_info as strings, not a categorical
    import sniffsync
    from airtime.blockack import ba_records
    f = sniffsync.read_capture(Path(__file__).parents[1] / "data" / "tshark_ba" / "hand_ba.pcap")
    g = f.copy()
    g["ba_info"] = g["ba_info"].astype(object)
    g["ba_bitmap"] = g["ba_bitmap"].astype(object)
    assert ba_records(g).astype(str).equals(ba_records(f).astype(str)) and len(ba_records(f)) > 20
    frame = np.repeat(np.flatnonzero(f["ba_type"].notna().to_numpy()), 8)
    seq = np.tile(np.arange(8), len(frame) // 8)
    tid = np.tile([5, 6, 3, 0, 1, 2, 4, 5], len(frame) // 8)
    assert (_in_bitmap(g, frame, seq, tid=tid) == _in_bitmap(f, frame, seq, tid=tid)).all()
    assert _in_bitmap(f, frame, seq, tid=tid).any()
