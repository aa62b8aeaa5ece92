"""Exact PPDU durations from the IEEE 802.11-2020 TXTIME equations, vectorised.

Every public function takes scalars or arrays (numpy, pandas nullable, lists),
broadcasts them, and returns integer nanoseconds (``-1`` where a row cannot be
computed: unknown PHY, missing MCS/bandwidth, a combination the standard does not
define). A bad row never raises. Clause references are to IEEE 802.11-2020.
"""
from __future__ import annotations

import numpy as np

from airtime import phy_tables as T

__all__ = ["ppdu_duration_ns", "data_rate_kbps", "legacy_response_rate_kbps",
           "nonht_reference_rate_kbps", "sifs_ns", "slot_ns", "ldpc_extra_symbol"]


# ----------------------------------------------------------------- input helpers
def _num(x, default, dtype=np.int64):
    """Numeric column with nulls replaced by ``default`` (scalars stay 0-d)."""
    if x is None:
        return np.asarray(default, dtype)
    if isinstance(x, (int, np.integer)) or isinstance(x, np.ndarray) and x.dtype.kind in "iub":
        return np.asarray(x).astype(dtype)             # (no pandas needed)
    import pandas as pd
    if np.ndim(x) == 0:
        return np.asarray(default if pd.isna(x) else x).astype(dtype)
    if isinstance(x, (pd.Series, pd.Index)):
        x = x.array
    if isinstance(x, pd.api.extensions.ExtensionArray):
        f = x.to_numpy(dtype="float64", na_value=np.nan)
    else:
        a = np.asarray(x)
        if a.dtype.kind in "iub":
            return a.astype(dtype)
        f = pd.to_numeric(pd.Series(a.ravel()), errors="coerce").to_numpy(float).reshape(a.shape)
    return np.where(np.isnan(f), default, f).astype(dtype)


def _code(x, table: dict, default: int):
    """Integer code of string labels via ``table``; null -> ``default``, unknown -> -1."""
    if x is None:
        return np.asarray(default)
    if isinstance(x, str):
        return np.asarray(table.get(x, -1))
    if hasattr(x, "codes") and hasattr(x, "categories"):     # codes + labels: no pandas needed
        lut = np.array([table.get(str(c), -1) for c in x.categories] + [default], np.int64)
        return lut[np.asarray(x.codes)]
    import pandas as pd
    if np.ndim(x) == 0:
        return np.asarray(default if pd.isna(x) else table.get(str(x), -1))
    cat = pd.Categorical(np.asarray(x, dtype=object) if not isinstance(x, pd.Categorical) else x)
    lut = np.array([table.get(str(c), -1) for c in cat.categories] + [default], np.int64)
    return lut[cat.codes]  # code -1 (null) picks the trailing default


def _ceil_div(a, b):
    """Exact integer ceil(a / b) for b > 0."""
    return -(-a // b)


def _lookup(table: dict, key, missing=-1):
    """Vectorised dict lookup on an integer array."""
    keys = np.fromiter(table.keys(), np.int64)
    vals = np.fromiter(table.values(), np.int64)
    order = np.argsort(keys)
    keys, vals = keys[order], vals[order]
    i = np.clip(np.searchsorted(keys, key), 0, len(keys) - 1)
    return np.where(keys[i] == key, vals[i], missing)


# ------------------------------------------------------------- LDPC (19.3.11.7.5)
def ldpc_extra_symbol(n_pld, n_avbits, r_num, r_den):
    """Whether the LDPC encoding procedure adds an extra symbol.

    Steps c)-e) of 19.3.11.7.5 in exact integer arithmetic (R = r_num / r_den).

    Parameters
    ----------
    n_pld, n_avbits : array_like of int
        Payload bits and available coded bits before the extra-symbol check.
    r_num, r_den : array_like of int
        Coding rate.

    Returns
    -------
    np.ndarray of bool
    """
    n_pld, n_avbits = np.asarray(n_pld, np.int64), np.asarray(n_avbits, np.int64)
    num, den = np.asarray(r_num, np.int64), np.asarray(r_den, np.int64)
    inv = den - num                                   # (1 - R) * den
    # Table 19-16: codeword count and length from the available bits.
    many = _ceil_div(n_pld * den, 1944 * num)
    n_cw = np.select([n_avbits <= 1944, n_avbits <= 2592], [1, 2], many)
    l_ldpc = np.select(
        [n_avbits <= 648,
         n_avbits <= 1296,
         n_avbits <= 1944,
         n_avbits <= 2592],
        [np.where(den * n_avbits >= den * n_pld + 912 * inv, 1296, 648),
         np.where(den * n_avbits >= den * n_pld + 1464 * inv, 1944, 1296),
         1944,
         np.where(den * n_avbits >= den * n_pld + 2916 * inv, 1944, 1296)],
        1944)
    n_shrt = np.maximum(0, n_cw * l_ldpc * num // den - n_pld)
    n_punc = np.maximum(0, n_cw * l_ldpc - n_avbits - n_shrt)
    big = n_cw * l_ldpc * inv                         # N_CW * L_LDPC * (1-R) * den
    return (((10 * den * n_punc > big) & (10 * n_shrt * inv < 12 * n_punc * num))
            | (10 * den * n_punc > 3 * big))


# ------------------------------------------------------------------ per-PHY parts
def _data_ns(n_sym, gi_ns, sym_ns=3200):
    """Data field of HT/VHT: T_SYM * N_SYM, or T_SYML * ceil(T_SYMS * N_SYM / T_SYML) for SGI."""
    long_ns = sym_ns + 800
    short = gi_ns == 400
    sgi = long_ns * _ceil_div((sym_ns + 400) * n_sym, long_ns)
    return np.where(short, sgi, long_ns * n_sym)


def _mcs_params(mcs_idx, nss, n_sd, floor=False):
    """N_CBPS, N_DBPS, R num/den for a modulation index (valid rows only)."""
    m = np.clip(mcs_idx, 0, len(T.MCS_BPSCS) - 1)
    bpscs, num, den = T.MCS_BPSCS[m], T.MCS_R_NUM[m], T.MCS_R_DEN[m]
    n_cbps = n_sd * bpscs * nss
    exact = (n_cbps * num) % den == 0
    n_dbps = n_cbps * num // den
    return n_cbps, n_dbps, num, den, (exact | floor)


def _bcc_or_ldpc_nsym(L, n_dbps, n_cbps, num, den, m_stbc, n_es, ldpc):
    """HT N_SYM (19.3.11.7.5 for LDPC, eq. 19-32 for BCC)."""
    bcc = m_stbc * _ceil_div(8 * L + 16 + 6 * n_es, m_stbc * n_dbps)
    n_pld = 8 * L + 16
    n_av = n_cbps * m_stbc * _ceil_div(n_pld, n_dbps * m_stbc)
    n_av = n_av + np.where(ldpc_extra_symbol(n_pld, n_av, num, den), n_cbps * m_stbc, 0)
    return np.where(ldpc, n_av // np.maximum(n_cbps, 1), bcc)


def _ht(L, mcs, bw, gi, ldpc, stbc, ness, fmt, freq):
    valid = (mcs >= 0) & (mcs <= 32) & np.isin(bw, (20, 40)) & (L >= 0)
    valid &= (mcs != 32) | (bw == 40)
    nss = np.where(mcs == 32, 1, mcs // 8 + 1)
    n_sd = np.where(bw == 40, 108, 52)
    n_cbps, n_dbps, num, den, _ = _mcs_params(mcs % 8, nss, n_sd)
    # MCS 32: 40 MHz duplicate BPSK 1/2, 6 Mb/s (Table 19-41)
    n_cbps, n_dbps = np.where(mcs == 32, 48, n_cbps), np.where(mcs == 32, 24, n_dbps)
    num, den = np.where(mcs == 32, 1, num), np.where(mcs == 32, 2, den)
    n_es = np.where(n_dbps > T.HT_NES_MAX_NDBPS, 2, 1)
    m_stbc = np.where(stbc > 0, 2, 1)
    n_sts = nss + stbc
    valid &= (n_sts <= 4) & (stbc <= 2) & (ness <= 3) & (fmt >= 0)
    n_ltf = T.HT_N_DLTF[np.clip(n_sts, 0, 4)] + T.HT_N_ELTF[np.clip(ness, 0, 3)]
    n_sym = _bcc_or_ldpc_nsym(L, np.maximum(n_dbps, 1), n_cbps, num, den, m_stbc, n_es, ldpc)
    pre = np.where(fmt == 1, T.PREAMBLE_NS["ht_gf"], T.PREAMBLE_NS["ht_mf"])
    t = pre + T.LTF_NS * n_ltf + _data_ns(n_sym, gi) + _sig_ext(freq)
    return np.where(valid & np.isin(gi, (400, 800)), t, -1)


def _vht_nes(bw, nss, mcs, n_dbps):
    key = bw * 10000 + nss * 100 + mcs
    exc = {b * 10000 + n * 100 + m: v for (b, n, m), v in T.VHT_NES_EXCEPTIONS.items()}
    # ceil(rate_LGI / 540 Mb/s) with rate_LGI = N_DBPS / 4 us  ->  ceil(N_DBPS / 2160)
    return np.where(np.isin(key, list(exc)), _lookup(exc, key), _ceil_div(n_dbps, 2160))


def _vht(L, mcs, nss, bw, gi, ldpc, stbc):
    valid = (mcs >= 0) & (mcs <= 9) & (nss >= 1) & (nss <= 8) & (L >= 0)
    valid &= np.isin(bw, (20, 40, 80, 160))
    n_sd = _lookup(T.N_SD_HT, bw)
    n_cbps, n_dbps, num, den, exact = _mcs_params(mcs, nss, n_sd)
    valid &= exact                                      # e.g. 20 MHz MCS 9 NSS 1
    n_dbps = np.maximum(n_dbps, 1)
    m_stbc = np.where(stbc > 0, 2, 1)
    n_sts = nss * m_stbc
    valid &= n_sts <= 8
    n_ltf = T.VHT_N_LTF[np.clip(n_sts, 0, 8)]
    n_es = _vht_nes(bw, nss, mcs, n_dbps)
    bcc = m_stbc * _ceil_div(8 * L + 16 + 6 * n_es, m_stbc * n_dbps)
    # LDPC (21.3.10.5.4): N_pld and N_avbits from whole initial symbols.
    init = m_stbc * _ceil_div(8 * L + 16, m_stbc * n_dbps)
    extra = ldpc_extra_symbol(init * n_dbps, init * n_cbps, num, den)
    n_sym = np.where(ldpc, init + np.where(extra, m_stbc, 0), bcc)
    t = T.PREAMBLE_NS["vht"] + T.LTF_NS * n_ltf + _data_ns(n_sym, gi)
    return np.where(valid & np.isin(gi, (400, 800)), t, -1)


def _he(L, mcs, nss, bw, gi, ldpc, stbc, fmt, ltf_size, n_ltf_given, pe_us, freq):
    valid = (mcs >= 0) & (mcs <= 11) & (nss >= 1) & (nss <= 8) & (L >= 0)
    valid &= np.isin(bw, (20, 40, 80, 160)) & np.isin(fmt, (0, 1))
    valid &= np.isin(gi, (800, 1600, 3200)) & np.isin(ltf_size, (1, 2, 4))
    n_sd, n_sd_short = _lookup(T.N_SD_HE, bw), _lookup(T.N_SD_SHORT_HE, bw)
    # HE rounds N_DBPS down (e.g. 996-tone MCS 11: 9800 * 5/6 -> 8166, Table 27-95)
    n_cbps, n_dbps, num, den, _ = _mcs_params(mcs, nss, n_sd, floor=True)
    n_cbps_s, n_dbps_s, _, _, _ = _mcs_params(mcs, nss, n_sd_short, floor=True)
    n_dbps, n_dbps_s = np.maximum(n_dbps, 1), np.maximum(n_dbps_s, 1)
    m = np.where(stbc > 0, 2, 1)
    # 27.3.12: one BCC encoder (N_ES = 1) with 6 tail bits; LDPC has no tail.
    bits = 8 * L + 16 + np.where(ldpc, 0, 6)
    init = m * _ceil_div(bits, m * n_dbps)
    excess = bits % (m * n_dbps)
    a_init = np.where(excess == 0, 4, np.minimum(_ceil_div(excess, m * n_dbps_s), 4))
    last_d = np.where(a_init < 4, a_init * n_dbps_s, n_dbps)
    last_c = np.where(a_init < 4, a_init * n_cbps_s, n_cbps)
    n_pld = (init - m) * n_dbps + m * last_d
    n_av = (init - m) * n_cbps + m * last_c
    extra = ldpc & ldpc_extra_symbol(n_pld, n_av, num, den) & (a_init == 4)
    n_sym = init + np.where(extra, m, 0)
    n_sts = nss * m
    n_ltf = np.where(n_ltf_given > 0, n_ltf_given, T.VHT_N_LTF[np.clip(n_sts, 0, 8)])
    valid &= n_sts <= 8
    ltf_ns = _lookup(T.HE_LTF_NS, ltf_size, 0) + gi
    pre = np.where(fmt == 1, T.PREAMBLE_NS["he_ext_su"], T.PREAMBLE_NS["he_su"])
    t = pre + n_ltf * ltf_ns + n_sym * (T.HE_DATA_SYM_NS + gi) + pe_us * 1000 + _sig_ext(freq)
    return np.where(valid, t, -1)


def _sig_ext(freq):
    return np.where((freq > 0) & (freq < T.BAND_2G4_MAX_MHZ), T.SIGNAL_EXTENSION_NS, 0)


def _legacy(code, L, rate, short, freq):
    dsss = (code == T.DSSS) | (code == T.CCK)
    dsss_ok = np.isin(rate, T.DSSS_RATES_KBPS + T.CCK_RATES_KBPS)
    # 1 Mb/s is always sent with the long preamble (the short PLCP header is at 2 Mb/s).
    pre = np.where(short & (rate > 1000), T.PREAMBLE_NS["dsss_short"], T.PREAMBLE_NS["dsss_long"])
    t_dsss = pre + 1000 * _ceil_div(8000 * L, np.maximum(rate, 1))
    n_dbps = _lookup(T.OFDM_NDBPS, rate)
    t_ofdm = (T.PREAMBLE_NS["ofdm"] + 4000 * _ceil_div(16 + 8 * L + 6, np.maximum(n_dbps, 1))
              + _sig_ext(freq))
    return np.where(dsss, np.where(dsss_ok, t_dsss, -1),
                    np.where(n_dbps > 0, t_ofdm, -1))


# ------------------------------------------------------------------- public API
def ppdu_duration_ns(phy, psdu_bytes, *, rate_kbps=None, mcs=None, nss=None, bw_mhz=None,
                     gi_ns=None, ldpc=False, stbc=0, short_preamble=False, ht_format="mf",
                     ness=0, freq_mhz=5180, he_format="su", he_ltf_size=2, he_n_ltf=None,
                     he_pe_us=0):
    """Duration of whole PPDUs (preamble to the end of the packet extension), in ns.

    Parameters
    ----------
    phy : str or array_like of str
        ``dsss``/``cck``/``ofdm``/``ht``/``vht``/``he``; anything else gives -1.
    psdu_bytes : int or array_like
        PSDU length (VHT/HE: the A-MPDU length before EOF padding, i.e. APEP_LENGTH).
    rate_kbps : legacy rate (dsss/cck/ofdm).
    mcs, nss, bw_mhz, gi_ns : HT/VHT/HE MCS index, spatial streams (HT: from MCS;
        null -> 1), channel width, guard interval (null -> 800).
    ldpc, stbc, ness : coding, STBC (HT: N_STBC; VHT/HE: 0/1), HT extension streams.
    short_preamble : DSSS/CCK short PLCP preamble.
    ht_format : ``mf`` (mixed) or ``gf`` (greenfield).
    freq_mhz : centre frequency; below 3000 MHz adds the 6 us signal extension
        to ERP-OFDM, HT and HE PPDUs.
    he_format : ``su`` or ``ext_su`` (MU/TB: -1).
    he_ltf_size : 1, 2 or 4 (x). he_n_ltf : HE-LTF count (null -> from N_STS).
    he_pe_us : packet extension, 0/4/8/12/16 us.

    Every argument may be a scalar or an array; they broadcast. Nulls in optional
    arguments take the default shown; nulls in ``phy``/``psdu_bytes``/``mcs``/
    ``bw_mhz``/``rate_kbps`` give -1.

    Returns
    -------
    np.ndarray of int64
        Duration in ns, -1 where it cannot be computed.
    """
    cols = [
        _code(phy, T.PHY_CODE, -1), _num(psdu_bytes, -1), _num(rate_kbps, -1),
        _num(mcs, -1), _num(nss, 1), _num(bw_mhz, -1), _num(gi_ns, 800),
        _num(ldpc, 0).astype(bool), _num(stbc, 0), _num(short_preamble, 0).astype(bool),
        _code(ht_format, T.HT_FORMAT_CODE, 0), _num(ness, 0), _num(freq_mhz, 5180),
        _code(he_format, T.HE_FORMAT_CODE, 0), _num(he_ltf_size, 2), _num(he_n_ltf, 0),
        _num(he_pe_us, 0),
    ]
    shape = np.broadcast_shapes(*(c.shape for c in cols))
    (code, L, rate, mcs_, nss_, bw, gi, ldpc_, stbc_, short, htf, ness_, freq, hef,
     ltf, nltf, pe) = (np.broadcast_to(c, shape).ravel() for c in cols)
    out = np.full(L.shape, -1, np.int64)
    parts = {
        T.DSSS: lambda s: _legacy(code[s], L[s], rate[s], short[s], freq[s]),
        T.CCK: lambda s: _legacy(code[s], L[s], rate[s], short[s], freq[s]),
        T.OFDM: lambda s: _legacy(code[s], L[s], rate[s], short[s], freq[s]),
        T.HT: lambda s: _ht(L[s], mcs_[s], bw[s], gi[s], ldpc_[s], stbc_[s], ness_[s], htf[s],
                            freq[s]),
        T.VHT: lambda s: _vht(L[s], mcs_[s], nss_[s], bw[s], gi[s], ldpc_[s], stbc_[s]),
        T.HE: lambda s: _he(L[s], mcs_[s], nss_[s], bw[s], gi[s], ldpc_[s], stbc_[s], hef[s],
                            ltf[s], nltf[s], pe[s], freq[s]),
    }
    for c, fn in parts.items():
        sel = np.flatnonzero(code == c)
        if sel.size:
            out[sel] = fn(sel)
    out[L < 0] = -1
    return out.reshape(shape)


def data_rate_kbps(phy, mcs, nss=None, bw_mhz=None, gi_ns=None):
    """PHY data rate of HT/VHT/HE MCSs in kbit/s (float; NaN where undefined).

    N_DBPS / T_SYM with N_DBPS = N_SD * N_BPSCS * R * N_SS (HT: N_SS from the MCS;
    HE: N_DBPS rounded down, T_SYM = 12.8 us + GI).
    """
    cols = [_code(phy, T.PHY_CODE, -1), _num(mcs, -1), _num(nss, 1), _num(bw_mhz, -1),
            _num(gi_ns, 800)]
    shape = np.broadcast_shapes(*(c.shape for c in cols))
    code, mcs_, nss_, bw, gi = (np.broadcast_to(c, shape).ravel() for c in cols)
    ht, he = code == T.HT, code == T.HE
    nss_ = np.where(ht, mcs_ // 8 + 1, nss_)
    idx = np.where(ht, mcs_ % 8, mcs_)
    n_sd = np.where(he, _lookup(T.N_SD_HE, bw), _lookup(T.N_SD_HT, bw))
    n_cbps, n_dbps, num, den, exact = _mcs_params(idx, nss_, n_sd, floor=False)
    n_dbps = np.where(he, n_cbps * num // den, n_dbps)
    n_dbps = np.where(ht & (mcs_ == 32) & (bw == 40), 24, n_dbps)
    t_sym = np.where(he, T.HE_DATA_SYM_NS, 3200) + gi
    ok = ((ht & (mcs_ >= 0) & (mcs_ <= 32) & np.isin(bw, (20, 40)))
          | ((code == T.VHT) & (mcs_ >= 0) & (mcs_ <= 9) & exact)
          | (he & (mcs_ >= 0) & (mcs_ <= 11)))
    ok &= (n_sd > 0) & (nss_ >= 1)
    return np.where(ok, n_dbps * 1e6 / t_sym, np.nan).reshape(shape)


def nonht_reference_rate_kbps(phy, mcs):
    """Non-HT reference rate (Table 10-8) of an HT/VHT/HE MCS's modulation and coding."""
    code, m = np.broadcast_arrays(_code(phy, T.PHY_CODE, -1), _num(mcs, -1))
    idx = np.where(code == T.HT, np.where(m == 32, 0, m % 8), m)
    ok = (code >= T.HT) & (idx >= 0) & (idx < len(T.MCS_NONHT_REF_KBPS))
    return np.where(ok, T.MCS_NONHT_REF_KBPS[np.clip(idx, 0, 11)], -1)


def legacy_response_rate_kbps(rate_kbps, basic_rates=(6000, 12000, 24000), *, phy=None,
                              mcs=None):
    """Rate of a control response (CTS/ACK/BA) to a frame sent at ``rate_kbps``.

    10.6.6.5: the highest rate of the basic rate set that is <= the eliciting
    frame's rate and of the same modulation class (DSSS/HR-DSSS vs OFDM); if no
    basic rate qualifies, the highest mandatory rate of that class (1/2/5.5/11 or
    6/12/24 Mb/s) that is. For HT/VHT/HE eliciting frames (``phy``/``mcs`` given)
    the eliciting rate is the non-HT reference rate of the MCS.

    Returns
    -------
    np.ndarray of int64
        kbit/s, -1 where no rate qualifies.
    """
    rate = _num(rate_kbps, -1)
    if phy is not None:
        ref = nonht_reference_rate_kbps(phy, mcs)
        rate = np.where(ref > 0, ref, rate)
    dsss_set = set(T.DSSS_RATES_KBPS + T.CCK_RATES_KBPS)
    basic = np.asarray(sorted(basic_rates), np.int64)
    out = np.full(np.shape(rate), -1, np.int64)
    for is_dsss, mandatory in ((True, T.DSSS_RATES_KBPS + T.CCK_RATES_KBPS),
                               (False, (6000, 12000, 24000))):
        cls = np.isin(basic, list(dsss_set)) == is_dsss
        for rates in (np.asarray(mandatory, np.int64), basic[cls]):  # basic set wins
            if not rates.size:
                continue
            i = np.searchsorted(rates, rate, side="right") - 1
            pick = np.where(i >= 0, rates[np.clip(i, 0, None)], -1)
            mine = np.isin(rate, list(dsss_set)) == is_dsss
            out = np.where(mine & (pick > 0), pick, out)
    return out


def sifs_ns(freq_mhz):
    """SIFS: 10 us in the 2.4 GHz band, 16 us at 5/6 GHz."""
    f = _num(freq_mhz, 5180)
    return np.where(f < T.BAND_2G4_MAX_MHZ, T.SIFS_NS["2.4"], T.SIFS_NS["5"])


def slot_ns(freq_mhz, short_slot=True):
    """Slot time: 9 us (5/6 GHz, or 2.4 GHz short slot), 20 us for the 2.4 GHz long slot."""
    f = _num(freq_mhz, 5180)
    long_ = (f < T.BAND_2G4_MAX_MHZ) & ~np.asarray(short_slot, bool)
    return np.where(long_, T.SLOT_NS["2.4_long"], T.SLOT_NS["5"])
