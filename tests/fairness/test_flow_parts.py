"""A big capture's flows are analysed in groups of whole flows on threads
(sniffsync.fairness.core._analyze_parts): any split gives the report, flow table and RTT
samples of one table on one thread, byte for byte, on an 802.11 capture (MAC retries,
A-MPDUs, holes) and on the wired path of the command (columns consumed as read)."""
from __future__ import annotations

import io
import os
import threading

import numpy as np
import pytest

import sniffsync.fairness.core as core
from sniffsync.cli.fairness import _captures
from sniffsync.decode.frames import read_capture
from sniffsync.fairness.core import Capture, fairness_tables
from sniffsync.fairness.report import write_json
from sniffsync.tcp.columns import flow_parts

CAPS = os.path.join(os.path.dirname(__file__), "..", "data", "captures")
NS3 = os.path.join(CAPS, "ns3-11n-ht20-hidden-sniffer{}.pcap")


def test_flow_parts_cut_between_flows_only():
    fd = np.repeat(np.arange(8), [5, 1, 2, 2, 6, 0, 3, 1])        # flows of 6, 4, 6, 4 rows
    cuts = [(s.start, s.stop) for s in flow_parts(fd, 2)]
    assert cuts == [(0, 10), (10, 20)]
    assert [(s.start, s.stop) for s in flow_parts(fd, 4)] == [(0, 6), (6, 10), (10, 16), (16, 20)]
    assert flow_parts(fd, 2, min_rows=21) == [slice(0, 20)]         # small: one part
    assert flow_parts(fd[::-1], 2) == [slice(0, 20)]                # not sorted by fd
    assert flow_parts(np.array([0, 0, 1, 1, 1]), 2) == [slice(0, 5)]   # one flow
    assert flow_parts(np.repeat([0, 2], [99, 1]), 2) == [slice(0, 100)]  # a cut would save nothing


def _report(caps):
    runs, summary = fairness_tables(caps, 200_000_000, 100_000_000)
    fh = io.StringIO()
    write_json(fh, runs, summary)
    return fh.getvalue(), runs


@pytest.fixture
def split(monkeypatch):
    """Runs every analysis through the split path (2 threads, any size); counts the parts."""
    ran = []
    whole = core._analyze_parts

    def spy(seg, parts, *args):
        ran.append(len(parts))
        return whole(seg, parts, *args)
    monkeypatch.setenv("SNIFFSYNC_THREADS", "2")
    monkeypatch.setattr(core, "PARALLEL_MIN_ROWS", 1)
    monkeypatch.setattr(core, "_analyze_parts", spy)
    return ran


@pytest.fixture(scope="module")
def ethernet_pcap(tmp_path_factory):
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "bench_fairness", os.path.join(os.path.dirname(__file__), "..", "..", "bench", "bench_fairness.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    path = str(tmp_path_factory.mktemp("eth") / "tiled.pcap")
    mod.build_capture(path, 6000)
    return path


@pytest.mark.parametrize("kind", ["A-nearAP", "B-nearSTA1", "B-nearSTA1 command", "wired"])
def test_split_analysis_equals_one_table(kind, ethernet_pcap, split, monkeypatch):
    def caps():
        if kind in ("A-nearAP", "B-nearSTA1"):        # the API's path: a frame table
            return [Capture.from_frame(read_capture(NS3.format(kind)))]
        # the command's path: columns consumed as read (each group gathers its rows); lazily,
        # as the command does (a capture's parked columns are deleted when the next is asked for)
        return _captures([ethernet_pcap if kind == "wired" else NS3.format(kind.split()[0])])
    with monkeypatch.context() as mp:
        mp.setenv("SNIFFSYNC_THREADS", "1")
        one, runs1 = _report(caps())
    assert not split
    got, runs2 = _report(caps())
    assert split == [2]                                # two parts ran
    assert got == one
    for table in ("flows", "rtt"):
        a, b = runs1[0][table], runs2[0][table]
        assert list(a) == list(b)
        for k in a:
            np.testing.assert_array_equal(a[k], b[k], err_msg=f"{table}.{k}")
            assert a[k].dtype == b[k].dtype
    fl = runs1[0]["flows"]         # the parts had work: RTT samples, bytes across holes, MAC duplicates
    assert (fl["rtt_samples"] > 0).sum() >= 2
    assert {"A-nearAP": fl["inferred_bytes"], "B-nearSTA1": fl["mac_duplicates"],
            "B-nearSTA1 command": fl["mac_duplicates"]}.get(kind, np.ones(1)).sum() > 0


@pytest.mark.parametrize("kind", ["B-nearSTA1", "A-command"])
def test_groups_one_after_the_other_equal_groups_at_once(kind, split, monkeypatch):
    """A table above PARALLEL_MAX_ROWS runs its flow groups one by one (each group's
    temporaries alone, its columns the join does not keep freed): the same report."""
    def caps():
        if kind == "A-command":
            return _captures([NS3.format("A-nearAP")])     # (lazily: see above)
        return [Capture.from_frame(read_capture(NS3.format(kind)))]
    at_once, _ = _report(caps())
    monkeypatch.setattr(core, "PARALLEL_MAX_ROWS", 0)
    threads = []
    whole = core._analyze

    def spy(*args, **kwargs):
        threads.append(threading.current_thread())
        return whole(*args, **kwargs)
    monkeypatch.setattr(core, "_analyze", spy)
    one_by_one, _ = _report(caps())
    assert split == [2, 2] and len(threads) == 2 and set(threads) == {threading.main_thread()}
    assert one_by_one == at_once

