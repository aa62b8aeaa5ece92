"""Bounded load test over real loopback HTTP: 8 clients, a fixed request count and a time
limit. Every answer must be 200 and equal to what the app answers one request at a time
(Flask test client, no threads); timing is measured by bench/server_load.py, not asserted."""
import importlib.util
import threading
from pathlib import Path

from unit_run import run  # noqa: F401  (the fixture)
from web import create_app
from web.server import make_server

BENCH = Path(__file__).resolve().parents[2] / "bench" / "server_load.py"
spec = importlib.util.spec_from_file_location("server_load", BENCH)
server_load = importlib.util.module_from_spec(spec)
spec.loader.exec_module(server_load)


def test_eight_clients_fixed_count_all_correct(run):
    paths = server_load.session_paths(run.meta(), 240, seed=3)
    assert {server_load.endpoint(p) for p in paths} == {"meta", "tile", "tracks", "ppdu", "find",
                                                       "analysis (whole run)", "analysis (range)"}
    expect = {p: create_app(run).test_client().get(p) for p in set(paths)}
    srv = make_server(create_app(run), "127.0.0.1", 0)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    try:
        res = server_load.hammer(("127.0.0.1", srv.server_port), paths, clients=8, timeout=60)
    finally:
        srv.shutdown()
        srv.server_close()
    assert len(res) == len(paths) and all(expect[p].status_code == 200 for p in paths)
    errors = [(p, st, body[:100]) for p, st, _, body, _ in res if st != expect[p].status_code]
    assert errors == []
    for path, status, headers, body, _ in res:
        assert body == expect[path].data, path
        assert "server" not in headers


def test_gate_lets_one_request_compute_at_a_time():
    """8 clients at once through the real server: the app never runs two requests together,
    and every one is answered (in whatever order)."""
    import time
    inside, most, lock = [0], [0], threading.Lock()

    def app(environ, start_response):
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        time.sleep(0.005)                        # long enough for the others to arrive
        with lock:
            inside[0] -= 1
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [environ["PATH_INFO"].encode()]
    srv = make_server(app, "127.0.0.1", 0)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    try:
        paths = [f"/{i}" for i in range(24)]
        res = server_load.hammer(("127.0.0.1", srv.server_port), paths, clients=8, timeout=30)
    finally:
        srv.shutdown()
        srv.server_close()
    assert [(st, body) for _, st, _, body, _ in res] == [(200, p.encode()) for p in paths]
    assert most[0] == 1


def test_gate_lets_the_cheap_paths_pass():
    """A bounded-cost path (UNGATED) is answered while a long request holds the gate."""
    from web.server import UNGATED, Gate
    held, done = threading.Event(), threading.Event()

    def app(environ, start_response):
        if environ["PATH_INFO"] == "/api/tile":
            held.set()
            done.wait(10)
        start_response("200 OK", [])
        return [b""]
    gate = Gate(app, 1)
    slow = threading.Thread(target=gate, args=({"PATH_INFO": "/api/tile"}, lambda *a: None))
    slow.start()
    assert held.wait(10)
    for env in ({"PATH_INFO": UNGATED[0]}, {"PATH_INFO": "/api/analysis", "QUERY_STRING": ""}):
        assert gate(env, lambda *a: None) == [b""]                        # not blocked by the tile
    waits = threading.Thread(target=gate, args=({"PATH_INFO": "/api/analysis", "QUERY_STRING": "t0=1&t1=2"},
                                                lambda *a: None))
    waits.start()
    waits.join(0.2)
    assert waits.is_alive()                                               # a range waits for the gate
    done.set()
    waits.join(10)
    slow.join(10)
