"""The HTTP server under the app: Werkzeug's threaded WSGI server, with no banner.

No ``Server:`` header (it named Werkzeug's and Python's versions), no development-server
warning, no per-request log line; a busy port is one clear error instead of a traceback.
Which names and which token the server accepts is :mod:`web.guard`'s job.
"""
from __future__ import annotations

import errno
import ipaddress
import secrets
import socket

from werkzeug.serving import WSGIRequestHandler, make_server as _werkzeug_server

from sniffsync.errors import UsageError

__all__ = ["make_server", "access", "url_host"]

WILDCARD = {"0.0.0.0", "::", ""}


class _Handler(WSGIRequestHandler):
    """Werkzeug's handler minus the version banner, the access log and a second ``Date``
    (http.server sends one; Werkzeug's conditional and file responses add their own)."""

    _date_sent = False
    timeout = 60          # s per socket read/write: an idle or trickling client does not hold a thread forever

    def send_response(self, code, message=None):
        self._date_sent = False
        super().send_response(code, message)

    def send_header(self, keyword, value):
        name = keyword.lower()
        if name == "server" or (name == "date" and self._date_sent):
            return
        self._date_sent |= name == "date"
        super().send_header(keyword, value)

    def log_request(self, *args, **kwargs):
        pass


def make_server(app, host: str, port: int):
    """A threaded server bound to ``host:port`` (``port`` 0: any free one), not yet serving.

    The socket is bound here (Werkzeug would print its own advice and exit on a busy port).
    """
    try:
        family = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM)[0][0]
        sock = socket.create_server((host, port), family=family)
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise UsageError(f"port {port} on {host} is busy: stop what uses it or pick another --port")
        raise UsageError(f"cannot listen on {host}:{port}: {e.strerror or e}")
    with sock:                                      # Werkzeug works on its own duplicate of the fd
        srv = _werkzeug_server(host, port, app, threaded=True, request_handler=_Handler, fd=sock.fileno())
    srv.server_name, srv.server_port = host, srv.socket.getsockname()[1]    # bind() would have set them
    return srv


def _is_loopback_bind(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _machine_names() -> set[str]:
    """This machine's name, FQDN and the addresses they resolve to (best effort)."""
    names = {socket.gethostname(), socket.getfqdn()}
    for n in list(names):
        try:
            names.update(ai[4][0] for ai in socket.getaddrinfo(n, None))
        except OSError:
            pass
    return {n.lower() for n in names if n}


def access(host: str, allow: tuple = ()) -> tuple[set[str], str | None]:
    """(names the Host header may carry besides loopback, token or None) for a bind address.

    Beyond loopback every start draws a new token; a wildcard bind also accepts the
    machine's own names and addresses.
    """
    hosts = {host.lower(), *(a.lower() for a in allow)} - WILDCARD
    if host in WILDCARD:
        hosts |= _machine_names()
    token = None if _is_loopback_bind(host) else secrets.token_urlsafe(24)
    return hosts, token


def url_host(host: str) -> str:
    """How ``host`` is written in a URL (IPv6 in brackets; a wildcard as this machine's name)."""
    if host in WILDCARD:
        return socket.gethostname() or "localhost"
    return f"[{host}]" if ":" in host else host
