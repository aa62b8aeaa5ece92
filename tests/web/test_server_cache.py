"""Answers computed once per server start: ETag / 304, ranges in an LRU, one computation for
concurrent first requests."""
import threading
import time

from viz.runview import RunView
from unit_run import run  # noqa: F401  (the fixture)
from web import create_app


def _counting_view(run, delay_s=0.0):
    calls = []

    def analysis(t0, t1):
        calls.append((t0, t1))
        time.sleep(delay_s)
        return {"range": [t0, t1], "n": len(calls)}
    return RunView(run.ppdus, run.events, analysis, run.sniffers, "count"), calls


def test_whole_run_analysis_computed_once_with_etag(run):
    view, calls = _counting_view(run)
    c = create_app(view).test_client()
    a, b = c.get("/api/analysis"), c.get("/api/analysis")
    assert a.get_json() == b.get_json() == {"range": [None, None], "n": 1} and calls == [(None, None)]
    assert a.headers["ETag"] == b.headers["ETag"] and a.headers["Cache-Control"] == "no-cache"
    r = c.get("/api/analysis", headers={"If-None-Match": a.headers["ETag"]})
    assert r.status_code == 304 and r.data == b"" and len(calls) == 1
    assert c.get("/api/analysis", headers={"If-None-Match": '"other"'}).status_code == 200


def test_ranges_cached_separately_and_bounded(run):
    view, calls = _counting_view(run)
    app = create_app(view)
    c = app.test_client()
    assert c.get("/api/analysis?t0=5&t1=10").get_json()["range"] == [5, 10]
    assert c.get("/api/analysis?t0=5&t1=11").get_json()["range"] == [5, 11]
    assert c.get("/api/analysis?t0=5&t1=10").get_json()["n"] == 1 and len(calls) == 2
    cache = app.extensions["sniffsync.cache"]
    for k in range(cache.max_ranges + 10):
        c.get(f"/api/analysis?t0={k}&t1={k + 100}")
    assert len(cache._lru) == cache.max_ranges
    c.get("/api/analysis?t0=5&t1=10")                   # evicted long ago: computed again
    assert calls.count((5, 10)) == 2


def test_concurrent_first_requests_compute_once(run):
    view, calls = _counting_view(run, delay_s=0.2)
    app = create_app(view)
    bodies = []

    def get():
        bodies.append(app.test_client().get("/api/analysis").data)
    threads = [threading.Thread(target=get) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(bodies) == 8 and len(set(bodies)) == 1 and len(calls) == 1


def test_meta_served_from_cache_matches_view(run):
    c = create_app(run).test_client()
    assert c.get("/api/meta").get_json() == run.meta()
    assert "ETag" in c.get("/api/meta").headers
