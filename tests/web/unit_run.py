"""A small hand-made run (50 PPDUs, 3 events) for the API and server tests."""
import numpy as np
import pandas as pd
import pytest

from viz.runview import RunView

T0 = 1_700_000_000_000_000_000


@pytest.fixture
def run():
    n = 50
    start = T0 + np.arange(n) * 200_000
    ppdus = pd.DataFrame({
        "ppdu": np.arange(n), "start_ns": start, "end_ns": start + 120_000,
        "ta": pd.array([0x020000000001 if i % 2 else 0x020000000003 for i in range(n)], dtype="UInt64"),
        "ra": pd.array([0x020000000003] * n, dtype="UInt64"),
        "kind": ["data" if i % 2 else "ba" for i in range(n)], "phy": "ht", "mcs": 5, "nss": 1,
        "bw_mhz": 20, "n_mpdus": 4, "sniffer": 0, "heard_mask": 3})
    events = pd.DataFrame({"kind": ["mpdu_failed", "mpdu_failed", "rts_cts_collision"],
                           "ppdu": [7, 7, 9], "seq": [101, 103, None]})
    return RunView(ppdus, events, lambda a, b: {"range": [a, b]}, ["A", "B"], "unit")
