"""Serve a Flask app on loopback in a thread and drive Debian chromium through Playwright."""
import contextlib
import threading
from pathlib import Path

from web.server import make_server

ARTIFACTS = Path(__file__).parent / "artifacts"
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@contextlib.contextmanager
def serve(app):
    srv = make_server(app, "127.0.0.1", 0)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    try:
        yield f"http://127.0.0.1:{srv.server_port}"
    finally:
        srv.shutdown()
        srv.server_close()


@contextlib.contextmanager
def browser_page(width=1400, height=1000):
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = b.new_page(viewport={"width": width, "height": height})
            errors = []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            yield page, errors
        finally:
            b.close()


def offline_route(path):
    """(blocked urls, a ``page.route`` handler letting only ``path`` (file://) through)."""
    blocked = []

    def route(r):
        if r.request.url == path.as_uri():
            return r.continue_()
        blocked.append(r.request.url)
        return r.abort()
    return blocked, route
