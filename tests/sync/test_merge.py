"""Merging copies across sniffers, the merged pcapng (checked with tshark) and the CLI's errors.

Truth of duplicates: a slow oracle over the skewed tables: same content tuple and true
TSFT (the shared ns-3 clock) within 1 µs (ns-3 sniffers round the same PPDU end to
adjacent µs). Targets: precision and recall >= 99.9 %, zero frames lost.
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sniffsync.cli.main import main
from sniffsync.errors import UsageError
from sniffsync.sync.copies import MERGE_KEY
from sniffsync.sync.merge import merge, write_merged
from pcapng_walk import slow_epbs
from skew import skew

CAPS = Path(__file__).parents[1] / "data" / "captures"
HIDDEN = [CAPS / f"ns3-11n-ht20-hidden-sniffer{x}.pcap" for x in ("A-nearAP", "B-nearSTA1", "C-nearSTA2")]
SPEC = [dict(jitter_us=0.3, drop=0.02, seed=1),
        dict(offset_us=3_600_000_000, ppm=50, jitter_us=0.3, drop=0.02, seed=2),
        dict(offset_us=-7_200_000_000, ppm=-50, jitter_us=0.3, drop=0.02, seed=3)]
tshark = pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")


@pytest.fixture(scope="module")
def skewed():
    from sniffsync import read_capture
    out = []
    for i, (p, kw) in enumerate(zip(HIDDEN, SPEC)):
        t, truth = skew(read_capture(p, sniffer=i), **kw)
        out.append(t.assign(true_ns=truth))
    return out


def _truth_groups(df):
    """Slow oracle: sort by (content, true time); same content within 1 µs = one transmission."""
    keys = [tuple(None if pd.isna(v) else int(v) for v in row)
            for row in df[list(MERGE_KEY)].itertuples(index=False)]
    t = df["true_ns"].tolist()
    order = sorted(range(len(df)), key=lambda i: (str(keys[i]), t[i]))
    g, cur, prev = [0] * len(df), -1, None
    for i in order:
        if prev is None or keys[i] != keys[prev] or t[i] - t[prev] > 1000:
            cur += 1
        g[i], prev = cur, i
    return np.array(g)


def _pairs(labels):
    n = np.bincount(pd.factorize(pd.Series(labels))[0])
    return int((n * (n - 1) // 2).sum())


def test_duplicates_precision_recall_and_nothing_lost(skewed):
    copies = merge(skewed, keep_duplicates=True).frames
    assert len(copies) == sum(map(len, skewed))                   # every copy kept
    assert not copies.duplicated(["sniffer", "frame"]).any()
    truth = _truth_groups(copies)
    both = copies["merged_id"].astype(str) + "|" + pd.Series(truth).astype(str)
    tp, predicted, true = _pairs(both), _pairs(copies["merged_id"]), _pairs(truth)
    assert true > 4000
    assert tp / predicted >= 0.999 and tp / true >= 0.999
    m = merge(skewed)
    merged, t = m.frames, m.report["totals"]
    assert t["frames_in"] == t["frames_out"] + t["duplicates_removed"] == sum(map(len, skewed))
    assert t["frames_out"] == len(merged) == copies["merged_id"].nunique()
    # merged time = mean of the copies' common times: p99 error vs the true clock <= 2 µs
    err = np.abs(merged["ts_ns"] - merged["true_ns"]) / 1000
    assert np.median(err) <= 1.0 and np.quantile(err, 0.99) <= 2.0
    assert merged["ts_ns"].is_monotonic_increasing


def test_best_sniffer_is_the_strongest_and_bitmask_lists_every_copy(skewed):
    sig = {0: -50, 1: -40, 2: -60}
    tables = [t.assign(signal_dbm=pd.array(np.full(len(t), sig[i]), dtype="Int8")) for i, t in enumerate(skewed)]
    merged = merge(tables).frames
    copies = merge(tables, keep_duplicates=True).frames
    heard = copies.groupby("merged_id").sniffer.agg(lambda s: sum(1 << int(x) for x in s))
    assert (merged.set_index("merged_id").sniffers_heard == heard.loc[merged.merged_id].to_numpy()).all()
    mask = merged.sniffers_heard.to_numpy()
    want = np.where(mask & 2, 1, np.where(mask & 1, 0, 2))       # B > A > C
    assert (merged.best_sniffer.to_numpy() == want).all() and (merged.sniffer == merged.best_sniffer).all()
    assert (merged.loc[mask & 2 > 0, "signal_dbm_s1"] == -40).all()
    assert merged.loc[mask & 4 == 0, "signal_dbm_s2"].isna().all()


def test_retransmission_is_another_frame(skewed):
    copies = merge(skewed, keep_duplicates=True).frames
    retry = copies[copies.retry.fillna(False).astype(bool)]
    assert len(retry) > 0
    # a retried copy never shares its merged frame with a non-retried one
    by = copies.groupby("merged_id").retry.agg(lambda s: s.fillna(False).astype(bool).nunique())
    assert (by == 1).all()


@tshark
def test_merged_pcapng_opens_in_tshark(tmp_path):
    out = tmp_path / "m.pcapng"
    m = merge([str(p) for p in HIDDEN])
    merged, rep = m.frames, m.report
    write_merged(out, m)
    f = subprocess.run(["tshark", "-r", str(out), "-T", "fields", "-e", "frame.interface_name",
                        "-e", "frame.comment", "-e", "frame.len", "-e", "wlan.seq"],
                       capture_output=True, text=True, check=True).stdout.splitlines()
    assert len(f) == len(merged) == rep["totals"]["frames_out"]
    rows = [line.split("\t") for line in f]
    names = [p.stem for p in HIDDEN]
    assert [r[0] for r in rows] == [names[s] for s in merged.sniffer]
    assert [int(r[2]) for r in rows] == merged.wirelen.tolist()
    n_in_comment = [r[1].count(" dBm)") for r in rows]
    assert n_in_comment == merged.n_heard.tolist()
    assert all(r[1].startswith("heard by: ") for r in rows)
    # a frame heard by all three names all three, with the signal of each
    i = int(np.flatnonzero(merged.n_heard.to_numpy() == 3)[0])
    assert rows[i][1] == "heard by: " + " ".join(f"{n}(16 dBm)" for n in names)


@tshark
def test_keep_duplicates_writes_each_copy_on_its_own_interface(tmp_path):
    out = tmp_path / "d.pcapng"
    assert main(["merge", *map(str, HIDDEN), "--keep-duplicates", "-o", str(out), "-q"]) == 0
    f = subprocess.run(["tshark", "-r", str(out), "-T", "fields", "-e", "frame.interface_name"],
                       capture_output=True, text=True, check=True).stdout.split()
    counts = pd.Series(f).value_counts()
    for p in HIDDEN:                         # tshark's own count of each input
        n = len(subprocess.run(["tshark", "-r", str(p), "-T", "fields", "-e", "frame.number"],
                               capture_output=True, text=True, check=True).stdout.split())
        assert counts[p.stem] == n


def test_cli_summary_report_and_conservation_line(tmp_path, capsys):
    import json
    rep = tmp_path / "sync.json"
    assert main(["merge", *map(str, HIDDEN), "--report", str(rep)]) == 0
    err = capsys.readouterr().err
    r = json.loads(rep.read_text())
    t = r["totals"]
    assert f"frames in {t['frames_in']} = frames out {t['frames_out']} + duplicates removed {t['duplicates_removed']}" in err
    assert t["frames_in"] == 3097 + 2947 + 2072                  # MANIFEST.md counts
    for s in r["sniffers"]:
        # B and C share ~9 beacons with A; every 5th anchor cluster (by content-key order,
        # so by the key's hash) is held out of the fit and not counted here
        assert s["synced"] and s["anchors"]["beacon"] >= 6
        assert s["heldout"]["n"] > 50 and s["heldout"]["abs_residual_us_p50_p95_p99"][2] < 2.0


@pytest.mark.parametrize("case", ["twice", "ethernet", "linktype", "empty", "unwritable"])
def test_bad_input_one_clear_message_no_output(tmp_path, capsys, case):
    a, b = map(str, HIDDEN[:2])
    out = tmp_path / "out.pcapng"
    args = {"twice": [a, a], "empty": [a, str(tmp_path / "empty.pcap")],
            "ethernet": [a, b, "ETH"], "linktype": [a, "LT105"], "unwritable": [a, b]}[case]
    (tmp_path / "empty.pcap").write_bytes(b"")
    if "ETH" in args or "LT105" in args:
        from sniffsync.io.capture import read_records
        from sniffsync.io.writers import write_pcap
        rec = read_records(HIDDEN[0])
        idx = np.arange(len(rec.data_off))
        off = np.r_[0, np.cumsum(rec.caplen.astype(np.int64))]
        data = np.concatenate([rec.buf[o:o + c] for o, c in zip(rec.data_off[idx], rec.caplen[idx])])
        lt = 1 if "ETH" in args else 105
        p = tmp_path / f"lt{lt}.pcap"
        write_pcap(p, lt, rec.ts_ns, data, off)
        args = [str(p) if x in ("ETH", "LT105") else x for x in args]
    target = "/proc/nonexistent/out.pcapng" if case == "unwritable" else str(out)
    code = main(["merge", *args, "-o", target, "-q"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0
    assert len(err) == 1 and err[0].startswith("sniffsync: error: ") and "Traceback" not in err[0]
    assert {"twice": "given twice", "empty": "empty", "ethernet": "not an 802.11",
            "linktype": "link type", "unwritable": "does not exist"}[case] in err[0]
    assert not out.exists() and not list(tmp_path.glob("*.pcapng*"))


# --- the streamed pcapng writer and the narrow decode of the CLI ------------------------

def _slow_comment(mask, sig, names):
    """Oracle of the "heard by" text: a plain loop over the sniffers of one frame."""
    parts = []
    for s, name in enumerate(names):
        if mask >> s & 1:
            parts.append(f"{name}({'?' if sig[s] is None else sig[s]} dBm)")
    return " ".join(parts)


def test_heard_by_matches_a_plain_loop():
    from sniffsync.sync.pcapng import heard_by
    rng = np.random.default_rng(0)
    n, names = 2000, ["A", "bee", "C3"]
    mask = rng.integers(1, 8, n)
    sig = {s: pd.array(np.where(rng.random(n) < 0.1, None, rng.integers(-95, -20, n)), dtype="Int8")
           for s in range(3)}
    inv, texts = heard_by(mask, sig, names)
    got = [texts[i] for i in inv]
    want = [_slow_comment(int(m), [None if pd.isna(sig[s][i]) else int(sig[s][i]) for s in range(3)], names)
            for i, m in enumerate(mask)]
    assert got == want
    inv, texts = heard_by(np.array([5]), {}, names)
    assert [texts[i] for i in inv] == ["A C3"]                       # no signal columns: names


def test_streamed_pcapng_is_byte_identical_to_the_generic_writer(tmp_path):
    """write_merged streams EPBs in chunks; the reference is writers.write_pcapng (checked
    against tshark in test_writers.py) fed with bytes gathered by a per-packet slice loop."""
    from sniffsync.io.writers import write_pcapng
    m = merge([str(p) for p in HIDDEN], columns=[])
    merged = m.frames
    merged["signal_dbm_s1"] = merged["signal_dbm_s1"].mask(merged.index % 7 == 0)   # some "?"
    got = tmp_path / "got.pcapng"
    assert write_merged(got, m, chunk_bytes=50_000) == len(merged)     # dozens of chunks
    recs, names = m.records, m.sniffers
    pkts, comments = [], []
    for row in merged.itertuples(index=False):
        r = recs[row.sniffer]
        o, c = int(r.data_off[row.frame - 1]), int(r.caplen[row.frame - 1])
        pkts.append(bytes(r.buf[o:o + c]))
        sig = [None if pd.isna(getattr(row, f"signal_dbm_s{s}")) else int(getattr(row, f"signal_dbm_s{s}"))
               for s in range(3)]
        comments.append("heard by: " + _slow_comment(int(row.sniffers_heard), sig, names))
    off = np.r_[0, np.cumsum([len(p) for p in pkts])]
    want = tmp_path / "want.pcapng"
    write_pcapng(want, [{"name": n, "linktype": 127} for n in names], merged["sniffer"].to_numpy(),
                 merged["ts_ns"].to_numpy(), np.frombuffer(b"".join(pkts), np.uint8), off,
                 wirelen=merged["wirelen"].to_numpy(), comments=comments)
    g_epbs, w_epbs = slow_epbs(got.read_bytes()), slow_epbs(want.read_bytes())
    # the same packets, stamps, interfaces and comments; ours adds the merge's option first
    assert [e[:4] + (e[4].get(1),) for e in g_epbs] == [e[:4] + (e[4].get(1),) for e in w_epbs]
    assert all(19373 not in e[4] for e in w_epbs)
    assert "?" in "".join(comments)


def test_narrow_decode_merges_exactly_like_the_full_table(tmp_path):
    """merge(columns=[...]) decodes less, merge(keep=WRITTEN_COLUMNS) keeps only what the
    file needs (the CLI's table): the same report, rows and written file as the full table."""
    from sniffsync.sync.merge import WRITTEN_COLUMNS
    full_m = merge([str(p) for p in HIDDEN])
    narrow_m = merge([str(p) for p in HIDDEN], columns=["ssid"])
    written_m = merge([str(p) for p in HIDDEN], columns=[], keep=WRITTEN_COLUMNS)
    assert narrow_m.report == full_m.report == written_m.report
    full, narrow, written = full_m.frames, narrow_m.frames, written_m.frames
    assert len(narrow.columns) < len(full.columns) - 20 and "ssid" in narrow and "tcp_seq" not in narrow
    assert "ampdu_ref" in narrow                         # what group_ppdus reads stays
    own = ["merged_id", "sniffers_heard", "n_heard", "best_sniffer", "unsynced", "signal_dbm_s0",
           "signal_dbm_s1", "signal_dbm_s2", "ts_err_ns", "ts_src"]
    assert sorted(written.columns) == sorted([*WRITTEN_COLUMNS, *own])
    for c in narrow.columns:
        assert narrow[c].equals(full[c]), c
    for c in written.columns:
        assert written[c].equals(full[c]), c
    with pytest.raises(UsageError, match="keep: no column ssid in the inputs"):
        merge([str(p) for p in HIDDEN], columns=[], keep=[*WRITTEN_COLUMNS, "ssid"])
    write_merged(tmp_path / "narrow.pcapng", written_m)
    write_merged(tmp_path / "full.pcapng", full_m)
    assert (tmp_path / "narrow.pcapng").read_bytes() == (tmp_path / "full.pcapng").read_bytes()


def test_candidates_found_per_input_equal_those_of_the_joined_table(skewed):
    """merge() finds each input's anchor candidates while the next is read; joined, they
    are exactly (rows, kinds, keys, in order) those of the concatenated table."""
    from sniffsync.sync.anchors import anchor_candidates, join_candidates
    from sniffsync.sync.tables import concat_columns, str_categories
    anchors = ("beacon", "ba", "unique")
    tables = [t.drop(columns="true_ns").assign(sniffer=np.int16(s)) for s, t in enumerate(skewed)]
    parts = [anchor_candidates(t, anchors) for t in tables]
    got = join_candidates(parts, [len(t) for t in tables])
    want = anchor_candidates(concat_columns([str_categories(t.copy()) for t in tables]), anchors)
    assert all(g.dtype == w.dtype and np.array_equal(g, w) for g, w in zip(got, want))
    assert len(np.unique(got[1])) == 3 and len(got[0]) > 1000


def test_fit_inputs_found_per_input_equal_those_of_the_joined_table(skewed):
    """merge() finds each input's clocks, anchor candidates and copies' key (with their
    sorts) while the next is read (sync/perinput.py); joined, they equal what
    local_clocks, sync_candidates and the key sort give on the concatenated table --
    here with TSF segments (a jump) and frames without TSFT mixed in."""
    from sniffsync.sync.anchors import hash_key, key_order
    from sniffsync.sync.clock import local_clocks, sync_candidates
    from sniffsync.sync.perinput import input_part, join_key, join_parts
    from sniffsync.sync.tables import concat_columns, str_categories
    anchors = ("beacon", "ba", "unique")
    tables = [t.drop(columns="true_ns").assign(sniffer=np.int16(s)) for s, t in enumerate(skewed)]
    n1, n2 = len(tables[1]), len(tables[2])
    tsft = tables[1]["tsft_us"].copy()
    tsft[np.random.default_rng(5).random(n1) < 0.3] = pd.NA      # host-stamped frames mixed in
    tables[1]["tsft_us"] = tsft
    tables[2]["tsft_us"] = tables[2]["tsft_us"] + np.where(np.arange(n2) >= n2 // 2, 10**9, 0)   # a TSF jump
    for sort in (True, False):
        parts = [input_part(t, anchors, sort) for t in tables]
        clocks, cand, keys = join_parts(parts)
        key, by_key = join_key(*keys)
        df = concat_columns([str_categories(t.copy()) for t in tables])
        want = local_clocks(df)
        assert np.array_equal(clocks[0], want[0]) and np.array_equal(clocks[1], want[1])
        pd.testing.assert_frame_equal(clocks[2], want[2])
        assert len(want[2]) == 5                                  # A; B TSFT + host; C two segments
        for g, w in zip(cand, sync_candidates(df, anchors)):
            g, w = (g, w) if isinstance(g, np.ndarray) else (np.concatenate(g), np.concatenate(w))
            assert g.dtype == w.dtype and np.array_equal(g, w)
        want_key = hash_key(df, MERGE_KEY)
        assert np.array_equal(key, want_key)
        assert (by_key is None) == (not sort)
        if sort:
            assert all(np.array_equal(g, w) for g, w in zip(by_key, key_order(want_key)))
            assert (np.diff(by_key[1]) == 0).sum() > 1000          # keys shared across inputs: ties


def test_a_host_clock_without_response_frames(tmp_path):
    """A sniffer without TSFT (a host clock: a wide copy gate) whose frames hold no ACK/CTS,
    here the reference (one RTS), beside one it cannot sync: the host clock's frames are
    attached with no response rows to place (the empty part raised IndexError). Every frame
    stays its own transmission, the other sniffer's flagged unsynced, and all are written."""
    from sniffsync.io.capture import read_records
    crash = Path(__file__).parents[1] / "data" / "crashes" / "detect-IndexError-only-rts.pcap"
    m = merge([str(crash), str(HIDDEN[1])], allow_unsynced=True)
    f = m.frames
    assert (f["sniffer"] == 0).sum() == len(read_records(crash).data_off) > 0
    assert (f["sniffer"] == 1).sum() == len(read_records(HIDDEN[1]).data_off)
    assert f.loc[f["sniffer"] == 1, "unsynced"].all() and (f["n_heard"] == 1).all()
    assert m.report["sniffers"][0]["model"][0]["clock"] == "capture"
    assert write_merged(tmp_path / "m.pcapng", m) == len(f)
