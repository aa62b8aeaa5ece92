"""No command overwrites its own input: every output option (file or folder) is checked
against the inputs, and the outputs against each other, before any work; the refusal is
one line on stderr and the input stays byte-identical."""
import shutil
from pathlib import Path

import pytest

from sniffsync.cli.main import main

CAP = Path(__file__).resolve().parents[1] / "data" / "captures" / "tcpdump_ieee802.11_exthdr.pcap"

# command line with {out} where the output goes; "a.pcap" is the input
CASES = {
    "frames -o": ["frames", "a.pcap", "-o", "{out}"],
    "merge -o": ["merge", "a.pcap", "b.pcap", "-o", "{out}"],
    "merge --report": ["merge", "a.pcap", "b.pcap", "--report", "{out}"],
    "airtime -o": ["airtime", "a.pcap", "-o", "{out}"],
    "detect -o": ["detect", "a.pcap", "-o", "{out}"],
    "detect --summary": ["detect", "a.pcap", "--summary", "{out}"],
    "detect --mpdus": ["detect", "a.pcap", "--mpdus", "{out}"],
    "fairness -o": ["fairness", "a.pcap", "-o", "{out}"],
    "report -o": ["report", "a.pcap", "-o", "{out}", "--no-cache"],
}


def _snapshot(folder: Path) -> dict:
    return {p.name: (p.is_symlink(), p.read_bytes()) for p in sorted(folder.rglob("*")) if p.is_file()}


def _refused(argv, folder, capsys) -> str:
    before = _snapshot(folder)
    code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0
    assert len(err) == 1 and err[0].startswith("sniffsync: error: "), err
    assert _snapshot(folder) == before              # input byte-identical, no file left behind
    return err[0]


@pytest.fixture
def work(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SNIFFSYNC_CACHE", str(tmp_path / "cache"))
    for name in ("a.pcap", "b.pcap"):
        shutil.copyfile(CAP, tmp_path / name)
    (tmp_path / "link.pcap").symlink_to(tmp_path / "a.pcap")
    return tmp_path


@pytest.mark.parametrize("out", ["a.pcap", "link.pcap", "./sub/../a.pcap"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_output_equal_to_an_input_is_refused(work, capsys, case, out):
    (work / "sub").mkdir(exist_ok=True)
    argv = [a.format(out=out) for a in CASES[case]]
    assert "is an input" in _refused(argv, work, capsys)


def test_input_given_through_a_symlink_is_protected_too(work, capsys):
    assert "is an input" in _refused(["frames", "link.pcap", "-o", "a.pcap"], work, capsys)


@pytest.mark.parametrize("argv", [
    ["detect", "a.pcap", "-o", "x.csv", "--mpdus", "x.csv"],
    ["detect", "a.pcap", "--summary", "s.json", "--mpdus", "./s.json"],
    ["merge", "a.pcap", "b.pcap", "-o", "m.out", "--report", "m.out"],
    ["fairness", "a.pcap", "-o", "d/flows.csv", "--csv", "d"],
])
def test_two_outputs_naming_one_file_are_refused(work, capsys, argv):
    (work / "d").mkdir()
    assert "named for two outputs" in _refused(argv, work, capsys)


def test_fairness_csv_folder_holding_an_input_is_refused(work, capsys):
    d = work / "d"
    d.mkdir()
    shutil.copyfile(CAP, d / "rtt.csv")            # an input named like a file --csv writes
    assert "is an input" in _refused(["fairness", "d/rtt.csv", "--csv", "d"], work, capsys)


def test_demo_out_folder_holding_an_input_is_refused(work, capsys):
    d = work / "d"
    d.mkdir()
    shutil.copyfile(CAP, d / "snifA.pcap")
    shutil.copyfile(CAP, d / "merged.pcapng")      # an input the demo would overwrite
    err = _refused(["demo", "--no-serve", "-q", "--samples", "d", "--out", "d"], work, capsys)
    assert "merged.pcapng: is an input" in err


def test_refusal_comes_before_any_work(work, capsys, monkeypatch):
    import sniffsync.cli.detect as cmd

    def boom(args):
        raise AssertionError("the command ran")
    monkeypatch.setattr(cmd, "run", boom)
    _refused(["detect", "a.pcap", "-o", "a.pcap"], work, capsys)
