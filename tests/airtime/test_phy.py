"""airtime.phy against hand-worked IEEE 802.11-2020 TXTIME values, a slow Fraction
oracle of the LDPC procedure, and tshark's wlan_radio.duration."""
from fractions import Fraction
from math import ceil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from airtime.phy import (data_rate_kbps, ldpc_extra_symbol, legacy_response_rate_kbps,
                         ppdu_duration_ns, sifs_ns, slot_ns)

FIX = Path(__file__).parents[1] / "data" / "tshark_phy"
US = 1000


def test_dsss_cck():
    # 15.4.4: 192 us long PLCP + 14*8 bits / 1 Mb/s = 112 us -> 304 us
    assert ppdu_duration_ns("dsss", 14, rate_kbps=1000) == 304 * US
    # 1 Mb/s cannot use the short preamble (short PLCP header is at 2 Mb/s): still 304
    assert ppdu_duration_ns("dsss", 14, rate_kbps=1000, short_preamble=True) == 304 * US
    # 2 Mb/s short: 96 + 112/2 = 152
    assert ppdu_duration_ns("dsss", 14, rate_kbps=2000, short_preamble=True) == 152 * US
    # CCK 11 Mb/s short: 96 + ceil(112/11 = 10.18) = 107
    assert ppdu_duration_ns("cck", 14, rate_kbps=11000, short_preamble=True) == 107 * US
    # CCK 5.5 long, 1500 B: 192 + ceil(12000/5.5 = 2181.8) = 2374
    assert ppdu_duration_ns("cck", 1500, rate_kbps=5500) == 2374 * US


def test_ofdm_and_erp():
    # 17.4.3: 20 + 4*ceil((16 + 8*14 + 6)/24) = 20 + 4*ceil(5.58) = 44 (6 Mb/s ACK)
    assert ppdu_duration_ns("ofdm", 14, rate_kbps=6000) == 44 * US
    # 24 Mb/s CTS: 20 + 4*ceil(134/96 = 1.4) = 28
    assert ppdu_duration_ns("ofdm", 14, rate_kbps=24000) == 28 * US
    # ERP-OFDM at 2412 MHz adds the 6 us signal extension: 34
    assert ppdu_duration_ns("ofdm", 14, rate_kbps=24000, freq_mhz=2412) == 34 * US
    # 54 Mb/s 1500 B: 20 + 4*ceil(12022/216 = 55.66) = 244
    assert ppdu_duration_ns("ofdm", 1500, rate_kbps=54000) == 244 * US


def test_ht():
    # HT20 MCS7 LGI 1500 B: N_DBPS = 52*6*5/6 = 260, N_SYM = ceil(12022/260) = 47,
    # mixed preamble 16+4+8+4 + 1 HT-LTF*4 = 36 -> 36 + 47*4 = 224
    assert ppdu_duration_ns("ht", 1500, mcs=7, bw_mhz=20, gi_ns=800) == 224 * US
    # same at 2.4 GHz: + 6 us signal extension (19.4.3)
    assert ppdu_duration_ns("ht", 1500, mcs=7, bw_mhz=20, gi_ns=800, freq_mhz=2437) == 230 * US
    # greenfield: HT-GF-STF 8 + HT-LTF1 8 + HT-SIG 8 = 24 -> 24 + 188 = 212
    assert ppdu_duration_ns("ht", 1500, mcs=7, bw_mhz=20, gi_ns=800, ht_format="gf") == 212 * US
    # HT40 MCS15 SGI, STBC 1: N_SS 2, N_DBPS = 108*6*2*5/6 = 1080, N_ES 1, m_STBC 2:
    # N_SYM = 2*ceil(12022/2160 = 5.57) = 12; N_STS = 3 -> 4 HT-LTFs: 32 + 16 = 48;
    # data 4*ceil(3.6*12/4 = 10.8) = 44 -> 92
    assert ppdu_duration_ns("ht", 1500, mcs=15, bw_mhz=40, gi_ns=400, stbc=1) == 92 * US
    # Ness 1 adds one extension LTF: 96
    assert ppdu_duration_ns("ht", 1500, mcs=15, bw_mhz=40, gi_ns=400, stbc=1, ness=1) == 96 * US
    # LDPC extra symbol, HT20 MCS7, 28 B: N_pld = 240, N_avbits = 312 -> N_CW 1,
    # L_LDPC 648 (312 < 240 + 912/6), N_shrt = 540-240 = 300, N_punc = 648-312-300 = 36
    # > 0.3*648/6 = 32.4 -> +1 symbol: N_SYM 2 -> 36 + 8 = 44 (BCC: 1 symbol, 40)
    assert ppdu_duration_ns("ht", 28, mcs=7, bw_mhz=20, ldpc=True) == 44 * US
    assert ppdu_duration_ns("ht", 28, mcs=7, bw_mhz=20, ldpc=False) == 40 * US
    # HT40 MCS21 (3 SS 64-QAM 2/3, 324 Mb/s): N_ES = 2 (Table 19-31): N_DBPS 1296,
    # N_SYM = ceil((8000 + 16 + 12)/1296 = 6.19) = 7 -> 32 + 4*4 LTF + 28 = 76
    assert ppdu_duration_ns("ht", 1000, mcs=21, bw_mhz=40) == 76 * US


def test_vht():
    # VHT80 MCS9 NSS2 SGI LDPC 4000 B: N_DBPS = 234*8*2*5/6 = 3120, N_CBPS 3744;
    # N_SYM_init = ceil(32016/3120 = 10.26) = 11; N_pld 34320, N_avbits 41184 ->
    # N_CW = ceil(34320/1620) = 22, N_shrt = 35640-34320 = 1320,
    # N_punc = 42768-41184-1320 = 264 < 0.1*22*1944/6 = 712.8 -> no extra symbol.
    # 36 + 2 VHT-LTFs*4 = 44; data 4*ceil(3.6*11/4 = 9.9) = 40 -> 84
    assert ppdu_duration_ns("vht", 4000, mcs=9, nss=2, bw_mhz=80, gi_ns=400, ldpc=True) == 84 * US
    # BCC: N_ES = ceil(3120/2160) = 2: N_SYM = ceil((32000+16+12)/3120 = 10.27) = 11, same 84
    assert ppdu_duration_ns("vht", 4000, mcs=9, nss=2, bw_mhz=80, gi_ns=400) == 84 * US
    # VHT20 MCS9 NSS1 is not defined (N_DBPS = 346.7): -1
    assert ppdu_duration_ns("vht", 100, mcs=9, nss=1, bw_mhz=20) == -1
    # STBC: N_STS 2 -> 2 LTFs; VHT20 MCS0 100 B LGI: N_DBPS 26,
    # N_SYM = 2*ceil(822/52 = 15.8) = 32 -> 44 + 128 = 172
    assert ppdu_duration_ns("vht", 100, mcs=0, nss=1, bw_mhz=20, stbc=1) == 172 * US


@pytest.mark.parametrize("ltf,gi,want_ns", [
    # HE80 MCS11 1500 B LDPC: N_DBPS = floor(9800*5/6) = 8166, N_DBPS,short = 2000;
    # 8*1500+16 = 12016 -> N_SYM_init 2, N_excess 3850, a_init = ceil(3850/2000) = 2;
    # N_pld = 8166 + 2*2000 = 12166, N_avbits = 9800 + 2*2400 = 14600, N_CW 8,
    # N_shrt 794, N_punc 158 < 259.2 -> no extra. 36 + 1 HE-LTF + 2 symbols:
    (1, 800, 36000 + 4000 + 2 * 13600),     # 1x: 3.2+0.8; symbol 12.8+0.8 -> 67.2 us
    (2, 800, 36000 + 7200 + 2 * 13600),     # 70.4 us
    (2, 1600, 36000 + 8000 + 2 * 14400),    # 72.8 us
    (4, 800, 36000 + 13600 + 2 * 13600),    # 76.8 us
    (4, 3200, 36000 + 16000 + 2 * 16000),   # 84.0 us
])
def test_he80_mcs11(ltf, gi, want_ns):
    got = ppdu_duration_ns("he", 1500, mcs=11, bw_mhz=80, gi_ns=gi, he_ltf_size=ltf, ldpc=True)
    assert got == want_ns
    # HE ER SU: HE-SIG-A 16 instead of 8; PE adds; 2.4 GHz adds the 6 us extension
    assert ppdu_duration_ns("he", 1500, mcs=11, bw_mhz=80, gi_ns=gi, he_ltf_size=ltf, ldpc=True,
                            he_format="ext_su", he_pe_us=16, freq_mhz=2412) == want_ns + 30 * US


def test_he_bcc_20mhz():
    # HE20 MCS7 1500 B BCC GI 0.8 2x: N_DBPS = 234*6*5/6 = 1170; ceil(12022/1170) = 11
    # -> 36 + 7.2 + 11*13.6 = 192.8 us
    assert ppdu_duration_ns("he", 1500, mcs=7, bw_mhz=20, gi_ns=800) == 192_800


def test_bad_rows_are_minus_one_not_errors():
    got = ppdu_duration_ns(["ht", "vht", "xx", None, "ofdm", "he", "ht"],
                           [100, 100, 100, 100, 100, 100, -5],
                           mcs=pd.array([None, 0, 0, 0, 0, 12, 0], dtype="UInt8"),
                           rate_kbps=7000, bw_mhz=20)
    assert got.tolist() == [-1, ppdu_duration_ns("vht", 100, mcs=0, bw_mhz=20), -1, -1, -1, -1, -1]


def test_vectorised_equals_rowwise():
    rng = np.random.default_rng(1)
    n = 300
    phy = rng.choice(["ht", "vht", "he", "ofdm"], n)
    L = rng.integers(1, 20000, n)
    mcs, nss = rng.integers(0, 10, n), rng.integers(1, 4, n)
    bw = rng.choice([20, 40, 80], n)
    gi = np.where(phy == "he", rng.choice([800, 1600, 3200], n), rng.choice([400, 800], n))
    ldpc = rng.random(n) < 0.5
    rate = rng.choice([6000, 24000, 54000], n)
    vec = ppdu_duration_ns(phy, L, mcs=mcs, nss=nss, bw_mhz=bw, gi_ns=gi, ldpc=ldpc, rate_kbps=rate)
    one = [int(ppdu_duration_ns(phy[i], L[i], mcs=mcs[i], nss=nss[i], bw_mhz=bw[i], gi_ns=gi[i],
                                ldpc=ldpc[i], rate_kbps=rate[i])) for i in range(n)]
    assert vec.tolist() == one
    assert (vec[(phy == "he") | (phy == "ofdm") | ((phy == "ht") & (bw < 80))] > 0).all()


def _ldpc_extra_oracle(n_pld, n_avbits, R):
    """19.3.11.7.5 steps c)-e) transcribed literally with exact fractions."""
    if n_avbits <= 648:
        n_cw, l = 1, (1296 if n_avbits >= n_pld + 912 * (1 - R) else 648)
    elif n_avbits <= 1296:
        n_cw, l = 1, (1944 if n_avbits >= n_pld + 1464 * (1 - R) else 1296)
    elif n_avbits <= 1944:
        n_cw, l = 1, 1944
    elif n_avbits <= 2592:
        n_cw, l = 2, (1944 if n_avbits >= n_pld + 2916 * (1 - R) else 1296)
    else:
        n_cw, l = ceil(n_pld / (1944 * R)), 1944
    n_shrt = max(0, n_cw * l * R - n_pld)
    n_punc = max(0, n_cw * l - n_avbits - n_shrt)
    return bool((n_punc > Fraction(1, 10) * n_cw * l * (1 - R)
                 and n_shrt < Fraction(12, 10) * n_punc * R / (1 - R))
                or n_punc > Fraction(3, 10) * n_cw * l * (1 - R))


def test_ldpc_extra_symbol_against_fraction_oracle():
    rates = [(1, 2), (2, 3), (3, 4), (5, 6)]
    cases = [(p, cbps * k, num, den) for num, den in rates for cbps in (52, 312, 1404)
             for k in (1, 2, 3, 7) for p in range(16, cbps * k * num // den + 1, 7)]
    p, a, num, den = (np.array(x) for x in zip(*cases))
    got = ldpc_extra_symbol(p, a, num, den)
    want = [_ldpc_extra_oracle(int(x), int(y), Fraction(int(u), int(d)))
            for x, y, u, d in zip(p, a, num, den)]
    assert got.tolist() == want
    assert 0 < got.sum() < len(got)


def test_data_rates_from_standard_tables():
    got = data_rate_kbps(["ht", "ht", "vht", "he", "he"], [7, 15, 9, 11, 0], [1, 1, 2, 1, 1],
                         [20, 40, 80, 80, 20], [800, 400, 400, 800, 3200])
    # Tables 19-27 (65), 19-30 (300), 21-40 (866.7), 27-95 (600.4), 27-89 (7.3 Mb/s)
    assert np.allclose(got, [65000, 300000, 866666.7, 600441.2, 7312.5], atol=0.1)
    assert np.isnan(data_rate_kbps("vht", 9, 1, 20, 800))


def test_response_rates_and_ifs():
    # 10.6.6.5.2: highest basic rate <= the eliciting rate in its modulation class
    got = legacy_response_rate_kbps([54000, 18000, 9000, 11000, 1000])
    assert got.tolist() == [24000, 12000, 6000, 11000, 1000]
    # HT MCS 5 (64-QAM 2/3 -> non-HT reference 48 Mb/s) -> 24; MCS 0 -> 6
    assert legacy_response_rate_kbps(0, phy="ht", mcs=[5, 0]).tolist() == [24000, 6000]
    assert legacy_response_rate_kbps(54000, basic_rates=(6000, 12000, 24000, 54000)) == 54000
    assert sifs_ns([2412, 5180]).tolist() == [10000, 16000]
    assert slot_ns([2412, 2412, 5180], short_slot=[False, True, False]).tolist() == [20000, 9000, 9000]


def _tshark(name):
    return pd.read_csv(FIX / f"{name}.tsv.gz", sep="\t", low_memory=False)


def test_against_wireshark_duration_ofdm_and_ht():
    """tshark's wlan_radio.duration is exact for OFDM and HT except that it leaves out
    the SGI rounding T_SYML*ceil(T_SYMS*N_SYM/T_SYML) of 19.4.3 (it uses N_SYM*3.6 us)."""
    t = _tshark("ns3-11n-ht20-hidden-snifferA-nearAP")
    t = t[t["radiotap.ampdu.reference"].isna()]            # single MPDUs only
    L = (t["frame.len"] - t["radiotap.length"]).to_numpy()  # FCS included (flags 0x10)
    assert (t["radiotap.flags.fcs"] == 1).all()
    ws = t["wlan_radio.duration"].to_numpy() * US
    ofdm = (t["wlan_radio.phy"] == 5).to_numpy()
    rate = (t["radiotap.datarate"] * 1000).to_numpy()
    got = ppdu_duration_ns("ofdm", L[ofdm], rate_kbps=rate[ofdm].astype(int))
    assert ofdm.sum() > 300 and (got == ws[ofdm]).all()
    ht = (t["wlan_radio.phy"] == 7).to_numpy()
    mcs = t["radiotap.mcs.index"].to_numpy()[ht].astype(int)
    bw = np.where(t["radiotap.mcs.bw"].to_numpy()[ht] == 1, 40, 20)
    sgi = t["radiotap.mcs.gi"].to_numpy()[ht] == 1
    lgi = ppdu_duration_ns("ht", L[ht], mcs=mcs, bw_mhz=bw, gi_ns=800)
    pre = ppdu_duration_ns("ht", 0, mcs=mcs, bw_mhz=bw, gi_ns=800) - 4 * US
    n_sym = (lgi - pre) // (4 * US)
    wireshark_model = np.where(sgi, (pre + 3600 * n_sym + 500) // US * US, lgi)  # nearest us
    assert ht.sum() > 50 and sgi.all()
    assert (wireshark_model == ws[ht]).all()
    # and ours is the standard's: the 4 us-aligned ceiling of the same symbols
    ours = ppdu_duration_ns("ht", L[ht], mcs=mcs, bw_mhz=bw, gi_ns=400)
    assert (ours == pre + 4 * US * np.ceil(0.9 * n_sym).astype(int)).all()
