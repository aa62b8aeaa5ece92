"""Runs on disk, the per-run Parquet cache, and Dask == in-process."""
import json
import os

import pandas as pd
import pytest

from sniffsync.campaign.runs import discover, read_labels
from sniffsync.campaign.schedule import analyse_all
from sniffsync.campaign.store import TABLES, analyse_run, cached, load_table
from sniffsync.errors import UsageError

pytestmark = pytest.mark.slow      # the session's six simulated runs, analysed


def test_discover_campaign_labels_and_notes(campaign):
    specs, results = campaign
    assert [s.name for s in specs] == sorted(f"rts-{r}-udp{m}" for r in ("on", "off") for m in (5, 10, 20))
    by_name = {s.name: s for s in specs}
    assert by_name["rts-on-udp10"].labels == {"rts": "on", "udp_mbps": 10}          # run.toml
    assert by_name["rts-on-udp10"].notes == "STA2 with RTS"
    assert by_name["rts-off-udp20"].labels == {"rts": "off", "udp_mbps": 20}        # run.json
    assert all(len(s.captures) == 3 for s in specs)
    assert [r["run"] for r in results] == [s.name for s in specs]


def test_every_table_stored_once_and_reused(campaign):
    specs, results = campaign
    for spec in specs:
        for fname in TABLES.values():
            assert os.path.exists(os.path.join(spec.cache, fname)), fname
    spec = specs[0]
    stamp = os.stat(os.path.join(spec.cache, "ppdus.parquet")).st_mtime_ns
    again = analyse_run(spec, frames=True)
    assert again["cached"] and again["key"] == results[0]["key"]
    assert os.stat(os.path.join(spec.cache, "ppdus.parquet")).st_mtime_ns == stamp


def test_changed_capture_or_options_recompute(campaign_dir, tmp_path):
    spec = discover([campaign_dir / "rts-on-udp5"], tmp_path)[0]
    first = analyse_run(spec)
    assert not first["cached"] and analyse_run(spec)["cached"]
    assert cached(spec) is not None
    assert cached(spec, {"window_ns": 200_000_000}) is None            # other options: other key
    assert cached(spec, frames=True) is None                           # frames asked, none stored
    cap = spec.captures[0]
    st = os.stat(cap)
    os.utime(cap, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    try:
        assert cached(spec) is None                                    # touched input: other key
    finally:
        os.utime(cap, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert cached(spec) is not None


def test_dask_local_cluster_gives_identical_tables(campaign, tmp_path):
    distributed = pytest.importorskip("distributed")
    specs, _ = campaign
    dspecs = discover([os.path.dirname(specs[0].folder)], tmp_path)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        res = analyse_all(dspecs, cluster.scheduler_address)      # the frame table is not compared
    assert [r["run"] for r in res] == [s.name for s in specs] and not any(r["cached"] for r in res)
    for a, b in zip(specs, dspecs):
        assert a.cache != b.cache
        for name in set(TABLES) - {"frames"}:
            pd.testing.assert_frame_equal(load_table(a.cache, name), load_table(b.cache, name), obj=name)


def test_unreachable_scheduler_is_one_clear_error(campaign_dir, tmp_path, monkeypatch):
    monkeypatch.setattr("sniffsync.campaign.schedule.CONNECT_TIMEOUT", "0.5s")
    specs = discover([campaign_dir / "rts-on-udp5"], tmp_path)
    with pytest.raises(UsageError, match="cannot reach a Dask scheduler"):
        analyse_all(specs, "tcp://127.0.0.1:9", force=True)


def test_label_files_refused_when_wrong(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({"run": "x"}))
    with pytest.raises(UsageError, match="reserved"):
        read_labels(tmp_path)
    (tmp_path / "run.toml").write_text('cca = "bbr"\n')
    with pytest.raises(UsageError, match="both"):
        read_labels(tmp_path)
    (tmp_path / "run.json").unlink()
    (tmp_path / "run.toml").write_text('cca = "bbr"\n[qdisc]\nname = "fq_codel"\nlimit = 1000\nnotes = "n"\n')
    assert read_labels(tmp_path) == ({"cca": "bbr", "qdisc.name": "fq_codel", "qdisc.limit": 1000,
                                      "qdisc.notes": "n"}, "")
    (tmp_path / "run.toml").write_text("cca = \n")
    with pytest.raises(UsageError, match="not valid TOML"):
        read_labels(tmp_path)


def test_discover_refusals(campaign_dir, tmp_path):
    with pytest.raises(UsageError, match="no captures"):
        discover([tmp_path])
    with pytest.raises(UsageError, match="no such"):
        discover([tmp_path / "missing"])
    with pytest.raises(UsageError, match="given twice"):
        discover([campaign_dir / "rts-on-udp5", campaign_dir / "rts-on-udp5"])
    # a cache root that would hold the inputs (stale files are deleted there) is refused
    with pytest.raises(UsageError, match="holds the input"):
        discover([campaign_dir / "rts-on-udp5"], campaign_dir)
    cap = sorted((campaign_dir / "rts-on-udp5").glob("*.pcap"))
    spec = discover(cap[:2], tmp_path)[0]
    assert spec.captures == tuple(map(str, cap[:2])) and spec.labels == {}


def test_bad_capture_in_a_run_is_one_line_naming_it(tmp_path, capsys):
    from sniffsync.cli.main import main
    (tmp_path / "c" / "r1").mkdir(parents=True)
    (tmp_path / "c" / "r1" / "bad.pcap").write_bytes(b"x")
    assert main(["compare", str(tmp_path / "c"), "--scheduler", "none", "-q", "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("sniffsync: error: ") and "bad.pcap" in err[0]
