"""The server's fast paths against the direct computations they replace, on a small run.

Tiles: one keyed search over every lane (and over a compact copy of the range's window) ==
per-lane searches == brute force. Counter tracks: the packed series == each series searched
on its own == loops over the samples. Encoding: pre-encoded columns (``Texts``/``Raw``) and
numpy columns == the plain values; the bytes the server sends == the standard library's
encoding of the plain answers (the public API, which the oracle tests check).
"""
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

import viz.jsonable as jsonable
import viz.keyed as keyed
import viz.tiles as tiles_mod
from viz.jsonable import Raw, Texts, dumpb, plain
from viz.laneranks import LaneRanks
from viz.tiles import build_index, ends, tile
from viz.tracks import TrackIndex
from web import create_app

BENCH = Path(__file__).resolve().parents[2] / "bench" / "bench_tiles.py"
_spec = importlib.util.spec_from_file_location("bench_tiles", BENCH)
bench_tiles = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_tiles)


@pytest.fixture(scope="module")
def small():
    """3,000 PPDUs over 3 s, 5 stations, 3 flows (goodput windows, RTT samples), events."""
    return bench_tiles.synth_run(3000, n_sta=5, span_s=3, n_flows=3)


def _ranges(span, k, seed):
    rng = np.random.default_rng(seed)
    for _ in range(k):
        w = int(np.exp(rng.uniform(np.log(2_000), np.log(span * 1.3))))
        t0 = int(rng.integers(-w // 4, span))
        yield t0, t0 + w, int(rng.integers(1, 700))


@pytest.mark.parametrize("how", ["ranks", "keys", "keys in a copy"])
@pytest.mark.parametrize("lanes", ["station", "sniffer"])
def test_tiles_one_search_equal_per_lane_search(small, monkeypatch, lanes, how):
    if how == "keys in a copy":
        monkeypatch.setattr(keyed, "SMALL", 0)         # always search a copy of the window
    if how != "ranks":                                 # as with more lanes than MAX_LANES
        monkeypatch.setattr(tiles_mod, "MAX_LANES", 0)
    idx = build_index(small.ppdus, small.events, lanes=lanes, n_sniffers=3, names="ABC")
    assert (idx.ranks is not None) == (how == "ranks")
    per_lane = idx._replace(stride=0, start_key=None, end_key=None, ranks=None,
                            end_sorted=np.concatenate([ends(idx, k) for k in range(len(idx.lanes))]))
    span = idx.t1_ns - idx.t0_ns
    modes = set()
    for t0, t1, px in _ranges(span, 40, 1):
        for most in (None, 0):
            a = tile(idx, t0, t1, px, most)
            assert a == tile(per_lane, t0, t1, px, most)
            modes.add(a["mode"])
    assert modes == {"items", "buckets"}


def test_lane_ranks_equal_a_search_per_lane():
    """Ties, empty lanes, times before the first and after the last item, unsorted queries."""
    rng = np.random.default_rng(4)
    t = rng.integers(0, 300, 2_000)
    lane = rng.choice([0, 1, 3, 4], 2_000)                 # lane 2 is empty
    r = LaneRanks(t, lane, 5)
    q = np.concatenate([[-5, 0, 299, 300, 10**12], rng.integers(-10, 320, 400)])
    want = np.array([np.searchsorted(np.sort(t[lane == k]), q) for k in range(5)])
    assert (r.rank(q) == want).all()
    assert (LaneRanks(t[:0], lane[:0], 2).rank(q) == 0).all()


def test_tile_counts_and_busy_in_a_narrow_window_by_brute_force(small, monkeypatch):
    monkeypatch.setattr(keyed, "SMALL", 0)
    p = small.ppdus
    idx = build_index(p, small.events)
    t0, t1, px = 1_000_000_000, 1_050_000_000, 50
    t = tile(idx, t0, t1, px, max_items=0)
    edges = np.array(t["edges_ns"])
    who = p["ta"].fillna(p["ra"]).to_numpy(np.uint64)
    for lane, label in enumerate(idx.lanes):
        sel = p[who == int(label.replace(":", ""), 16)]
        count, busy = np.zeros(px, int), np.zeros(px, np.int64)
        for s, e in zip(sel.start_ns - idx.t0_ns, sel.end_ns - idx.t0_ns):
            if s < t1 and e > t0:
                count[0 if s < t0 else int(np.searchsorted(edges, s, side="right")) - 1] += 1
            busy += np.clip(np.minimum(e, edges[1:]) - np.maximum(s, edges[:-1]), 0, None)
        assert t["count"][lane] == count.tolist() and t["busy_ns"][lane] == busy.tolist()


@pytest.mark.parametrize("copy", [False, True])
def test_tracks_packed_equal_each_series_alone(small, monkeypatch, copy):
    if copy:
        monkeypatch.setattr(keyed, "SMALL", 0)
    packed, alone = TrackIndex(small), TrackIndex(small)
    alone._keys = None                                  # per series: _Series.mean / step / counts
    span = int(small.ppdus["end_ns"].max() - small.ppdus["start_ns"].min())
    for t0, t1, n in _ranges(span, 30, 2):
        assert packed.tracks(t0, t1, n) == alone.tracks(t0, t1, n)


def test_tracks_by_loops_over_the_samples(small):
    """RTT (mean of the samples starting in a bucket), Jain (step: else the window in force)
    and failed MPDUs (count), per bucket, by loops over the run's tables."""
    base = int(small.ppdus["start_ns"].min())
    t0, t1, n = 200_000_000, 2_300_000_000, 37
    d = {t["id"]: t for t in TrackIndex(small).tracks(t0, t1, n)["tracks"]}
    edges = np.linspace(t0, t1, n + 1).round().astype(np.int64)
    rtt = small.fairness.rtt
    r0 = rtt[rtt["fd"] == rtt["fd"].min()]
    jain = small.fairness.jain
    ev = small.events
    failed = (ev.loc[ev["kind"].astype(str) == "mpdu_failed", "start_ns"] - base).to_numpy()
    for i in range(n):
        a, b = edges[i], edges[i + 1]
        v = [x / 1e6 for t, x in zip(r0["ts_ns"] - base, r0["rtt_ns"]) if a <= t < b]
        got = d["rtt"]["series"][0]["y"][i]
        assert (got is None) if not v else got == pytest.approx(sum(v) / len(v), abs=1e-3)
        w = [x for t, x in zip(jain["start_ns"] - base, jain["jain"]) if a <= t < b]
        held = [x for t, x in zip(jain["start_ns"] - base, jain["jain"]) if t <= a]
        want = sum(w) / len(w) if w else (held[-1] if held else None)
        got = d["jain"]["series"][0]["y"][i]
        assert (got is None) if want is None else got == pytest.approx(want, abs=1e-3)
        assert d["failed"]["series"][0]["y"][i] == sum(1 for t in failed if a <= t < b)


@pytest.mark.parametrize("encoder", ["orjson", "json"])
def test_texts_select_equals_encoding_the_selection(monkeypatch, encoder):
    if encoder == "json":
        monkeypatch.setattr(jsonable, "orjson", None)
    elif jsonable.orjson is None:
        pytest.skip("orjson not installed")
    rng = np.random.default_rng(3)
    f = np.round(rng.random(500) * 10 ** rng.integers(0, 6, 500), 3)
    f[::7] = np.nan
    for values in (f, rng.integers(-10**12, 10**12, 500), np.zeros(0)):
        tx = Texts(values)
        for pos in (slice(0, 0), slice(3, 4), slice(10, 400), slice(0, len(values)),
                    np.sort(rng.choice(len(values), min(len(values), 60), replace=False)) if len(values) else []):
            got = tx.select(pos).data
            assert got == dumpb(values[pos])
            assert json.loads(got) == plain(values[pos])


def test_raw_spliced_in_place_with_either_encoder(monkeypatch):
    obj = {"b": Raw(b"[1,2.5,null]"), "a": np.array([1.5, np.nan, 3.0]), "c": [{"z": Raw(b"7"), "y": "→"}]}
    want = '{"a":[1.5,null,3.0],"b":[1,2.5,null],"c":[{"y":"→","z":7}]}'.encode()
    if jsonable.orjson is not None:
        assert dumpb(obj) == want
    monkeypatch.setattr(jsonable, "orjson", None)
    assert dumpb(obj, ensure_ascii=False) == want
    assert plain(obj) == {"a": [1.5, None, 3.0], "b": [1, 2.5, None], "c": [{"z": 7, "y": "→"}]}


def test_server_sends_the_plain_answers(small):
    """Tiles, tracks and analyses of ranges (with filters): the HTTP body equals the standard
    library's encoding of what the public API (plain lists) answers."""
    view = bench_tiles.synth_view(small)
    c = create_app(view).test_client()
    span = view.meta()["span_ns"]
    enc = lambda d: json.dumps(d, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()  # noqa: E731
    sta = view.meta()["lanes"]["station"][1]
    checks = []
    for t0, t1, px in _ranges(span, 8, 4):
        t0, t1 = max(t0, 0), min(max(t1, t0 + 1), span + 1)
        checks += [(f"/api/tile?t0={t0}&t1={t1}&px={px}&lanes=station", view.tile(t0, t1, px)),
                   (f"/api/tile?t0={t0}&t1={t1}&px={px}&lanes=sniffer", view.tile(t0, t1, px, "sniffer")),
                   (f"/api/tracks?t0={t0}&t1={t1}&n={px}", view.tracks(t0, t1, px)),
                   (f"/api/analysis?t0={t0}&t1={t1}", view.analysis(t0, t1)),
                   (f"/api/analysis?t0={t0}&t1={t1}&flows=0,2&sta={sta}",
                    view.analysis(t0, t1, stations=(sta,), kinds=None, flows=(0, 2)))]
    for path, want in checks:
        r = c.get(path)
        assert r.status_code == 200 and r.data == enc(want), path
    assert any(json.loads(r.data).get("rtt") for r in [c.get(f"/api/analysis?t0=0&t1={span}")])


def test_goodput_grid_equals_the_series_built_per_range(small):
    """The goodput of an unfiltered range sliced from text encoded at load == built from the
    range's rows (the bytes the server sends)."""
    from viz.analysis_index import AnalysisIndex
    run = small
    grid = AnalysisIndex(run)
    assert grid.goodput is not None
    rows = AnalysisIndex(run)
    rows.goodput = None
    span = int(run.ppdus["end_ns"].max() - run.ppdus["start_ns"].min())
    for t0, t1, _ in [*_ranges(span, 30, 2), (0, 1, 0), (span, span + 1, 0)]:
        t0 = max(t0, 0)
        a, b = grid(t0, t1, arrays=True), rows(t0, t1, arrays=True)
        assert dumpb(a) == dumpb(b) and plain(a) == plain(b)
