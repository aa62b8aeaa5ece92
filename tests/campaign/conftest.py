"""A campaign of six 1-second simulated hidden-node runs (RTS on STA2 on/off x UDP 5/10/20 Mb/s),
generated and analysed once per test session. The simulator only makes the inputs: every
number checked in these tests comes from an independent route (DuckDB over the frames,
tshark fixtures), never from the simulator's truth."""
import json

import pytest

from sniffsync.campaign.runs import discover
from sniffsync.campaign.schedule import analyse_all
from sniffsync.sim import scenario, simulate

RTS = ("on", "off")
UDP_MBPS = (5, 10, 20)


@pytest.fixture(scope="session")
def campaign_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("campaign")
    for rts in RTS:
        for mbps in UDP_MBPS:
            run = root / f"rts-{rts}-udp{mbps}"
            cfg = scenario("hidden-node", [f"nodes.STA2.rts={'true' if rts == 'on' else 'false'}",
                                           f"udp_rate_bps={mbps * 1_000_000}"], seconds=1.0, seed=1)
            simulate(cfg, run)
            if rts == "on":      # both label formats in one campaign
                (run / "run.toml").write_text(f'rts = "{rts}"\nudp_mbps = {mbps}\nnotes = "STA2 with RTS"\n')
            else:
                (run / "run.json").write_text(json.dumps({"rts": rts, "udp_mbps": mbps}))
    return root


@pytest.fixture(scope="session")
def campaign(campaign_dir, tmp_path_factory):
    """(specs, results) analysed in this process, frames stored, in a separate cache root."""
    cache = tmp_path_factory.mktemp("cache-inproc")
    specs = discover([campaign_dir], cache)
    return specs, analyse_all(specs, "none", frames=True)
