"""Decoding only some columns gives those columns exactly as a full decode does (the Block
Ack texts are skipped when not asked for), and the vectorised hex categories equal
``bytes.hex`` of every key (Python's formatting: the oracle)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sniffsync.decode.dot11 import _hexstr, categorical_from_bytes
from sniffsync.decode.frames import read_capture

CAPTURE = Path(__file__).parents[1] / "data" / "captures" / "ns3-11ac-vht80-snifferA-s256.pcap"
SUBSETS = [["ba_ssn", "ba_bitmap"], ["ba_bitmap_lo", "ra"], ["ba_info"], ["ba_ssn", "seq", "ta"]]


@pytest.mark.parametrize("m", [1, 3, 8, 9, 32])
def test_hex_categories_are_bytes_hex(m):
    keys = np.random.default_rng(m).integers(0, 3, (500, m)).astype(np.uint8)
    cat = categorical_from_bytes(keys, _hexstr)
    assert cat.categories == sorted({k.tobytes().hex() for k in keys})
    assert [cat.categories[c] for c in cat.codes] == [k.tobytes().hex() for k in keys]


@pytest.fixture(scope="module")
def full():
    return read_capture(CAPTURE)


@pytest.mark.parametrize("cols", SUBSETS)
def test_subset_equals_full_decode(full, cols):
    part = read_capture(CAPTURE, columns=cols)
    assert full["ba_bitmap"].notna().sum() > 100           # the capture has Block Acks
    for c in cols:
        assert part[c].equals(full[c]), c
