"""A fake Zulip server on 127.0.0.1 speaking the documented REST API with HTTP basic auth
(the bot's email and API key): `GET /api/v1/users/me`, `POST /api/v1/register` and the
long poll `GET /api/v1/events` (events after `last_event_id`, a `heartbeat` when nothing
came, 400 `BAD_EVENT_QUEUE_ID` for a queue it dropped), `POST /api/v1/messages`, `GET
/api/v1/messages` (from an anchor), `POST /api/v1/user_uploads` and the uploads at
`/user_uploads/...`. Every message reaches the event queues of its recipients, the
sender's own included, as on Zulip. A test can hold sends (to kill a process mid-reply)
and drop the queues (as a server restart does).

`ZulipDriver` plays Alice in a direct message with the bot.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from habakkuk.engine.timeouts import wait_within
from tests.helpers import eventually

BOT_EMAIL, BOT_NAME, BOT_ID = "habakkuk-bot@zulip.test", "Habakkuk", 10
ALICE_EMAIL, ALICE_ID = "alice@zulip.test", 11
BOB_EMAIL, BOB_ID = "bob@zulip.test", 12
API_KEY = "zulip-test-api-key-0123456789abcd"
_LINK = re.compile(r"\[([^\]\n]*)\]\((/user_uploads/[^)\s]+)\)")
PEOPLE = {
    BOT_ID: (BOT_EMAIL, BOT_NAME),
    ALICE_ID: (ALICE_EMAIL, "Alice"),
    BOB_ID: (BOB_EMAIL, "Bob"),
}


@dataclass
class Message:
    """One message on the server."""

    id: int
    sender_id: int
    content: str
    recipients: list[int] = field(default_factory=list)  # a direct message's people
    stream_id: int = 0
    topic: str = ""
    timestamp: int = field(default_factory=lambda: int(time.time()))

    def wire(self) -> dict[str, Any]:
        email, name = PEOPLE[self.sender_id]
        out: dict[str, Any] = {
            "id": self.id, "sender_id": self.sender_id, "sender_email": email,
            "sender_full_name": name, "content": self.content, "timestamp": self.timestamp,
        }  # fmt: skip
        if self.stream_id:
            out.update(type="stream", stream_id=self.stream_id, subject=self.topic)
            out["display_recipient"] = f"stream{self.stream_id}"
        else:
            out["type"] = "private"
            out["display_recipient"] = [
                {"id": uid, "email": PEOPLE[uid][0], "full_name": PEOPLE[uid][1]}
                for uid in sorted({self.sender_id, *self.recipients})
            ]
        return out

    def flags(self) -> list[str]:
        return ["mentioned"] if f"@**{BOT_NAME}**" in self.content else []

    def files(self) -> list[tuple[str, str]]:
        return [(m.group(1), m.group(2)) for m in _LINK.finditer(self.content)]


@dataclass
class Queue:
    """A registered event queue of one user."""

    id: str
    user_id: int
    events: list[dict[str, Any]] = field(default_factory=list)
    next_id: int = 0


class FakeZulip:
    """The fake server (start / stop, or `async with`)."""

    def __init__(self, heartbeat: float = 1.0) -> None:
        self.heartbeat = heartbeat
        self.messages: list[Message] = []
        self.uploads: dict[str, bytes] = {}
        self.queues: dict[str, Queue] = {}
        self.registers = 0
        self.polls: list[tuple[str, int]] = []  # (queue_id, last_event_id) of each poll
        self.anchors: list[str] = []  # the anchor of each GET /messages
        self.sends = 0
        self._ids = itertools.count(100)
        self._queue_ids = itertools.count(1)
        self._changed = asyncio.Condition()
        self._hold_after: int | None = None
        self._released = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_get("/api/v1/users/me", self._me)
        app.router.add_post("/api/v1/register", self._register)
        app.router.add_get("/api/v1/events", self._events)
        app.router.add_post("/api/v1/messages", self._send)
        app.router.add_get("/api/v1/messages", self._history)
        app.router.add_post("/api/v1/user_uploads", self._upload)
        app.router.add_get("/user_uploads/{path:.+}", self._download)
        self._runner = web.AppRunner(app, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        self._released.set()
        if self._runner is not None:
            await self._runner.cleanup()

    async def __aenter__(self) -> FakeZulip:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- the test's hand ---------------------------------------------------------------

    def post(
        self,
        sender_id: int,
        content: str,
        *,
        to: list[int] | None = None,
        stream_id: int = 0,
        topic: str = "",
    ) -> Message:
        """A message someone (not the bot) sends: to people, or to a stream's topic."""
        message = Message(next(self._ids), sender_id, content, to or [], stream_id, topic)
        self._store(message)
        return message

    def upload(self, name: str, data: bytes) -> str:
        """A file someone uploaded; its path, to link in a message."""
        path = f"/user_uploads/2/{len(self.uploads):02x}/{name}"
        self.uploads[path] = data
        return path

    def drop_queues(self) -> None:
        """Forget every event queue (a server restart, a queue idle too long)."""
        self.queues.clear()

    def of(self, user_id: int) -> list[Message]:
        """The direct messages between the bot and `user_id`, oldest first."""
        return [
            m
            for m in self.messages
            if not m.stream_id and {m.sender_id, *m.recipients} == {BOT_ID, user_id}
        ]

    def by_bot(self) -> list[Message]:
        return [m for m in self.messages if m.sender_id == BOT_ID]

    def hold_sends_after(self, count: int) -> None:
        """Answer no send after the first `count` (they hang until `release`)."""
        self._hold_after = count
        self._released.clear()

    def release(self) -> None:
        self._hold_after = None
        self._released.set()

    async def wait_for(self, predicate: Any, timeout: float = 20.0) -> None:
        await eventually(predicate, what="the fake Zulip", timeout=timeout)

    # -- the API -------------------------------------------------------------------------

    def _store(self, message: Message) -> None:
        self.messages.append(message)
        for queue in self.queues.values():
            if message.stream_id or queue.user_id in {message.sender_id, *message.recipients}:
                flags = message.flags() if queue.user_id == BOT_ID else []
                queue.events.append(
                    {"type": "message", "id": queue.next_id, "message": message.wire(),
                     "flags": flags}
                )  # fmt: skip
                queue.next_id += 1
        asyncio.get_running_loop().create_task(self._notify())

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    def _user(self, request: web.Request) -> int | None:
        header = request.headers.get("Authorization", "")
        if not header.startswith("Basic "):
            return None
        email, _, key = base64.b64decode(header[6:]).decode().partition(":")
        return BOT_ID if (email, key) == (BOT_EMAIL, API_KEY) else None

    @staticmethod
    def _error(status: int, code: str, msg: str, **more: Any) -> web.Response:
        return web.json_response(
            {"result": "error", "code": code, "msg": msg, **more}, status=status
        )

    @staticmethod
    def _ok(**body: Any) -> web.Response:
        return web.json_response({"result": "success", "msg": "", **body})

    def _unauthorized(self) -> web.Response:
        return self._error(401, "UNAUTHORIZED", "Invalid API key")

    async def _me(self, request: web.Request) -> web.Response:
        if self._user(request) is None:
            return self._unauthorized()
        return self._ok(user_id=BOT_ID, email=BOT_EMAIL, full_name=BOT_NAME, is_bot=True)

    async def _register(self, request: web.Request) -> web.Response:
        user = self._user(request)
        if user is None:
            return self._unauthorized()
        form = await request.post()
        assert form.get("event_types") == '["message"]', form
        self.registers += 1
        queue = Queue(f"queue-{next(self._queue_ids)}", user)
        self.queues[queue.id] = queue
        return self._ok(queue_id=queue.id, last_event_id=-1)

    async def _events(self, request: web.Request) -> web.Response:
        if self._user(request) is None:
            return self._unauthorized()
        queue_id = request.query.get("queue_id", "")
        last = int(request.query.get("last_event_id", "-1"))
        self.polls.append((queue_id, last))
        queue = self.queues.get(queue_id)
        if queue is None:
            return self._error(
                400, "BAD_EVENT_QUEUE_ID", f"Bad event queue ID: {queue_id}", queue_id=queue_id
            )
        queue.events = [e for e in queue.events if e["id"] > last]  # acknowledged: gone
        if not queue.events:
            async with self._changed:
                with contextlib.suppress(TimeoutError):
                    await wait_within(self._changed.wait(), self.heartbeat)
        if queue_id not in self.queues:
            return self._error(400, "BAD_EVENT_QUEUE_ID", f"Bad event queue ID: {queue_id}")
        if not queue.events:
            queue.events.append({"type": "heartbeat", "id": queue.next_id})
            queue.next_id += 1
        return self._ok(events=list(queue.events), queue_id=queue_id)

    async def _send(self, request: web.Request) -> web.Response:
        if self._user(request) is None:
            return self._unauthorized()
        form = await request.post()
        self.sends += 1
        if self._hold_after is not None and self.sends > self._hold_after:
            await self._released.wait()
            return self._error(500, "BAD_REQUEST", "gone")
        content = str(form.get("content", ""))
        if form.get("type") == "stream":
            stream_id, topic = int(str(form["to"])), str(form.get("topic", ""))
            message = Message(next(self._ids), BOT_ID, content, [], stream_id, topic)
        else:
            people = json.loads(str(form["to"]))
            ids = [uid for uid, (email, _) in PEOPLE.items() if email in people or uid in people]
            if len(ids) != len(people):
                return self._error(400, "BAD_REQUEST", f"Invalid email in {people}")
            message = Message(next(self._ids), BOT_ID, content, ids)
        self._store(message)
        return self._ok(id=message.id)

    async def _history(self, request: web.Request) -> web.Response:
        if self._user(request) is None:
            return self._unauthorized()
        anchor = request.query["anchor"]
        self.anchors.append(anchor)
        after = int(anchor)
        found = [m for m in self.messages if m.id > after][: int(request.query["num_after"])]
        return self._ok(messages=[dict(m.wire(), flags=m.flags()) for m in found])

    async def _upload(self, request: web.Request) -> web.Response:
        if self._user(request) is None:
            return self._unauthorized()
        form = await request.post()
        field_ = form.get("filename")
        if not isinstance(field_, web.FileField):
            return self._error(400, "BAD_REQUEST", "You must upload exactly one file.")
        path = self.upload(field_.filename, field_.file.read())
        return self._ok(uri=path, url=path)

    async def _download(self, request: web.Request) -> web.StreamResponse:
        if self._user(request) is None:
            return self._unauthorized()
        data = self.uploads.get(request.path)
        if data is None:
            return self._error(404, "BAD_REQUEST", "File not found")
        return web.Response(body=data)


class ZulipDriver:
    """Alice in a direct message with the bot on the fake Zulip (approvals typed)."""

    kind = "zulip"
    has_buttons = False

    def __init__(self, fake: FakeZulip):
        self.fake = fake

    def channel_yaml(self, name: str) -> str:
        return (
            f"type: zulip\nbase_url: {self.fake.base_url}\nusername: {BOT_EMAIL}\n"
            f'token_env: ZULIP_TEST_KEY\nallow_from: ["{ALICE_EMAIL}"]\n'
        )

    def env(self) -> dict[str, str]:
        return {"ZULIP_TEST_KEY": API_KEY}

    async def say(self, text: str) -> None:
        self.fake.post(ALICE_ID, text, to=[BOT_ID])

    async def send_file(self, name: str, data: bytes, media_type: str, caption: str = "") -> None:
        path = self.fake.upload(name, data)
        self.fake.post(ALICE_ID, f"{caption}\n[{name}]({path})".strip(), to=[BOT_ID])

    async def press(self, label: str) -> None:
        raise AssertionError("Zulip has no buttons: approvals are typed")

    def texts(self) -> list[str]:
        return [
            m.content for m in self.fake.of(ALICE_ID) if m.sender_id == BOT_ID and not m.files()
        ]

    def files(self) -> list[tuple[str, bytes]]:
        return [
            (name, self.fake.uploads[path])
            for m in self.fake.of(ALICE_ID)
            if m.sender_id == BOT_ID
            for name, path in m.files()
        ]
