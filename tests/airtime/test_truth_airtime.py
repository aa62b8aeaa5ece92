"""PPDU airtime from captures against the simulator's true PPDU start/end (``truth/ppdus.csv``).

Our PPDUs are matched to true PPDUs through ``truth/captured_<sniffer>.csv`` (the true PPDU
of every pcap record). The simulator draws every airtime from ``airtime.phy``, so its truth
is re-derived here with a separate, slow TXTIME written from IEEE 802.11-2020 (eq. 17-29
OFDM, 19-90 HT-mixed, 21-135 VHT, 27-135 HE SU; BCC, one spatial stream, no STBC — what the
generator emits), so the two together are an independent check.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from airtime.ppdu import group_ppdus
from sniffsync.decode.frames import read_capture
from sniffsync.sim import scenario, simulate

US = 1000
# (bits per subcarrier, coding rate) per MCS (Tables 19-27.., 21-30.., 27-55..)
MOD = [(1, 1 / 2), (2, 1 / 2), (2, 3 / 4), (4, 1 / 2), (4, 3 / 4), (6, 2 / 3), (6, 3 / 4), (6, 5 / 6),
       (8, 3 / 4), (8, 5 / 6), (10, 3 / 4), (10, 5 / 6)]
N_SD_HT = {20: 52, 40: 108, 80: 234, 160: 468}          # HT / VHT data subcarriers
N_SD_HE = {20: 234, 40: 468, 80: 980, 160: 1960}        # HE full-band RU data subcarriers
OFDM_NDBPS = {6000: 24, 9000: 36, 12000: 48, 18000: 72, 24000: 96, 36000: 144, 48000: 192, 54000: 216}


def txtime_us(phy, L, rate_kbps=0, mcs=0, bw=20, gi_ns=800):
    """TXTIME in µs (float) of a PSDU of L bytes, straight from the standard's equations."""
    if phy == "ofdm":                         # 17-29: preamble 16 + SIGNAL 4 + 4 µs symbols
        return 20 + 4 * math.ceil((16 + 8 * L + 6) / OFDM_NDBPS[rate_kbps])
    bpscs, r = MOD[mcs]
    if phy in ("ht", "vht"):
        ndbps = round(N_SD_HT[bw] * bpscs * r)
        nsym = math.ceil((8 * L + 16 + 6) / ndbps)              # one BCC encoder
        # L-STF 8 + L-LTF 8 + L-SIG 4 + HT-SIG 8 + HT-STF 4 + 1 HT-LTF 4
        # (VHT: VHT-SIG-A 8 + VHT-STF 4 + 1 VHT-LTF 4 + VHT-SIG-B 4)
        pre = 36 if phy == "ht" else 40
        if gi_ns == 400:                      # T_SYML * ceil(T_SYMS * N_SYM / T_SYML)
            return pre + 4 * math.ceil(3.6 * nsym / 4 - 1e-9)
        return pre + 4 * nsym
    if phy == "he":                           # 27-135, BCC: N_SYM = ceil(bits / N_DBPS)
        ndbps = math.floor(N_SD_HE[bw] * bpscs * r)
        nsym = math.ceil((8 * L + 16 + 6) / ndbps)
        gi = gi_ns / 1000
        # L-part 20 + RL-SIG 4 + HE-SIG-A 8 + HE-STF 4 + one 2x HE-LTF (6.4 µs + GI), T_PE 0
        return 20 + 4 + 8 + 4 + (6.4 + gi) + nsym * (12.8 + gi)
    raise ValueError(phy)


def test_hand_oracle_spot_values():
    """The oracle itself on values worked by hand from the equations."""
    assert txtime_us("ofdm", 20, 24000) == 28      # RTS: 182 bits / 96 -> 2 symbols
    assert txtime_us("ofdm", 14, 24000) == 28      # CTS: 134 bits -> 2 symbols
    assert txtime_us("ofdm", 32, 24000) == 32      # BA: 278 bits -> 3 symbols
    assert txtime_us("ofdm", 65, 6000) == 112      # beacon: 542 bits / 24 -> 23 symbols
    assert txtime_us("ht", 1538, mcs=5) == 36 + 4 * 60   # 12326 bits / 208 -> 60 symbols
    # HE40 MCS7: N_DBPS = 468*6*5/6 = 2340; 1000 B -> 8022 bits -> 4 symbols of 13.6 µs
    assert txtime_us("he", 1000, mcs=7, bw=40) == pytest.approx(43.2 + 4 * 13.6)


RUNS = {   # scenario, --set, seconds: every PHY the generator emits, and short GI
    "ht20": ("hidden-node", [], 0.4),
    "ht40_sgi": ("clean", ["phy=ht", "bw_mhz=40", "gi_ns=400", "mcs=6"], 0.3),
    "vht80": ("clean", ["phy=vht", "bw_mhz=80", "mcs=9"], 0.3),
    "vht40_sgi": ("fairness", ["gi_ns=400"], 1.3),
    "he40": ("clean", [], 0.3),
    "he80_gi16": ("clean", ["bw_mhz=80", "gi_ns=1600", "mcs=11"], 0.3),
}


@pytest.fixture(scope="module", params=sorted(RUNS))
def run(request, tmp_path_factory):
    name, sets, secs = RUNS[request.param]
    out = tmp_path_factory.mktemp(request.param)
    simulate(scenario(name, sets, seconds=secs, seed=3), out)
    truth = pd.read_csv(out / "truth" / "ppdus.csv", keep_default_na=False).set_index("ppdu")
    cap = pd.read_csv(out / "truth" / "captured_snifA.csv")
    frames = read_capture(str(out / "snifA.pcap"))      # snifA: perfect clock, no misses
    ppdus = group_ppdus(frames, tsft_at="end").ppdus
    tp = cap["ppdu"].to_numpy()[ppdus["first_frame"].to_numpy()]
    return request.param, ppdus, truth.loc[tp].reset_index(), truth


def test_truth_airtime_is_the_standard(run):
    """The generator's true airtime equals the hand TXTIME of every PPDU it put on the air."""
    _, _, _, truth = run
    want = [txtime_us(r.phy, r.psdu_bytes, r.rate_kbps, r.mcs, r.bw_mhz, r.gi_ns)
            for r in truth.itertuples()]
    err = np.abs(truth["airtime_ns"].to_numpy() - np.round(np.array(want) * US))
    assert err.max() == 0, truth[err > 0].head()


def test_ppdu_durations_within_1us(run):
    label, ppdus, t, _ = run
    # every MPDU of each PPDU captured (snifA decodes whole PPDUs), same grouping as truth
    assert (ppdus["n_mpdus"].to_numpy() == t["n_mpdus"].to_numpy()).all()
    assert (ppdus["psdu_bytes"].to_numpy() == t["psdu_bytes"].to_numpy()).all()
    err = np.abs(ppdus["airtime_ns"].to_numpy() - t["airtime_ns"].to_numpy())
    assert err.max() <= 1 * US, (label, err.max())
    # placed on the clock: TSFT is floor(true end / 1 µs), so both ends within 1 µs + airtime error
    t0 = ppdus["end_ns"].to_numpy() - 1_000_000_000 * 1000      # snifA TSF base 1e9 µs
    assert np.all((t0 <= t["end_ns"].to_numpy()) & (t["end_ns"].to_numpy() - t0 < US))
    st = ppdus["start_ns"].to_numpy() - 1_000_000_000 * 1000
    assert np.abs(st - t["start_ns"].to_numpy()).max() <= 2 * US
    # every kind the generator emits is covered (data in the scenario's PHY)
    kinds = set(t["kind"])
    assert {"data", "ba", "beacon"} <= kinds, kinds
    assert set(t.loc[t["kind"] == "data", "phy"]) == {label[:3].rstrip("0123456789_")}
