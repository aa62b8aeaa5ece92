"""Inputs that once ended in a traceback (tests/data/crashes/README.md): each command now finishes,
and what it reports is checked against tshark's reading of the same bytes."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CRASHES = Path(__file__).parents[1] / "data" / "crashes"
needs_tshark = pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")


def _run(*args):
    return subprocess.run([sys.executable, "-m", "sniffsync", *map(str, args)], capture_output=True,
                          text=True, timeout=120)


def _tshark(path, *fields, filt=None):
    cmd = ["tshark", "-r", str(path), "-n", "-T", "fields", *sum((["-e", f] for f in fields), [])]
    out = subprocess.run(cmd + (["-Y", filt] if filt else []), capture_output=True, text=True, check=True)
    return [line.split("\t") for line in out.stdout.splitlines() if line]


@pytest.mark.tshark
@needs_tshark
def test_fairness_on_legacy_rate_udp(tmp_path):
    name = "fair-IndexError-legacy-rate-udp.pcap"
    out = tmp_path / "r.json"
    p = _run("fairness", CRASHES / name, "-o", out)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    flows = json.loads(out.read_text())["flows"]
    # tshark: UDP payload bytes per (src, sport, dst, dport)
    want = {}
    for src, sport, dst, dport, ln in _tshark(CRASHES / name, "ip.src", "udp.srcport", "ip.dst",
                                              "udp.dstport", "udp.length", filt="udp"):
        key = (f"{src}:{sport}", f"{dst}:{dport}")
        want[key] = want.get(key, 0) + int(ln) - 8
    got = {(f["src"] + ":" + str(f["sport"]), f["dst"] + ":" + str(f["dport"])): f["bytes"] for f in flows}
    assert got == want


@pytest.mark.tshark
@needs_tshark
def test_detect_on_a_capture_of_only_rts(tmp_path):
    name = "detect-IndexError-only-rts.pcap"
    p = _run("detect", CRASHES / name, "-o", tmp_path / "e.csv")
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    # tshark: how many RTS (subtype 0x1b) and CTS (0x1c) frames; each RTS without a CTS is unanswered
    kinds = [int(r[0], 16) for r in _tshark(CRASHES / name, "wlan.fc.type_subtype") if r and r[0]]
    n_rts, n_cts = kinds.count(0x1B), kinds.count(0x1C)
    assert n_cts == 0
    assert f"rts_unanswered {n_rts}," in p.stdout


@pytest.mark.parametrize("command, name", [("fairness", "fuzz-36219-fair-IndexError-_known.pcap"),
                                           ("detect", "fuzz-7653-detect-IndexError-_implied_cts.pcap")])
def test_fuzzed_reproducers_finish_without_a_traceback(tmp_path, command, name):
    # mutated bytes tshark itself cannot fully dissect: the property is that the command ends
    # normally (it raised IndexError before the fix)
    p = _run(command, CRASHES / name, "-o", tmp_path / ("r.json" if command == "fairness" else "e.csv"))
    # (stderr holds only the reader's warnings, which name the file: "...IndexError....pcap")
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    assert all(line.startswith("sniffsync: warning: ") for line in p.stderr.splitlines()), p.stderr


# ---- nothing to analyse: a header-only pcap, a capture with no 802.11 (link type 0, 228) ----
def _main(capsys, *args):
    """The CLI in this process (fast): (exit code, stdout, stderr)."""
    from sniffsync.cli.main import main
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def _pcap(linktype: int, packets: list) -> bytes:
    import struct
    out = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, linktype)
    for i, data in enumerate(packets):
        out += struct.pack("<IIII", 1_700_000_000 + i, 0, len(data), len(data)) + data
    return out


# hand-made packets: BSD loopback (link type 0: 4-byte family 2 = IPv4) and raw IPv4 (228),
# each a 20-byte IPv4 header (10.0.0.1 -> 10.0.0.2, protocol 17) + an 8-byte UDP header
_IP_UDP = bytes.fromhex("4500001c00000000401100000a0000010a000002" "1389138a00080000")
NO_DOT11 = {"report-ValueError-zero-frames.pcap": None,
            "loopback-linktype0.pcap": _pcap(0, [b"\x02\x00\x00\x00" + _IP_UDP] * 3),
            "rawip-linktype228.pcap": _pcap(228, [_IP_UDP] * 3)}


def _no_dot11(tmp_path, name):
    data = NO_DOT11[name]
    if data is None:
        return CRASHES / name
    (tmp_path / name).write_bytes(data)
    return tmp_path / name


@pytest.mark.parametrize("name", sorted(NO_DOT11))
@pytest.mark.parametrize("command", ["airtime", "detect", "report", "serve"])
def test_nothing_to_analyse_is_one_line_and_exit_2(tmp_path, capsys, command, name):
    path = _no_dot11(tmp_path, name)
    extra = {"report": ["-o", tmp_path / "r.html", "--no-cache"], "serve": ["--no-cache", "--port", "1"]}
    code, out, err = _main(capsys, command, path, *extra.get(command, []))
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert lines[0].startswith("sniffsync: error: nothing to analyse: no 802.11 frames in ")
    assert out == "" and not (tmp_path / "r.html").exists()


@pytest.mark.tshark
@needs_tshark
@pytest.mark.parametrize("name", sorted(NO_DOT11))
def test_no_dot11_files_per_tshark(tmp_path, capsys, name):
    # the oracle for "nothing to analyse": tshark finds no 802.11 frame, and the frame count
    path = _no_dot11(tmp_path, name)
    rows = _tshark(path, "frame.number", "wlan.fc.type_subtype")
    assert all(len(r) < 2 or r[1] == "" for r in rows)
    code, _, err = _main(capsys, "detect", path)
    assert code == 2 and f"({len(rows)} frame(s)" in err


def test_zero_frame_pcap_exports_an_empty_table(tmp_path, capsys):
    # frames is a converter: a header-only capture is an empty table, not an error
    out = tmp_path / "f.csv"
    code, _, err = _main(capsys, "frames", CRASHES / "report-ValueError-zero-frames.pcap", "-o", out,
                         "--columns", "frame,bad")
    assert code == 0 and err == "" and out.read_text().splitlines() == ['"frame","bad"']


# ---- wild timestamps: flagged in `bad` and in one warning line per file --------------------
@pytest.mark.tshark
@needs_tshark
@pytest.mark.parametrize("name", ["fair-hang-one-timestamp-7-days-later.pcap",
                                  "fair-MemoryError-one-timestamp-30-years-later.pcap",
                                  "fuzz-15943-fair-hang-window-explosion.pcap"])
def test_wild_timestamps_are_flagged(tmp_path, capsys, name):
    # oracle: tshark's epoch stamps; a frame is wild when it is more than 1 h from the
    # median of the 17 frames around it (window kept inside the file; sniffsync.io.stamps)
    import numpy as np
    ts = np.array([float(r[0]) for r in _tshark(CRASHES / name, "frame.time_epoch")])
    k = len(ts)
    starts = np.clip(np.arange(k) - 8, 0, k - 17)
    med = np.array([np.median(ts[s:s + 17]) for s in starts])
    want = (np.flatnonzero(np.abs(ts - med) > 3600) + 1).tolist()
    assert len(want) == 1                                     # one wild frame in each file
    out = tmp_path / "f.csv"
    code, _, err = _main(capsys, "frames", CRASHES / name, "-o", out, "--columns", "frame,bad")
    flagged = [int(line.split(",")[0]) for line in out.read_text().splitlines()[1:] if "ts_outlier" in line]
    assert code == 0 and flagged == want
    warn = [line for line in err.splitlines() if "ts_outlier" in line]
    assert len(warn) == 1 and f"(first: frame {want[0]})" in warn[0] and warn[0].startswith("sniffsync: warning: ")


# ---- the gzip bomb: streamed (memory: tests/io/test_limits.py), limits stop it with a warning ----
BOMB = CRASHES / "mem-gzip-bomb-1GB-inflated.pcap.gz"


def test_gzip_bomb_max_bytes_stops_with_a_warning(tmp_path, capsys):
    import struct
    import zlib
    head = zlib.decompressobj(31).decompress(BOMB.read_bytes()[:4096], 40)   # by hand: the first record
    incl = struct.unpack("<I", head[24 + 8:24 + 12])[0]
    assert incl == 65535
    out = tmp_path / "f.csv"
    code, _, err = _main(capsys, "frames", BOMB, "-o", out, "--columns", "frame,caplen,bad", "--max-bytes", "200K")
    rows = out.read_text().splitlines()[1:]
    # 200 KiB = 24-byte header + 3 whole records (16 + 65535 bytes) + the cut 4th one
    # (records of zeros: a radiotap header of length 0 is corrupt, as tshark also says)
    assert code == 0 and rows[:3] == [f'{i},{incl},"radiotap: corrupt header"' for i in (1, 2, 3)]
    assert rows[3:] == [f"4,{200 * 1024 - 24 - 3 * (16 + incl) - 16},\"truncated record\""]
    assert "sniffsync: warning: " in err and "read only the first 204800 bytes (--max-bytes)" in err


def test_max_frames_stops_with_a_warning(tmp_path, capsys):
    out = tmp_path / "f.csv"
    cap = CRASHES / "fair-hang-one-timestamp-7-days-later.pcap"          # 21 frames (tshark)
    code, _, err = _main(capsys, "frames", cap, "-o", out, "--columns", "frame", "--max-frames", "5")
    assert code == 0 and out.read_text().splitlines()[1:] == ["1", "2", "3", "4", "5"]
    assert err.strip() == f"sniffsync: warning: {cap}: stopped after 5 frames (--max-frames); the rest is ignored"
    code, _, err = _main(capsys, "frames", cap, "-o", out, "--columns", "frame", "--max-frames", "21")
    assert code == 0 and len(out.read_text().splitlines()) == 22 and "--max-frames" not in err
    code, _, err = _main(capsys, "frames", cap, "-o", out, "--columns", "frame", "--max-frames", "5", "-q")
    assert code == 0 and err == ""                             # -q: no warnings


def test_every_reading_command_takes_the_limits():
    from sniffsync.cli.main import build_parser
    parser = build_parser()
    for command in ("frames", "merge", "airtime", "detect", "fairness", "report", "serve"):
        out = [] if command == "serve" else ["-o", "x"]
        args = parser.parse_args([command, "a.pcap", *out, "--max-frames", "7", "--max-bytes", "2M"])
        assert (args.max_frames, args.max_bytes) == (7, 2 << 20)
    for option, bad in [("--max-frames", "0"), ("--max-frames", "1.5"), ("--max-frames", "5_000"),
                        ("--max-frames", "+5"), ("--max-frames", "\u0665"), ("--max-bytes", "0"),
                        ("--max-bytes", "-1"), ("--max-bytes", "2X")]:
        with pytest.raises(SystemExit):
            parser.parse_args(["detect", "a.pcap", option, bad])
