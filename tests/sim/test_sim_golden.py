"""The simulator's outputs are a pure function of scenario + seed: these hashes were taken
from the code before the speed-up of issue 17 (commit 055c975), so any change of event
order, random draws, bytes or CSV formatting shows here. A deliberate model change
updates them (and says so in its commit)."""
import hashlib
import pathlib

import pytest

from sniffsync.sim import scenario, simulate

GOLDEN = {
    ("hidden-node", ("sniffers.snifC.fcs=false", "sniffers.snifC.snaplen=120"), 0.3, 1): {
        "scenario.json": "f9db964e65bc8035", "snifA.pcap": "38cfeeab5ebd6f27",
        "snifB.pcap": "ac2b170d19fbbf95", "snifC.pcap": "c190c2448391fa13",
        "truth/captured_snifA.csv": "688943cf9fb950b0", "truth/captured_snifB.csv": "b355a5c1c0616648",
        "truth/captured_snifC.csv": "0797bf567f3db7b1", "truth/clocks.json": "22736776863ead03",
        "truth/flows.csv": "6419512e26eaa584", "truth/mpdus.csv": "6986c6edae628756",
        "truth/ppdus.csv": "475cb02a66e8eb5e", "truth/rts.csv": "6f0eac7fc9ba0995"},
    ("clean", (), 0.2, 2): {
        "scenario.json": "e8e79db46e2f7641", "snifA.pcap": "f3f6be274268e3d1",
        "snifB.pcap": "d6b832ea0ed01213", "truth/captured_snifA.csv": "f42322cfe97b2183",
        "truth/captured_snifB.csv": "aa21ad8b19a493ff", "truth/clocks.json": "58dcbe98c857d591",
        "truth/flows.csv": "dd863123759d5037", "truth/mpdus.csv": "adeb5782bbc4f2e4",
        "truth/ppdus.csv": "1ff0013f628e1643", "truth/rts.csv": "2fec83df9dd129b8"},
}


@pytest.mark.parametrize("key", list(GOLDEN), ids=[k[0] for k in GOLDEN])
def test_outputs_byte_identical_to_before_the_speed_up(key, tmp_path):
    name, sets, seconds, seed = key
    simulate(scenario(name, list(sets), seconds=seconds, seed=seed), tmp_path)
    got = {str(p.relative_to(tmp_path)): hashlib.sha256(p.read_bytes()).hexdigest()[:16]
           for p in sorted(pathlib.Path(tmp_path).rglob("*")) if p.is_file()}
    assert got == GOLDEN[key]
