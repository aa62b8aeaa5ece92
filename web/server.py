"""The HTTP server under the app: waitress (a production WSGI server), with no banner.

No ``Server:`` header (waitress's ``ident`` is empty, so neither the app's answers nor
waitress's own error pages name it), no start-up banner, no per-request log; a busy port
is one clear error instead of a traceback. Which names and which token the server accepts
is :mod:`web.guard`'s job.
"""
from __future__ import annotations

import errno
import ipaddress
import logging
import secrets
import socket
import threading

from sniffsync.errors import UsageError

__all__ = ["make_server", "access", "url_host", "Server", "Gate"]

WILDCARD = {"0.0.0.0", "::", ""}
IDLE_TIMEOUT_S = 60      # a connection idle this long is closed: a stalled client does not hold it forever
# not workers() (the cores, 2 here): with 2 or 4 threads a cheap request waits in waitress's
# queue behind expensive ones; 8 gave the lower p50 and p95 under 8 clients (docs/benchmarks.md)
THREADS = 8
# requests inside the app at once. The GIL makes the app one core whatever the threads: with 8
# requests computing together each runs at 1/8 speed (a 9 ms tile answered in ~70 ms); one at a
# time in arrival order, a request waits for those before it (~7 x the mix's ~1.3 ms) plus its own
# (docs/benchmarks.md). The threads still read requests and send answers concurrently.
COMPUTE_SLOTS = 1
# the accepted sockets inherit it: waitress sends an answer in chunks of the send buffer, and
# whatever the buffer does not take is sent later by its event loop, a GIL hand-off per chunk
# (a 600 kB analysis in 16-32 kB chunks); the kernel caps it at net.core.wmem_max
SEND_BUFFER = 4 << 20


class Server:
    """A bound waitress server with the ``serve_forever / shutdown / server_close`` shape
    of :mod:`socketserver` (what the CLI and the tests drive)."""

    def __init__(self, inner, host: str):
        self._inner = inner
        self.server_name, self.server_port = host, int(inner.effective_port)
        self._stop = threading.Event()
        self._done = threading.Event()
        self._done.set()

    def serve_forever(self):
        """Serve until :meth:`shutdown` (or Ctrl-C): waitress's event loop, one poll at a time."""
        from waitress import wasyncore
        self._done.clear()
        try:
            while not self._stop.is_set() and self._inner._map:
                wasyncore.loop(timeout=self._inner.adj.asyncore_loop_timeout, map=self._inner._map,
                               use_poll=True, count=1)
        except KeyboardInterrupt:
            pass
        finally:
            self._done.set()

    def shutdown(self):
        """Stop serving (from another thread): the loop ends, then the worker threads."""
        self._stop.set()
        self._inner.pull_trigger()                  # wakes the poll now
        self._done.wait(5)
        self._inner.task_dispatcher.shutdown(timeout=5)

    def server_close(self):
        from waitress import wasyncore
        self._stop.set()
        if self._done.wait(5):                      # never close sockets under a running poll
            wasyncore.close_all(self._inner._map)


# answers of a bounded, small cost (a cached body, one PPDU, one search among the events' starts):
# they pass the gate instead of waiting behind the long ones. Paths starting so, and paths
# asked without a query (the page, the whole-run analysis: encoded once, then cached bytes)
UNGATED = ("/api/meta", "/api/ppdu/", "/api/find", "/static/")
UNGATED_BARE = ("/", "/api/analysis")


class Gate:
    """WSGI wrapper: at most ``slots`` requests run ``app`` at once, the others wait in arrival
    order (a :class:`threading.Semaphore` wakes its waiters first come, first served); paths
    starting with one of ``ungated``, and ``bare`` paths without a query, do not wait. The
    app's answers are bytes, so all their work happens inside; a streamed body (a static
    file) is sent after, outside the gate."""

    def __init__(self, app, slots: int = COMPUTE_SLOTS, ungated: tuple = UNGATED,
                 bare: tuple = UNGATED_BARE):
        self.app, self._slots, self._ungated, self._bare = app, threading.Semaphore(slots), ungated, bare

    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO", "")
        if path.startswith(self._ungated) or (path in self._bare and not environ.get("QUERY_STRING")):
            return self.app(environ, start_response)
        with self._slots:
            return self.app(environ, start_response)


def _bind(host: str, port: int) -> socket.socket:
    try:
        family = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM)[0][0]
        sock = socket.create_server((host, port), family=family)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
        return sock
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise UsageError(f"port {port} on {host} is busy: stop what uses it or pick another --port")
        raise UsageError(f"cannot listen on {host}:{port}: {e.strerror or e}")


def make_server(app, host: str, port: int) -> Server:
    """A waitress server bound to ``host:port`` (``port`` 0: any free one), not yet serving.

    The socket is bound here, so a busy port is our one-line error, not waitress's traceback.
    """
    from waitress.server import create_server

    sock = _bind(host, port)
    logging.getLogger("waitress").setLevel(logging.ERROR)   # no "task queue depth" chatter
    idle = IDLE_TIMEOUT_S
    inner = create_server(Gate(app, COMPUTE_SLOTS), sockets=[sock], ident="", threads=THREADS,
                          channel_timeout=idle,
                          cleanup_interval=max(0.2, min(30, idle / 2)), asyncore_loop_timeout=min(1, idle),
                          max_request_header_size=64 * 1024, clear_untrusted_proxy_headers=True)
    return Server(inner, host)


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
