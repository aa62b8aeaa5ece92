"""airtime.ppdu: grouping on hand-built frame tables, and ns-3 timing truth via tshark fields."""
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from airtime.phy import ppdu_duration_ns
from airtime.ppdu import align_to_ppdu_end, group_ppdus
from sniffsync.decode.table import frame_table
from sniffsync.errors import UsageError

FIX = Path(__file__).parents[1] / "data" / "tshark_phy"


def table(**cols):
    """Frame table of the schema dtypes from a few columns (None = null)."""
    n = len(next(iter(cols.values())))
    c = {"sniffer": (np.zeros(n, np.int16), None), "frame": (np.arange(1, n + 1), None),
         "ts_ns": (np.zeros(n, np.int64), None), "caplen": (np.zeros(n, np.int32), None),
         "linktype": (np.full(n, 127, np.int32), None)}
    extra = {}
    for name, v in cols.items():
        if name == "rt_len":
            extra[name] = np.asarray(v)
            continue
        arr = np.asarray(v, dtype=object)
        ok = np.array([x is not None for x in arr])
        if name == "phy":
            c[name] = (pd.Categorical(arr), None)
        else:
            c[name] = (np.where(ok, arr, 0), ok)
    df = frame_table(n, c, [])
    for k, v in extra.items():
        df[k] = v
    return df
PHY_BY_WS = {4: "cck", 5: "ofdm", 6: "ofdm", 7: "ht", 8: "vht", 11: "he"}
VHT_BW = {0: 20, 1: 40, 4: 80, 11: 160}
HE_BW = {0: 20, 1: 40, 2: 80, 3: 160}
HE_GI = {0: 800, 1: 1600, 2: 3200}

def _mac(col):
    s = col.fillna("").str.replace(":", "", regex=False)
    return np.array([int(x, 16) if x else 0 for x in s], np.uint64), (s != "").to_numpy()

def _int(col, base=10):
    if col.dtype == object:
        ok = col.notna().to_numpy()
        v = np.array([int(x, 0) if isinstance(x, str) else 0 for x in col], np.int64)
        return v, ok
    ok = col.notna().to_numpy()
    return np.nan_to_num(col.to_numpy(float)).astype(np.int64), ok

def load_tshark(path):
    t = pd.read_csv(path, sep="\t", dtype={"wlan.fc.type_subtype": object,
        "radiotap.he.data_3.data_mcs": object, "radiotap.he.data_5.data_bw_ru_allocation": object,
        "radiotap.he.data_5.gi": object, "radiotap.he.data_3.coding": object,
        "radiotap.he.data_1.ppdu_format": object, "wlan.ra": object, "wlan.ta": object})
    n = len(t)
    g = lambda name, base=10: _int(t[name])
    phy_ws, _ = g("wlan_radio.phy")
    phy = np.array([PHY_BY_WS.get(int(p), "unknown") for p in phy_ws], object)
    cols = {}
    cols["sniffer"] = (np.zeros(n, np.int16), None)
    cols["frame"] = (t["frame.number"].to_numpy(np.int64), None)
    tsft, ok = g("radiotap.mactime")
    cols["ts_ns"] = (tsft * 1000, None)
    cols["tsft_us"] = (tsft, ok)
    cols["caplen"] = (t["frame.cap_len"].to_numpy(np.int32), None)
    cols["wirelen"] = (t["frame.len"].to_numpy(np.int32), None)
    cols["linktype"] = (np.full(n, 127, np.int32), None)
    fcs, _ = g("radiotap.flags.fcs"); pre, _ = g("radiotap.flags.preamble")
    cols["rt_flags"] = (fcs * 0x10 + pre * 0x02, None)
    cols["short_preamble"] = (pre.astype(bool), None)
    cols["phy"] = (pd.Categorical(phy), None)
    rate = t["radiotap.datarate"].to_numpy(float)
    cols["rate_kbps"] = (np.nan_to_num(rate * 1000).astype(np.int64), ~np.isnan(rate))
    f, ok = g("radiotap.channel.freq"); cols["freq_mhz"] = (f, ok)
    v, ok = g("radiotap.dbm_antsignal"); cols["signal_dbm"] = (v, ok)
    ht, vht, he = phy == "ht", phy == "vht", phy == "he"
    hm, _ = g("radiotap.mcs.index"); vm, _ = g("radiotap.vht.mcs.0"); em, _ = _int(t["radiotap.he.data_3.data_mcs"])
    cols["mcs"] = (np.select([ht, vht, he], [hm, vm, em], 0), ht | vht | he)
    vn, _ = g("radiotap.vht.nss.0")
    cols["nss"] = (np.select([ht, vht], [hm // 8 + 1, vn], 0), ht | vht)
    hb, _ = g("radiotap.mcs.bw"); vb, _ = g("radiotap.vht.bw"); eb, _ = _int(t["radiotap.he.data_5.data_bw_ru_allocation"])
    bw = np.select([ht, vht, he], [np.where(hb == 1, 40, 20), [VHT_BW.get(x, 0) for x in vb],
                                   [HE_BW.get(x, 0) for x in eb]], 0)
    cols["bw_mhz"] = (bw, ht | vht | he)
    hg, _ = g("radiotap.mcs.gi"); vg, _ = g("radiotap.vht.gi"); eg, _ = _int(t["radiotap.he.data_5.gi"])
    gi = np.select([ht, vht, he], [np.where(hg == 1, 400, 800), np.where(vg == 1, 400, 800),
                                   [HE_GI.get(x, 0) for x in eg]], 0)
    cols["gi_ns"] = (gi, ht | vht | he)
    hf, _ = g("radiotap.mcs.fec"); vc, _ = g("radiotap.vht.coding.0"); ec, _ = _int(t["radiotap.he.data_3.coding"])
    cols["ldpc"] = (np.select([ht, vht, he], [hf, vc, ec], 0).astype(bool), ht | vht | he)
    hs, _ = g("radiotap.mcs.stbc"); vs, _ = g("radiotap.vht.stbc")
    cols["stbc"] = (np.select([ht, vht], [hs, vs], 0), ht | vht | he)
    fm, _ = g("radiotap.mcs.format")
    cols["ht_format"] = (np.where(fm == 1, "gf", "mf").astype(object), ht)
    cols["he_format"] = (np.full(n, "su", object), he)
    ref, ok = g("radiotap.ampdu.reference"); cols["ampdu_ref"] = (ref, ok)
    last, _ = g("radiotap.ampdu.flags.last"); cols["ampdu_last"] = (last.astype(bool), ok)
    ts, ok = _int(t["wlan.fc.type_subtype"]); cols["type_subtype"] = (ts, ok)
    r, ok = _mac(t["wlan.ra"]); cols["ra"] = (r, ok)
    a, ok = _mac(t["wlan.ta"]); cols["ta"] = (a, ok)
    rt, _ = g("wlan.fc.retry"); cols["retry"] = (rt.astype(bool), None)
    df = frame_table(n, cols, [])
    df["rt_len"] = t["radiotap.length"].to_numpy(np.int32)
    return df, t


# ------------------------------------------------------------------ synthetic tables
AP, STA = 0x000000000003, 0x000000000001


def test_ampdu_ref_groups_per_sniffer_and_psdu_length():
    # rt_len 20: MPDUs of 100, 57, 30 bytes with FCS (flags 0x10), one A-MPDU ref 7;
    # a second sniffer reuses ref 7 for an unrelated PPDU.
    df = table(sniffer=[0, 0, 0, 1], wirelen=[120, 77, 50, 120], rt_len=[20] * 4,
               rt_flags=[0x10] * 4, tsft_us=[1000, 1000, 1000, 5000], ampdu_ref=[7, 7, 7, 7],
               ampdu_last=[False, False, True, True], phy=["ht"] * 4, mcs=[7] * 4,
               bw_mhz=[20] * 4, gi_ns=[800] * 4, type_subtype=[0x28] * 4, ta=[STA] * 4,
               ra=[AP] * 4, retry=[False, True, True, False])
    p, fp, _ = group_ppdus(df, tsft_at="end")
    assert fp.tolist() == [0, 0, 0, 1]
    # delimiter 4 + 100 = 104 (already x4), 4 + 57 = 61 -> 64, last 4 + 30 = 34: 202
    assert p.psdu_bytes.tolist() == [202, 104]     # single HT-with-ref: 4 + 100
    assert p.n_mpdus.tolist() == [3, 1] and p.retries.tolist() == [2, 0]
    assert p.kind.astype(str).tolist() == ["data", "data"]
    want = int(ppdu_duration_ns("ht", 202, mcs=7, bw_mhz=20))
    assert p.airtime_ns[0] == want == 36000 + 4000 * 7     # ceil((1616+22)/260) = 7
    assert p.end_ns[0] == 1_000_000 and p.start_ns[0] == 1_000_000 - want
    assert p.first_frame.tolist() == [0, 3]


def test_fcs_absent_adds_four_and_single_vht_is_one_subframe():
    df = table(wirelen=[34, 34], rt_len=[20, 20], rt_flags=[0, 0x10], tsft_us=[100, 900],
               phy=["ofdm", "vht"], rate_kbps=[24000, None], mcs=[None, 0], nss=[None, 1],
               bw_mhz=[None, 20], type_subtype=[0x1c, 0x28], ta=[None, STA], ra=[AP, AP])
    p, _, _ = group_ppdus(df, tsft_at="start")
    # CTS: 14 bytes on the wire + 4 FCS = 18 (fcs absent); VHT: 4 + 14 (single A-MPDU)
    assert p.psdu_bytes.tolist() == [18, 18]
    assert p.airtime_ns[0] == ppdu_duration_ns("ofdm", 18, rate_kbps=24000)
    assert p.start_ns.tolist() == [100_000, 900_000]


@pytest.mark.parametrize("tsft", [
    [500, 500, 500, 900],          # all subframes share the TSFT (Broadcom)
    [500, 0, 0, 900],              # first has TSFT, the rest 0 (Intel)
    [-1, -1, 500, 900],            # TSFT -1 until the last (QCA)
])
def test_tsf_patterns_without_ampdu_ref(tsft):
    df = table(wirelen=[120, 120, 120, 120], rt_len=[20] * 4, rt_flags=[0x10] * 4,
               tsft_us=tsft, phy=["ht"] * 4, mcs=[3] * 4, bw_mhz=[20] * 4,
               type_subtype=[0x28, 0x28, 0x28, 0x28], ta=[STA] * 4, ra=[AP] * 4)
    p, fp, _ = group_ppdus(df, tsft_at="end")
    assert fp.tolist() == [0, 0, 0, 1]
    assert p.n_mpdus.tolist() == [3, 1]
    assert p.end_ns[0] == 500_000


def test_no_grouping_across_transmitters_or_legacy():
    df = table(wirelen=[120, 120, 60], rt_len=[20] * 3, tsft_us=[500, 500, 500],
               phy=["ht", "ht", "ofdm"], mcs=[3, 3, None], bw_mhz=[20, 20, None],
               rate_kbps=[None, None, 6000], type_subtype=[0x28, 0x28, 0x28],
               ta=[STA, AP, AP], ra=[AP, STA, STA])
    fp = group_ppdus(df, tsft_at="end").frame_ppdu
    assert fp.tolist() == [0, 1, 2]


def _rts_cts():
    """An RTS then its CTS (timestamps filled in by the test)."""
    return table(wirelen=[40, 34], rt_len=[20, 20], rt_flags=[0x10, 0x10], tsft_us=[0, 0],
                 phy=["ofdm", "ofdm"], rate_kbps=[6000, 24000], type_subtype=[0x1b, 0x1c],
                 ta=[STA, None], ra=[AP, STA], freq_mhz=[5180, 5180])


@pytest.mark.parametrize("stamp", ["start", "end"])
def test_tsft_at_auto_detects_stamp_position(stamp):
    df = _rts_cts()
    rts = 52_000     # 6 Mb/s, 20 B: 20 + 4*ceil((16+160+6)/24 = 7.6) = 52 us
    cts = 28_000     # 24 Mb/s, 14 B: 20 + 4*ceil(134/96) = 28 us
    t0 = 1_000_000
    start = [t0, t0 + rts + 16_000]
    t = start if stamp == "start" else [start[0] + rts, start[1] + cts]
    df["tsft_us"] = pd.array([x // 1000 for x in t], dtype="Int64")
    p, _, tsft_at = group_ppdus(df)
    assert tsft_at == {0: stamp}
    assert p.start_ns.tolist() == start
    assert p.kind.astype(str).tolist() == ["rts", "cts"]


def _start_stamped_rts_cts():
    df = _rts_cts()
    df["tsft_us"] = pd.array([1000, 1068], dtype="Int64")     # starts: RTS 52 us + SIFS 16 us
    df["ts_ns"] = np.array([1_000_000, 1_068_000], np.int64)
    return df


def test_stamps_end_means_the_table_already_marks_ends():
    df = _start_stamped_rts_cts()
    p, _, tsft_at = group_ppdus(df, tsft_at="start", stamps="end")
    assert tsft_at == {0: "end"}                           # tsft_at ignored for a merged table
    assert p.end_ns.tolist() == [1_000_000, 1_068_000]
    assert group_ppdus(df, tsft_at="start").tsft_at == {0: "start"}
    with pytest.raises(UsageError, match="stamps"):
        group_ppdus(df, stamps="start")


def test_align_to_ppdu_end_moves_start_stamps_by_airtime():
    df = _start_stamped_rts_cts()
    out, tsft_at = align_to_ppdu_end(df)
    assert tsft_at == {0: "start"} and not out.attrs
    assert out["ts_ns"].tolist() == [1_052_000, 1_096_000]      # + 52 us RTS, + 28 us CTS
    assert out["tsft_us"].tolist() == [1052, 1096]
    assert df["ts_ns"].tolist() == [1_000_000, 1_068_000]       # the input is not changed
    grouped = group_ppdus(df, tsft_at="end")
    same, conv = align_to_ppdu_end(df, grouped=grouped)         # a grouping passed in is used
    assert conv == {0: "end"} and same["ts_ns"].tolist() == df["ts_ns"].tolist()
    kept, conv = align_to_ppdu_end(df, stamps="end")
    assert conv == {0: "end"} and kept["ts_ns"].tolist() == df["ts_ns"].tolist()


# ------------------------------------------------------- ns-3 truth through tshark
NS3 = ["ns3-11n-ht20-hidden-snifferA-nearAP", "ns3-11ac-vht80-snifferA-s256",
       "ns3-11ax-he80-snifferA-s256"]


@pytest.fixture(scope="module", params=NS3)
def ns3(request):
    df, _ = load_tshark(FIX / f"{request.param}.tsv.gz")
    p, fp, tsft_at = group_ppdus(df)
    return request.param, df, p, fp, tsft_at


def test_ns3_groups_match_ampdu_refs(ns3):
    name, df, p, fp, tsft_at = ns3
    ref = df.ampdu_ref.to_numpy(dtype=float, na_value=np.nan)
    agg = ~np.isnan(ref)
    # every reference maps to exactly one PPDU and vice versa
    pairs = pd.DataFrame({"r": ref[agg], "p": fp[agg]}).drop_duplicates()
    assert pairs.r.is_unique and pairs.p.is_unique
    assert tsft_at == {0: "end"}              # ns-3 stamps the end (FACTS.md)
    assert len(p) == len(np.unique(fp)) and (p.airtime_ns > 0).all()


def test_ns3_response_gap_is_sifs_plus_response_airtime(ns3):
    """TSFT(resp) - TSFT(frame) == 16 us + airtime(resp) +-1 us (timestamps are whole
    us) for every CTS/ACK/BA answering the PPDU just before it."""
    name, df, p, fp, tsft_at = ns3
    end = p.end_ns.to_numpy()
    kind = p.kind.astype(str).to_numpy()
    ta, ra = p.ta.to_numpy(dtype=float, na_value=-1), p.ra.to_numpy(dtype=float, na_value=-2)
    gap = np.diff(end)
    resp = np.flatnonzero(np.isin(kind[1:], ["cts", "ack", "ba"]) & (ra[1:] == ta[:-1])) + 1
    err = gap[resp - 1] - 16_000 - p.airtime_ns.to_numpy()[resp]
    # a response whose eliciting PPDU this sniffer lost answers an older one: far away
    adjacent = err < 50_000
    assert adjacent.sum() >= 0.99 * len(resp) and adjacent.sum() > 200
    assert (np.abs(err[adjacent]) <= 1000).all()


def test_ns3_data_after_cts_matches_ns3_timing_model(ns3):
    """Data PPDU airtime from the CTS -> data gap. ns-3 deviates from the standard in
    documented ways (docs/airtime.md): SGI data is N_SYM * 3.6 us without the 4 us
    ceiling, VHT SU has no VHT-SIG-B, HE-LTFs are always 8 us. Model those on top of
    our N_SYM and preamble and require +-1.5 us (whole-us stamps, propagation)."""
    name, df, p, fp, tsft_at = ns3
    kind = p.kind.astype(str).to_numpy()
    ta, ra = p.ta.to_numpy(dtype=float, na_value=-1), p.ra.to_numpy(dtype=float, na_value=-2)
    i = np.flatnonzero((kind[:-1] == "cts") & (kind[1:] == "data") & (ta[1:] == ra[:-1])) + 1
    q = p.iloc[i]
    obs = (p.end_ns.to_numpy()[i] - p.end_ns.to_numpy()[i - 1]) - 16_000
    phy = q.phy.astype(str).to_numpy()
    args = dict(mcs=q.mcs, nss=q.nss, bw_mhz=q.bw_mhz)
    if name.startswith("ns3-11ax"):
        # 1 HE-LTF of 2x + 1.6 us GI (8 us) instead of 6.4 + 3.2 = 9.6 us
        ns3_model = q.airtime_ns.to_numpy() - 1600
        assert (q.gi_ns == 3200).all()
    else:
        lgi = ppdu_duration_ns(phy, q.psdu_bytes, gi_ns=800, **args)
        pre = ppdu_duration_ns(phy, 0, gi_ns=800, **args) - 4000
        n_sym = (lgi - pre) // 4000
        ns3_model = pre + 3600 * n_sym - (4000 if name.startswith("ns3-11ac") else 0)
        assert (q.gi_ns == 400).all()
        # ours is the standard's rounding of the same symbols
        assert (q.airtime_ns.to_numpy() == pre + 4000 * -(-9 * n_sym // 10)).all()
    assert len(i) > 30 and (q.n_mpdus > 1).any()
    assert (np.abs(obs - ns3_model) <= 1500).all()
