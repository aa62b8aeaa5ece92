"""Local web UI: a Flask app factory with one blueprint per view.

The loaded run (a :class:`viz.runview.RunView`) lives in ``app.extensions``; the
routes only read it. Nothing takes a file path from a request: static assets are the
package's own, served by Flask's safe static handler. In front of Flask, :class:`web.guard.Guard`
refuses foreign ``Host:`` names and, when ``TOKEN`` is set, requests without the token.

Config: ``ALLOWED_HOSTS`` (names accepted besides loopback), ``TOKEN`` (None: no token),
``TOKEN_COOKIE`` (cookie name), ``MAX_TILE_PX``.
"""
from __future__ import annotations

from flask import Flask, jsonify

from web.guard import Guard
from web.jsonfast import FastJSONProvider
from web.views import UIntConverter
from web.views.cached import JsonCache

__all__ = ["create_app"]


def create_app(run=None, test_config: dict | None = None) -> Flask:
    """Build the app serving ``run`` (a RunView)."""
    app = Flask(__name__, static_folder="static", static_url_path="/static")
    app.json = FastJSONProvider(app)
    app.config.update(MAX_TILE_PX=8192, ALLOWED_HOSTS=(), TOKEN=None, TOKEN_COOKIE="sniffsync_token")
    if test_config:
        app.config.update(test_config)
    app.extensions["sniffsync.run"] = run
    app.extensions["sniffsync.cache"] = JsonCache()
    app.url_map.converters["uint"] = UIntConverter
    app.wsgi_app = Guard(app.wsgi_app, app.config["ALLOWED_HOSTS"], app.config["TOKEN"],
                         app.config["TOKEN_COOKIE"])

    from web.views import analysis, export, pages, timeline
    app.register_blueprint(pages.bp)
    app.register_blueprint(timeline.bp)
    app.register_blueprint(analysis.bp)
    app.register_blueprint(export.bp)

    @app.errorhandler(400)
    def bad_request(err):
        return jsonify(error=getattr(err, "description", "bad request")), 400

    @app.errorhandler(404)
    def not_found(err):
        return jsonify(error="not found"), 404

    @app.errorhandler(405)
    def not_allowed(err):
        return jsonify(error="method not allowed"), 405

    @app.after_request
    def headers(resp):
        resp.headers["X-Content-Type-Options"] = "nosniff"
        resp.headers["Content-Security-Policy"] = (
            "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:")
        return resp

    return app
