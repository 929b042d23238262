"""A fake of OpenAI's POST /v1/realtime/client_secrets on 127.0.0.1, as OpenAI
documents it: a bearer key; a JSON body {expires_after: {anchor: "created_at", seconds
10..7200}, session: {type: "realtime", model, instructions, audio: {input:
{transcription: {model}}, output: {voice}}, tools: [{type: "function", name,
description, parameters}]}} -> {value: "ek_...", expires_at (epoch seconds), session}.
A wrong key is a 401, a malformed body a 400, each {"error": {"message", "type"}}.
POST /v1/realtime/calls takes a WebRTC offer (Content-Type: application/sdp) with a
client secret as the bearer token and answers SDP; it answers a browser's CORS preflight
as the real API does, since the dashboard posts there from its own origin.

Every request body is kept in `seen`; the fake checks the shape itself (a body the real
API would refuse is refused here too), independently of the code under test.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from aiohttp import web

from tests.fakes.loopback import serve_on_loopback

KEY = "sk-realtime-test"
ANSWER_SDP = "v=0\r\no=- 0 0 IN IP4 127.0.0.1\r\ns=fake answer\r\nt=0 0\r\n"
CORS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Methods": "POST",
    "Access-Control-Allow-Headers": "Authorization, Content-Type",
}
SECRET = "ek_fake_client_secret_0123"


def _problem(body: Any) -> str | None:
    """Why the real API would refuse `body`, or None."""
    if not isinstance(body, dict):
        return "the body must be a JSON object"
    after = body.get("expires_after")
    if after is not None and (
        after.get("anchor") != "created_at" or not 10 <= int(after.get("seconds", 0)) <= 7200
    ):
        return "expires_after: anchor created_at, seconds between 10 and 7200"
    session = body.get("session")
    if not isinstance(session, dict) or session.get("type") != "realtime":
        return "session.type must be 'realtime'"
    if not isinstance(session.get("model"), str):
        return "session.model is required"
    for tool in session.get("tools", []):
        # The realtime API takes flat function tools (not {"function": {...}}).
        if tool.get("type") != "function" or not isinstance(tool.get("name"), str):
            return "tools[]: {type: function, name, description, parameters}"
        if "function" in tool or tool.get("parameters", {}).get("type") != "object":
            return "tools[]: parameters must be a JSON schema object"
    return None


@dataclass
class FakeRealtime:
    """The client-secrets endpoint under {url}/v1."""

    seen: list[Any] = field(default_factory=list)
    offers: list[str] = field(default_factory=list)
    port: int = 0
    _runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> FakeRealtime:
        app = web.Application()
        app.router.add_post("/v1/realtime/client_secrets", self._mint)
        app.router.add_post("/v1/realtime/calls", self._call)
        app.router.add_route("OPTIONS", "/v1/realtime/calls", self._preflight)
        self._runner, self.port = await serve_on_loopback(app)
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _mint(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {KEY}":
            error = {
                "error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}
            }
            return web.json_response(error, status=401)
        body = await request.json()
        self.seen.append(body)
        problem = _problem(body)
        if problem is not None:
            error = {"error": {"message": problem, "type": "invalid_request_error"}}
            return web.json_response(error, status=400)
        seconds = int(body.get("expires_after", {}).get("seconds", 600))
        session = dict(body["session"], id="sess_fake", object="realtime.session")
        return web.json_response(
            {"value": SECRET, "expires_at": int(time.time()) + seconds, "session": session}
        )

    async def _preflight(self, request: web.Request) -> web.Response:
        return web.Response(status=204, headers=CORS)

    async def _call(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {SECRET}":
            error = {"error": {"message": "Invalid client secret", "type": "invalid_request_error"}}
            return web.json_response(error, status=401, headers=CORS)
        if request.content_type != "application/sdp":
            error = {"error": {"message": "send application/sdp", "type": "invalid_request_error"}}
            return web.json_response(error, status=400, headers=CORS)
        self.offers.append(await request.text())
        return web.Response(text=ANSWER_SDP, content_type="application/sdp", headers=CORS)
