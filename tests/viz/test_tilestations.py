"""Station bitmasks of zoomed-out sniffer-lane buckets (viz/tilestations.py) against a brute-force
reading of the PPDU table: per sniffer and bucket, the stations (TA, else RA) of the PPDUs that
sniffer heard overlapping the bucket. 40 stations: more than the 31 bits, so the shared bit is
exercised too."""
import numpy as np
import pandas as pd
import pytest

from sniffsync.decode.macs import mac_text


@pytest.fixture(scope="module")
def view():
    from viz.runview import RunView
    rng = np.random.default_rng(5)
    n = 3000
    start = 1_000_000_000 + np.sort(rng.integers(0, 2_000_000_000, n))
    air = rng.integers(20_000, 3_000_000, n)                      # up to 3 ms: spans several buckets
    sta = 0x020000000000 + rng.zipf(1.3, n) % 40                 # skewed: a few busy stations
    ta = pd.array(sta, dtype="UInt64")
    ta[rng.random(n) < 0.2] = pd.NA                               # CTS/ACK: placed by RA
    ppdus = pd.DataFrame({"ppdu": np.arange(n), "start_ns": start, "end_ns": start + air, "ta": ta,
                          "ra": pd.array(sta, dtype="UInt64"), "kind": pd.Categorical(["data"] * n),
                          "sniffer": np.zeros(n, np.int16), "heard_mask": rng.integers(1, 8, n)})
    return RunView(ppdus, None, {}, ["s0", "s1", "s2"], "t"), ppdus


def test_bucket_masks_equal_the_stations_heard_in_each_bucket(view):
    v, p = view
    meta = v.meta()
    bits = meta["sta_bits"]
    assert len(bits) == 31 and bits[-1] == -1 and len(meta["lanes"]["station"]) == 40
    bit_of = {meta["lanes"]["station"][lane]: b for b, lane in enumerate(bits) if lane >= 0}
    who = p["ta"].astype("UInt64").fillna(p["ra"].astype("UInt64")).map(lambda m: mac_text(int(m)))
    s = p["start_ns"].to_numpy() - meta["t0_abs_ns"]
    e = p["end_ns"].to_numpy() - meta["t0_abs_ns"]
    for t0, t1, px in ((0, meta["span_ns"] + 1, 200), (300_000_000, 420_000_000, 29)):
        t = v.tile(t0, t1, px, "sniffer", stations=True)
        assert t["mode"] == "buckets" and len(t["sta_mask"]) == 3
        edges = np.array(t["edges_ns"])
        for lane in range(3):
            heard = (p["heard_mask"].to_numpy() >> lane & 1).astype(bool)
            want = []
            for k in range(px):
                on = heard & (s < edges[k + 1]) & (e > edges[k])
                want.append(sum(1 << b for b in {bit_of.get(w, 30) for w in who[on]}))
            assert t["sta_mask"][lane] == want
        assert "sta_mask" not in v.tile(t0, t1, px, "station", stations=True)
        assert "sta_mask" not in v.tile(t0, t1, px, "sniffer")          # not asked: not computed


def test_server_sends_the_masks_only_when_asked(view):
    """/api/tile: ``stations=1`` -> the masks above (same body as the public API's answer);
    without it (no filter on the page) none, and a bad value is a 400."""
    import json

    from web import create_app
    v, _ = view
    c = create_app(v).test_client()
    span = v.meta()["span_ns"]
    enc = lambda d: json.dumps(d, sort_keys=True, separators=(",", ":")).encode()  # noqa: E731
    q = f"/api/tile?t0=0&t1={span + 1}&px=200&lanes=sniffer"
    with_masks = c.get(q + "&stations=1")
    assert with_masks.status_code == 200 and with_masks.data == enc(v.tile(0, span + 1, 200, "sniffer", stations=True))
    assert "sta_mask" in json.loads(with_masks.data)
    plain_tile = json.loads(c.get(q).data)
    assert plain_tile["mode"] == "buckets" and "sta_mask" not in plain_tile
    assert "sta_mask" not in json.loads(c.get(q.replace("sniffer", "station") + "&stations=1").data)
    assert c.get(q + "&stations=2").status_code == 400


def test_bucket_masks_at_the_edges():
    """Hand-checked: a PPDU ending exactly at a bucket's start or starting at its end is not in
    it; one spanning several buckets is in each; lanes (sniffers) apart."""
    from viz.runview import RunView
    from viz.tilestations import bucket_masks
    t = 1_000_000_000
    # station lanes by TA: 0x..01 -> lane 0 (bit 0), 0x..02 -> lane 1 (bit 1)
    start = np.array([0, 100, 250, 300, 100]) + t
    end = np.array([100, 200, 260, 500, 400]) + t
    ta = pd.array([0x020000000001, 0x020000000002, 0x020000000001, 0x020000000002, 0x020000000001], dtype="UInt64")
    ppdus = pd.DataFrame({"ppdu": np.arange(5), "start_ns": start, "end_ns": end, "ta": ta, "ra": ta,
                          "kind": pd.Categorical(["data"] * 5), "sniffer": np.zeros(5, np.int16),
                          "heard_mask": [1, 1, 1, 1, 2]})
    v = RunView(ppdus, None, {}, ["s0", "s1"], "t")
    m = bucket_masks(v._sta_bits, v._index["sniffer"], [0, 100, 200, 300, 400, 500])
    # s0: [0,100) PPDU 0; [100,200) PPDU 1; [200,300) PPDU 2; [300,400) and [400,500) PPDU 3
    assert m.tolist() == [[0b01, 0b10, 0b01, 0b10, 0b10], [0, 0b01, 0b01, 0b01, 0]]
