"""PPDU grouping with its per-frame temporaries built in small chunks (airtime.ppdu and
airtime.extent, FRAME_CHUNK: memory, not results) gives the same PPDU table, frame -> PPDU
map and stamp decision as one pass, on ns-3's cut A-MPDUs (each sniffer, and merged:
copies of one PPDU) and the hidden-node set (one table of three sniffers)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import airtime.extent as E
import airtime.extent_ba as B
import airtime.ppdu as P
from sniffsync.decode.frames import read_capture
from sniffsync.sync.merge import merge

CUT = "tests/data/captures/ns3-hidden-cut/sniffer{}.pcap.gz"
HIDDEN = ["tests/data/captures/ns3-11n-ht20-hidden-snifferA-nearAP.pcap",
          "tests/data/captures/ns3-11n-ht20-hidden-snifferB-nearSTA1.pcap",
          "tests/data/captures/ns3-11n-ht20-hidden-snifferC-nearSTA2.pcap"]


def _sniffers(paths):
    tables = []
    for k, p in enumerate(paths):
        fr = read_capture(p)
        fr["sniffer"] = np.full(len(fr), k, fr["sniffer"].dtype)
        tables.append(fr)
    return tables


@pytest.fixture(scope="module")
def tables(request):
    root = request.config.rootpath
    cut = [str(root / CUT.format(s)) for s in "ABC"]
    out = {f"cut {s}": (fr, "capture") for s, fr in zip("AB", _sniffers(cut[:2]))}
    m = merge(cut)
    out["cut merged"] = (m.frames, m.stamps)
    hidden = _sniffers([str(root / p) for p in HIDDEN])
    out["hidden A"] = (hidden[0], "capture")
    # three sniffers in one table, rows interleaved: the grouping's sort by sniffer is not the row order
    both = pd.concat(hidden, ignore_index=True)
    out["hidden ABC"] = (both.iloc[np.argsort(both["ts_ns"].to_numpy(), kind="stable")].reset_index(drop=True),
                         "capture")
    return out


@pytest.mark.parametrize("name", ["cut A", "cut B", "cut merged", "hidden A", "hidden ABC"])
def test_chunked_grouping_is_the_whole_grouping(tables, name, monkeypatch):
    frames, stamps = tables[name]
    want = P.group_ppdus(frames, stamps=stamps)
    assert len(frames) > 5 * 7
    monkeypatch.setattr(E, "FRAME_CHUNK", 7)
    monkeypatch.setattr(B, "FRAME_CHUNK", 7)
    monkeypatch.setattr(P, "FRAME_CHUNK", 7)
    unions = []
    rows_of = E._subframe_rows
    monkeypatch.setattr(E, "_subframe_rows", lambda *a: unions.append(1) or rows_of(*a))
    got = P.group_ppdus(frames, stamps=stamps)
    assert got.ppdus.equals(want.ppdus)
    assert np.array_equal(got.frame_ppdu, want.frame_ppdu)
    assert got.tsft_at == want.tsft_at
    if name == "cut merged":       # the copies' union is taken (copies of one PPDU share a clock)
        assert unions and (want.ppdus["extent_src"] != "captured").any()


def test_median_by_is_pandas_groupby_median():
    rng = np.random.default_rng(3)
    big = 1_700_000_000_000_000_000
    for n, k in ((1, 1), (2, 1), (1000, 1), (999, 3), (10, 4)):
        values = -big + rng.integers(-5_000_000, 5_000_000, n)         # epoch-sized: float rounding
        key = rng.integers(0, k, n)
        got, want = P._median_by(values, key), pd.Series(values).groupby(key).median()
        assert got.index.tolist() == want.index.tolist()
        assert np.array_equal(got.to_numpy(), want.to_numpy())
