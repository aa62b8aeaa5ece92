"""One meaning per option across the commands: values out of range refused by argparse,
``--reference`` checked against the inputs, ``--traceback`` before or after the command,
the help saying what several CAPTUREs mean, and one message per error kind."""
import re
import shutil
from pathlib import Path

import pytest

from sniffsync.cli.main import build_parser, main
from sniffsync.errors import NoDataError, SniffsyncError, UsageError

CAPS = Path(__file__).resolve().parents[1] / "data" / "captures"
CAP = str(CAPS / "tcpdump_ieee802.11_exthdr.pcap")

# option -> (command line before the option, refused values, accepted values and what they parse to)
VALUES = {
    "--window": (["fairness", CAP], ["nan", "inf", "-inf", "0", "-0.4", "x"], {"0.25": 0.25}),
    "--step": (["fairness", CAP], ["nan", "inf", "0", "-1"], {"1e-3": 0.001}),
    "--bloat-ms": (["fairness", CAP], ["nan", "inf", "0", "-50"], {"10": 10.0}),
    "--origin": (["fairness", CAP], ["nan", "inf", "-1", "1e9"], {"0": 0, "1700000000.5": 1_700_000_000_500_000_000}),
    "--knot-s": (["merge", CAP, CAP], ["nan", "inf", "0", "-1"], {"0.5": 0.5}),
    "--window-s": (["merge", CAP, CAP], ["nan", "inf", "0", "-1"], {"10": 10.0}),
    "--slack-us": (["detect", CAP], ["nan", "inf", "-0.5"], {"0": 0.0, "6.5": 6.5}),
    "--seconds": (["simulate", "clean", "-o", "x"], ["nan", "inf", "0", "-2"], {"0.1": 0.1}),
    "--seed": (["simulate", "clean", "-o", "x"], ["-1", "1.5", "x"], {"0": 0, "7": 7}),
    "--port": (["serve", CAP], ["0", "-1", "65536", "http"], {"1": 1, "65535": 65535}),
}
REFUSED = [(before, option, bad) for option, (before, bads, _) in VALUES.items() for bad in bads]
REFUSED += [(["demo", "--no-serve"], "--port", bad) for bad in ("0", "65536")]


def _dest(option: str) -> str:
    return option.lstrip("-").replace("-", "_")


@pytest.mark.parametrize("before,option,bad", REFUSED)
def test_out_of_range_values_are_refused_by_argparse(before, option, bad, capsys):
    with pytest.raises(SystemExit) as exc:
        main([*before, f"{option}={bad}"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {option}: must be " in err and repr(bad) in err and "Traceback" not in err


@pytest.mark.parametrize("option", sorted(VALUES))
def test_values_in_range_are_accepted(option):
    before, _, good = VALUES[option]
    for text, value in good.items():
        args = build_parser().parse_args([*before, f"{option}={text}"])
        assert getattr(args, _dest(option)) == value and type(getattr(args, _dest(option))) is type(value)


@pytest.fixture
def two(tmp_path):
    paths = []
    for name in ("a.pcap", "b.pcap"):
        shutil.copyfile(CAP, tmp_path / name)
        paths.append(str(tmp_path / name))
    return paths


@pytest.mark.parametrize("command", ["merge", "airtime", "detect", "report", "serve"])
@pytest.mark.parametrize("value", ["2", "-1", "c.pcap", "1.0"])
def test_reference_outside_the_inputs_is_refused(command, value, two, capsys):
    extra = ["-o", str(Path(two[0]).with_suffix(".html"))] if command == "report" else []
    with pytest.raises(SystemExit) as exc:
        main([command, *two, "--reference", value, *extra])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"sniffsync {command}: error: argument --reference: {value!r} is neither an input index (0..1)" in err


@pytest.mark.parametrize("value,index", [("0", 0), ("1", 1), ("b.pcap", 1), ("a.pcap", 0)])
def test_reference_is_an_index_or_a_file_name(value, index, two):
    from sniffsync.cli.common import prepare
    args = build_parser().parse_args(["detect", *two, "--reference", value])
    prepare(args)
    assert args.reference == index
    args = build_parser().parse_args(["detect", *two, "--reference", two[index]])
    prepare(args)
    assert args.reference == index


@pytest.mark.parametrize("argv,expected", [
    (["frames", CAP], False),
    (["--traceback", "frames", CAP], True),
    (["frames", CAP, "--traceback"], True),
    (["frames", "--traceback", CAP], True),
    (["--traceback", "frames", CAP, "--traceback"], True),
])
def test_traceback_before_or_after_the_command(argv, expected):
    assert build_parser().parse_args(argv).traceback is expected


def test_traceback_after_the_command_shows_the_exception(tmp_path, capsys):
    missing = str(tmp_path / "missing.pcap")
    assert main(["frames", missing, "-o", str(tmp_path / "x.csv")]) == 2
    assert capsys.readouterr().err.startswith("sniffsync: error: ")
    with pytest.raises(SniffsyncError):
        main(["frames", missing, "-o", str(tmp_path / "x.csv"), "--traceback"])


# what the help of each command says several CAPTUREs are
MEANING = {"frames": "separate captures, decoded one after another into one table",
           "merge": "sniffers of one run, merged onto one clock first",
           "airtime": "sniffers of one run, merged onto one clock first",
           "detect": "sniffers of one run, merged onto one clock first",
           "serve": "sniffers of one run, merged onto one clock first",
           "report": "sniffers of one run, merged onto one clock first",
           "fairness": "separate runs, each analysed on its own"}


@pytest.mark.parametrize("command", sorted(MEANING))
def test_help_says_what_several_captures_are(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert re.search(r"CAPTURE \[CAPTURE \.\.\.\]", text)
    assert f"several are {MEANING[command]}" in text
    for other in set(MEANING.values()) - {MEANING[command]}:
        assert other not in text


def test_memory_error_gets_a_message(monkeypatch, capsys):
    import sniffsync.cli.frames as cmd

    def run(args):
        raise MemoryError()
    monkeypatch.setattr(cmd, "run", run)
    assert main(["frames", CAP]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("sniffsync: error: out of memory while running frames; ")
    with pytest.raises(MemoryError):
        main(["frames", CAP, "--traceback"])


def test_no_data_is_its_own_error(tmp_path, capsys):
    assert issubclass(NoDataError, SniffsyncError) and not issubclass(NoDataError, UsageError)
    # no TCP/UDP data in an 802.11 capture: "nothing to analyse", not a usage error
    with pytest.raises(NoDataError, match="no TCP/UDP data"):
        main(["fairness", str(CAPS / "wltrace_trace.pcap"), "--traceback"])
    assert main(["fairness", str(CAPS / "wltrace_trace.pcap")]) == NoDataError.exit_code
    assert "no TCP/UDP data" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    with pytest.raises(NoDataError, match="no .pcap samples"):
        main(["demo", "--no-serve", "-q", "--samples", str(tmp_path / "empty"), "--out", str(tmp_path / "o"),
              "--traceback"])


def test_cli_leaves_the_process_untuned(tmp_path, monkeypatch):
    # no process-wide tuning (numpy huge-page advice) from the command line
    import os
    monkeypatch.delenv("NUMPY_MADVISE_HUGEPAGE", raising=False)
    assert main(["frames", "-q", CAP, "--columns", "frame", "-o", str(tmp_path / "f.csv")]) == 0
    assert "NUMPY_MADVISE_HUGEPAGE" not in os.environ
