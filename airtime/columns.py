"""The frame-table columns each airtime stage reads, declared once.

Callers that decode only some columns (``merge``, the ``fairness`` command) take their
lists from here, so a stage that starts reading a new column cannot be starved of it
silently. No imports: the CLI reads these without loading pandas.
"""
from __future__ import annotations

__all__ = ["GROUPING_COLUMNS", "TIMING_COLUMNS", "DETECT_COLUMNS"]

# airtime.ppdu.group_ppdus, with its extent estimate (airtime.extent) and the Block-Ack
# records it reads (airtime.blockack)
GROUPING_COLUMNS = (
    "sniffer", "frame", "ts_ns", "wirelen", "tsft_us", "rt_len", "mpdu_len", "rt_flags", "fcs_bad",
    "short_preamble", "rate_kbps", "freq_mhz", "signal_dbm", "phy", "mcs", "nss", "bw_mhz", "gi_ns",
    "ldpc", "stbc", "ness", "ht_format", "he_format", "he_ltf_size", "he_n_ltf", "ampdu_ref",
    "ampdu_last", "type_subtype", "retry", "duration_us", "ta", "ra", "seq", "frag", "tid", "aid",
    "assoc_aid", "ba_type", "ba_ssn", "ba_bitmap", "ba_bitmap_lo", "ba_info",
)
# what the grouping reads to delimit, place and time the PPDUs (frame -> PPDU, start, end,
# airtime, ta): all but the PPDU table's signal_dbm and the Block-Ack record fields that
# only airtime.blockack's tables read (the extent parses the records out of ba_info itself)
TIMING_COLUMNS = tuple(c for c in GROUPING_COLUMNS if c not in ("signal_dbm", "frag", "tid", "aid", "assoc_aid",
                                                                "ba_type"))
# airtime.detect.detect reads these besides the PPDU table
DETECT_COLUMNS = GROUPING_COLUMNS + ("type",)
