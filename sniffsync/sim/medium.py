"""Geometry, hearing and the shared PHY durations of the simulated BSS.

Positions give distances; distance gives who hears whom (a disc of ``range_m``) and a
log-distance received power. Every PPDU airtime comes from
:func:`airtime.phy.ppdu_duration_ns` (the one PHY implementation of the
project), called vectorised over all candidate PSDU lengths at once.
"""
from __future__ import annotations

import numpy as np

from airtime.phy_tables import BA_BYTES, CTS_BYTES, RTS_BYTES

__all__ = ["positions", "hearing", "rx_power_dbm", "Phy", "mac_int", "RTS_BYTES", "CTS_BYTES",
           "BA_BYTES", "ampdu_psdu_bytes"]


def mac_int(i: int, base: int = 0x020000000000) -> int:
    """48-bit MAC of node ``i`` (first byte on the air = most significant byte)."""
    return base + i + 1


def positions(items: list[dict]) -> np.ndarray:
    """``(n, 2)`` float positions in metres of a list of nodes / sniffers."""
    return np.array([it["pos"] for it in items], dtype=float).reshape(-1, 2)


def _dist(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sqrt(((a[:, None, :] - b[None, :, :]) ** 2).sum(axis=2))


def hearing(rx_pos: np.ndarray, tx_pos: np.ndarray, range_m: float) -> np.ndarray:
    """``hears[r, t]``: receiver ``r`` senses and can decode transmitter ``t`` (disc model)."""
    return _dist(rx_pos, tx_pos) <= range_m


def rx_power_dbm(rx_pos, tx_pos, tx_power_dbm, exp, pl1m_db) -> np.ndarray:
    """Log-distance received power ``P_tx - PL(1 m) - 10 n log10(d)``, d floored at 1 m."""
    d = np.maximum(_dist(rx_pos, tx_pos), 1.0)
    return tx_power_dbm - pl1m_db - 10.0 * exp * np.log10(d)


def ampdu_psdu_bytes(mpdu_bytes: np.ndarray) -> np.ndarray:
    """PSDU length of an A-MPDU of the first ``k`` MPDUs, for every ``k`` (1-based).

    Each subframe is a 4-byte delimiter + MPDU, padded to 4 bytes except the last
    (IEEE 802.11-2020 10.12.2).
    """
    sub = 4 + np.asarray(mpdu_bytes, np.int64)
    padded = sub + (-sub) % 4
    return np.concatenate([[0], np.cumsum(padded)[:-1]]) + sub


class Phy:
    """PPDU durations for one scenario's data PHY and its legacy control rates."""

    def __init__(self, cfg: dict):
        from airtime.phy import ppdu_duration_ns
        self._f = ppdu_duration_ns
        self.cfg = cfg
        self.data_kw = dict(mcs=cfg["mcs"], nss=cfg["nss"], bw_mhz=cfg["bw_mhz"],
                            gi_ns=cfg["gi_ns"], ldpc=bool(cfg["ldpc"]), freq_mhz=cfg["freq_mhz"])
        if cfg["phy"] == "he":
            self.data_kw["he_ltf_size"] = 2            # written as 2x in radiotap HE data5
        ctrl = cfg["ctrl_rate_kbps"]
        self.rts_ns = self.legacy(RTS_BYTES, ctrl)
        self.cts_ns = self.legacy(CTS_BYTES, ctrl)
        self.ba_ns = self.legacy(BA_BYTES, ctrl)
        self._data_ns: dict[int, int] = {}       # PSDU length -> duration (the PHY is fixed)

    def legacy(self, psdu_bytes: int, rate_kbps: int) -> int:
        """Duration of a non-HT OFDM PPDU (5 GHz: control, management frames)."""
        d = self._f("ofdm", np.array([psdu_bytes]), rate_kbps=rate_kbps,
                    freq_mhz=self.cfg["freq_mhz"])
        return int(np.asarray(d).reshape(-1)[0])

    def data(self, psdu_bytes: np.ndarray) -> np.ndarray:
        """Durations (ns, int64) of data PPDUs of the scenario PHY for each PSDU length.

        Memoised per length: an exchange asks for up to 64 lengths, nearly all seen before,
        and one vectorised call costs ~0.7 ms whatever its size.
        """
        return np.array(self.data_ns(np.asarray(psdu_bytes, np.int64).reshape(-1).tolist()), np.int64)

    def data_ns(self, psdu_bytes: list[int]) -> list[int]:
        """:meth:`data` on a list of ints, as a list."""
        known = self._data_ns
        new = sorted({x for x in psdu_bytes if x not in known})
        if new:
            d = self._f(self.cfg["phy"], np.array(new, np.int64), **self.data_kw)
            known.update(zip(new, np.asarray(d, np.int64).reshape(-1).tolist()))
        return [known[x] for x in psdu_bytes]
