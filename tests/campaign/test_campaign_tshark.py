"""compare on a real (ns-3) single-sniffer run against tshark's fields of the same capture
(fixtures in tests/data/tshark*/, made by the make_fixtures.sh there)."""
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sniffsync.campaign.compare import compare
from sniffsync.campaign.runs import discover
from sniffsync.campaign.schedule import analyse_all

DATA = Path(__file__).resolve().parents[1] / "data"
CAPTURE = DATA / "captures" / "ns3-11n-ht20-hidden-snifferA-nearAP.pcap"
TSHARK_FRAMES = DATA / "tshark" / "ns3-11n-ht20-hidden-snifferA-nearAP.pcap.tsv.gz"
TSHARK_TCP = DATA / "tshark_tcp" / "ns3-hidden-snifferA-nearAP.tsv"


@pytest.fixture(scope="module")
def ns3(tmp_path_factory):
    root = tmp_path_factory.mktemp("ns3")
    (root / "ns3A").mkdir()
    shutil.copy(CAPTURE, root / "ns3A" / CAPTURE.name)
    (root / "ns3A" / "run.json").write_text('{"phy": "ht20"}')
    specs = discover([root / "ns3A"])
    analyse_all(specs, "none")
    out = root / "out"
    compare(specs, out)
    return out


def _tcp_fields() -> pd.DataFrame:
    ws = pd.read_csv(TSHARK_TCP, sep="\t", dtype=str)
    ws["len"] = pd.to_numeric(ws["tcp.len"]).fillna(pd.to_numeric(ws["udp.length"]) - 8)
    ws["src"] = ws["ip.src"] + ":" + ws["tcp.srcport"].fillna(ws["udp.srcport"])
    return ws


def test_flow_bytes_match_tshark(ns3):
    ws = _tcp_fields()
    once = ws.drop_duplicates(["wlan.ta", "wlan.seq"])        # 802.11 retry copies counted once
    want = once.groupby("src")["len"].sum()
    want = want[want > 0]
    got = pd.read_csv(ns3 / "flows.csv")
    got.index = got["flow"].str.extract(r"^\w+ ([\d.]+:\d+)")[0]
    assert sorted(got.index) == sorted(want.index) and len(want) == 3
    assert (got.loc[want.index, "bytes"] == want).all()
    # no TCP retransmission in this capture, and Wireshark flags none either; goodput = bytes
    # but AP -> STA1, where the receiver's ACKs cover 118,184 bytes sniffer A missed: its
    # goodput is what tshark's relative tcp.ack of STA1 says was delivered (docs/fairness.md)
    assert (got["retransmissions"] == 0).all()
    ap = "10.1.1.1:49153"
    assert (got.drop(ap)["goodput_bytes"] == got.drop(ap)["bytes"]).all()
    acks = pd.read_csv(DATA / "tshark_tcp" / "ns3-hidden-acks-snifferA-nearAP.tsv", sep="\t", dtype=str)
    sta1 = acks[(acks["ip.src"] == "10.1.1.2") & (acks["tcp.srcport"] == "5001")]       # STA1's ACKs
    sender = acks[(acks["ip.src"] == "10.1.1.1") & (acks["tcp.srcport"] == "49153")]
    fin_acked = int((sender["tcp.flags"].map(lambda x: int(x, 16)) & 1).any())
    assert got.loc[ap, "goodput_bytes"] == pd.to_numeric(sta1["tcp.ack"]).max() - 1 - fin_acked == 1_112_576
    assert once["tcp.analysis.retransmission"].isna().all()


def test_rts_cts_ampdu_mcs_per_station_match_tshark(ns3):
    fr = pd.read_csv(TSHARK_FRAMES, sep="\t", dtype=str)
    st = pd.read_csv(ns3 / "stations.csv").set_index("station")
    rts = fr[fr["wlan.fc.type_subtype"] == "0x001b"].groupby("wlan.ta").size()
    cts = fr[fr["wlan.fc.type_subtype"] == "0x001c"].groupby("wlan.ra").size()
    assert (st["rts_sent"] == rts.reindex(st.index).fillna(0)).all() and rts.sum() == 42
    assert (st["cts_received"] == cts.reindex(st.index).fillna(0)).all()
    data = fr[fr["wlan.fc.type_subtype"] == "0x0028"]
    ampdu = data.groupby(["wlan.ta", data["radiotap.ampdu.reference"].fillna("f" + data["frame.number"])]).size()
    per = ampdu.groupby(level=0).agg(["max", "size", "mean"])
    assert (st.loc[per.index, "mpdus_per_ampdu_max"] == per["max"]).all()
    assert (st.loc[per.index, "data_ppdus"] == per["size"]).all()
    np.testing.assert_allclose(st.loc[per.index, "mpdus_per_ampdu_mean"], per["mean"], rtol=1e-8)
    mcs = data.groupby("wlan.ta")["radiotap.mcs.index"].agg(lambda s: pd.to_numeric(s).median())
    assert (st.loc[mcs.index, "mcs_median"] == mcs).all()
    assert st.loc[per.index, "phy"].eq("ht20").all()


@pytest.mark.tshark
def test_tshark_still_counts_what_the_fixture_says():
    out = subprocess.run(["tshark", "-n", "-r", str(CAPTURE), "-Y", "wlan.fc.type_subtype == 0x001b",
                          "-T", "fields", "-e", "wlan.ta"], capture_output=True, text=True, check=True).stdout
    fr = pd.read_csv(TSHARK_FRAMES, sep="\t", dtype=str)
    assert sorted(out.split()) == sorted(fr.loc[fr["wlan.fc.type_subtype"] == "0x001b", "wlan.ta"])


def test_bytes_in_flight_per_flow_match_tshark(ns3):
    # flows.csv's in-flight maximum per TCP flow direction = Wireshark's maximum of
    # tcp.analysis.bytes_in_flight (which stops after a segment the sniffer missed, so it has
    # fewer samples; the quantiles are checked exactly on sniffer B in tests/tcp/test_inflight.py)
    ws = _tcp_fields().dropna(subset=["tcp.analysis.bytes_in_flight"])
    want = pd.to_numeric(ws["tcp.analysis.bytes_in_flight"]).groupby(ws["src"]).max()
    got = pd.read_csv(ns3 / "flows.csv")
    got.index = got["flow"].str.extract(r"^\w+ ([\d.]+:\d+)")[0]
    assert len(want) == 2 and (got.loc[want.index, "inflight_max_bytes"] == want).all()
    assert got.loc[want.index, "inflight_p50_bytes"].gt(0).all()
    assert got.drop(want.index)["inflight_max_bytes"].isna().all()        # the UDP flow has none


def test_ping_rtt_table_matches_tshark(tmp_path):
    # a run of the loopback ping capture: rtt.csv's ping columns = the same statistics of
    # tshark's icmp.resptime / icmpv6.resptime (fixture tests/data/tshark_icmp/ping_lo.tsv)
    from sniffsync.campaign.sql import query
    (tmp_path / "ping").mkdir()
    shutil.copy(DATA / "captures" / "icmp" / "ping_lo.pcapng", tmp_path / "ping" / "ping_lo.pcapng")
    specs = discover([tmp_path / "ping"])
    analyse_all(specs, "none")
    compare(specs, tmp_path / "out")
    ws = pd.read_csv(DATA / "tshark_icmp" / "ping_lo.tsv", sep="\t", dtype=str)
    rt = pd.to_numeric(ws["icmp.resptime"].fillna(ws["icmpv6.resptime"])).dropna()
    requests = ws["icmp.type"].eq("8").sum() + ws["icmpv6.type"].eq("128").sum()
    got = pd.read_csv(tmp_path / "out" / "rtt.csv").iloc[0]
    assert got["ping_requests"] == requests == 25 and got["ping_replies"] == len(rt) == 24
    assert got["ping_loss_pct"] == pytest.approx(100 / 25)
    for col, q in (("ping_p50_ms", 0.5), ("ping_p95_ms", 0.95), ("ping_max_ms", 1.0)):
        assert got[col] == pytest.approx(rt.quantile(q), abs=1e-9)
    assert np.isnan(got["ping_minus_tcp_p50_ms"])                      # no TCP in this run
    sql = query(specs, "select count(*) n, sum(rtt_ns >= 0) answered from icmp")
    assert list(sql.iloc[0]) == [25, 24]


def test_efficiency_and_completion_in_the_tables(ns3):
    # no retransmission in this capture (tshark flags none): every byte sent was goodput, also
    # the 118,184 bytes sniffer A missed that STA1 acknowledged -> efficiency exactly 1
    thr = pd.read_csv(ns3 / "throughput.csv").iloc[0]
    assert thr["efficiency"] == 1.0
    flows = pd.read_csv(ns3 / "flows.csv")
    tcp = flows[flows["flow"].str.startswith("tcp")]
    assert tcp["fct_ms"].notna().all() and flows[~flows.index.isin(tcp.index)]["fct_ms"].isna().all()
    assert (tcp["active_mbps"] <= tcp["goodput_mbps"]).all()       # the outstanding span is longer
    assert "jain_run_active" in pd.read_csv(ns3 / "jain.csv")


def test_udp_table_of_an_ethernet_iperf2_run(tmp_path):
    # the hand-built iperf2 capture (answers designed in tests/data/tshark_udp/make_capture.py)
    # as a run: udp.csv carries them; the Ethernet run's flows have no 802.11 station
    (tmp_path / "ip2").mkdir()
    shutil.copy(DATA / "captures" / "udp" / "iperf2_hand.pcap", tmp_path / "ip2" / "iperf2_hand.pcap")
    specs = discover([tmp_path / "ip2"])
    analyse_all(specs, "none")
    compare(specs, tmp_path / "out")
    u = pd.read_csv(tmp_path / "out" / "udp.csv").set_index("flow")
    a = u.loc["udp 10.0.0.1:40000→10.0.0.2:5001"]
    assert (a["method"], a["datagrams"], a["lost"], a["duplicates"], a["reordered"]) == ("iperf2", 20, 1, 1, 1)
    assert a["loss_pct"] == 5 and 0.5 < a["jitter_ms"] < 3
    b = u.loc["udp 10.0.0.3:7000→10.0.0.2:7001"]
    assert (b["method"], b["lost"], b["expected"]) == ("ip_id", 1, 10)
    assert pd.read_csv(tmp_path / "out" / "flows.csv")["station"].isna().all()


def test_airtime_and_channel_tables(ns3):
    # CTS/ACK per sender as tshark's fields say (the RA of the frame before, when its TA is the
    # response's RA); on sniffer A nothing overlaps, so the senders' airtime sums to the busy time
    fr = pd.read_csv(TSHARK_FRAMES, sep="\t", dtype=str)
    prev = fr.shift(1)
    resp = fr["wlan.fc.type_subtype"].isin(["0x001c", "0x001d"]) & (prev["wlan.ta"] == fr["wlan.ra"])
    want = prev.loc[resp, "wlan.ra"].value_counts()
    at = pd.read_csv(ns3 / "airtime.csv").set_index("station")
    assert (at.loc[want.index, "responses_attributed"] == want).all() and at["responses_attributed"].sum() == 125
    ch = pd.read_csv(ns3 / "channel.csv").iloc[0]
    assert at["airtime_ms"].sum() == pytest.approx(ch["busy_s"] * 1e3)
    assert at["airtime_share"].sum() == pytest.approx(1.0)
    parts = at[["data_ms", "control_ms", "management_ms", "other_ms"]].sum(axis=1)
    assert np.allclose(parts, at["airtime_ms"])


def test_wired_capture_joins_the_run(tmp_path):
    # sniffer A's capture plus a wired capture in the run's wired/ folder, built from tshark's
    # fields with designed delays (tests/tcp/test_wired.py): wired.csv's queueing delays
    from tcp.test_wired import MS, OFFSET, _first_copies, _write_wired
    run = tmp_path / "ns3w"
    (run / "wired").mkdir(parents=True)
    shutil.copy(CAPTURE, run / CAPTURE.name)
    t = _first_copies()
    down = (t["ip.src"] == "10.1.1.1").to_numpy()
    q = np.where(down, (np.arange(len(t)) % 7) * MS, 0)
    _write_wired(run / "wired" / "ap.pcap", t, np.where(down, t["t_ns"] - 5 * MS - q, t["t_ns"] + 3 * MS) + OFFSET)
    specs = discover([run])
    assert len(specs) == 1 and len(specs[0].wired) == 1
    analyse_all(specs, "none")
    compare(specs, tmp_path / "out")
    w = pd.read_csv(tmp_path / "out" / "wired.csv")
    assert w["packets"].sum() == len(t)
    dn = w[w["direction"] == "downlink"]
    assert len(dn) == 2 and abs(dn["queue_max_ms"].max() - 6) < 1e-3
    assert (w.loc[w["direction"] == "uplink", "queue_max_ms"].abs() < 1e-3).all()


def test_ampdu_size_against_rtt_points(ns3):
    # one point per (window, station) where the station sent data PPDUs and its flows have RTT
    # samples: x = that row of station_windows, y = the median of those samples (its inputs are
    # checked against tshark above and in tests/airtime/test_accounting.py)
    from sniffsync.campaign.metrics import ampdu_rtt
    from sniffsync.campaign.store import load_table
    spec = discover([ns3.parent / "ns3A"])[0]
    pts = ampdu_rtt(spec)
    sw, rtt, fl = (load_table(spec.cache, n) for n in ("station_windows", "rtt", "flows"))
    r = rtt[rtt["rtt_ns"] >= 0].merge(fl[["fd", "ta"]], on="fd")
    mac_int = lambda v: v if isinstance(v, (int, np.integer)) else int(str(v).replace(":", ""), 16)  # noqa: E731
    keys = (set(zip(r["ts_ns"] // 200_000_000, r["ta"].map(mac_int)))
            & set(zip(sw["window"], sw["ta"].map(mac_int))))
    assert len(pts) == len(keys) >= 6
    assert pts["ampdu"].isin(sw["mpdus_per_ampdu_mean"]).all() and (pts["rtt_ms"] > 0).all()
    assert (ns3 / "scatter_ampdu_rtt.svg").exists()
