"""detect's per-10 s histograms cost what their bars cost, not what a wild stamp's span would."""
from pathlib import Path

from airtime.detect import detect
from airtime.ppdu import group_ppdus
from airtime.summary import MAX_SUMMARY_BINS, bin_for_span, detect_summary
from sniffsync.decode.frames import read_capture

LATE = Path(__file__).parents[1] / "data" / "crashes" / "fair-MemoryError-one-timestamp-30-years-later.pcap"


def test_thirty_years_late_frame_widens_the_bins():
    # 21 frames, one 30 years late: 95M bins of 10 s before (41 s), a bounded count now
    f = read_capture(str(LATE))
    g = group_ppdus(f)
    s = detect_summary(g.ppdus, detect(f, g.ppdus, g.frame_ppdu))
    assert len(s["failed_per_bin"]["x"]) <= MAX_SUMMARY_BINS and s["bin_s"] == 21_600


def test_ladder_keeps_ten_seconds_while_it_fits():
    assert bin_for_span(3600 * 10**9, 120) == 60 * 10**9
    assert bin_for_span(600 * 10**9, MAX_SUMMARY_BINS) == 10 * 10**9
