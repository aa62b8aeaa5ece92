"""Extent of cut A-MPDUs on hand-built exchanges (times worked by hand, 802.11-2020 TXTIME).

HT20 MCS5 long GI (N_DBPS 208), 1000-byte MPDUs (FCS included): subframe 4 + 1000 = 1004 B.
- 4 subframes: PSDU 4016 B, N_SYM = ceil((8*4016 + 22) / 208) = 155 -> 36 + 620 = 656 us
- 2 subframes: PSDU 2008 B, N_SYM = ceil(16086 / 208) = 78 -> 36 + 312 = 348 us
Control at 24 Mb/s (N_DBPS 96): RTS 20 B and CTS 14 B 28 us, compressed BA 32 B 32 us.
Exchange from t = 0: RTS 0-28, CTS 44-72, data 88-744, BA 760-792; RTS NAV = 3*16 + 28 +
656 + 32 = 764 us, CTS NAV = 764 - 16 - 28 = 720 us.
"""
import numpy as np
import pandas as pd

from airtime.ppdu import group_ppdus
from test_ppdu import table

AP, STA = 0x020000000001, 0x020000000002
US = 1000
ENDS = {"rts": 28, "cts": 72, "data": 744, "ba": 792}
STARTS = {"rts": 0, "cts": 44, "data": 88, "ba": 760}


def exchange(stamp="start", seqs=(10, 11), last=False, rts=True, ba=True, ba_bits=0b1111, t0_us=1000, sniffer=0):
    """Frame rows of one RTS/CTS/A-MPDU/BA exchange as one sniffer captured it."""
    rows = []

    def add(kind, **kw):
        t = (STARTS if stamp == "start" else ENDS)[kind] + t0_us
        rows.append(dict(kind=kind, tsft_us=t, **kw))
    if rts:
        add("rts", type_subtype=0x1b, ta=STA, ra=AP, duration_us=764, wirelen=40, rate_kbps=24000, phy="ofdm")
        add("cts", type_subtype=0x1c, ta=None, ra=STA, duration_us=720, wirelen=34, rate_kbps=24000, phy="ofdm")
    for k, s in enumerate(seqs):
        add("data", type_subtype=0x28, ta=STA, ra=AP, duration_us=48, wirelen=1020, seq=s, ampdu_ref=7,
            ampdu_last=last and k == len(seqs) - 1, phy="ht", mcs=5, bw_mhz=20, gi_ns=800)
    if ba:
        add("ba", type_subtype=0x19, ta=AP, ra=STA, duration_us=0, wirelen=52, rate_kbps=24000, phy="ofdm",
            ba_ssn=10, ba_bitmap_lo=ba_bits)
    cols = {c: [r.get(c) for r in rows] for c in
            ("tsft_us", "type_subtype", "ta", "ra", "duration_us", "wirelen", "rate_kbps", "phy", "mcs",
             "bw_mhz", "gi_ns", "seq", "ampdu_ref", "ampdu_last", "ba_ssn", "ba_bitmap_lo")}
    n = len(rows)
    df = table(rt_len=np.full(n, 20), rt_flags=[0x10] * n, freq_mhz=[5180] * n,
               type=[r["type_subtype"] >> 4 for r in rows], **cols)
    df["ts_ns"] = df["tsft_us"].to_numpy(np.int64) * US
    df["sniffer"] = np.full(n, sniffer, df["sniffer"].dtype)
    return df


def data_row(p):
    return p[p["kind"] == "data"].iloc[0]


def test_hand_values_of_the_oracle():
    """Captured part only: 348 us; with the last subframe seen and nothing longer: complete."""
    p = group_ppdus(exchange(seqs=(10, 11, 12, 13), last=True, rts=False, ba=True), tsft_at="start").ppdus
    d = data_row(p)
    assert (d.start_ns, d.end_ns, d.complete, d.extent_src) == (1088 * US, 1744 * US, "complete", "captured")


def test_nav_gives_the_end_for_a_start_stamping_sniffer():
    p = group_ppdus(exchange(stamp="start", ba=False), tsft_at="start").ppdus
    d = data_row(p)
    assert d.captured_airtime_ns == 348 * US
    assert (d.start_ns, d.end_ns, d.airtime_ns) == (1088 * US, 1744 * US, 656 * US)
    assert (d.complete, d.extent_src) == ("estimated", "nav")


def test_nav_gives_the_start_for_an_end_stamping_sniffer():
    p = group_ppdus(exchange(stamp="end", ba=False), tsft_at="end").ppdus
    d = data_row(p)
    assert (d.start_ns, d.end_ns, d.extent_src) == (1088 * US, 1744 * US, "nav")


def test_cts_alone_gives_the_extent():
    df = exchange(stamp="end", ba=False)
    df = df[df["type_subtype"] != 0x1b].reset_index(drop=True)
    d = data_row(group_ppdus(df, tsft_at="end").ppdus)
    assert (d.start_ns, d.extent_src) == (1088 * US, "nav")


def test_block_ack_after_sifs_gives_the_end():
    d = data_row(group_ppdus(exchange(stamp="start", rts=False), tsft_at="start").ppdus)
    assert (d.end_ns, d.extent_src, d.complete) == (1744 * US, "response", "estimated")


def test_block_ack_bits_after_the_last_captured_mpdu_count_as_subframes():
    """End stamps, no RTS: the BA acknowledges 10..13, the sniffer caught 10, 11 -> 2 more
    subframes of the captured mean length (1004 B): PSDU 4016 B, 656 us."""
    d = data_row(group_ppdus(exchange(stamp="end", rts=False), tsft_at="end").ppdus)
    assert (d.start_ns, d.extent_src) == (1088 * US, "ba_span")
    # bits already set by the pair's previous BA are not this PPDU's subframes
    prev = exchange(stamp="end", rts=False, seqs=(12, 13), last=True, t0_us=0)
    prev = prev[prev["type_subtype"] == 0x19]
    both = pd.concat([prev, exchange(stamp="end", rts=False)], ignore_index=True)
    d = data_row(group_ppdus(both, tsft_at="end").ppdus)
    assert (d.start_ns, d.complete) == (1744 * US - 348 * US, "partial")


def test_other_sniffers_copy_gives_the_missing_subframes():
    a = exchange(stamp="end", rts=False, ba=False, sniffer=0)
    b = exchange(stamp="end", rts=False, ba=False, seqs=(10, 11, 12, 13), last=True, sniffer=1)
    p = group_ppdus(pd.concat([a, b], ignore_index=True), stamps="end").ppdus     # one clock (merged)
    d = p[(p["kind"] == "data") & (p["sniffer"] == 0)].iloc[0]
    assert (d.start_ns, d.extent_src, d.complete) == (1088 * US, "copies", "estimated")


def test_cut_without_any_source_is_partial():
    d = data_row(group_ppdus(exchange(stamp="end", rts=False, ba=False), tsft_at="end").ppdus)
    assert (d.airtime_ns, d.complete, d.extent_src) == (348 * US, "partial", "captured")
