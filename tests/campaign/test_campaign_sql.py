"""sniffsync sql: DuckDB views over every run, labels as columns; and the three CLI commands."""
import pandas as pd
import pytest

from sniffsync.campaign.sql import query
from sniffsync.campaign.store import load_table
from sniffsync.cli.main import main
from sniffsync.errors import UsageError

pytestmark = pytest.mark.slow      # the session's six simulated runs, analysed


def test_runs_and_labels(campaign):
    specs, _ = campaign
    runs = query(specs, "select run, rts, udp_mbps, notes from runs order by run")
    assert list(runs["run"]) == [s.name for s in specs]
    assert list(runs["rts"]) == [s.labels["rts"] for s in specs]
    assert list(runs["udp_mbps"]) == [s.labels["udp_mbps"] for s in specs]
    assert set(runs.loc[runs["rts"] == "on", "notes"]) == {"STA2 with RTS"}


def test_every_run_rows_once_with_its_labels(campaign):
    specs, _ = campaign
    for view in ("ppdus", "flows", "jain", "flow_summary"):
        got = query(specs, f"select run, count(*) as n from {view} group by run order by run")
        want = [len(load_table(s.cache, view)) for s in specs]
        assert list(got["n"]) == want and sum(want) > 0, view
    on = query(specs, "select distinct run from ppdus where rts = 'on' and udp_mbps >= 10 order by run")
    assert list(on["run"]) == ["rts-on-udp10", "rts-on-udp20"]


def test_label_named_like_a_column_and_mac_macro(campaign):
    specs, _ = campaign
    # station_counters has its own 'rts' column (RTS sent): the label is label_rts there
    df = query(specs, "select label_rts, rts, mac(ta) as sta from station_counters where run = 'rts-off-udp5' "
                      "order by sta")
    assert set(df["label_rts"]) == {"off"}
    assert list(df["sta"]) == ["02:00:00:00:00:01", "02:00:00:00:00:02", "02:00:00:00:00:03"]
    want = load_table(specs[[s.name for s in specs].index("rts-off-udp5")].cache, "station_counters")
    assert list(df["rts"]) == list(want.sort_values("ta")["rts"])
    assert query(specs, "select mac(2199023255554) as m")["m"][0] == "02:00:00:00:00:02"


def test_bad_query_is_a_usage_error(campaign):
    with pytest.raises(UsageError, match="^SQL: "):
        query(campaign[0], "select nope from ppdus")


def test_cli_analyse_compare_sql(campaign, tmp_path, capsys):
    specs, _ = campaign
    camp = specs[0].folder.rsplit("/", 1)[0]
    cache = specs[0].cache.rsplit("/", 1)[0]          # the session's tables: every run cached
    assert main(["analyse", camp, "--cache", cache, "--frames", "--scheduler", "none", "-q"]) == 0
    assert main(["compare", camp, "--cache", cache, "--by", "rts", "--baseline", "rts-on-udp5",
                 "-o", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert err.count("cached") == 6 and "analysed ->" not in err
    thr = pd.read_csv(tmp_path / "out" / "throughput.csv")
    assert list(thr["rts"]) == ["off", "on"] and (tmp_path / "out" / "baseline.csv").exists()
    assert main(["sql", camp, "--cache", cache, "-q",
                 "select rts, count(*) as runs from runs group by rts order by rts"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["rts", "runs"] and out[2].split() == ["off", "3"] and out[3].split() == ["on", "3"]
    assert main(["sql", camp, "--cache", cache, "-q", "select x from nowhere"]) == 2
    assert capsys.readouterr().err.startswith("sniffsync: error: SQL: ")
    assert main(["compare", str(tmp_path / "nothing-here"), "-o", str(tmp_path / "o2")]) == 2
    assert "no such file or folder" in capsys.readouterr().err


def test_label_text_in_one_run_and_number_in_another(campaign):
    import dataclasses
    specs, _ = campaign
    mixed = [dataclasses.replace(s, labels={**s.labels, "cw_min": 15 if i % 2 else "auto"})
             for i, s in enumerate(specs)]
    df = query(mixed, "select run, cw_min from runs order by run")
    assert list(df["cw_min"]) == ["15" if i % 2 else "auto" for i in range(len(specs))]
