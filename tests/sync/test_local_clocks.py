"""TSF segments (sync.clock.local_clocks): a reset starts a clock, host-stamp noise does not.

Frames of one TSFT sniffer: TSFT every 500 µs (the truth), host stamps = TSFT + latency.
With ms of latency a fixed 5 ms threshold on the step of tsft - ts started a clock at
nearly every frame (and the joint fit then ran for minutes)."""
import numpy as np
import pandas as pd

from sniffsync.sync.clock import local_clocks


def _frames(latency_ns, reset_at=None):
    n = len(latency_ns)
    tsft_us = np.arange(n, dtype=np.int64) * 500 + 1_000_000
    ts = tsft_us * 1000 + 1_700_000_000_000_000_000 + latency_ns
    if reset_at is not None:                        # driver reload: the TSF restarts near 0
        tsft_us[reset_at:] -= tsft_us[reset_at] - 7
    return pd.DataFrame({"sniffer": np.zeros(n, np.int64), "ts_ns": ts,
                         "tsft_us": pd.array(tsft_us, dtype="Int64")})


def test_jittery_host_stamps_make_one_clock_and_a_reset_still_makes_two():
    rng = np.random.default_rng(5)
    lat = rng.exponential(8e6, 4000).astype(np.int64)          # 8 ms mean latency: 0-60 ms
    assert len(local_clocks(_frames(lat))[2]) == 1
    _, clock, clocks = local_clocks(_frames(lat, reset_at=2500))
    # around the reset, frames of both TSF runs interleave in capture time (latency >>
    # spacing): a few one-frame clocks there, but no clock mixes the two runs
    assert sorted(clocks.frames)[-2] > 1400 and len(clocks) < 40
    assert not np.intersect1d(clock[:2500], clock[2500:]).size
    # wild host stamps (uniform over 1 s: frames out of capture order): still one clock
    wild = rng.integers(0, 1_000_000_000, 4000)
    assert len(local_clocks(_frames(wild))[2]) == 1


def test_quiet_host_stamps_keep_the_5_ms_threshold():
    lat = np.random.default_rng(6).normal(20_000, 5_000, 3000).astype(np.int64)   # 20 µs
    f = _frames(lat)
    f.loc[1500:, "tsft_us"] += 6_000          # a 6 ms TSF step: > 5 ms, >> the noise
    assert len(local_clocks(f)[2]) == 2
