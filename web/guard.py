"""WSGI middleware in front of the app: who may talk to the server at all.

* **Host check** (DNS rebinding): a page on ``evil.example`` whose name the attacker re-points
  at 127.0.0.1 reaches the server with ``Host: evil.example``. Only loopback names
  (``localhost``, 127.0.0.0/8, ``[::1]``, any port) and the names given at start-up pass;
  anything else, a malformed or a missing Host, gets **421** and no data.
* **Token** (binding beyond loopback): every request must carry the per-start token, as the
  ``token`` query parameter (the URL printed at start), the ``X-Sniffsync-Token`` header or the
  cookie set on the first load; otherwise **403**. A page load that brings the token in the
  query is redirected to the same URL without it (the cookie then carries it), so it does not
  stay in the address bar, the history or a Referer.

Both run before Flask routes anything, so a refused request never reaches a view.
"""
from __future__ import annotations

import hmac
import ipaddress
import json
import re
from urllib.parse import parse_qsl, quote, urlencode

from werkzeug.http import parse_cookie

__all__ = ["Guard", "host_name", "is_loopback"]

TOKEN_PARAM = "token"
TOKEN_HEADER = "HTTP_X_SNIFFSYNC_TOKEN"
_HOST = re.compile(r"^(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<name>[A-Za-z0-9._-]+))(?::[0-9]{1,5})?$")


def host_name(host: str) -> str | None:
    """The name part of a ``Host:`` value, lower case (``[::1]:8050`` -> ``::1``); None if malformed."""
    m = _HOST.match(host or "")
    if m is None:
        return None
    return (m["v6"] or m["name"]).lower()


def is_loopback(name: str) -> bool:
    """``localhost`` or a literal loopback address (127.0.0.0/8, ::1); no other spelling."""
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _refuse(start_response, status: str, message: str):
    body = json.dumps({"error": message}).encode()
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body))),
                            ("Cache-Control", "no-store"), ("X-Content-Type-Options", "nosniff")])
    return [body]


class Guard:
    """Wrap ``app``: pass only requests for an allowed host, carrying ``token`` when one is set.

    Parameters
    ----------
    app : WSGI application
    hosts : iterable of str
        Names accepted besides the loopback ones (``--host``, the machine's names).
    token : str or None
        Per-start secret; None when serving on loopback only.
    cookie : str
        Name of the cookie holding the token (per port: cookies ignore ports).
    """

    def __init__(self, app, hosts=(), token: str | None = None, cookie: str = "sniffsync_token"):
        self.app = app
        self.hosts = {h.strip("[]").lower() for h in hosts if h}
        self.token = token
        self.cookie = cookie

    def host_ok(self, environ) -> bool:
        name = host_name(environ.get("HTTP_HOST", ""))
        return name is not None and (is_loopback(name) or name in self.hosts)

    def _given(self, environ) -> tuple[str | None, str | None]:
        """(token from the query, token from header or cookie)."""
        q = dict(parse_qsl(environ.get("QUERY_STRING", ""), keep_blank_values=True)).get(TOKEN_PARAM)
        other = environ.get(TOKEN_HEADER)
        if other is None:            # lenient parser: other local apps' odd cookies must not hide ours
            other = parse_cookie(environ.get("HTTP_COOKIE", "")).get(self.cookie)
        return q, other

    def _match(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self.token.encode())

    def __call__(self, environ, start_response):
        if not self.host_ok(environ):
            return _refuse(start_response, "421 Misdirected Request",
                           "this server answers only to localhost and the names it was started with")
        if self.token is None:
            return self.app(environ, start_response)
        in_query, other = self._given(environ)
        if self._match(other):
            return self.app(environ, start_response)
        if not self._match(in_query):
            return _refuse(start_response, "403 Forbidden",
                           "missing or wrong token: open the URL printed when the server started")
        set_cookie = (f"{self.cookie}={self.token}; Path=/; HttpOnly; SameSite=Strict")
        if environ.get("REQUEST_METHOD") == "GET" and not environ.get("PATH_INFO", "/").startswith("/api/"):
            rest = [(k, v) for k, v in parse_qsl(environ.get("QUERY_STRING", ""), keep_blank_values=True)
                    if k != TOKEN_PARAM]
            # one leading slash: "//evil.example" would be a redirect to another site
            path = "/" + environ.get("PATH_INFO", "/").encode("latin-1").decode("utf-8", "replace").lstrip("/")
            where = quote(path) + (f"?{urlencode(rest)}" if rest else "")
            start_response("303 See Other", [("Location", where), ("Set-Cookie", set_cookie),
                                             ("Content-Length", "0"), ("Cache-Control", "no-store")])
            return [b""]

        def with_cookie(status, headers, exc_info=None):
            return start_response(status, [*headers, ("Set-Cookie", set_cookie)], exc_info)
        return self.app(environ, with_cookie)
