"""One atomic writer for every output: :func:`sniffsync.io.atomic.atomic_output`.

The writer itself (umask mode, clean-up, refusals), then every writer of the tree with
its file object failing part-way through the write (a full disk): the old file must
stay as it was and no temporary file may be left beside it.
"""
import errno
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sniffsync.cli.main import main
from sniffsync.errors import CaptureError, UsageError
from sniffsync.io import atomic
from sniffsync.io.atomic import atomic_output, check_outputs
from sniffsync.io.writers import write_pcap, write_pcapng

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = ROOT / "tests" / "data" / "captures"
WLTRACE = CAPTURES / "wltrace_trace.pcap"
HT20_A = CAPTURES / "ns3-11n-ht20-hidden-snifferA-nearAP.pcap"
HIDDEN = [ROOT / "samples" / "hidden-node" / f"snif{x}.pcap.gz" for x in "AB"]
FAIR = ROOT / "samples" / "fairness" / "snifA.pcap.gz"
OLD = b"old content\n"


@pytest.fixture
def umask_027():
    old = os.umask(0o027)
    yield
    os.umask(old)


def test_mode_follows_umask(tmp_path, umask_027):
    target = tmp_path / "out.bin"
    with atomic_output(target) as fh:
        fh.write(b"x")
    assert target.stat().st_mode & 0o777 == 0o640
    with atomic_output(tmp_path / "out.txt", "w") as fh:      # text mode alike
        fh.write("x")
    assert (tmp_path / "out.txt").stat().st_mode & 0o777 == 0o640


def test_failure_inside_the_block_removes_the_temporary_file(tmp_path):
    target = tmp_path / "out.bin"
    target.write_bytes(OLD)
    with pytest.raises(RuntimeError, match="boom"):
        with atomic_output(target) as fh:
            fh.write(b"partial")
            assert len(os.listdir(tmp_path)) == 2                # the temporary file, beside it
            raise RuntimeError("boom")
    assert target.read_bytes() == OLD
    assert os.listdir(tmp_path) == ["out.bin"]


def test_os_error_names_the_output(tmp_path):
    target = tmp_path / "out.bin"
    with pytest.raises(CaptureError, match=r"out\.bin: cannot write: No space left on device"):
        with atomic_output(target) as fh:
            fh.write(b"partial")
            raise OSError(errno.ENOSPC, "No space left on device")
    assert os.listdir(tmp_path) == []


def test_symlink_to_an_input_is_refused(tmp_path):
    src = tmp_path / "in.pcap"
    src.write_bytes(OLD)
    link = tmp_path / "out.pcap"
    link.symlink_to(src)
    with pytest.raises(UsageError, match="is an input"):
        with atomic_output(link, inputs=[src]) as fh:
            fh.write(b"new")
    assert src.read_bytes() == OLD and link.is_symlink()
    with pytest.raises(UsageError, match="is an input"):
        check_outputs([str(tmp_path / "." / "in.pcap")], [src])   # another spelling of it


def test_same_output_twice_is_refused(tmp_path):
    out = tmp_path / "x.csv"
    with pytest.raises(UsageError, match="two outputs"):
        check_outputs([out, out])
    with pytest.raises(UsageError, match="two outputs"):
        check_outputs([out, tmp_path / "sub" / ".." / "x.csv"])
    check_outputs([out, tmp_path / "y.csv", None, "-", "-"])     # stdout may repeat


def test_folders_are_checked(tmp_path, capsys):
    with pytest.raises(CaptureError, match="cannot write: folder .* does not exist"):
        check_outputs([tmp_path / "no" / "x.csv"])
    with pytest.raises(UsageError, match="is a directory"):
        check_outputs([tmp_path])
    assert main(["frames", "-q", str(WLTRACE), "-o", str(tmp_path / "no" / "x.csv")]) != 0
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["frames", "detect", "fairness"])
def test_a_command_refuses_to_overwrite_its_input_before_reading_it(tmp_path, capsys, command):
    src = tmp_path / "in.csv"                         # a capture is told by its bytes, not its name
    src.write_bytes(WLTRACE.read_bytes())
    assert main([command, str(src), "-o", str(src)]) != 0
    err = capsys.readouterr().err
    assert "is an input" in err and len(err.strip().splitlines()) == 1
    assert src.read_bytes() == WLTRACE.read_bytes()


# --- every writer, with a disk that fills up part-way through the write -----------------------

class _FullDisk:
    """A file object that takes ``room`` bytes (or characters), then fails like a full disk.

    A writer that writes to its file descriptor (the merged pcapng's sink) gets one on
    ``/dev/full``, which fails every write with ENOSPC.
    """

    def __init__(self, fh, room):
        self._fh, self._room, self._full = fh, room, None

    def write(self, data):
        n = len(data)
        if n > self._room:
            self._fh.write(data[:self._room])
            self._room = 0
            raise OSError(errno.ENOSPC, "No space left on device")
        self._room -= n
        return self._fh.write(data)

    def __enter__(self):
        return self

    def fileno(self):
        if self._full is None:
            self._full = os.open("/dev/full", os.O_WRONLY)
        return self._full

    def __exit__(self, *exc):
        self._fh.close()
        if self._full is not None:
            os.close(self._full)
        return False

    def __getattr__(self, name):
        return getattr(self._fh, name)


@pytest.fixture
def full_disk(monkeypatch):
    """Output files opened by atomic_output take 100 bytes, then fail."""
    if not os.path.exists("/dev/full"):
        pytest.skip("needs /dev/full")
    real = os.fdopen

    def fdopen(fd, *args, **kwargs):
        return _FullDisk(real(fd, *args, **kwargs), 100)
    monkeypatch.setattr(atomic.os, "fdopen", fdopen)


def _packets(n=50, size=120):
    rng = np.random.default_rng(1)
    data = rng.integers(0, 256, n * size, dtype=np.uint8)
    return np.arange(n, dtype=np.int64) * 1000 + 10**18, data, np.arange(n + 1, dtype=np.int64) * size


def _table():
    return pd.DataFrame({"frame": np.arange(500), "ta": pd.array(np.arange(500) * 7919, dtype="UInt64"),
                         "note": ["x" * 20] * 500})


def _write_pcap(out):
    write_pcap(out, 127, *_packets())


def _write_pcapng(out):
    ts, data, off = _packets()
    write_pcapng(out, [{"name": "a", "linktype": 127}], np.zeros(len(ts), int), ts, data, off,
                 comments=["c"] * len(ts))


def _write_table(suffix):
    def write(out):
        from sniffsync.export.tables import write_table
        write_table(_table(), str(out))
    return write, suffix


def _write_columns(suffix):
    def write(out):
        from sniffsync.decode.frames import read_columns
        from sniffsync.decode.schema import COLUMNS
        from sniffsync.export.tables import write_columns
        _rec, n, cols, _marks = read_columns(WLTRACE, 0, None, records=False)
        write_columns(n, cols, [c.name for c in COLUMNS if c.name != "bad"], str(out))
    return write, suffix


def _command(*argv, flag="-o"):
    def write(out):
        code = main([*argv, flag, str(out)])
        if code != 0:
            raise RuntimeError(f"exit {code}")
    return write


def _report(out):
    import viz.report

    from sniffsync.cli.report import write_report

    class View:
        title = "t"
    real = viz.report.build_report
    viz.report.build_report = lambda view, run, title: "<html>" + "x" * 1000 + "</html>"
    try:
        write_report(None, View(), str(out))
    finally:
        viz.report.build_report = real


def _fairness_csv(out):
    from sniffsync.fairness import frames as fairness_frames
    from sniffsync.fairness.report import write_csv

    class Table:
        def to_csv(self, fh, index):
            fh.write("a,b\n" * 100)
    real = fairness_frames.result_frames
    fairness_frames.result_frames = lambda runs, summary: type("R", (), dict.fromkeys(
        ("flows", "windows", "jain", "rtt"), Table()))()
    try:
        write_csv(str(out.parent), [], {})
    finally:
        fairness_frames.result_frames = real


def _sim_truth(out):
    from sniffsync.sim.truth import write_truth
    write_truth(out.parent.parent, {}, {"ppdus": _table()}, {})      # the JSON files fit


WRITERS = {
    "write_pcap": (_write_pcap, ".pcap"),
    "write_pcapng": (_write_pcapng, ".pcapng"),
    "write_table_csv": _write_table(".csv"),
    "write_table_parquet": _write_table(".parquet"),
    "write_table_jsonl": _write_table(".jsonl"),
    "write_columns_csv": _write_columns(".csv"),
    "write_columns_jsonl": _write_columns(".jsonl"),
    "frames_stream_csv": (_command("frames", str(WLTRACE), "-q"), ".csv"),
    "frames_stream_parquet": (_command("frames", str(WLTRACE), "-q"), ".parquet"),
    "merge_pcapng": (_command("merge", *map(str, HIDDEN), "-q"), ".pcapng"),
    "merge_report": (_command("merge", *map(str, HIDDEN), "-q", flag="--report"), ".json"),
    "detect_summary": (_command("detect", str(WLTRACE), "-q", flag="--summary"), ".json"),
    "fairness_json": (_command("fairness", str(FAIR)), ".json"),
    "airtime_ppdus": (_command("airtime", str(WLTRACE), "-q"), ".csv"),
    "fairness_csv": (_fairness_csv, "flows.csv"),
    "report_html": (_report, ".html"),
    "sim_truth": (_sim_truth, "truth/ppdus.csv"),
}


def _target(tmp_path, suffix):
    target = tmp_path / (f"out{suffix}" if suffix.startswith(".") else suffix)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(OLD)
    return target


@pytest.mark.parametrize("name", WRITERS)
def test_a_failure_mid_write_leaves_the_old_file(tmp_path, full_disk, name, capsys):
    write, suffix = WRITERS[name]
    target = _target(tmp_path, suffix)
    with pytest.raises((CaptureError, OSError, RuntimeError)):
        write(target)
    assert target.read_bytes() == OLD
    assert [p.name for p in tmp_path.rglob(".*")] == []              # no temporary file left


@pytest.mark.parametrize("name", WRITERS)
def test_the_same_writers_succeed_with_room(tmp_path, name, capsys):
    # the failure test above is only worth something if each writer really writes there,
    # more than the 100 bytes the full disk takes
    write, suffix = WRITERS[name]
    target = _target(tmp_path, suffix)
    write(target)
    assert target.read_bytes() != OLD and target.stat().st_size > 100
    assert [p.name for p in tmp_path.rglob(".*")] == []
