"""Detection scored against the simulator's ground truth (``sniffsync simulate hidden-node``).

Truth labels (``truth/*.csv``, see docs/detect.md "Truth"):

- unanswered RTS: ``rts.csv`` ``answered == False`` (the receiver sent no CTS; a CTS that was
  sent but lost at the RTS sender is ``answered`` and is not an unanswered RTS on the air);
- RTS/CTS collision: an unanswered RTS that overlapped, in TRUE time (``ppdus.csv``
  start/end), a PPDU sent by its receiver or sent to its receiver by another station —
  computed here by a slow per-RTS loop, independent of the detector's interval join;
- failed MPDU: ``mpdus.csv`` ``rx_fate != "ok"`` (the recipient did not decode that
  transmission; it had not decoded an earlier copy either — checked below).

Observability (recall is scored over what a sniffer could possibly see):
an RTS counts if the sniffer(s) captured it; a collision if the RTS and one partner PPDU
were captured; a failed MPDU if the MPDU and the Block-Ack answering its PPDU were captured.
Precision for unanswered RTS is scored over RTS whose outcome is observable: captured, and
when answered, the CTS or the frame the CTS allowed was captured too (a sniffer that decoded
neither cannot tell a lost CTS from none: beside the AP every such CTS is overlapped by the
hidden station's RTS).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sniffsync.sync.merge import merge
from airtime.detect import detect
from airtime.ppdu import group_ppdus
from sniffsync.decode.frames import read_capture
from sniffsync.sim import scenario, simulate

NAMES = ["snifA", "snifB", "snifC"]
TARGET = 0.98


class Run:
    """One simulated run: truth tables and the sniffers' captures."""

    def __init__(self, out):
        t = out / "truth"
        self.rts = pd.read_csv(t / "rts.csv")
        self.pp = pd.read_csv(t / "ppdus.csv", keep_default_na=False)
        self.mp = pd.read_csv(t / "mpdus.csv", keep_default_na=False)
        self.cap = {n: pd.read_csv(t / f"captured_{n}.csv") for n in NAMES}
        self.paths = [str(out / f"{n}.pcap") for n in NAMES]


@pytest.fixture(scope="module", params=["be", "vi"])
def run(request, tmp_path_factory):
    out = tmp_path_factory.mktemp(f"hidden_{request.param}")
    simulate(scenario("hidden-node", [f"udp_ac={request.param}"], seconds=2, seed=5), out)
    r = Run(out)
    r.ac = request.param
    return r


def analyse(frames, names, stamps="capture"):
    """Detect on ``frames``; return truth ids of each frame row and the detection result."""
    ppdus, fp = group_ppdus(frames, stamps=stamps)
    det = detect(frames, ppdus, fp)
    return ppdus, det


def truth_of_rows(frames, run, names, col):
    """Truth ``col`` (ppdu / mpdu_row) of every frame row, via captured_<sniffer>.csv."""
    s = frames["sniffer"].to_numpy(np.int64)
    f = frames["frame"].to_numpy(np.int64) - 1
    out = np.full(len(frames), -1, np.int64)
    for k, n in enumerate(names):
        m = s == k
        out[m] = run.cap[n][col].to_numpy(np.int64)[f[m]]
    return out


def true_collisions(run) -> set:
    """Slow oracle: unanswered RTS overlapping (true time) a PPDU from/to its receiver."""
    pp = run.pp
    st, en = pp["start_ns"].to_numpy(), pp["end_ns"].to_numpy()
    tx, rx = pp["tx_name"].to_numpy(), pp["rx_name"].to_numpy()
    idx = {int(p): i for i, p in enumerate(pp["ppdu"])}
    out = {}
    for r in run.rts.loc[~run.rts["answered"], "ppdu"]:
        i = idx[int(r)]
        partners = [int(pp["ppdu"].iat[j]) for j in range(max(0, i - 200), min(len(pp), i + 200))
                    if j != i and st[j] < en[i] and st[i] < en[j]
                    and (tx[j] == rx[i] or (rx[j] == rx[i] and tx[j] != tx[i]))]
        if partners:
            out[int(r)] = partners
    return out


def prec_rec(detected: set, truth_all: set, observable: set, scoreable=None):
    """Precision over ``scoreable`` detections (default all), recall over observable truth."""
    d = detected if scoreable is None else detected & scoreable
    tp = len(d & truth_all)
    prec = tp / len(d) if d else 1.0
    rec = len(detected & observable) / len(observable) if observable else 1.0
    return prec, rec, len(d), len(observable)


def score(run, frames, names, stamps="capture"):
    """Precision/recall of the three event kinds on one table (one sniffer or merged)."""
    ppdus, det = analyse(frames, names, stamps)
    ev = det["events"]
    tp_row = truth_of_rows(frames, run, names, "ppdu")
    ours = tp_row[ppdus["first_frame"].to_numpy()]           # our PPDU id -> truth PPDU id
    seen = set(tp_row.tolist())

    def ev_truth(kind):
        return set(ours[ev.loc[ev["kind"] == kind, "ppdu"].to_numpy(np.int64)].tolist())

    res = {}
    # unanswered RTS
    rts = run.rts
    un_truth = set(rts.loc[~rts["answered"], "ppdu"])
    ans = rts[rts["answered"]]
    # what the CTS allowed: the sender's data to the same receiver, SIFS after the CTS
    pp = run.pp
    cts_end = pp.set_index("ppdu")["end_ns"].reindex(ans["cts_ppdu"]).to_numpy()
    want = pd.DataFrame({"tx_name": ans["tx_name"].to_numpy(), "rx_name": ans["rx_name"].to_numpy(),
                         "start_ns": cts_end + 16_000, "rts": ans["ppdu"].to_numpy()})
    follow = want.merge(pp[["tx_name", "rx_name", "start_ns", "ppdu"]], how="left")
    follow_seen = np.isin(follow["ppdu"].fillna(-1).astype(np.int64), list(seen))
    observed_answer = set(ans["ppdu"][np.isin(ans["cts_ppdu"], list(seen))]) | set(follow["rts"][follow_seen])
    scoreable = (un_truth | observed_answer) & seen
    res["rts_unanswered"] = prec_rec(ev_truth("rts_unanswered"), un_truth, un_truth & seen, scoreable)
    res["rts_unanswered_raw_precision"] = prec_rec(ev_truth("rts_unanswered"), un_truth, set())[0]
    # RTS/CTS collisions
    coll = true_collisions(run)
    obs = {r for r, parts in coll.items() if r in seen and any(p in seen for p in parts)}
    res["rts_cts_collision"] = prec_rec(ev_truth("rts_cts_collision"), set(coll), obs)
    # failed MPDUs: detector's judged MPDUs -> truth rows
    mrow = truth_of_rows(frames, run, names, "mpdu_row")
    judged = det["mpdus"]
    jr = mrow[judged["frame"].to_numpy(np.int64)]
    fate = run.mp["rx_fate"].to_numpy()
    failed_det = set(jr[~judged["acked"].to_numpy(bool)].tolist())
    failed_truth = set(np.flatnonzero((fate != "ok") & (run.mp["ppdu"].to_numpy() >= 0)).tolist())
    ba = run.pp[run.pp["kind"] == "ba"]
    ba_seen = set(ba.loc[np.isin(ba["ppdu"], list(seen)), "answers"])
    captured_rows = set(mrow[mrow >= 0].tolist())
    obs_m = {r for r in failed_truth if r in captured_rows and run.mp["ppdu"].iat[r] in ba_seen}
    res["mpdu_failed"] = prec_rec(failed_det, failed_truth, obs_m)
    # the event table carries exactly the judged failures
    assert int((ev["kind"] == "mpdu_failed").sum()) == int((~judged["acked"]).sum())
    return res


def single(run, k):
    fr = read_capture(run.paths[k])
    fr["sniffer"] = np.full(len(fr), k, fr["sniffer"].dtype)
    return fr


@pytest.fixture(scope="module")
def merged(run):
    return merge(run.paths)


def test_truth_labels_consistent(run):
    """The truth labels mean what the docstring says."""
    rts, mp = run.rts, run.mp
    # every unanswered RTS has a reason; answered ones have a CTS PPDU answering them
    assert (rts.loc[~rts["answered"], "why"].isin(["collided", "deaf", "nav_busy", "not_heard"])).all()
    cts = run.pp[run.pp["kind"] == "cts"].set_index("ppdu")
    assert (cts.loc[rts.loc[rts["answered"], "cts_ppdu"], "answers"].to_numpy()
            == rts.loc[rts["answered"], "ppdu"].to_numpy()).all()
    # a failed transmission was never decoded before (else the BA bit would be set anyway)
    sent = mp[mp["ppdu"] >= 0]
    ok_before = sent["rx_fate"].eq("ok").groupby([sent["tx_name"], sent["tid"], sent["seq_abs"]]).cummax()
    prior_ok = ok_before.groupby([sent["tx_name"], sent["tid"], sent["seq_abs"]]).shift(1, fill_value=False)
    assert not (prior_ok & sent["rx_fate"].ne("ok")).any()


@pytest.mark.parametrize("k", [1, 2])
def test_per_sniffer_beside_stations(run, k):
    """Sniffers beside STA1/STA2 see their station's RTS and the AP's (missing) CTS."""
    res = score(run, single(run, k), [NAMES[k]] * 3)
    p, r, nd, no = res["rts_unanswered"]
    assert no > 50 and p >= TARGET and r >= TARGET, (run.ac, NAMES[k], res)
    p, r, nd, no = res["mpdu_failed"]
    assert p >= TARGET and r >= TARGET, (run.ac, NAMES[k], res)


def test_sniffer_beside_ap(run):
    """Beside the AP every collided/deaf RTS is overlapped at the sniffer too: nothing observable.

    What it does detect are RTS whose CTS (and the data after it) it could not decode.
    """
    res = score(run, single(run, 0), ["snifA"] * 3)
    p, r, nd, no = res["rts_unanswered"]
    assert no == 0 and nd == 0, res
    p, r, nd, no = res["mpdu_failed"]
    assert no > 10 and p >= TARGET and r >= TARGET, (run.ac, res)


def test_merged_three_sniffers(run, merged):
    res = score(run, merged.frames, NAMES, merged.stamps)
    for kind in ("rts_unanswered", "rts_cts_collision", "mpdu_failed"):
        p, r, nd, no = res[kind]
        assert no > 10 and p >= TARGET and r >= TARGET, (run.ac, kind, res)
    # on the merged timeline nothing is lost to a sniffer's blind spot
    assert res["rts_unanswered_raw_precision"] >= TARGET, res
