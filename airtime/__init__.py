"""Airtime: exact PPDU durations (IEEE 802.11-2020 TXTIME) and MPDU -> PPDU grouping."""
from airtime.phy import (data_rate_kbps, ldpc_extra_symbol, legacy_response_rate_kbps,
                  nonht_reference_rate_kbps, ppdu_duration_ns, sifs_ns, slot_ns)
from airtime.ppdu import (KIND_NAMES, PpduGrouping, align_to_ppdu_end, detect_tsft_at, group_ppdus,
                          kind_codes, mpdu_bytes)

__all__ = ["ppdu_duration_ns", "data_rate_kbps", "legacy_response_rate_kbps",
           "nonht_reference_rate_kbps", "ldpc_extra_symbol", "sifs_ns", "slot_ns",
           "group_ppdus", "PpduGrouping", "align_to_ppdu_end", "detect_tsft_at", "kind_codes",
           "mpdu_bytes", "KIND_NAMES"]
