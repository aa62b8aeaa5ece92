"""Who may talk to `sniffsync serve`: Host names (DNS rebinding), the token beyond loopback,
no version banner, strict integers. Oracles are the HTTP rules themselves: status codes,
headers on the wire (read with http.client / a raw socket, not through our code)."""
import http.client
import socket
import threading
from contextlib import contextmanager

import pytest

from sniffsync.errors import UsageError
from unit_run import run  # noqa: F401  (the fixture)
from web import create_app
from web.server import access, make_server

TOKEN = "t0k-EN_" + "x" * 25


@pytest.fixture
def client(run):
    return create_app(run, {"TESTING": True, "ALLOWED_HOSTS": ["sniff.lan", "10.0.0.5"]}).test_client()


@pytest.fixture
def tclient(run):
    """An app started beyond loopback: token required."""
    return create_app(run, {"TESTING": True, "ALLOWED_HOSTS": ["10.0.0.5"], "TOKEN": TOKEN}).test_client()


def _get(client, path, host="localhost", **kw):
    return client.get(path, environ_overrides={"HTTP_HOST": host}, **kw)


@pytest.mark.parametrize("host", ["localhost", "localhost:8050", "LOCALHOST:1", "127.0.0.1", "127.0.0.1:8050",
                                  "127.9.8.7:65535", "[::1]", "[::1]:8050", "sniff.lan", "sniff.lan:8050",
                                  "10.0.0.5:8050"])
def test_loopback_and_named_hosts_pass(client, host):
    r = _get(client, "/api/meta", host)
    assert r.status_code == 200 and r.get_json()["n_ppdus"] == 50


@pytest.mark.parametrize("host", ["evil.com", "evil.com:8050", "localhost.evil.com", "127.0.0.1.nip.io",
                                  "sniff.lan.evil.com", "", "::1", "[::2]:80", "2130706433", "0x7f000001",
                                  "127.1", "localhost:abc", "localhost:8050:1", "[::1]x", "10.0.0.6",
                                  "localhost/../x", "local host"])
@pytest.mark.parametrize("path", ["/api/meta", "/", "/api/analysis", "/static/js/main.js"])
def test_other_hosts_get_421_and_no_data(client, host, path):
    r = _get(client, path, host)
    assert r.status_code == 421
    assert r.get_json()["error"].startswith("this server answers only to")
    assert b"n_ppdus" not in r.data and b"timeline" not in r.data and b"range" not in r.data


def test_token_flow(tclient):
    assert _get(tclient, "/api/meta").status_code == 403
    assert _get(tclient, "/").status_code == 403
    assert _get(tclient, "/?token=wrong").status_code == 403
    r = _get(tclient, "/api/meta", headers={"X-Sniffsync-Token": "wrong"})
    assert r.status_code == 403 and b"n_ppdus" not in r.data
    # first load: the URL printed at start -> redirected without the token, cookie set
    r = _get(tclient, f"/?token={TOKEN}&lanes=sniffer")
    assert r.status_code == 303 and r.headers["Location"] == "/?lanes=sniffer"
    cookie = r.headers["Set-Cookie"]
    assert cookie.startswith(f"sniffsync_token={TOKEN};")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    # the browser then sends the cookie with every request, fetches included
    assert _get(tclient, "/").status_code == 200
    assert _get(tclient, "/api/meta").get_json()["n_ppdus"] == 50


def test_token_by_header_or_api_query(tclient):
    assert _get(tclient, "/api/meta", headers={"X-Sniffsync-Token": TOKEN}).status_code == 200
    r = _get(tclient, f"/api/meta?token={TOKEN}")              # API answers, no redirect
    assert r.status_code == 200 and r.get_json()["n_ppdus"] == 50 and TOKEN in r.headers["Set-Cookie"]


def test_token_redirect_stays_on_this_site(tclient):
    r = _get(tclient, f"//evil.com/x?token={TOKEN}")
    assert r.status_code in (303, 404)
    if r.status_code == 303:
        assert r.headers["Location"].startswith("/") and not r.headers["Location"].startswith("//")


def test_host_checked_before_token(tclient):
    assert _get(tclient, f"/api/meta?token={TOKEN}", "evil.com").status_code == 421
    assert _get(tclient, f"/api/meta?token={TOKEN}", "10.0.0.5:8050").status_code == 200


def test_access_per_bind_address():
    hosts, token = access("127.0.0.1")
    assert token is None and hosts == {"127.0.0.1"}
    assert access("::1")[1] is None and access("localhost")[1] is None
    hosts, token = access("10.1.2.3", ("lab.example",))
    assert hosts == {"10.1.2.3", "lab.example"} and len(token) >= 32
    assert access("10.1.2.3")[1] != token                    # a new token every start
    hosts, token = access("0.0.0.0")
    assert token and socket.gethostname().lower() in hosts and "0.0.0.0" not in hosts


# ---- on the wire: the real server -------------------------------------------------------------

@contextmanager
def live(app):
    srv = make_server(app, "127.0.0.1", 0)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    try:
        yield srv.server_port
    finally:
        srv.shutdown()
        srv.server_close()


def _wire(port, path, host=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request("GET", path, headers={"Host": host} if host else {})
        r = c.getresponse()
        return r.status, r.getheaders(), r.read()
    finally:
        c.close()


def _read_all(s) -> bytes:
    """What the server sent before closing (it may reset: it closes with our bytes unread)."""
    out = []
    try:
        for chunk in iter(lambda: s.recv(65536), b""):
            out.append(chunk)
    except ConnectionResetError:
        pass
    return b"".join(out)


def test_no_server_banner_on_the_wire(run):
    with live(create_app(run)) as port:
        for path, host, status in [("/api/meta", None, 200), ("/api/analysis", None, 200),
                                   ("/nope", None, 404), ("/api/meta", "evil.com", 421),
                                   ("/api/tile?t0=+5&t1=9", None, 400), ("/", f"[::1]:{port}", 200)]:
            got, headers, _ = _wire(port, path, host)
            names = [k.lower() for k, _ in headers]
            assert got == status, path
            assert "server" not in names and names.count("date") == 1, (path, headers)
        # a request the HTTP server itself refuses (headers over its limit: its own error page, not the app's)
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n" + b"X-a: " + b"b" * 70_000 + b"\r\n\r\n")
            raw = _read_all(s).lower()
        assert raw.startswith(b"http/1.") and b" 431 " in raw.split(b"\r\n")[0]
        assert b"\r\nserver:" not in raw and b"werkzeug" not in raw and b"waitress" not in raw


def test_idle_connection_is_dropped(run, monkeypatch):
    from web import server
    monkeypatch.setattr(server, "IDLE_TIMEOUT_S", 0.5)
    with live(create_app(run)) as port:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(b"GET /api/meta HTTP/1.1\r\n")          # ... and never the rest
            assert _read_all(s) == b""          # closed (or reset) by the server, not by our 10 s timeout


def test_token_cookie_found_among_other_apps_cookies(run):
    tclient = create_app(run, {"TOKEN": TOKEN}).test_client(use_cookies=False)   # send our Cookie as is
    jar = f'_xsrf=2|ab|cd|"x y"; a=b c; sniffsync_token={TOKEN}; z="'
    r = tclient.get("/api/meta", environ_overrides={"HTTP_HOST": "localhost", "HTTP_COOKIE": jar})
    assert r.status_code == 200
    r = tclient.get("/api/meta", environ_overrides={"HTTP_HOST": "localhost", "HTTP_COOKIE": jar[:-40]})
    assert r.status_code == 403


def test_busy_port_is_one_clear_error(run):
    with live(create_app(run)) as port:
        with pytest.raises(UsageError, match=f"port {port} .*busy"):
            make_server(create_app(run), "127.0.0.1", port)


def test_token_flow_on_the_wire(run):
    app = create_app(run, {"TOKEN": TOKEN, "TOKEN_COOKIE": "sniffsync_token_1"})
    with live(app) as port:
        assert _wire(port, "/api/meta")[0] == 403
        status, headers, _ = _wire(port, f"/?token={TOKEN}")
        cookie = dict((k.lower(), v) for k, v in headers)["set-cookie"].split(";")[0]
        assert status == 303 and cookie == f"sniffsync_token_1={TOKEN}"
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.request("GET", "/api/meta", headers={"Cookie": cookie})
        r = c.getresponse()
        assert r.status == 200 and b'"n_ppdus":50' in r.read()
        c.close()


# ---- strict integers ---------------------------------------------------------------------------

BAD_INTS = ["5_000", "+5", "%D9%A5", "%DB%B5", "%EF%BC%95", "%205", "5%20", "5.0", "0x10", "1e3", "--1",
            "-", "5-", "%2B5", "1%2C000", "Infinity", "nan"]


@pytest.mark.parametrize("raw", BAD_INTS)
@pytest.mark.parametrize("which", ["t0", "t1", "px"])
def test_tile_integers_strict(client, raw, which):
    q = {"t0": "0", "t1": "9000", "px": "100"}
    q[which] = raw
    r = _get(client, "/api/tile?" + "&".join(f"{k}={v}" for k, v in q.items()))
    assert r.status_code == 400
    assert r.data.strip().count(b"\n") == 0 and f"'{which}'" in r.get_json()["error"]


@pytest.mark.parametrize("raw,msg", [("-1", "out of range"), ("99999999999999999999999", "out of range"),
                                     ("9" * 5000, "out of range"), ("%D9%A5", "ASCII digits")])
def test_analysis_integers_strict(client, raw, msg):
    r = _get(client, f"/api/analysis?t0={raw}&t1=5")
    assert r.status_code == 400 and msg in r.get_json()["error"] and "'t0'" in r.get_json()["error"]


def test_plain_digits_still_accepted(client):
    assert _get(client, "/api/tile?t0=0&t1=0009000&px=100").status_code == 200
    assert _get(client, "/api/analysis?t0=000&t1=5").get_json() == {"range": [0, 5]}


@pytest.mark.parametrize("seg", ["%D9%A5", "+5", "-1", "5_0", "99999999999999999999999", "5.0", "%EF%BC%95"])
def test_ppdu_id_strict(client, seg):
    r = _get(client, f"/api/ppdu/{seg}")
    assert r.status_code == 404 and r.get_json() == {"error": "not found"}


def test_ppdu_id_plain(client):
    assert _get(client, "/api/ppdu/5").get_json()["ppdu"] == 5
    assert _get(client, "/api/ppdu/0005").get_json()["ppdu"] == 5


@pytest.mark.parametrize("path", ["/static/../../setup.cfg", "/static/%2e%2e/__init__.py",
                                  "/static/%2e%2e%2f%2e%2e%2fsetup.cfg", "/static/..%5c..%5csetup.cfg",
                                  "/static//etc/passwd", "/api/ppdu/..%2f..%2fsetup.cfg"])
def test_path_traversal_still_refused(client, path):
    r = _get(client, path, "127.0.0.1:8050", follow_redirects=True)     # '//' -> '/' is a 308 first
    assert r.status_code == 404 and b"[metadata]" not in r.data and b"root:" not in r.data


# ---- what `serve` starts -----------------------------------------------------------------------

def _serve_in_thread(srv):
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    return th


def test_serve_on_loopback_prints_a_plain_url(run):
    from sniffsync.cli.serve import start_server
    srv, url, token = start_server(run, "127.0.0.1", 0)
    _serve_in_thread(srv)
    try:
        assert token is None and url == f"http://127.0.0.1:{srv.server_port}/"
        assert _wire(srv.server_port, "/api/meta")[0] == 200
        assert _wire(srv.server_port, "/api/meta", "evil.com")[0] == 421
    finally:
        srv.shutdown()
        srv.server_close()


def test_serve_beyond_loopback_url_carries_the_token(run, monkeypatch):
    """As for --host 10.x (bound here on loopback, told it is not: tests stay off the network)."""
    import web.server
    from sniffsync.cli.serve import start_server
    monkeypatch.setattr(web.server, "_is_loopback_bind", lambda host: False)
    srv, url, token = start_server(run, "127.0.0.1", 0, allow_hosts=["lab.example"])
    _serve_in_thread(srv)
    try:
        port = srv.server_port
        assert url == f"http://127.0.0.1:{port}/?token={token}" and len(token) >= 32
        assert _wire(port, "/api/meta")[0] == 403
        status, headers, _ = _wire(port, url.split(str(port), 1)[1], f"lab.example:{port}")
        assert status == 303
        cookie = dict((k.lower(), v) for k, v in headers)["set-cookie"].split(";")[0]
        assert cookie == f"sniffsync_token_0={token}"
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.request("GET", "/api/meta", headers={"Cookie": cookie})
        assert c.getresponse().status == 200
        c.close()
    finally:
        srv.shutdown()
        srv.server_close()
