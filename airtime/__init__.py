"""Airtime: exact PPDU durations (IEEE 802.11-2020 TXTIME) and MPDU -> PPDU grouping.

Names are loaded on first use, so ``airtime.columns`` (plain tuples) can be read without
importing numpy-heavy or pandas modules (the ``fairness`` command on wired captures).
"""
from importlib import import_module

_WHERE = {
    "ppdu_duration_ns": "phy", "data_rate_kbps": "phy", "legacy_response_rate_kbps": "phy",
    "nonht_reference_rate_kbps": "phy", "ldpc_extra_symbol": "phy", "sifs_ns": "phy", "slot_ns": "phy",
    "group_ppdus": "ppdu", "PpduGrouping": "ppdu", "align_to_ppdu_end": "ppdu",
    "detect_tsft_at": "ppdu", "kind_codes": "ppdu", "mpdu_bytes": "ppdu", "KIND_NAMES": "ppdu",
}
__all__ = list(_WHERE)


def __getattr__(name):
    if name in _WHERE:
        return getattr(import_module(f"airtime.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'airtime' has no attribute {name!r}")
