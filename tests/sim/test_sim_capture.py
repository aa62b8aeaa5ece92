"""Captures written by `sniffsync simulate`, checked against tshark, hand-read bytes,
sniffsync.read_capture and the clock definition in truth/clocks.json."""
import json
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest

from sniffsync.sim import scenario, simulate

SETS = ["sniffers.snifB.tsft_at=start", "sniffers.snifC.fcs=false", "sniffers.snifC.snaplen=120"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("cap")
    simulate(scenario("hidden-node", SETS, seconds=0.4, seed=11), out)
    return out


def _truth(out, name):
    cap = pd.read_csv(out / "truth" / f"captured_{name}.csv")
    clocks = json.loads((out / "truth" / "clocks.json").read_text())
    return cap, clocks["sniffers"][name], clocks["start_unix_ns"]


def _tshark(path, fields):
    cmd = ["tshark", "-r", str(path), "-o", "wlan.check_checksum:TRUE", "-o", "ip.check_checksum:TRUE",
           "-o", "tcp.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE", "-T", "fields",
           "-E", "separator=|", "-E", "occurrence=f"] + sum((["-e", f] for f in fields), [])
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    rows = [ln.split("|") for ln in out.splitlines()]
    return pd.DataFrame(rows, columns=fields)


def _epoch_ns(text: pd.Series) -> np.ndarray:
    # frame.time_epoch prints 9 decimals for nanosecond pcaps: parse exactly, not as float
    sec, frac = text.str.split(".", expand=True)[0], text.str.split(".", expand=True)[1]
    return sec.astype(np.int64).to_numpy() * 10**9 + frac.str.ljust(9, "0").astype(np.int64).to_numpy()


def test_radiotap_header_bytes_hand_checked(run):
    raw = (run / "snifA.pcap").read_bytes()
    rec = raw[24:]                              # after the 24-byte pcap file header
    incl = int.from_bytes(rec[8:12], "little")
    rt = rec[16:16 + incl]
    cap, sn, _ = _truth(run, "snifA")
    assert cap["kind"][0] == "beacon"
    assert rt[0:2] == b"\x00\x00"                # version 0, pad
    assert rt[2:4] == (23).to_bytes(2, "little")  # it_len: 8 + TSFT 8 + flags 1 + rate 1 + chan 4 + sig 1
    assert rt[4:8] == bytes([0x2F, 0, 0, 0])     # present: TSFT, Flags, Rate, Channel, dBm signal
    assert int.from_bytes(rt[8:16], "little") == cap["tsft_us"][0]
    assert rt[16] == 0x10                        # Flags: FCS at end
    assert rt[17] == 12                          # Rate: 12 x 500 kb/s = 6 Mb/s (beacon)
    assert rt[18:22] == bytes([0x3C, 0x14, 0x40, 0x01])   # 5180 MHz, flags 0x0140 (OFDM, 5 GHz)
    assert -60 < rt[22] - 256 < -20             # dBm, two's complement; 2 m from the AP
    dot11 = rt[23:]
    assert dot11[0:2] == b"\x80\x00"             # beacon
    assert dot11[4:10] == b"\xff" * 6            # broadcast RA
    assert dot11[10:16] == bytes.fromhex("020000000001")   # AP = node 0


@pytest.mark.tshark
def test_tshark_decodes_everything_cleanly(run):
    for name in ("snifA", "snifB", "snifC"):
        path = run / f"{name}.pcap"
        mal = subprocess.run(["tshark", "-r", str(path), "-Y", "_ws.malformed"],
                             capture_output=True, text=True, check=True).stdout
        assert mal == ""
        t = _tshark(path, ["wlan.fcs.status", "ip.checksum.status", "tcp.checksum.status",
                           "udp.checksum.status"])
        cap, _, _ = _truth(run, name)
        assert len(t) == len(cap) > 200
        if name != "snifC":                     # snifC: no FCS and cut frames
            assert (t["wlan.fcs.status"] == "1").all()
            assert (t["ip.checksum.status"].isin(["1", ""])).all()
            assert (t["tcp.checksum.status"].isin(["1", ""])).all()
            assert (t["udp.checksum.status"].isin(["1", ""])).all()
            assert (t["tcp.checksum.status"] == "1").sum() > 50


@pytest.mark.tshark
def test_tshark_fields_match_truth(run):
    mp = pd.read_csv(run / "truth" / "mpdus.csv")
    pp = pd.read_csv(run / "truth" / "ppdus.csv", keep_default_na=False).set_index("ppdu")
    for name in ("snifA", "snifB"):
        cap, sn, _ = _truth(run, name)
        t = _tshark(run / f"{name}.pcap", ["frame.time_epoch", "radiotap.mactime", "wlan.fc.type_subtype",
                                           "wlan.seq", "wlan.fc.retry", "wlan.duration",
                                           "wlan.fixed.ssc.sequence", "wlan.ba.bm",
                                           "radiotap.ampdu.reference", "radiotap.mcs.index"])
        assert (_epoch_ns(t["frame.time_epoch"]) == cap["ts_ns"].to_numpy()).all()
        assert (t["radiotap.mactime"].astype(np.int64).to_numpy() == cap["tsft_us"].to_numpy()).all()
        kinds = {"beacon": "0x0008", "rts": "0x001b", "cts": "0x001c", "ba": "0x0019", "data": "0x0028"}
        assert (t["wlan.fc.type_subtype"].to_numpy() == cap["kind"].map(kinds).to_numpy()).all()
        d = cap["kind"] == "data"
        m = mp.loc[cap.loc[d, "mpdu_row"]]
        assert (t.loc[d, "wlan.seq"].astype(int).to_numpy() == m["seq"].to_numpy()).all()
        assert (t.loc[d, "wlan.fc.retry"].isin(["True", "1"]).to_numpy() == m["retry"].to_numpy()).all()
        assert (t.loc[d, "radiotap.mcs.index"] == "5").all()
        # one A-MPDU reference per true PPDU
        refs = pd.DataFrame({"ref": t.loc[d, "radiotap.ampdu.reference"], "ppdu": cap.loc[d, "ppdu"]})
        assert (refs.groupby("ref")["ppdu"].nunique() == 1).all()
        assert (refs.groupby("ppdu")["ref"].nunique() == 1).all()
        b = cap["kind"] == "ba"
        truth_ba = pp.loc[cap.loc[b, "ppdu"]]
        assert (t.loc[b, "wlan.fixed.ssc.sequence"].astype(int).to_numpy()
                == truth_ba["ba_ssn"].to_numpy() % 4096).all()
        # tshark prints the bitmap bytes as sent; truth holds the u64 (bit i = SSN + i)
        le = [bytes.fromhex(h)[::-1].hex() for h in t.loc[b, "wlan.ba.bm"]]
        assert le == list(truth_ba["ba_bitmap"])
        assert (t.loc[~b & ~d, "wlan.duration"].astype(int).to_numpy()
                == pp.loc[cap.loc[~b & ~d, "ppdu"], "dur_us"].to_numpy()).all()


def test_timestamps_follow_each_sniffer_clock_within_jitter(run):
    for name in ("snifA", "snifB", "snifC"):
        cap, sn, unix0 = _truth(run, name)
        ppm, off, jit_ns = sn["ppm"], sn["offset_ns"], int(sn["jitter_us"] * 1000)
        ref = cap["true_start_ns"] if sn["tsft_at"] == "start" else cap["true_end_ns"]
        # the definition, written out with exact Python integers/fractions
        model_ts = [unix0 + round(t * (1 + ppm * 1e-6)) + off for t in cap["true_end_ns"]]
        model_tsf = [sn["tsf_base_us"] * 1000 + round(t * (1 + ppm * 1e-6)) + off for t in ref]
        err = cap["ts_ns"].to_numpy() - np.array(model_ts)
        assert np.abs(err).max() <= jit_ns
        if jit_ns:
            assert np.abs(err).max() > jit_ns / 2          # jitter is really applied
        tsf_err = cap["tsft_us"].to_numpy() * 1000 - np.array(model_tsf)
        assert (tsf_err <= jit_ns).all() and (tsf_err > -jit_ns - 1000).all()   # floor to us
    _, snb, _ = _truth(run, "snifB")
    assert snb["tsft_at"] == "start"


def test_sniffers_miss_at_their_rate_and_never_write_collided_frames(run):
    pp = pd.read_csv(run / "truth" / "ppdus.csv", keep_default_na=False)
    cap_a, _, _ = _truth(run, "snifA")
    cap_c, snc, _ = _truth(run, "snifC")
    # snifA (beside the AP, miss 0) has every PPDU the AP decoded from STA1 and STA2
    at_ap = pp[(pp["rx_name"] == "AP") & pp["rx_ok"]]
    assert set(at_ap["ppdu"]) <= set(cap_a["ppdu"])
    # snifC sits beside STA2 and cannot hear STA1 (120 m away)
    assert not set(pp.loc[pp["tx_name"] == "STA1", "ppdu"]) & set(cap_c["ppdu"])


def test_read_capture_agrees_with_truth(run):
    frames = pytest.importorskip("sniffsync.decode.frames")
    mp = pd.read_csv(run / "truth" / "mpdus.csv")
    for name in ("snifA", "snifC"):
        df = frames.read_capture(run / f"{name}.pcap")
        cap, sn, _ = _truth(run, name)
        assert len(df) == len(cap)
        assert df["bad"].isna().all() or name == "snifC"
        assert (df["ts_ns"].to_numpy() == cap["ts_ns"].to_numpy()).all()
        assert (df["tsft_us"].to_numpy() == cap["tsft_us"].to_numpy()).all()
        d = (cap["kind"] == "data").to_numpy()
        assert (df.loc[d, "phy"] == "ht").all() and (df.loc[d, "mcs"] == 5).all()
        assert (df.loc[d, "bw_mhz"] == 20).all()
        m = mp.loc[cap.loc[d, "mpdu_row"]]
        assert (df.loc[d, "seq"].to_numpy() == m["seq"].to_numpy()).all()
        assert (df["fcs_bad"].fillna(False) == False).all()  # noqa: E712
    df = frames.read_capture(run / "snifC.pcap")
    assert (df["wirelen"] >= df["caplen"]).all() and (df["caplen"] <= 120).all()


@pytest.mark.parametrize("phy,bw,field", [("vht", 80, "vht"), ("he", 40, "he")])
def test_vht_he_radiotap_read_back(tmp_path, phy, bw, field):
    frames = pytest.importorskip("sniffsync.decode.frames")
    simulate(scenario("clean", [f"phy={phy}", f"bw_mhz={bw}", "mcs=4", "nss=2"], seconds=0.15), tmp_path)
    df = frames.read_capture(tmp_path / "snifA.pcap")
    d = df[df["type_subtype"] == 0x28]
    assert len(d) > 20
    assert (d["phy"] == phy).all() and (d["mcs"] == 4).all() and (d["bw_mhz"] == bw).all()
    if phy == "vht":
        assert (d["nss"] == 2).all()
    if shutil.which("tshark"):
        assert subprocess.run(["tshark", "-r", str(tmp_path / "snifA.pcap"), "-Y", "_ws.malformed"],
                              capture_output=True, text=True).stdout == ""
