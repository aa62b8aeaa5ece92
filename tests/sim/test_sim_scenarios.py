"""Scenario dicts, --set overrides and the `sniffsync simulate` command line."""
import json

import pytest

from sniffsync.cli.main import main
from sniffsync.errors import UsageError
from sniffsync.sim import scenario


def test_set_overrides_typed_values_and_named_items():
    cfg = scenario("hidden-node", ["udp_ac=vi", "mcs=3", "nodes.STA2.rts=false",
                                   "sniffers.*.jitter_us=7", "mpdu_error=0.2"])
    assert cfg["mcs"] == 3 and cfg["mpdu_error"] == 0.2
    udp = next(f for f in cfg["flows"] if f["kind"] == "udp")
    assert udp["ac"] == "vi"                       # "$udp_ac" resolved after the override
    assert next(n for n in cfg["nodes"] if n["name"] == "STA2")["rts"] is False
    assert {s["jitter_us"] for s in cfg["sniffers"]} == {7.0}


@pytest.mark.parametrize("bad", ["nope=1", "mcs=x", "nodes.STA9.rts=1", "noequals"])
def test_bad_overrides_raise_usage_error(bad):
    with pytest.raises(UsageError):
        scenario("hidden-node", [bad])


def test_fairness_flows_start_and_end_one_second_apart():
    cfg = scenario("fairness")
    starts = [f["start_s"] for f in cfg["flows"]]
    stops = [f["stop_s"] for f in cfg["flows"]]
    assert len(cfg["flows"]) == 10 and cfg["seconds"] == 40
    assert all(abs((b - a) - 1) < 1e-9 for a, b in zip(starts, starts[1:]))
    assert all(abs((p - s) - 20) < 1e-9 for s, p in zip(starts, stops))


def test_cli_writes_captures_truth_and_scenario(tmp_path, capsys):
    rc = main(["simulate", "clean", "-o", str(tmp_path), "--seconds", "0.2", "--seed", "4",
               "--set", "mcs=5"])
    assert rc == 0
    names = {p.name for p in tmp_path.iterdir()} | {p.name for p in (tmp_path / "truth").iterdir()}
    assert {"snifA.pcap", "snifB.pcap", "scenario.json", "ppdus.csv", "mpdus.csv", "rts.csv",
            "flows.csv", "clocks.json"} <= names
    cfg = json.loads((tmp_path / "scenario.json").read_text())
    assert cfg["seed"] == 4 and cfg["mcs"] == 5 and cfg["seconds"] == 0.2
    assert "clean" in capsys.readouterr().out
    assert main(["simulate", "nosuch", "-o", str(tmp_path)]) == 2
