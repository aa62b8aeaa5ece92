"""Merging sniffers without TSFT (or with TSFT on some frames only), issue 18.

Inputs: the three ns-3 hidden-node sniffers, which share one true clock (ns-3's: pcap
stamp == TSFT == the PPDU's end), degraded as pcap bytes by ``degrade.py``: A as it is
(the reference), C's clock skewed (+25 ppm, +3 s), B -18 ppm, +7.2 s, its radiotap TSFT
stripped and its host stamps jittered by 20 µs (sd). Oracles, none of them our code:
- distinct transmissions = the merge of the un-degraded captures (TSFT at 1 µs, the
  floor tested in test_merge.py against a slow content + true-time oracle);
- each frame's true time = the original capture's own TSFT (ns-3's clock, which is the
  reference A's clock, so its epoch: A's stamps are its TSFT);
- tshark dissects the stripped file cleanly (fixture ``tests/data/tshark_degrade``).
"""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from degrade import degrade, read_records, tsft_us
from sniffsync.cli.main import main
from sniffsync.sync.merge import merge

CAPS = Path(__file__).parents[1] / "data" / "captures"
HIDDEN = [CAPS / f"ns3-11n-ht20-hidden-sniffer{x}.pcap" for x in ("A-nearAP", "B-nearSTA1", "C-nearSTA2")]
FIXTURE = Path(__file__).parents[1] / "data" / "tshark_degrade" / "B_stripped.tsv"
TSHARK_FIELDS = ("radiotap.present.tsft", "radiotap.length", "wlan.fc.type_subtype", "wlan.seq",
                 "radiotap.dbm_antsignal", "wlan_radio.frequency")
B_HOST = dict(ppm=-18, offset_ns=7_200_000_000, jitter_us=20, seed=3)
tshark = pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")


def _set(tmp, strip):
    a = degrade(HIDDEN[0], tmp / "A.pcap")
    b = degrade(HIDDEN[1], tmp / "B.pcap", strip=strip, **B_HOST)
    c = degrade(HIDDEN[2], tmp / "C.pcap", ppm=25, offset_ns=3_000_000_000)
    return [a, b, c]


COLS = ["type"]        # what the merge needs, and detect's "type"


@pytest.fixture(scope="module")
def clean():
    return merge(HIDDEN, columns=COLS)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return _set(tmp_path_factory.mktemp("no_tsft"), 1.0)


@pytest.fixture(scope="module")
def merged(files):
    return merge(files, columns=COLS)


@pytest.fixture(scope="module")
def truth_ns():
    """Per sniffer, per record: the original TSFT (ns-3's clock), in ns."""
    return [tsft_us(read_records(p)) * 1000 for p in HIDDEN]


def _transmissions(m):
    """Frozen sets of (sniffer, frame) per merged transmission, from a keep-duplicates merge."""
    f = m.frames
    key = pd.Series(list(zip(f.sniffer.tolist(), f.frame.tolist())))
    return set(key.groupby(f.merged_id.to_numpy()).agg(frozenset))


def _errors(m, truth_ns):
    f = m.frames
    sn, fr = f.sniffer.to_numpy(np.int64), f.frame.to_numpy(np.int64) - 1
    true = np.zeros(len(f), np.int64)
    for s, t in enumerate(truth_ns):
        true[sn == s] = t[fr[sn == s]]
    return np.abs(f.ts_ns.to_numpy(np.int64) - true), f.ts_err_ns.to_numpy(np.int64, na_value=-1), \
        f.ts_src.astype(str).to_numpy()


def test_degraded_b_is_a_clean_radiotap_capture_for_tshark(files):
    """Our reader on the stripped B agrees with tshark's dissection (stored fixture)."""
    from sniffsync import read_capture
    want = [line.split("\t") for line in FIXTURE.read_text().splitlines()]
    t = read_capture(files[1])
    assert len(want) == len(t) == 2947
    assert {w[0] for w in want} == {"0"}                  # TSFT present bit cleared everywhere
    assert t.tsft_us.isna().all()
    assert [int(w[1]) for w in want] == t.rt_len.astype(int).tolist()
    assert [int(w[2], 0) for w in want] == t.type_subtype.astype(int).tolist()
    assert [int(w[4]) for w in want] == t.signal_dbm.astype(int).tolist()
    assert {int(w[5]) for w in want} == set(t.freq_mhz.astype(int))
    orig = read_capture(HIDDEN[1])
    assert (orig.rt_len.astype(int) - t.rt_len.astype(int) == 8).all()
    assert orig.mpdu_len.equals(t.mpdu_len) and orig.seq.equals(t.seq) and orig.ta.equals(t.ta)


@tshark
def test_tshark_fixture_is_current(files):
    out = subprocess.run(["tshark", "-r", str(files[1]), "-T", "fields", "-E", "occurrence=f",
                          *sum((["-e", f] for f in TSHARK_FIELDS), [])],
                         capture_output=True, text=True, check=True).stdout
    assert out == FIXTURE.read_text()


def test_frames_out_equal_the_distinct_transmissions(clean, merged, files):
    """Before the fix: 5572 frames out (B's copies never matched: its radiotap header,
    8 bytes shorter, was part of the content key). Now the clean merge's 3660."""
    t = merged.report["totals"]
    assert len(merged.frames) == len(clean.frames) == 3660
    assert t["frames_in"] == 8116 and t["frames_in"] == t["frames_out"] + t["duplicates_removed"]
    assert t["conserved"] and t["gate_us"] <= 3.0          # the TSFT gate stays tight
    both = [merge(p, columns=[], keep_duplicates=True) for p in (HIDDEN, files)]
    assert _transmissions(both[0]) == _transmissions(both[1])   # the same copies, exactly


def test_every_frame_b_alone_heard_is_within_its_error_bound(merged, truth_ns):
    err, bound, src = _errors(merged, truth_ns)
    f = merged.frames
    alone = (f.sniffer.to_numpy() == 1) & (f.n_heard.to_numpy() == 1)
    assert alone.sum() > 300
    assert (err[alone] <= bound[alone]).mean() >= 0.99
    assert (err <= bound).mean() >= 0.99                   # and every merged frame
    for name, p99_us in (("tsft", 1.0), ("protocol", 1.0), ("host", 60.0)):
        k = src == name
        assert k.sum() > 50 and np.percentile(err[k], 99) <= p99_us * 1000, name
    assert np.median(bound[src == "host"]) > 10 * np.median(bound[src == "protocol"])


def test_provenance_per_sniffer(merged, clean):
    rep = {s["name"]: s for s in merged.report["sniffers"]}
    a, b, c = (rep[n]["ts_src"] for n in ("A", "B", "C"))
    assert a == {"tsft": 3097, "other_sniffer": 0, "protocol": 0, "host": 0}
    assert c["tsft"] == 2072
    assert b["tsft"] == 0 and sum(b.values()) == 2947
    assert b["other_sniffer"] > 2000 and b["protocol"] > 100 and 0 < b["host"] < 300
    assert sum(merged.report["totals"]["ts_src"].values()) == 3660
    assert clean.report["totals"]["ts_src"]["tsft"] == 3660
    host_model = rep["B"]["model"][0]
    assert host_model["clock"] == "capture" and 20 <= host_model["ts_err_us"] <= 100
    # the clocks against the skews degrade.py applied (C: TSFT +25 ppm; B: host -18 ppm)
    assert abs(rep["C"]["model"][0]["drift_ppm"] + 25) < 0.25     # end-to-end slope of a piecewise fit
    assert abs(host_model["drift_ppm"] - 18) < 3


def test_partial_tsft(tmp_path, clean, truth_ns):
    """B keeps TSFT on half its frames: two clocks (TSFT, host), the same transmissions."""
    m = merge(_set(tmp_path, 0.5), columns=[])
    assert len(m.frames) == len(clean.frames)
    b = next(s for s in m.report["sniffers"] if s["name"] == "B")
    assert b["ts_src"]["tsft"] > 1000 and b["ts_src"]["other_sniffer"] > 500
    assert {seg["clock"] for seg in b["model"]} == {"tsft", "capture"}
    err, bound, _ = _errors(m, truth_ns)
    assert (err <= bound).mean() >= 0.99


def test_cli_merge_on_degraded_pcaps(files, merged, tmp_path, capsys):
    from sniffsync.sync.mergedfile import read_merged
    out, rep = tmp_path / "m.pcapng", tmp_path / "r.json"
    assert main(["merge", *map(str, files), "-o", str(out), "--report", str(rep), "-q"]) == 0
    r = json.loads(rep.read_text())
    assert r["totals"]["frames_out"] == 3660 and r["totals"]["ts_src"] == merged.report["totals"]["ts_src"]
    back = read_merged(out).frames
    assert back.ts_src.astype(str).tolist() == merged.frames.ts_src.astype(str).tolist()
    assert back.ts_err_ns.tolist() == merged.frames.ts_err_ns.tolist()


def test_detect_on_the_degraded_merge(merged, clean):
    """The events detect finds on the merged degraded set against the clean set: the
    same but for a few RTS that only B heard (STA1's, unanswered: no protocol timing
    places them), kept on B's host clock (error bound ~60 µs) where detect's overlap
    tolerance is 2 µs: 116 RTS/CTS collisions instead of 119, 211 overlaps instead of
    213, 121 unanswered RTS instead of 122; the other kinds identical."""
    from airtime.detect import detect
    from airtime.ppdu import group_ppdus
    counts = []
    for m in (clean, merged):
        g = group_ppdus(m.frames, stamps="end")
        ev = detect(m.frames, g.ppdus, g.frame_ppdu).events
        counts.append(ev["kind"].astype(str).value_counts().to_dict())
    host_timed = {"rts_cts_collision", "overlap", "rts_unanswered"}
    assert set(counts[0]) == set(counts[1]) and host_timed <= set(counts[0])
    for k, n in counts[0].items():
        assert counts[1][k] == n if k not in host_timed else 0 <= n - counts[1][k] <= 0.03 * n, k


def test_vht80_replicated_into_two_sniffers(tmp_path):
    """The issue's VHT80 case: one capture as two sniffers, one without TSFT:
    24,090 frames out before, now the capture's own 12,045."""
    src = CAPS / "ns3-11ac-vht80-snifferA-s256.pcap"
    files = [degrade(src, tmp_path / "a.pcap"),
             degrade(src, tmp_path / "c.pcap", ppm=-18, offset_ns=5_000_000_000, strip=1.0,
                     jitter_us=20, seed=5)]
    m = merge(files, columns=[])
    assert len(m.frames) == 12045
    c = m.report["sniffers"][1]["ts_src"]
    assert c["tsft"] == 0 and c["other_sniffer"] == 12045


def test_every_sniffer_without_tsft(tmp_path):
    """No TSFT anywhere (the reference is a host clock too): still the clean transmissions."""
    a = degrade(HIDDEN[0], tmp_path / "a.pcap", strip=1.0, jitter_us=20, seed=8)
    b = degrade(HIDDEN[1], tmp_path / "b.pcap", strip=1.0, jitter_us=20, seed=9, ppm=10,
                offset_ns=1_000_000_000)
    m = merge([a, b], columns=[])
    assert len(m.frames) == len(merge(HIDDEN[:2], columns=[]).frames) == 3500
    assert m.report["totals"]["ts_src"]["host"] == 3500


def test_streamed_merge_of_a_host_clock_sniffer_equals_the_one_pass_file(files, tmp_path):
    """`merge --window-s` (two streamed passes, copies matched and re-timed per window)
    gives the one-pass file byte for byte when one sniffer has only its host clock: the
    host clock's wide copy gate, the re-timing and the provenance report are per window."""
    from sniffsync.sync.pcapng import write_merged
    from sniffsync.sync.stream import merge_to_file
    whole = merge(files)
    write_merged(tmp_path / "whole.pcapng", whole)
    report = merge_to_file(files, tmp_path / "streamed.pcapng", window_s=0.5, batch_rows=2048)
    assert report["totals"]["frames_out"] == whole.report["totals"]["frames_out"]
    assert report["totals"]["ts_src"] == whole.report["totals"]["ts_src"]
    assert report["totals"]["ts_src"]["protocol"] > 0 and report["totals"]["ts_src"]["host"] > 0
    assert (tmp_path / "streamed.pcapng").read_bytes() == (tmp_path / "whole.pcapng").read_bytes()
