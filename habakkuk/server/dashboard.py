"""The dashboard at /app/: static HTML, CSS and JavaScript shipped in the package.

The page holds no data: it asks for the token once (kept in localStorage) and
reads everything from the JSON API. Files are read once and kept in memory. With
realtime: the Content-Security-Policy lets the page connect to the provider's origin
(Live mode's WebRTC offer), and only then.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from aiohttp import web

from .errors import ApiError
from .served import server_of

STATIC = Path(__file__).parent / "static"
TYPES = {
    "index.html": "text/html",
    "app.js": "text/javascript",
    "views.js": "text/javascript",
    "memory.js": "text/javascript",
    "skills.js": "text/javascript",
    "schedules.js": "text/javascript",
    "board.js": "text/javascript",
    "usage.js": "text/javascript",
    "config.js": "text/javascript",
    "pair.html": "text/html",  # a browser as a device node (spec 000 "Device nodes")
    "pair.js": "text/javascript",
    "node.js": "text/javascript",
    "nodes.js": "text/javascript",
    "app.css": "text/css",
    "manifest.webmanifest": "application/manifest+json",
    "sw.js": "text/javascript",
    "icon.svg": "image/svg+xml",
    "icon-180.png": "image/png",
    "icon-192.png": "image/png",
    "icon-512.png": "image/png",
}
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
        "media-src 'self' blob:; "
        "connect-src 'self'; manifest-src 'self'; worker-src 'self'; frame-ancestors 'none'; "
        "base-uri 'none'; form-action 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
_cache: dict[str, bytes] = {}


def live_policy(origin: str) -> str:
    """The dashboard's Content-Security-Policy with the Live mode provider's origin
    allowed in connect-src (only when realtime: is configured)."""
    return HEADERS["Content-Security-Policy"].replace(
        "connect-src 'self';", f"connect-src 'self' {origin};"
    )


async def _file(name: str) -> bytes:
    if name not in _cache:
        _cache[name] = await asyncio.to_thread((STATIC / name).read_bytes)
    return _cache[name]


async def static_file(request: web.Request) -> web.Response:
    """GET /app/ and /app/<file>: one of the shipped files."""
    name = request.match_info.get("name") or "index.html"
    if name not in TYPES:
        raise ApiError(404, f"no such file: /app/{name}")
    headers = dict(HEADERS)
    realtime = server_of(request).runtime.config.realtime
    if realtime is not None and realtime.origin:
        # Live mode: the page posts its WebRTC offer to the provider itself.
        headers["Content-Security-Policy"] = live_policy(realtime.origin)
    # The service worker must be able to control /app/ and be refetched on update.
    headers["Cache-Control"] = "no-cache"
    if name == "sw.js":
        headers["Service-Worker-Allowed"] = "/app/"
    return web.Response(body=await _file(name), content_type=TYPES[name], headers=headers)


async def to_app(request: web.Request) -> web.Response:
    """/ and /app go to the dashboard."""
    raise web.HTTPFound("/app/")


def setup(app: web.Application) -> None:
    """Register /, /app and /app/<file>."""
    app.router.add_get("/", to_app)
    app.router.add_get("/app", to_app)
    app.router.add_get("/app/", static_file)
    app.router.add_get("/app/{name}", static_file)
