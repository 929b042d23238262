"""Speech and Live mode (spec 001 "Chat" speech, "Live mode"): not in this version.

GET /api/app says `"speech": false` and `"realtime": false`, so the dashboard offers
neither; a client that asks anyway gets what spec 001 says for a process without them:
501 with the API's error body (`{"error": "..."}`), after the same checks as the rest
of /api (host, token, JSON content type, through the conventions middleware), never
the 404 of a path that does not exist.
"""

from __future__ import annotations

from aiohttp import web

from .errors import ApiError

SPEECH_OFF = "speech is not configured: this version has no tts: (GET /api/app says speech: false)"
REALTIME_OFF = (
    "Live mode is not configured: this version has no realtime: (GET /api/app says realtime: false)"
)
REALTIME_PATHS = ("session", "tool", "transcript", "end")


async def speech(request: web.Request) -> web.Response:
    """GET /api/chat/{conversation}/messages/{seq}/speech: 501 without tts."""
    raise ApiError(501, SPEECH_OFF)


async def realtime(request: web.Request) -> web.Response:
    """POST /api/realtime/{session,tool,transcript,end}: 501 without realtime."""
    raise ApiError(501, REALTIME_OFF)


def setup(app: web.Application) -> None:
    """Register the speech and Live mode routes."""
    app.router.add_get("/api/chat/{conversation}/messages/{seq}/speech", speech)
    for path in REALTIME_PATHS:
        app.router.add_post(f"/api/realtime/{path}", realtime)
