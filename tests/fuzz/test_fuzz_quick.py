"""Quick profile of the fuzz suite (the long one: ``python bench/fuzz.py --minutes N``).

Structure-aware inputs (bench/fuzz_inputs.py: pcap/pcapng headers and block lengths,
radiotap it_len and present-word chains, 802.11 lengths, IP/TCP fields, timestamps,
gzip) go through the whole reader and the stage functions; every input must end in a
table or the project's own error. And a damaged file keeps every record before its
first damaged byte, decoded exactly as in the undamaged file.
"""
import importlib.util
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "bench")


def _load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(BENCH, f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


fi = _load("fuzz_inputs")
ft = _load("fuzz_target")
QUICK = settings(max_examples=int(os.environ.get("SNIFFSYNC_FUZZ_EXAMPLES", 30)), deadline=None, database=None, derandomize=True,
                 phases=[Phase.explicit, Phase.generate],
                 suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return str(tmp_path_factory.mktemp("fuzz") / "input.bin")


@QUICK
@given(data=fi.capture())
def test_every_input_ends_in_a_table_or_our_error(scratch, data):
    ft.run_one(data, scratch, with_stages=False)


@settings(QUICK, max_examples=max(10, QUICK.max_examples // 3))
@given(data=fi.capture())
def test_stages_take_any_decoded_table(scratch, data):
    try:
        rec, frames = ft.read_bytes(data, scratch)
    except ft.SniffsyncError:
        return
    ft.check_table(rec, frames)
    try:                        # wild stamps included: fairness computes only windows with data
        ft.stages(frames)
    except ft.SniffsyncError:
        pass


COMPARED = ["ts_ns", "caplen", "wirelen", "linktype", "type_subtype", "ta", "ra", "seq", "mcs", "tsft_us",
            "ip_src", "sport", "tcp_seq", "tcp_payload_len", "udp_len"]


@settings(QUICK, max_examples=12)
@given(recs=fi.records(127, max_records=10).filter(lambda r: len(r) >= 2), where=st.floats(0, 1),
       how=st.sampled_from(["cut", "length", "garbage", "gzip-cut"]))
def test_records_before_the_first_damaged_byte_are_kept(tmp_path_factory, recs, where, how):
    import gzip
    import struct
    folder = tmp_path_factory.mktemp("damage")
    good = fi.build_pcap(recs)
    at = 24 + int(where * (len(good) - 24))          # first damaged byte
    if how == "cut":
        bad = good[:at]
    elif how == "length":                            # a record length field set to garbage
        bad = good[:at] + struct.pack("<I", 0xFFFFFFF0) + good[at + 4:]
    elif how == "garbage":
        bad = good[:at] + b"\xff" * (len(good) - at)
    else:                                            # a gzip cut in the middle of its stream
        packed = gzip.compress(good)
        bad = packed[:max(len(packed) * (at - 24) // (len(good) - 24), 11)]
    _, want = ft.read_bytes(good, str(folder / "good.pcap"))
    try:
        _, got = ft.read_bytes(bad, str(folder / "bad.pcap"))
    except ft.SniffsyncError:                        # nothing readable: the header itself is hit
        assert how == "gzip-cut" or at < 24 + 16
        return
    if how == "gzip-cut":                            # before the damage: all that inflated but the last
        k = len(got) - 1
    else:                                            # records ending before the first damaged byte
        end = 24 + np.cumsum(16 + np.asarray(want["caplen"], np.int64))
        k = int(np.searchsorted(end, at, side="right"))
    assert len(got) >= k
    cols = [c for c in COMPARED if c in want]
    a, b = want[cols].iloc[:k].reset_index(drop=True), got[cols].iloc[:k].reset_index(drop=True)
    assert a.astype(str).equals(b.astype(str))


FOUND = sorted((Path(__file__).parents[1] / "data" / "crashes" / "fuzz-found").glob("*.bin"))


@pytest.mark.parametrize("path", FOUND, ids=[p.name for p in FOUND])
def test_inputs_the_long_run_found_end_in_a_result(path, scratch):
    # each crashed the stages once (the traceback is in tests/data/crashes/README.md)
    rec, frames = ft.read_bytes(path.read_bytes(), scratch)
    ft.check_table(rec, frames)
    assert len(frames) > 0
    ft.stages(frames)            # raised IndexError before: now a result
