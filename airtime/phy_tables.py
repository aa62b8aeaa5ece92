"""Declarative PHY tables of IEEE 802.11-2020 used by :mod:`airtime.phy`.

Everything is a plain dict or a numpy array indexed by a code, so the duration
code is lookups and arithmetic. Times are integer nanoseconds.
"""
from __future__ import annotations

import numpy as np

# PHY names (sniffsync.schema.PHY_NAMES order) -> code used for masks.
PHY_CODE = {"dsss": 0, "cck": 1, "ofdm": 2, "ht": 3, "vht": 4, "he": 5}
DSSS, CCK, OFDM, HT, VHT, HE = range(6)

# Modulation and coding per MCS index, shared by HT (index mcs % 8), VHT (0-9)
# and HE (0-11): bits per subcarrier N_BPSCS and coding rate R = num/den
# (Tables 19-27.., 21-30.., 27-55..).
MCS_BPSCS = np.array([1, 2, 2, 4, 4, 6, 6, 6, 8, 8, 10, 10], np.int64)
MCS_R_NUM = np.array([1, 1, 3, 1, 3, 2, 3, 5, 3, 5, 3, 5], np.int64)
MCS_R_DEN = np.array([2, 2, 4, 2, 4, 3, 4, 6, 4, 6, 4, 6], np.int64)

# Non-HT reference rate of each modulation/coding (Table 10-8 of 802.11-2020,
# "non-HT reference rate"), the input of the control-response rate rule.
MCS_NONHT_REF_KBPS = np.array([6000, 12000, 18000, 24000, 36000, 48000,
                               54000, 54000, 54000, 54000, 54000, 54000], np.int64)

# Data subcarriers per channel width. HT/VHT: Tables 19-6 / 21-5.
# HE: N_SD of the 242/484/996/2x996-tone RU and N_SD,short (27.3.12, Table 27-33).
N_SD_HT = {20: 52, 40: 108, 80: 234, 160: 468}
N_SD_HE = {20: 234, 40: 468, 80: 980, 160: 1960}
N_SD_SHORT_HE = {20: 60, 40: 120, 80: 240, 160: 492}

# Legacy rates. OFDM (Table 17-4): rate -> N_DBPS for 20 MHz channels.
OFDM_NDBPS = {6000: 24, 9000: 36, 12000: 48, 18000: 72,
              24000: 96, 36000: 144, 48000: 192, 54000: 216}
DSSS_RATES_KBPS = (1000, 2000)           # Clause 15
CCK_RATES_KBPS = (5500, 11000)           # Clause 16 (HR/DSSS)

# Long-training symbols per space-time streams. HT (Tables 19-13/19-14):
# N_DLTF by N_STS, N_ELTF by Ness. VHT (Table 21-13) and HE (Table 27-32):
# N_LTF by N_STS. Index 0 is invalid (-1).
HT_N_DLTF = np.array([-1, 1, 2, 4, 4], np.int64)
HT_N_ELTF = np.array([0, 1, 2, 4], np.int64)
VHT_N_LTF = np.array([-1, 1, 2, 4, 4, 6, 6, 8, 8], np.int64)

# Preamble parts in ns (the part before the data symbols that does not scale
# with the number of LTFs).
US = 1000
PREAMBLE_NS = {
    "dsss_long": 192 * US,        # 144 us preamble + 48 us PLCP header (15.4.4)
    "dsss_short": 96 * US,        # 72 us preamble + 24 us PLCP header (16.2.2.3)
    "ofdm": 20 * US,              # L-STF 8 + L-LTF 8 + SIGNAL 4 (17.4.3)
    # HT-mixed: L-STF 8 + L-LTF 8 + L-SIG 4 + HT-SIG 8 + HT-STF 4; +4 per HT-LTF
    "ht_mf": 32 * US,
    # HT-greenfield: HT-GF-STF 8 + HT-LTF1 8 + HT-SIG 8; +4 per further HT-LTF
    "ht_gf": 20 * US,
    # VHT: L-STF 8 + L-LTF 8 + L-SIG 4 + VHT-SIG-A 8 + VHT-STF 4 + VHT-SIG-B 4;
    # +4 per VHT-LTF (21.4.3)
    "vht": 36 * US,
    # HE SU: L-STF 8 + L-LTF 8 + L-SIG 4 + RL-SIG 4 + HE-SIG-A 8 + HE-STF 4 (27.4.3)
    "he_su": 36 * US,
    # HE ER SU: HE-SIG-A is 16 us
    "he_ext_su": 44 * US,
}
LTF_NS = 4 * US                   # HT/VHT LTF symbol
SIGNAL_EXTENSION_NS = 6 * US      # ERP-OFDM, HT and HE in the 2.4 GHz band
BAND_2G4_MAX_MHZ = 3000           # freq_mhz below this is the 2.4 GHz band

HT_FORMAT_CODE = {"mf": 0, "gf": 1}
HE_FORMAT_CODE = {"su": 0, "ext_su": 1, "mu": 2, "trig": 3}
# HE-LTF symbol without GI, by HE-LTF size 1x/2x/4x (27.3.11.10).
HE_LTF_NS = {1: 3200, 2: 6400, 4: 12800}
HE_DATA_SYM_NS = 12800            # HE data symbol without GI

# VHT N_ES (BCC encoders): ceil(rate_800ns_GI / 540 Mb/s) except these entries
# of the VHT-MCS tables 21-30 to 21-61, (bw_mhz, nss, mcs) -> N_ES.
VHT_NES_EXCEPTIONS = {
    (80, 7, 2): 3, (80, 7, 7): 6, (80, 7, 8): 6, (80, 8, 7): 6,
    (160, 4, 7): 6, (160, 5, 8): 8, (160, 6, 7): 8, (160, 7, 3): 4,
    (160, 7, 4): 6, (160, 7, 5): 7, (160, 7, 7): 9, (160, 7, 8): 12,
    (160, 7, 9): 12,
}
# HT N_ES: one BCC encoder up to 320 Mb/s with 800 ns GI (Tables 19-27..19-41:
# N_ES = 2 exactly for the MCSs at 324 Mb/s and above).
HT_NES_MAX_NDBPS = 1280           # 320 Mb/s * 4 us

# Interframe spaces per band (Tables 15-5, 17-21, 19-25, 21-30 PHY characteristics).
SIFS_NS = {"2.4": 10 * US, "5": 16 * US}
SLOT_NS = {"2.4_long": 20 * US, "2.4_short": 9 * US, "5": 9 * US}

# Control-frame sizes on the air in bytes, FCS included (802.11-2020 9.3.1).
RTS_BYTES = 20                    # frame control 2, duration 2, RA 6, TA 6, FCS 4
CTS_BYTES = 14                    # frame control 2, duration 2, RA 6, FCS 4
ACK_BYTES = CTS_BYTES             # same layout as a CTS
BA_BYTES = 32                     # compressed Block-Ack, one TID: RTS + BA control 2, SSC 2, bitmap 8
