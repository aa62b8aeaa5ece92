"""The fairness report writer and the pandas-free CLI path (sniffsync.fairness.report).

Oracles: ``json.dump`` of the DataFrame records (the writer's previous implementation)
and the pandas API (:func:`sniffsync.fairness.frames.fairness` on ``read_capture`` tables).
"""
from __future__ import annotations

import importlib.util
import io
import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from sniffsync.fairness.frames import fairness, result_frames
from sniffsync.fairness.report import flow_lines, write_json
from sniffsync.decode.frames import read_capture
from frame_rows import CAPS, make_frames

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NS3 = [os.path.join(CAPS, f"ns3-11n-ht20-hidden-sniffer{s}.pcap") for s in ("A-nearAP", "B-nearSTA1")]


def _json_oracle(res) -> str:
    """The report as ``json.dump(indent=1)`` of the DataFrames' records writes it."""
    def recs(df):
        return [] if df is None or df.empty else \
            df.astype(object).where(df.notna(), None).to_dict(orient="records")
    rep = {"summary": res.summary, "flows": recs(res.flows), "windows": recs(res.windows),
           "jain": recs(res.jain), "cdf": recs(res.cdf), "stations": recs(res.stations)}
    return json.dumps(rep, indent=1, default=str)


def _write(runs, summary) -> str:
    fh = io.StringIO()
    write_json(fh, runs, summary)
    return fh.getvalue()


def test_json_writer_is_json_dump_of_records():
    # every kind of value: ints, floats incl. NaN/inf, bools, text incl. non-ASCII, null text
    n = 5
    run = {"names": ["10.0.0.1", "fe80::1"],
           "flows": {"fd": np.arange(n), "proto": np.array([6, 17, 6, 6, 17]),
                     "src": np.array([0, 1, -1, 0, 1]), "dst": np.array([1, 0, 0, -1, 0]),
                     "x": np.array([0.1, np.nan, np.inf, -np.inf, 1e300])},
           "windows": {"ok": np.array([True, False]), "big": np.array([2**62, -3])},
           "jain": {"jain": np.array([1.0, 1 / 3]),
                    "why": np.array(["", "station é: 5% \"air\"\n"], dtype=object)},
           "cdf": {"jain": np.zeros(0), "frac": np.zeros(0)}, "stations": {}, "rtt": {}}
    summary = {"runs": [{"run": 0, "median": None, "p10": 0.25}], "definitions": {"a": "b"}}
    got = _write([run, run], summary)
    res = result_frames([run | {"rtt": _rtt0()}] * 2, summary)
    assert got == _json_oracle(res)
    assert json.loads(got)["flows"][2]["src"] is None


def _rtt0():
    z = np.zeros(0, np.int64)
    return {"fd": z, "flow": z, "ts_ns": z, "rtt_ns": z, "source": z, "data_row": z, "ack_row": z}


@pytest.mark.parametrize("paths", [NS3[:1], NS3], ids=["one", "two-runs"])
def test_report_of_the_core_equals_the_pandas_api(paths):
    from sniffsync.fairness.core import Capture, fairness_tables
    runs, summary = fairness_tables([Capture.from_frame(read_capture(p)) for p in paths],
                                    200_000_000, 100_000_000)
    res = fairness([read_capture(p) for p in paths], 200_000_000, 100_000_000)
    assert _write(runs, summary) == _json_oracle(res)
    assert len(flow_lines(runs)) == 1 + int((res.flows["bytes"] > 0).sum())


def _bench():
    spec = importlib.util.spec_from_file_location("bench_fairness",
                                                  os.path.join(ROOT, "bench", "bench_fairness.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def ethernet_pcap(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("eth") / "tiled.pcap")
    _bench().build_capture(path, 6000)
    return path


def _cli(args, code="from sniffsync.cli import main; main(sys.argv[1:])"):
    return subprocess.run([sys.executable, "-c", "import sys; " + code + "; print('PANDAS', 'pandas' in sys.modules)",
                           "fairness", *args], capture_output=True, text=True, timeout=120)


def test_cli_on_ethernet_reads_no_pandas_and_matches_the_api(ethernet_pcap, tmp_path):
    out = tmp_path / "r.json"
    p = _cli([ethernet_pcap, "-o", str(out)])
    assert p.returncode == 0, p.stderr
    assert "PANDAS False" in p.stdout
    assert out.read_text() == _json_oracle(fairness(read_capture(ethernet_pcap)))


def test_cli_csv_and_radiotap_captures_match_the_api(ethernet_pcap, tmp_path):
    out = tmp_path / "r.json"
    p = _cli([NS3[0], ethernet_pcap, "--window", "0.3", "--step", "0.1", "-o", str(out),
              "--csv", str(tmp_path / "csv")])
    assert p.returncode == 0, p.stderr
    res = fairness([read_capture(NS3[0]), read_capture(ethernet_pcap)], 300_000_000, 100_000_000)
    assert out.read_text() == _json_oracle(res)
    for name in ("flows", "windows", "jain", "rtt"):
        got = pd.read_csv(tmp_path / "csv" / f"{name}.csv")
        pd.testing.assert_frame_equal(got, pd.read_csv(io.StringIO(getattr(res, name).to_csv(index=False))))


# --- wired captures decode only what the analysis reads -------------------------------------
def _pcapng_block(btype, body):
    import struct
    body += b"\0" * (-len(body) % 4)
    return struct.pack("<II", btype, 12 + len(body)) + body + struct.pack("<I", 12 + len(body))


def _to_pcapng(parts):
    """pcapng of ``[(linktype, Records)]``: each part's IDB written just before its packets."""
    import struct
    out = [_pcapng_block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))]
    for iface, (linktype, rec) in enumerate(parts):
        out.append(_pcapng_block(1, struct.pack("<HHI", linktype, 0, 65535)))
        for o, c, w, t in zip(rec.data_off.tolist(), rec.caplen.tolist(), rec.wirelen.tolist(),
                              (rec.ts_ns // 1000).tolist()):
            out.append(_pcapng_block(6, struct.pack("<IIIII", iface, t >> 32, t & 0xFFFFFFFF, c, w)
                                     + bytes(rec.buf[o:o + c])))
    return b"".join(out)


def test_head_linktypes_reads_pcap_pcapng_and_gzip_headers(ethernet_pcap, tmp_path):
    import gzip
    import struct

    from sniffsync.io.capture import head_linktypes, read_records
    assert head_linktypes(ethernet_pcap) == {1}
    assert head_linktypes(NS3[0]) == {127}
    raw = open(NS3[0], "rb").read()
    # the same header big-endian: magic and link type byte-swapped
    big = struct.pack(">IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 127)
    (tmp_path / "be.pcap").write_bytes(big)
    assert head_linktypes(tmp_path / "be.pcap") == {127}
    (tmp_path / "a.pcap.gz").write_bytes(gzip.compress(raw[:4096]))
    assert head_linktypes(tmp_path / "a.pcap.gz") == {127}
    ng = _to_pcapng([(1, read_records(ethernet_pcap)), (127, read_records(NS3[0]))])
    (tmp_path / "two.pcapng").write_bytes(ng)
    assert head_linktypes(tmp_path / "two.pcapng") == {1}       # the second IDB comes later
    for junk in (b"", b"\0" * 40, raw[:10]):
        (tmp_path / "j").write_bytes(junk)
        assert head_linktypes(tmp_path / "j") is None


def test_late_radiotap_interface_is_read_in_full(ethernet_pcap, tmp_path):
    """An Ethernet IDB first and a radiotap one after the first packet: the wired column
    set is not enough, and the command reads the capture again with every column."""
    from sniffsync.io.capture import read_records
    path = tmp_path / "two.pcapng"
    path.write_bytes(_to_pcapng([(1, read_records(ethernet_pcap)), (127, read_records(NS3[0]))]))
    out = tmp_path / "r.json"
    p = _cli([str(path), "-o", str(out)])
    assert p.returncode == 0, p.stderr
    assert out.read_text() == _json_oracle(fairness(read_capture(str(path))))


def test_wired_capture_decodes_only_the_wired_columns(ethernet_pcap, monkeypatch):
    import sniffsync.decode.frames as frames
    from sniffsync.cli import fairness as cmd
    asked = []
    real = frames.read_columns

    def spy(path, sniffer, columns, records=True, **sizes):
        asked.append(list(columns))
        return real(path, sniffer, columns, records, **sizes)
    monkeypatch.setattr(frames, "read_columns", spy)
    import sniffsync.fairness.lean as lean
    real_lean = lean.read_lean

    def spy_lean(path, columns, sniffer=0, **spill):           # 802.11: the narrow columns
        asked.append(list(columns))
        return real_lean(path, columns, sniffer, **spill)
    monkeypatch.setattr(lean, "read_lean", spy_lean)
    caps = list(cmd._captures([ethernet_pcap, NS3[0]]))
    assert asked == [cmd.WIRED_COLUMNS, cmd.COLUMNS] and len(caps) == 2


def test_rate_of_a_one_datagram_flow_is_not_printed():
    # one 30-byte UDP datagram: span 0 (was printed as 240000.00 Mb/s); two 1 s apart: 0.00 Mb/s
    from sniffsync.fairness.core import Capture, fairness_tables
    rows = [{"t_ms": 0, "proto": 17, "len": 30},
            {"t_ms": 0, "proto": 17, "len": 30, "sport": 40001},
            {"t_ms": 1000, "proto": 17, "len": 30, "sport": 40001}]
    runs, _ = fairness_tables([Capture.from_frame(make_frames(rows))])
    lines = flow_lines(runs)
    assert "inferred" in lines[0]
    rates = [ln.split()[6] for ln in lines[1:]]
    assert rates == ["n/a", "0.00"]
