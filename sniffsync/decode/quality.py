"""Frames that failed their FCS: kept in the frame table, left out of the analysis, counted.

A frame whose FCS check failed (``fcs_bad``: radiotap Flags 0x40, PPI 802.11-Common flag
0x4, the CRC-32 of a Prism / AVS frame) has corrupt bits somewhere: its addresses, type,
sequence number and payload cannot be trusted, so it must not create a station, a flow,
a PPDU or an event. The stages call :func:`good_fcs_mask` at their entry (PPDU grouping,
the station table, TCP/UDP segment extraction); ``frames`` and ``merge`` keep every frame.
What remains measurable is reception quality: per sniffer, how many frames failed, and per
transmitter where the corrupt frame's TA is *plausible*, i.e. equals the TA of a good frame
(a corrupt TA that happens to equal a real station's is possible but rare: one flipped bit
in 48 gives another address).

``--keep-bad-fcs`` is an explicit argument: ``group_ppdus(..., keep_bad_fcs=True)``; the TCP
stage is handed the table without its ``fcs_bad`` column (no FCS verdict: every frame counts). See docs/bad-fcs.md. (pandas is imported
only inside the functions that build tables: the decoders stay pandas-free.)
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["good_fcs_mask", "known_tas", "bad_fcs_counts", "bad_fcs_by_ta"]


def _bad(frames) -> np.ndarray:
    if "fcs_bad" not in frames:
        return np.zeros(len(frames), bool)
    return frames["fcs_bad"].to_numpy(bool, na_value=False)


def good_fcs_mask(frames: "pd.DataFrame", keep_bad_fcs: bool = False) -> np.ndarray:
    """Rows the analysis may use: FCS good or not checked (all rows under ``--keep-bad-fcs``).

    Examples
    --------
    >>> import pandas as pd
    >>> t = pd.DataFrame({"fcs_bad": pd.array([False, True, None], dtype="boolean")})
    >>> good_fcs_mask(t).tolist(), good_fcs_mask(t, keep_bad_fcs=True).tolist()
    ([True, False, True], [True, True, True])
    """
    if keep_bad_fcs:
        return np.ones(len(frames), bool)
    return ~_bad(frames)


def known_tas(frames: "pd.DataFrame") -> np.ndarray:
    """Sorted distinct transmitter addresses of the frames whose FCS is not bad."""
    if "ta" not in frames:
        return np.zeros(0, np.uint64)
    ta = frames["ta"]
    ok = ~_bad(frames) & ta.notna().to_numpy()
    return np.unique(ta.to_numpy(np.uint64, na_value=0)[ok])


def _plausible(frames, bad, known) -> np.ndarray:
    """Bad rows whose TA equals one of ``known`` (a station seen in good frames)."""
    if "ta" not in frames or not len(known):
        return np.zeros(len(frames), bool)
    ta = frames["ta"].to_numpy(np.uint64, na_value=0)
    return bad & frames["ta"].notna().to_numpy() & np.isin(ta, known)


def bad_fcs_counts(frames: "pd.DataFrame", known=None) -> "pd.DataFrame":
    """Reception quality per sniffer.

    Columns: ``sniffer``, ``frames``, ``fcs_checked`` (frames whose FCS status is known),
    ``fcs_bad``, ``fcs_bad_pct`` (of the checked ones), ``fcs_bad_known_ta`` (bad frames
    whose TA is a station seen in good frames: ``known``, default :func:`known_tas`).
    """
    import pandas as pd
    n = len(frames)
    snf = frames["sniffer"].to_numpy(np.int64) if "sniffer" in frames else np.zeros(n, np.int64)
    bad = _bad(frames)
    checked = frames["fcs_bad"].notna().to_numpy() if "fcs_bad" in frames else np.zeros(n, bool)
    plaus = _plausible(frames, bad, known_tas(frames) if known is None else np.asarray(known, np.uint64))
    s = np.unique(snf)
    idx = np.searchsorted(s, snf)
    count = lambda m: np.bincount(idx, weights=m, minlength=len(s)).astype(np.int64)   # noqa: E731
    out = pd.DataFrame({"sniffer": s, "frames": count(np.ones(n)), "fcs_checked": count(checked),
                        "fcs_bad": count(bad), "fcs_bad_known_ta": count(plaus)})
    with np.errstate(invalid="ignore", divide="ignore"):
        out["fcs_bad_pct"] = np.round(100.0 * out["fcs_bad"] / out["fcs_checked"].where(out["fcs_checked"] > 0), 2)
    return out


def bad_fcs_by_ta(frames: "pd.DataFrame", tas, known=None) -> np.ndarray:
    """Per address of ``tas``: bad-FCS frames that name it as transmitter (plausible TAs only)."""
    import pandas as pd
    tas = np.asarray(pd.array(tas, dtype="UInt64").fillna(0).to_numpy(np.uint64))
    bad = _bad(frames)
    plaus = _plausible(frames, bad, known_tas(frames) if known is None else np.asarray(known, np.uint64))
    if not plaus.any() or not len(tas):
        return np.zeros(len(tas), np.int64)
    u, c = np.unique(frames["ta"].to_numpy(np.uint64, na_value=0)[plaus], return_counts=True)
    pos = np.clip(np.searchsorted(u, tas), 0, len(u) - 1)
    return np.where(u[pos] == tas, c[pos], 0).astype(np.int64)


def with_fcs_bad(stations: "pd.DataFrame", frames: "pd.DataFrame") -> "pd.DataFrame":
    """``stations`` (a per-``ta`` table) with ``fcs_bad``: corrupt frames naming each station."""
    return stations.assign(fcs_bad=bad_fcs_by_ta(frames, stations["ta"]) if len(stations) else
                           np.zeros(0, np.int64))


__all__ += ["with_fcs_bad"]


def reception_rows(frames) -> list:
    """:func:`bad_fcs_counts` as JSON-able records (the summaries and the report)."""
    t = bad_fcs_counts(frames)
    pct = [None if p != p else float(p) for p in t["fcs_bad_pct"].tolist()]
    ints = ("sniffer", "frames", "fcs_checked", "fcs_bad", "fcs_bad_known_ta")
    return [dict({k: int(t[k].iat[i]) for k in ints}, fcs_bad_pct=pct[i]) for i in range(len(t))]


__all__ += ["reception_rows"]
