"""Flask API routes: shapes, bounds, errors, and that nothing reaches the file system."""
import pytest

from viz.tiles import KINDS
from unit_run import run  # noqa: F401  (the fixture)
from web import create_app


@pytest.fixture
def client(run):
    return create_app(run, {"TESTING": True}).test_client()


def test_meta(client, run):
    m = client.get("/api/meta").get_json()
    assert m["span_ns"] == 49 * 200_000 + 120_000
    assert m["lanes"]["station"] == ["02:00:00:00:00:01", "02:00:00:00:00:03"]
    assert m["lanes"]["sniffer"] == ["A", "B"]
    assert m["kinds"] == KINDS                           # the page names tile kind codes from it


def test_tile_items_and_buckets(client):
    t = client.get("/api/tile?t0=0&t1=1000000&px=800").get_json()
    assert t["mode"] == "items" and len(t["items"]["ppdu"]) == 5      # PPDUs 0..4 start before 1 ms
    t = client.get("/api/tile?t0=0&t1=9920000&px=2").get_json()
    assert t["mode"] == "buckets" and len(t["busy_ns"][0]) == 2
    assert sum(map(sum, t["busy_ns"])) == 50 * 120_000


def test_ppdu_detail(client):
    d = client.get("/api/ppdu/7").get_json()
    assert d["ta"] == "02:00:00:00:00:01" and d["airtime_us"] == 120.0
    assert d["failed_seqs"] == [101, 103] and d["heard_by"] == ["A", "B"]
    assert client.get("/api/ppdu/999").status_code == 404


def test_analysis_range_passed_through(client):
    assert client.get("/api/analysis").get_json() == {"range": [None, None]}
    assert client.get("/api/analysis?t0=5&t1=10").get_json() == {"range": [5, 10]}


@pytest.mark.parametrize("query,msg", [
    ("t0=a&t1=5", "'t0' must be an integer"), ("t1=5", "missing parameter 't0'"),
    ("t0=5&t1=5", "t1 must be greater"), ("t0=0&t1=5&px=0", "'px' out of range"),
    ("t0=0&t1=5&lanes=x", "'lanes' must be"), ("t0=-1&t1=5", "'t0' out of range")])
def test_bad_parameters_400(client, query, msg):
    r = client.get(f"/api/tile?{query}")
    assert r.status_code == 400 and msg in r.get_json()["error"]


@pytest.mark.parametrize("path", ["/nope", "/static/../../setup.cfg", "/static/", "/api/ppdu/abc",
                                  "/static/%2e%2e/__init__.py", "/api/file?path=/etc/passwd"])
def test_no_filesystem_reach(client, path):
    r = client.get(path)
    assert r.status_code == 404
    assert b"sniffsync" not in r.data or b"error" in r.data


def test_index_and_assets(client):
    r = client.get("/")
    assert r.status_code == 200 and b'id="timeline"' in r.data
    assert "script-src 'self'" in r.headers["Content-Security-Policy"]
    assert client.get("/static/vendor/d3/d3.min.js").status_code == 200
    assert client.get("/static/js/timeline.js").status_code == 200


def test_find_next_and_previous(client):
    # unit run: PPDU i starts at i * 200 us; events: mpdu_failed on 7, rts_cts_collision on 9
    f = client.get("/api/find?what=failed&after=0").get_json()
    assert f == {"ppdu": 7, "kind": "failed", "start_ns": 7 * 200_000, "end_ns": 7 * 200_000 + 120_000}
    assert client.get("/api/find?what=failed&after=1400001").get_json() is None
    assert client.get("/api/find?what=collision&after=0").get_json()["ppdu"] == 9
    assert client.get("/api/find?what=event&after=1800000&before=1").get_json()["ppdu"] == 7
    assert client.get("/api/find?what=event&after=1400000&before=1").get_json() is None


@pytest.mark.parametrize("query,msg", [
    ("/api/find?what=nope&after=0", "'what'"), ("/api/find?what=failed", "'after'"),
    ("/api/find?what=failed&after=-1", "'after'"), ("/api/find?what=failed&after=0&before=2", "'before'"),
    ("/api/tracks?t0=5&t1=5", "t1"), ("/api/tracks?t0=0&t1=10&n=0", "'n'"), ("/api/tracks?t0=0&t1=10&n=2001", "'n'"),
    ("/api/tracks?t1=10", "'t0'"), ("/api/analysis?kinds=data,nope", "'kinds'"),
])
def test_new_routes_bad_parameters_400(client, query, msg):
    r = client.get(query)
    assert r.status_code == 400 and msg in r.get_json()["error"], r.get_json()


def test_tracks_without_an_index_is_empty(client):
    assert client.get("/api/tracks?t0=0&t1=1000&n=10").get_json() == {"tracks": []}
