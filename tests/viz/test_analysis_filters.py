"""Filters of the analysis (stations, kinds, flows) against oracles that do not use the index:
pandas group-bys over run.ppdus / run.events, and the fairness stage's own Jain per window."""
import numpy as np
import pytest

from conftest import CAPTURES
from sniffsync.decode.macs import mac_text

SNIFFERS = [CAPTURES / f"ns3-11n-ht20-hidden-sniffer{s}.pcap" for s in ("A-nearAP", "B-nearSTA1", "C-nearSTA2")]


@pytest.fixture(scope="module")
def run():
    from sniffsync.pipeline.run import analyse
    return analyse([str(p) for p in SNIFFERS])


@pytest.fixture(scope="module")
def index(run):
    from viz.analysis_index import AnalysisIndex
    return AnalysisIndex(run)


def _rel(run):
    return int(run.ppdus["start_ns"].min())


def test_station_and_kind_filters_match_pandas(run, index):
    p = run.ppdus
    base = _rel(run)
    t0, t1 = 200_000_000, 700_000_000
    tas = sorted({mac_text(int(v)) for v in p["ta"].dropna()})
    keep = tas[:2]
    got = index(t0, t1, stations=tuple(keep), kinds=("data", "rts"))
    sel = p[(p["start_ns"] >= base + t0) & (p["start_ns"] < base + t1) & p["ta"].notna()]
    sel = sel[sel["ta"].map(lambda v: mac_text(int(v))).isin(keep) & sel["kind"].astype(str).isin(["data", "rts"])]
    busy_us = ((sel["end_ns"] - sel["start_ns"]).groupby(sel["ta"].map(lambda v: mac_text(int(v)))).sum() // 1000)
    want = {k: 100.0 * v / busy_us.sum() for k, v in busy_us.items()}
    assert {r["station"]: r["share_pct"] for r in got["airtime_share"]} == pytest.approx(want)
    data = sel[sel["kind"].astype(str) == "data"]
    assert sum(got["hist"]["mpdus_per_ampdu"]["y"]) == len(data)
    assert {r["station"]: r["rts"] for r in got["rts"]} == \
        {mac_text(int(k)): int(v) for k, v in sel[sel["kind"].astype(str) == "rts"].groupby("ta").size().items()}
    ev = run.events
    e = ev[(ev["start_ns"] >= base + t0) & (ev["start_ns"] < base + t1) & (ev["kind"].astype(str) == "mpdu_failed")]
    e = e[e["ta"].map(lambda v: mac_text(int(v)) if v == v and v is not None else None).isin(keep)]
    assert sum(got["hist"]["failed_per_10s"]["y"]) == len(e)
    assert got["filters"]["stations"] == tuple(keep)


def test_flow_filter_keeps_those_flows_and_recomputes_jain(run, index):
    fair = run.fairness
    flows = index()["flows"]
    moving = [i for i, f in enumerate(flows) if f["bytes"] > 0]
    got = index(None, None, flows=tuple(moving))
    # all flows that carry data: Jain per window equals the fairness stage's own
    assert got["jain"]["goodput"] == pytest.approx([round(v, 3) for v in fair.jain["jain"]], abs=1e-3)
    two = tuple(moving[:2])
    got2 = index(None, None, flows=two)
    assert [s["label"] for s in got2["goodput"]["series"]] == [flows[i]["label"] for i in two]
    w = fair.windows
    lab = {(f.run, f.fd): flows[k]["label"] for k, f in enumerate(fair.flows.itertuples(index=False))}
    w = w.assign(label=[lab[(r, fd)] for r, fd in zip(w["run"], w["fd"])])
    w = w[w["label"].isin([flows[i]["label"] for i in two]) & w["active"].astype(bool)]
    for t, g in w.groupby("start_ns"):
        x = g["goodput_bps"].to_numpy(float)
        j = x.sum() ** 2 / (len(x) * (x ** 2).sum())
        k = got2["jain"]["t_ns"].index(int(t) - _rel(run))
        assert got2["jain"]["goodput"][k] == pytest.approx(j, abs=1e-3)
    assert [f["label"] for f in got2["flows"]] == [flows[i]["label"] for i in two]


def test_api_filters_validated_and_cached(run, index):
    from viz.runview import RunView
    from web import create_app
    view = RunView(run.ppdus, run.events, index, run.names, "f")
    c = create_app(view).test_client()
    ok = c.get("/api/analysis?sta=00:00:00:00:00:01&kinds=data,rts&flows=0,2")
    assert ok.status_code == 200 and ok.get_json()["filters"]["kinds"] == ["data", "rts"]
    for bad in ("sta=00:00:00:00:00", "sta=<x>", "kinds=nope", "flows=-1", "flows=1_0", "flows=٥"):
        r = c.get(f"/api/analysis?{bad}")
        assert r.status_code == 400 and bad.split("=")[0] in r.get_json()["error"], bad


def test_notes_and_frame_facts_survive_without_the_frame_table():
    """A cached run has no frame table: the encrypted-frames note (tshark counts 35 protected data
    frames in this capture) and the legacy rates come from the columns the pipeline attached."""
    import dataclasses
    from sniffsync.pipeline.run import analyse
    from sniffsync.pipeline.uicols import attach_frame_columns
    from viz.analysis import data_notes
    r = attach_frame_columns(analyse([str(CAPTURES / "fragattacks_ping_D_BP_bcast_ra-fromap.pcapng")]))
    cached = dataclasses.replace(r, frames=None)
    assert data_notes(cached) == data_notes(r) == {"flows": "no TCP/UDP: 35 encrypted data frames"}
    first = r.frames["rate_kbps"].to_numpy(dtype=float, na_value=np.nan)[r.ppdus["first_frame"].to_numpy()]
    got = r.ppdus["rate_mbps"].to_numpy(dtype=float, na_value=np.nan)
    assert np.array_equal(np.isnan(first), np.isnan(got)) and np.allclose(got[~np.isnan(got)], first[~np.isnan(first)] / 1000)
