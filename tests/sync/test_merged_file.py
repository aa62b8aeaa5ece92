"""The merged pcapng is the unit of analysis: every command gives on ``merged.pcapng`` what it
gives on the inputs (ns-3 hidden-node captures), the file reads back as the merge's table,
Wireshark opens it cleanly, and the subframes of each A-MPDU keep the order every sniffer
captured them in (tshark's decoding of the inputs, tests/data/tshark_tcp, is the oracle)."""
from __future__ import annotations

import json
import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sniffsync.cli.main import main
from sniffsync.pipeline.run import analyse, load_merged
from sniffsync.sync.merge import merge

DATA = Path(__file__).parents[1] / "data"
NAMES = ("A-nearAP", "B-nearSTA1", "C-nearSTA2")
HIDDEN = [str(DATA / "captures" / f"ns3-11n-ht20-hidden-sniffer{x}.pcap") for x in NAMES]
TSV = [DATA / "tshark_tcp" / f"ns3-hidden-sniffer{x}.tsv" for x in NAMES]
needs_tshark = pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")


@pytest.fixture(scope="module")
def merged_file(tmp_path_factory):
    out = tmp_path_factory.mktemp("merged") / "merged.pcapng"
    assert main(["merge", *HIDDEN, "-o", str(out), "-q"]) == 0
    return out


@pytest.fixture(scope="module")
def in_memory():
    return merge(HIDDEN)


def _cli(capsys, *argv):
    assert main([str(a) for a in argv]) == 0
    return capsys.readouterr().out


def test_reads_back_as_the_merge(merged_file, in_memory):
    again = load_merged([merged_file])
    # categories may come in another order (one file vs three unions): values compared
    pd.testing.assert_frame_equal(again.frames, in_memory.frames, check_categorical=False)
    assert again.report == json.loads(json.dumps(in_memory.report))
    assert (again.sniffers, again.stamps) == (in_memory.sniffers, "end")


def test_custom_option_bytes_match_the_table(merged_file, in_memory):
    """A plain struct walk of the file (not the reader) finds each row's option."""
    from pcapng_walk import slow_epbs
    epbs = slow_epbs(merged_file.read_bytes())
    f = in_memory.frames
    assert len(epbs) == len(f)
    assert [e[0] for e in epbs] == f["sniffer"].tolist()
    opt = [e[4][19373] for e in epbs]
    assert all(o[:8] == struct.pack("<I", 32473) + b"SnSy" for o in opt)
    frame, tsft, mid, heard = zip(*(struct.unpack_from("<qqqQ", o, 8) for o in opt))
    assert list(frame) == f["frame"].tolist() and list(mid) == f["merged_id"].tolist()
    assert list(tsft) == f["tsft_us"].tolist() and list(heard) == f["sniffers_heard"].tolist()
    sig = np.array([struct.unpack_from("<3b", o, 42) for o in opt])
    for s in range(3):
        assert (sig[:, s] == f[f"signal_dbm_s{s}"].fillna(-128).to_numpy()).all()


@pytest.mark.parametrize("cmd, outputs", [
    ("detect", ("-o", "events.csv", "--summary", "summary.json", "--mpdus", "mpdus.csv")),
    ("airtime", ("-o", "ppdus.csv")),
])
def test_command_same_on_merged_file(cmd, outputs, merged_file, tmp_path, capsys):
    runs = {}
    for label, inputs in (("in", HIDDEN), ("merged", [merged_file])):
        d = tmp_path / label
        d.mkdir()
        opts = [str(d / o) if i % 2 else o for i, o in enumerate(outputs)]
        runs[label] = (_cli(capsys, cmd, *inputs, "-q", *opts),
                       [(d / o).read_bytes() for o in outputs[1::2]])
    assert runs["in"] == runs["merged"]
    assert "rts_cts_collision" in runs["in"][0] or cmd == "airtime"


def test_frames_on_merged_file_is_the_merged_table(merged_file, in_memory, tmp_path, capsys):
    from sniffsync.decode.schema import COLUMNS
    from sniffsync.export.tables import write_table
    _cli(capsys, "frames", merged_file, "-o", tmp_path / "got.csv")
    f = in_memory.frames
    names = [c.name for c in COLUMNS]
    write_table(f[names + [c for c in f.columns if c not in names]], str(tmp_path / "want.csv"))
    assert (tmp_path / "got.csv").read_bytes() == (tmp_path / "want.csv").read_bytes()


def test_fairness_on_merged_file_is_the_merge_s(merged_file, in_memory, tmp_path, capsys):
    from sniffsync.fairness.core import Capture, fairness_tables
    from sniffsync.fairness.report import write_json
    _cli(capsys, "fairness", merged_file, "-o", tmp_path / "got.json")
    runs, summary = fairness_tables([Capture.from_frame(in_memory.frames, stamps="end")],
                                    400_000_000, 200_000_000)
    with open(tmp_path / "want.json", "w") as fh:
        write_json(fh, runs, summary)
    got, want = (json.loads((tmp_path / n).read_text()) for n in ("got.json", "want.json"))
    assert got == want and len(got["flows"]) >= 3


def test_report_same_on_merged_file(merged_file, tmp_path, capsys):
    a, b = analyse(HIDDEN), analyse([str(merged_file)])
    for part in ("ppdus", "events", "mpdus", "stations"):
        pd.testing.assert_frame_equal(getattr(a, part), getattr(b, part))
    assert a.detect_summary == b.detect_summary and a.names == b.names
    assert json.loads(json.dumps(a.sync_report)) == b.sync_report
    html = []
    for inputs in (HIDDEN, [merged_file]):
        out = tmp_path / f"r{len(html)}.html"
        _cli(capsys, "report", *inputs, "-o", out, "--no-cache", "-q")
        title = " + ".join(Path(p).name for p in inputs)
        html.append(out.read_text().replace(title, "TITLE"))
    assert html[0] == html[1]


def test_merge_of_a_merged_file(merged_file, tmp_path, capsys):
    again = tmp_path / "again.pcapng"
    _cli(capsys, "merge", merged_file, "-o", again, "-q")
    assert _cli(capsys, "detect", again, "-q") == _cli(capsys, "detect", *HIDDEN, "-q")
    both = tmp_path / "both.pcapng"
    rep = tmp_path / "r.json"
    _cli(capsys, "merge", merged_file, HIDDEN[1], "-o", both, "--report", rep, "-q")
    t = json.loads(rep.read_text())["totals"]
    # every frame of sniffer B is already in the merged file: all are duplicates
    assert t["conserved"] and t["frames_out"] == len(in_memory_rows(merged_file))


def in_memory_rows(path):
    return load_merged([path]).frames


def _tshark_rows(tsv):
    t = pd.read_csv(tsv, sep="\t", dtype=str)
    t = t[t["tcp.seq_raw"].notna()]
    return pd.DataFrame({"ta": t["wlan.ta"], "seq": t["wlan.seq"].astype(int),
                         "retry": t["wlan.fc.retry"].map({"True": 1, "False": 0, "1": 1, "0": 0}),
                         "tcp_seq": t["tcp.seq_raw"].astype(np.int64),
                         "ooo": t["tcp.analysis.out_of_order"].notna()})


def test_every_sniffers_capture_order_is_kept(in_memory):
    """Each input's TCP segments, in tshark's (capture) order, come in the same order in the
    merged table: A-MPDU subframes share one stamp, only the order tells them apart."""
    from sniffsync.cli.common import mac
    f = in_memory.frames
    key = pd.DataFrame({"ta": [mac(v) if pd.notna(v) else "" for v in f["ta"]], "seq": f["seq"],
                        "retry": f["retry"].astype("Int64"), "tcp_seq": f["tcp_seq"]})
    key = key[f["tcp_seq"].notna().to_numpy()]
    cols = ["ta", "seq", "retry", "tcp_seq"]
    key = key.astype({"seq": np.int64, "retry": np.int64, "tcp_seq": np.int64})
    pos = key.drop_duplicates(cols, keep=False).reset_index().rename(columns={"index": "row"})
    checked = 0
    for tsv in TSV:
        t = _tshark_rows(tsv).drop_duplicates(cols, keep=False)
        m = t.merge(pos, on=cols, how="inner", sort=False)         # keeps t's (capture) order
        assert len(m) > 0.9 * len(t)
        assert (np.diff(m["row"].to_numpy()) > 0).all(), tsv.name
        checked += len(m)
    assert checked > 1000


@pytest.mark.tshark
@needs_tshark
def test_tshark_reads_merged_file_cleanly_and_in_order(merged_file):
    p = subprocess.run(["tshark", "-r", str(merged_file), "-Y", "tcp.analysis.out_of_order"],
                       capture_output=True, text=True)
    errs = [x for x in p.stderr.splitlines() if "Running as user" not in x]
    assert p.returncode == 0 and errs == []
    inputs = sum(int(_tshark_rows(t)["ooo"].sum()) for t in TSV)
    # tshark on the inputs: 0 + 40 + 0 (network reordering seen near STA1); before the fix
    # the merge scrambled A-MPDUs and tshark counted 1365 on the merged file
    assert len(p.stdout.splitlines()) <= inputs


def test_every_copy_reads_back_too(tmp_path):
    from sniffsync.sync.merge import write_merged
    m = merge(HIDDEN, keep_duplicates=True)
    write_merged(tmp_path / "all.pcapng", m)
    again = load_merged([tmp_path / "all.pcapng"])
    pd.testing.assert_frame_equal(again.frames, m.frames, check_categorical=False)
    assert (again.frames["sniffer"] != again.frames["best_sniffer"]).any()


def _damaged(data: bytes, how: str) -> bytes:
    b = bytearray(data)
    shb_len = struct.unpack_from("<I", b, 4)[0]
    if how == "header json":                     # the report's JSON no longer parses
        i = b.index(b"sniffsync-merge/1 {") + 19
        b[i:i + 4] = b"\xff\xfe{["
    elif how == "header names":                  # the first sniffer name damaged
        i = b.index(b'"sniffers":[') + 12
        b[i] = ord("7")
    else:
        pos, k = shb_len, 0
        while pos < len(b):
            btype, blen = struct.unpack_from("<II", b, pos)
            if btype == 6 and k % 3 == 0:
                cap = struct.unpack_from("<I", b, pos + 20)[0]
                if how == "options":             # every 3rd packet's option code
                    struct.pack_into("<H", b, pos + 28 + (cap + 3) // 4 * 4, 2988)
                elif how == "interface":         # every 3rd packet on an interface with no IDB
                    struct.pack_into("<I", b, pos + 8, 7)
            k += btype == 6
            pos += blen
        if how == "cut":
            return bytes(b[:len(b) * 2 // 3 + 5])
    return bytes(b)


@pytest.mark.parametrize("how", ["header json", "header names", "options", "interface", "cut"])
def test_a_damaged_merged_file_still_reads(how, merged_file, tmp_path):
    from airtime.detect import detect
    from airtime.ppdu import group_ppdus
    bad = tmp_path / "bad.pcapng"
    bad.write_bytes(_damaged(merged_file.read_bytes(), how))
    m = load_merged([bad])
    f = m.frames
    assert len(f) > 1000 and (f["sniffer"] >= 0).all()
    if how.startswith("header"):                 # not trusted: read as a plain capture
        assert m.stamps == "capture" and "sniffers_heard" not in f
    ppdus, fp, _ = group_ppdus(f, stamps=m.stamps)
    detect(f, ppdus, fp)
