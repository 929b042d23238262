"""A fake WhatsApp agent platform on 127.0.0.1, speaking the wire habakkuk/channels/
whatsappagent.py documents: `GET /<version>/updates?offset=N&timeout=S` held until an
update at or past N exists (or S seconds pass: 204, no body), `POST /<version>/messages`,
media on a path of its own, the agent's key as a bearer token, a 409 while another poller
holds the key. Updates stay (polling does not consume them), as on the platform.

`AgentDriver` plays the person writing to the agent.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from aiohttp import web

from habakkuk.channels.metagraph import GRAPH_VERSION

AGENT_KEY = "agent-test-key-0123456789"
ALICE = "4711"
# The poll spacing of tests that are not about it: a poll is held until an update comes,
# so a short spacing only ends the 4.3 s wait before each message after the first.
QUICK_SPACING = 0.05


@dataclass
class Sent:
    """A message the agent sent."""

    id: str
    to: str
    text: str


class FakeAgentPlatform:
    """The agent platform's updates and messages for one agent key."""

    def __init__(self) -> None:
        self.updates: list[dict[str, Any]] = []  # update_id is the index
        self.sent: list[Sent] = []
        self.polls: list[tuple[float, int]] = []  # (monotonic start, offset)
        self.refuse_key = False
        self.conflict = False  # another poller holds the key: 409
        self.empty_sends = False  # answer a send with 204 and no body
        self.hold: asyncio.Event | None = None
        self.held = 0
        self.media: dict[str, tuple[bytes, str]] = {}
        self._new = asyncio.Event()
        self._closing = False  # set on exit: held polls answer at once, as at their timeout
        self._ids = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self.base_url = ""

    async def __aenter__(self) -> FakeAgentPlatform:
        app = web.Application()
        app.router.add_get(f"/{GRAPH_VERSION}/updates", self._poll)
        app.router.add_post(f"/{GRAPH_VERSION}/messages", self._send)
        app.router.add_get("/media/{id}", self._media)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]  # a started TCPSite has its server
        self.base_url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._closing = True
        self._new.set()
        if self._runner is not None:
            await self._runner.cleanup()

    def _denied(self, request: web.Request) -> web.Response | None:
        if self.refuse_key or request.headers.get("Authorization") != f"Bearer {AGENT_KEY}":
            error = {"message": "Invalid agent key", "type": "OAuthException", "code": 190}
            return web.json_response({"error": error}, status=401)
        return None

    async def _poll(self, request: web.Request) -> web.StreamResponse:
        denied = self._denied(request)
        if denied is not None:
            return denied
        if self.conflict:
            error = {"message": "Another poller is active for this key", "code": 409}
            return web.json_response({"error": error}, status=409)
        offset = int(request.query.get("offset", "0"))
        self.polls.append((time.monotonic(), offset))
        deadline = time.monotonic() + float(request.query.get("timeout", "0"))
        while len(self.updates) <= offset and time.monotonic() < deadline and not self._closing:
            self._new.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._new.wait(), deadline - time.monotonic())
        batch = self.updates[offset : offset + 100]
        if not batch:
            return web.Response(status=204)
        return web.json_response({"updates": batch, "next_offset": offset + len(batch)})

    async def _send(self, request: web.Request) -> web.Response:
        denied = self._denied(request)
        if denied is not None:
            return denied
        body = await request.json()
        if self.hold is not None:
            self.held += 1
            await self.hold.wait()
            raise web.HTTPServiceUnavailable()
        to, text = str(body.get("to", "")), str(body.get("text", ""))
        if not to.startswith("user:") or not text:
            error = {"message": "(#100) to and text are required", "code": 100}
            return web.json_response({"error": error}, status=400)
        sent = Sent(f"amid.{next(self._ids)}", to, text)
        self.sent.append(sent)
        return web.Response(status=204) if self.empty_sends else web.json_response({"id": sent.id})

    async def _media(self, request: web.Request) -> web.Response:
        denied = self._denied(request)
        if denied is not None:
            return denied
        found = self.media.get(request.match_info["id"])
        if found is None:
            raise web.HTTPNotFound()
        return web.Response(body=found[0], content_type=found[1])

    def push(self, sender: str, text: str = "", *, age: float = 0.0, **extra: Any) -> str:
        """A message from `user:<sender>` becomes the next update; returns its id."""
        message_id = f"msg.{next(self._ids)}"
        message = {"id": message_id, "from": f"user:{sender}", "text": text, **extra}
        update_id = len(self.updates)
        self.updates.append(
            {"update_id": update_id, "created_at": int(time.time() - age), "message": message}
        )
        self._new.set()
        return message_id

    def push_file(self, sender: str, name: str, data: bytes, media_type: str, text: str) -> str:
        """A message carrying a file served on the platform's media path."""
        media_id = f"{next(self._ids)}"
        self.media[media_id] = (data, media_type)
        attachment = {
            "id": media_id,
            "url": f"{self.base_url}/media/{media_id}",
            "mime_type": media_type,
            "name": name,
        }
        return self.push(sender, text, attachments=[attachment])


class AgentDriver:
    """The person (ALICE) writing to the agent."""

    kind = "whatsappagent"
    has_buttons = False

    def __init__(self, fake: FakeAgentPlatform):
        self.fake = fake

    def channel_yaml(self, name: str) -> str:
        return (
            f"type: whatsappagent\ntoken_env: WA_AGENT_KEY\nbase_url: {self.fake.base_url}\n"
            f'allow_from: ["{ALICE}"]\n'
        )

    def env(self) -> dict[str, str]:
        return {"WA_AGENT_KEY": AGENT_KEY}

    async def say(self, text: str) -> None:
        self.fake.push(ALICE, text)

    async def send_file(self, name: str, data: bytes, media_type: str, caption: str = "") -> None:
        self.fake.push_file(ALICE, name, data, media_type, caption)

    async def press(self, label: str) -> None:
        raise AssertionError("the agent platform has no buttons")

    def texts(self) -> list[str]:
        return [sent.text for sent in self.fake.sent if sent.to == f"user:{ALICE}"]

    def files(self) -> list[tuple[str, bytes]]:
        return []
