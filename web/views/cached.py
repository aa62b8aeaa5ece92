"""Encoded JSON answers computed once per server start and served as bytes with an ETag.

The run never changes while the server runs, so an answer for a key (the whole-run analysis,
the meta, a brushed range, a tile, counter tracks) is computed once: the whole-run ones are
kept for the server's life, the others in one LRU per kind (the first element of the key), so
a pan/zoom session's tiles do not evict the brushed ranges. A view zoomed in and back out, or
panned and back, asks for the very same tile (W/S zoom by 2 about the centre, A/D pan by a
quarter): it is bytes from the cache, not a recomputation. Concurrent first requests for one
key wait for one computation instead of each doing it (eight tabs opening at once cost one
analysis, not eight). The body is the encoder's bytes (numpy columns written by orjson
directly, :mod:`web.jsonfast`); the ETag names the key and this server start, not the body's
hash: an answer never changes while the server runs, and hashing a 700 kB body costs ~0.6 ms.
"""
from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict

from flask import Response, current_app, request

__all__ = ["JsonCache", "cached_json"]


class JsonCache:
    """``key -> (body bytes, etag)``; keys of one element are permanent, longer ones in an LRU
    per kind (``key[0]``): ``max_ranges`` analyses, ``max_views`` of each other kind."""

    def __init__(self, max_ranges: int = 64, max_views: int = 256):
        self.max_ranges, self.max_views = max_ranges, max_views
        self._lock = threading.Lock()
        self._fixed: dict = {}
        self._lrus: dict = {}
        self._lru: OrderedDict = self._lrus.setdefault("analysis", OrderedDict())
        self._pending: dict = {}
        self.computed = 0                     # how many answers were computed (tests read it)
        self._start = os.urandom(12)          # a new server start never matches an old ETag

    def _lookup(self, key):
        if key in self._fixed:
            return self._fixed[key]
        lru = self._lrus.get(key[0])
        hit = lru.get(key) if lru is not None else None
        if hit is not None:
            lru.move_to_end(key)
        return hit

    def _store(self, key, value):
        if len(key) == 1:
            self._fixed[key] = value
            return
        lru = self._lrus.setdefault(key[0], OrderedDict())
        lru[key] = value
        while len(lru) > (self.max_ranges if key[0] == "analysis" else self.max_views):
            lru.popitem(last=False)

    def get(self, key: tuple, compute, dumps) -> tuple[bytes, str]:
        """(body, etag) for ``key``: ``dumps(compute())`` (bytes) once, then from the cache."""
        with self._lock:
            hit = self._lookup(key)
            if hit is not None:
                return hit
            pending = self._pending.setdefault(key, threading.Lock())
        with pending:
            with self._lock:
                hit = self._lookup(key)
            if hit is not None:
                return hit
            body = dumps(compute())
            value = (body, hashlib.blake2b(repr(key).encode(), digest_size=12, key=self._start).hexdigest())
            with self._lock:
                self._store(key, value)
                self._pending.pop(key, None)
                self.computed += 1
            return value


def cached_json(key, compute) -> Response:
    """Response for ``key`` (a str or tuple): 200 with the cached body, or 304 on a matching ETag."""
    key = key if isinstance(key, tuple) else (key,)
    body, etag = current_app.extensions["sniffsync.cache"].get(key, compute, current_app.json.dumpb)
    resp = Response(body, mimetype="application/json")
    resp.set_etag(etag)
    resp.headers["Cache-Control"] = "no-cache"        # revalidate: a 304 costs no analysis
    return resp.make_conditional(request)
