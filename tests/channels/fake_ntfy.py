"""A fake ntfy server on a loopback port, speaking ntfy's documented HTTP API: publish
with `POST /<topic>` (the body the message; Markdown, Priority and Message headers) or
`PUT /<topic>` with a `Filename` (an attachment served at `/file/<id>`); subscribe with
`GET /<topic>/json[?since=<id>|all][&poll=1]`, one JSON event a line (`open`,
`keepalive`, `message`). An access token, when set, is required as `Bearer`. A test
can hold publishes (to kill a process mid-reply) and read every message of a topic."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from habakkuk.engine.timeouts import wait_within
from tests.helpers import eventually


@dataclass
class Published:
    """One message stored on a topic."""

    id: str
    topic: str
    message: str
    time: int
    headers: dict[str, str] = field(default_factory=dict)
    file: tuple[str, str, bytes] | None = None  # name, type, data

    def event(self, base_url: str) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id, "time": self.time, "event": "message",
            "topic": self.topic, "message": self.message,
        }  # fmt: skip
        if self.file is not None:
            name, media, data = self.file
            out["attachment"] = {
                "name": name, "type": media, "size": len(data),
                "url": f"{base_url}/file/{self.id}",
            }  # fmt: skip
        return out


class FakeNtfy:
    """The fake server (start / stop, or `async with`)."""

    def __init__(self, token: str = "", keepalive: float = 1.0) -> None:
        self.token = token
        self.keepalive = keepalive
        self.messages: list[Published] = []
        self.subscriptions: list[str] = []  # the `since` of each subscribe ("" for none)
        self.streams = 0
        self.publishes = 0
        self._ids = itertools.count(1)
        self._changed = asyncio.Condition()
        self._hold_after: int | None = None
        self._released = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/file/{id}", self._file)
        app.router.add_get("/{topic}/json", self._subscribe)
        app.router.add_route("POST", "/{topic}", self._publish)
        app.router.add_route("PUT", "/{topic}", self._publish)
        self._runner = web.AppRunner(app, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        self._released.set()
        if self._runner is not None:
            await self._runner.cleanup()

    async def __aenter__(self) -> FakeNtfy:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- the test's hand ---------------------------------------------------------------

    def store(
        self, topic: str, message: str, file: tuple[str, str, bytes] | None = None
    ) -> Published:
        """A message published to `topic` by someone else (the person)."""
        item = Published(f"msg{next(self._ids):04d}", topic, message, int(time.time()), file=file)
        self.messages.append(item)
        asyncio.get_running_loop().create_task(self._notify())
        return item

    def of(self, topic: str) -> list[Published]:
        return [m for m in self.messages if m.topic == topic]

    def hold_publishes_after(self, count: int) -> None:
        """Answer no publish after the first `count` (they hang until `release`)."""
        self._hold_after = count
        self._released.clear()

    def release(self) -> None:
        self._hold_after = None
        self._released.set()

    async def wait_for(self, predicate: Any, timeout: float = 20.0) -> None:
        await eventually(predicate, what="the fake ntfy", timeout=timeout)

    def _next_id(self) -> str:
        return f"msg{next(self._ids):04d}"

    # -- the API -------------------------------------------------------------------------

    def _allowed(self, request: web.Request) -> bool:
        return not self.token or request.headers.get("Authorization") == f"Bearer {self.token}"

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def _publish(self, request: web.Request) -> web.StreamResponse:
        if not self._allowed(request):
            return web.json_response({"code": 40101, "error": "unauthorized"}, status=401)
        body = await request.read()
        topic = request.match_info["topic"]
        self.publishes += 1
        if self._hold_after is not None and self.publishes > self._hold_after:
            await self._released.wait()
            return web.json_response({"error": "gone"}, status=500)
        headers = {k: v for k, v in request.headers.items() if k.lower() in (
            "markdown", "priority", "filename", "message", "title", "content-type"
        )}  # fmt: skip
        name = request.headers.get("Filename", "")
        file = None
        message = body.decode("utf-8", "replace")
        if request.method == "PUT" and name:
            file = (name, request.headers.get("Content-Type", "application/octet-stream"), body)
            message = request.headers.get("Message", "") or f"You received a file: {name}"
        item = Published(
            f"msg{next(self._ids):04d}", topic, message, int(time.time()), headers, file
        )
        self.messages.append(item)
        await self._notify()
        return web.json_response(item.event(self.base_url))

    async def _file(self, request: web.Request) -> web.StreamResponse:
        for item in self.messages:
            if item.id == request.match_info["id"] and item.file is not None:
                return web.Response(body=item.file[2], content_type=item.file[1])
        return web.json_response({"error": "not found"}, status=404)

    async def _subscribe(self, request: web.Request) -> web.StreamResponse:
        if not self._allowed(request):
            return web.json_response({"code": 40101, "error": "unauthorized"}, status=401)
        topic = request.match_info["topic"]
        since = request.query.get("since", "")
        self.subscriptions.append(since)
        known = self.of(topic)
        if since == "all":
            start = 0
        elif since and since != "latest":
            ids = [m.id for m in known]
            start = ids.index(since) + 1 if since in ids else 0
        else:
            start = len(known)
        if request.query.get("poll") == "1":
            lines = [json.dumps(m.event(self.base_url)) for m in known[start:]]
            return web.Response(text="".join(f"{line}\n" for line in lines))
        response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
        await response.prepare(request)
        self.streams += 1
        sent = start
        opened = {"id": "open", "time": int(time.time()), "event": "open", "topic": topic}
        await response.write(json.dumps(opened).encode() + b"\n")
        try:
            while True:
                for item in self.of(topic)[sent:]:
                    await response.write(json.dumps(item.event(self.base_url)).encode() + b"\n")
                    sent += 1
                async with self._changed:
                    with contextlib.suppress(TimeoutError):
                        await wait_within(self._changed.wait(), self.keepalive)
                if len(self.of(topic)) == sent:
                    alive = {
                        "id": "ka",
                        "time": int(time.time()),
                        "event": "keepalive",
                        "topic": topic,
                    }
                    await response.write(json.dumps(alive).encode() + b"\n")
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        return response
