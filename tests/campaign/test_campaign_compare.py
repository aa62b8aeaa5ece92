"""compare's numbers against an independent route: DuckDB SQL straight over each run's
exported frame table (no tcp/fairness/detect code), and grouping/baseline arithmetic."""
import re

import numpy as np
import pandas as pd
import pytest

from sniffsync.campaign import FIGURE_NAMES, METRIC_TABLES, output_files
from sniffsync.campaign.compare import compare
from sniffsync.campaign.figures import FIGURES
from sniffsync.campaign.metrics import METRICS
from sniffsync.campaign.sql import query
from sniffsync.errors import UsageError

# per flow direction, from the merged frames only: payload bytes of distinct transmissions
# (an 802.11 retry copy has the same TA + 802.11 sequence number), goodput = bytes of
# distinct TCP sequence numbers (UDP: every datagram), span = first to last segment with
# payload (the flow's activity span, docs/fairness.md: a SYN or pure ACK does not start it)
ORACLE = """
with seg as (select run, ip_src, sport, ip_dst, dport, ip_proto, ts_ns, ta, seq, tcp_seq,
                    coalesce(tcp_payload_len, udp_len - 8) as len
             from frames where ip_proto in (6, 17) and not coalesce(fcs_bad, false)),
     tx as (select distinct run, ip_src, sport, ip_proto, ta, seq, tcp_seq, len from seg where len > 0),
     good as (select distinct run, ip_src, sport, ip_proto, coalesce(tcp_seq, seq) k, len from tx),
     span as (select run, ip_src, sport, min(ts_ns) t0, max(ts_ns) t1 from seg where len > 0
              group by all)
select tx.run, tx.ip_src || ':' || tx.sport as src, sum(tx.len) as bytes,
       (select sum(len) from good g where g.run = tx.run and g.ip_src = tx.ip_src and g.sport = tx.sport) as goodput,
       any_value(s.t1 - s.t0) as span_ns
from tx join span s using (run, ip_src, sport) group by all order by all
"""

pytestmark = pytest.mark.slow      # the session's six simulated runs, analysed


@pytest.fixture(scope="module")
def compared(campaign, tmp_path_factory):
    specs, _ = campaign
    out = tmp_path_factory.mktemp("compare")
    tables = compare(specs, out, baseline="rts-off-udp5")
    return specs, out, tables


def test_flow_bytes_and_goodput_match_sql_over_frames(compared):
    specs, out, _ = compared
    want = query(specs, ORACLE)
    got = pd.read_csv(out / "flows.csv")
    got["src"] = got["flow"].str.extract(r"^\w+ ([\d.]+:\d+)")[0]
    m = want.merge(got, on=["run", "src"], how="outer", validate="1:1", indicator=True)
    assert (m["_merge"] == "both").all() and len(m) == 12
    assert (m["bytes_x"] == m["bytes_y"]).all()
    assert (m["goodput"] == m["goodput_bytes"]).all()
    np.testing.assert_allclose(m["goodput_mbps"], m["goodput"] * 8e3 / m["span_ns"], rtol=1e-5)
    # the run's throughput table: mean/min/max/std/total over its flows
    thr = pd.read_csv(out / "throughput.csv").set_index("run")
    rate = (m["goodput"] * 8e3 / m["span_ns"]).groupby(m["run"])
    np.testing.assert_allclose(thr.loc[rate.mean().index, "flow_goodput_mbps_mean"], rate.mean(), rtol=1e-5)
    np.testing.assert_allclose(thr.loc[rate.max().index, "flow_goodput_mbps_max"], rate.max(), rtol=1e-5)
    np.testing.assert_allclose(thr.loc[rate.min().index, "flow_goodput_mbps_min"], rate.min(), rtol=1e-5)
    np.testing.assert_allclose(thr.loc[rate.sum().index, "total_goodput_mbps"], rate.sum(), rtol=1e-5)
    np.testing.assert_allclose(thr.loc[rate.std().index, "flow_goodput_mbps_std"], rate.std(ddof=0), rtol=1e-5)
    # Jain over the run, by hand from the same rates
    jain = pd.read_csv(out / "jain.csv").set_index("run")
    hand = rate.sum() ** 2 / (rate.count() * (rate.apply(lambda s: (s * s).sum())))
    np.testing.assert_allclose(jain.loc[hand.index, "jain_run"], hand, rtol=1e-5)


def test_rts_and_cts_per_station_match_sql_over_frames(compared):
    specs, out, _ = compared
    rts = query(specs, "select run, mac(ta) as station, count(*) as n from frames where type_subtype = 27 "
                       "group by all")
    cts = query(specs, "select run, mac(ra) as station, count(*) as n from frames where type_subtype = 28 "
                       "group by all")
    st = pd.read_csv(out / "stations.csv")
    m = st.merge(rts, on=["run", "station"], how="left").merge(cts, on=["run", "station"], how="left",
                                                              suffixes=("_rts", "_cts"))
    m = m.fillna({"n_rts": 0, "n_cts": 0})
    assert (m["rts_sent"] == m["n_rts"]).all() and m["rts_sent"].sum() > 500
    # a CTS every sniffer missed is implied by the data that followed it: at least the
    # captured CTS, at most one per RTS
    assert (m["cts_received"] >= m["n_cts"]).all() and (m["cts_received"] <= m["rts_sent"]).all()
    assert (m["cts_received"] - m["n_cts"]).sum() <= 0.02 * m["n_cts"].sum()
    on = st[st["rts"] == "on"].groupby("run")["rts_sent"].apply(lambda s: (s > 0).sum())
    off = st[st["rts"] == "off"].groupby("run")["rts_sent"].apply(lambda s: (s > 0).sum())
    assert (on == 2).all() and (off == 1).all()          # STA1 always, STA2 only with rts=on


def test_grouping_by_label_is_the_mean_of_its_runs(compared, tmp_path):
    specs, out, _ = compared
    tables = compare(specs, tmp_path, by=["rts"])
    per_run = pd.read_csv(out / "throughput.csv")
    g = pd.read_csv(tmp_path / "throughput.csv").set_index("rts")
    assert list(g.index) == ["off", "on"] and (g["runs"] == 3).all()
    for rts in ("on", "off"):
        np.testing.assert_allclose(g.loc[rts, "total_goodput_mbps"],
                                   per_run.loc[per_run["rts"] == rts, "total_goodput_mbps"].mean(), rtol=1e-5)
    st = tables["stations"]
    assert set(zip(st["rts"], st["station"])) == {(r, f"02:00:00:00:00:0{k}") for r in ("on", "off") for k in (1, 2, 3)}
    two = compare(specs, tmp_path / "two", by=["rts", "udp_mbps"])
    assert len(two["jain"]) == 6 and (two["jain"]["runs"] == 1).all()
    with pytest.raises(UsageError, match="no label 'cca'"):
        compare(specs, tmp_path / "bad", by=["cca"])


def test_baseline_ratios(compared, tmp_path):
    specs, out, tables = compared
    b = pd.read_csv(out / "baseline.csv").set_index("run")
    thr = pd.read_csv(out / "throughput.csv").set_index("run")
    np.testing.assert_allclose(b["total_goodput_mbps_ratio"],
                               thr["total_goodput_mbps"] / thr.loc["rts-off-udp5", "total_goodput_mbps"], rtol=1e-5)
    assert b.loc["rts-off-udp5"].dropna().eq(1).all()
    with pytest.raises(UsageError, match="--baseline nope"):
        compare(specs, tmp_path, baseline="nope")


def test_figures_svg_pdf_greyscale_and_deterministic(compared, tmp_path):
    specs, out, _ = compared
    assert tuple(FIGURES) == FIGURE_NAMES and tuple(METRICS) == METRIC_TABLES
    for name in FIGURE_NAMES:
        svg = (out / f"{name}.svg").read_text()
        assert (out / f"{name}.pdf").read_bytes().startswith(b"%PDF")
        colours = set(re.findall(r"#([0-9a-fA-F]{6})\b", svg))
        assert colours and all(c[0:2] == c[2:4] == c[4:6] for c in colours), (name, colours)
    compare(specs, tmp_path, baseline="rts-off-udp5")
    for name in FIGURE_NAMES:
        assert (tmp_path / f"{name}.svg").read_bytes() == (out / f"{name}.svg").read_bytes()
    for f in output_files(True):
        assert (out / f).exists(), f


def test_html_page_is_self_contained(compared):
    _, out, tables = compared
    page = (out / "campaign.html").read_text()
    # nothing fetched: inline scripts only (d3, campaign.js, the JSON block), no stylesheet link, no
    # external src/href (SVG namespaces are names)
    assert "<script src" not in page and "<link" not in page
    assert page.count("<script") == 3 and '<script type="application/json" id="campaign-data">' in page
    assert not re.search(r"""(src|href)\s*=\s*["'](https?:|//)""", page)
    assert page.count("<svg") == len(FIGURE_NAMES)
    for name in tables:
        assert f"<h2>{name}</h2>" in page
    assert "STA2 with RTS" in page                          # run notes


def test_every_table_is_also_parquet_with_its_types(compared):
    # Parquet is the table to query: same rows and values as the CSV, integers stay integers
    specs, out, tables = compared
    for name, df in tables.items():
        pq = pd.read_parquet(out / f"{name}.parquet")
        pd.testing.assert_frame_equal(pq, df.reset_index(drop=True), check_dtype=True)
        csv = pd.read_csv(out / f"{name}.csv")
        assert list(csv.columns) == list(pq.columns) and len(csv) == len(pq)


OVERLAY_SQL = """select run, start_ns, sum(goodput_bps) / 1e6 as mbps from windows group by all order by run, start_ns"""


def _overlay_data(page: str) -> dict:
    import json
    return json.loads(re.search(r'id="campaign-data">(.*?)</script>', page, re.S).group(1))


def test_overlay_series_match_sql_over_the_runs_tables(compared):
    """The page's goodput series of every run: DuckDB over the run's windows table, times from
    the run's first PPDU (DuckDB over its ppdus)."""
    specs, out, _ = compared
    d = _overlay_data((out / "campaign.html").read_text())
    assert [r["name"] for r in d["runs"]] == [s.name for s in specs]
    assert {m["id"] for m in d["metrics"]} >= {"goodput", "jain", "util"}
    want = query(specs, OVERLAY_SQL)
    t0 = query(specs, "select run, min(start_ns) t0 from ppdus group by run").set_index("run")["t0"]
    good = next(m for m in d["metrics"] if m["id"] == "goodput")
    for s in good["series"]:
        w = want[want["run"] == s["run"]]
        assert s["t_s"] == pytest.approx(((w["start_ns"] - t0[s["run"]]) / 1e9).tolist(), abs=1e-6)
        assert s["y"] == pytest.approx(w["mbps"].round(4).tolist(), abs=1e-4)


@pytest.mark.browser
def test_overlay_run_picker_in_chromium(compared):
    """Offline in chromium: one line per run in every chart; unticking a run removes its line
    from every chart; its points are the run's windows."""
    from browser_util import ARTIFACTS, browser_page, offline_route
    specs, out, _ = compared
    path = out / "campaign.html"
    d = _overlay_data(path.read_text())
    blocked, route = offline_route(path)
    ARTIFACTS.mkdir(exist_ok=True)
    with browser_page() as (page, errors):
        page.route("**/*", route)
        page.goto(path.as_uri())
        page.wait_for_selector('body[data-ready="1"]', timeout=15_000)
        n = len(specs)
        for m in d["metrics"]:
            assert page.locator(f'.overlay-chart[data-id="{m["id"]}"] path.run-line').count() == n
        gone = specs[0].name
        line = page.locator(f'.overlay-chart[data-id="goodput"] path.run-line[data-run="{gone}"]')
        n_pts = len(re.findall(r"[ML]", line.get_attribute("d")))
        assert n_pts == len(query(specs, f"select distinct start_ns from windows where run = '{gone}'"))
        page.screenshot(path=str(ARTIFACTS / "campaign-overlay.png"), full_page=False)
        page.locator(f'#run-picker input[value="{gone}"]').uncheck()
        for m in d["metrics"]:
            sel = f'.overlay-chart[data-id="{m["id"]}"] path.run-line'
            assert page.locator(sel).count() == n - 1
            assert page.locator(f'{sel}[data-run="{gone}"]').count() == 0
        assert page.evaluate("() => window.__campaign.picked").count(gone) == 0
        assert errors == []
    assert blocked == []
