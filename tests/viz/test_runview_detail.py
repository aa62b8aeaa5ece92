"""RunView.ppdu_detail (column arrays + sorted events) against a plain pandas reading of the
same tables, for PPDUs of the merged ns-3 hidden-node run (with failed MPDUs, RTS events)."""
import numpy as np
import pandas as pd
import pytest

from conftest import CAPTURES
from sniffsync.decode.macs import mac_text
from viz.runview import RunView

SNIFFERS = [CAPTURES / f"ns3-11n-ht20-hidden-sniffer{s}.pcap" for s in ("A-nearAP", "B-nearSTA1", "C-nearSTA2")]


@pytest.fixture(scope="module")
def run():
    from sniffsync.pipeline.run import analyse
    return analyse([str(p) for p in SNIFFERS])


def _reference(run, pid):
    p = run.ppdus.set_index("ppdu")
    row = p.loc[pid]
    ev = run.events[run.events["ppdu"] == pid]

    def py(v):
        return None if pd.isna(v) else (v.item() if hasattr(v, "item") else v)
    out = {k: py(row[k]) for k in ("kind", "phy", "mcs", "nss", "bw_mhz", "n_mpdus", "psdu_bytes", "retries",
                                   "signal_dbm")}
    out.update(ppdu=pid, ta=mac_text(row["ta"]), ra=mac_text(row["ra"]),
               start_ns=int(row["start_ns"]) - int(run.ppdus["start_ns"].min()),
               airtime_us=round((int(row["end_ns"]) - int(row["start_ns"])) / 1000, 1),
               events=sorted(set(ev["kind"].astype(str))),
               failed_seqs=sorted(int(s) for s in ev.loc[ev["kind"] == "mpdu_failed", "seq"].dropna()),
               heard_by=[n for s, n in enumerate(run.names) if int(row["heard_mask"]) >> s & 1])
    return out


def test_detail_equals_pandas_reading(run):
    view = RunView(run.ppdus, run.events, {}, run.names, "t")
    with_events = run.events["ppdu"].unique()
    ids = np.unique(np.concatenate([with_events[:150], run.ppdus["ppdu"].to_numpy()[::7]]))
    for pid in ids:
        assert view.ppdu_detail(int(pid)) == _reference(run, int(pid)), pid
    assert sum(bool(view.ppdu_detail(int(p))["failed_seqs"]) for p in with_events) > 5
    assert view.ppdu_detail(int(run.ppdus["ppdu"].max()) + 1) is None
