"""A fake Rocket.Chat on 127.0.0.1: the realtime API at `/websocket` as DDP (`connect`,
the `login` method with a `resume` token, `sub` to `stream-room-messages`
`__my_messages__`, `changed` events, `ping`/`pong`) and the REST API with `X-User-Id` /
`X-Auth-Token` (`GET /api/v1/me`, `POST /api/v1/chat.postMessage`, `POST
/api/v1/rooms.upload/<rid>`, the uploads at `/file-upload/...`). A test can hold sends
(to kill a process mid-reply) and drop every socket (a server restart).

`RocketDriver` plays Alice in a direct message with the bot.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

from tests.helpers import eventually

BOT_ID, BOT_USER = "botUserId0001", "habakkuk"
ALICE_ID, ALICE = "aliceUserId001", "alice"
TOKEN = "rc-personal-access-token-0123456789abcdef"
DM_ROOM = "aliceUserId001botUserId0001"
USERS = {BOT_ID: BOT_USER, ALICE_ID: ALICE}


@dataclass
class Message:
    """One message in a room."""

    id: str
    rid: str
    user_id: str
    msg: str
    room_type: str = "d"
    tmid: str = ""
    mentions: list[str] = field(default_factory=list)
    file: tuple[str, str, bytes] | None = None  # name, type, data
    ts: int = field(default_factory=lambda: int(time.time() * 1000))

    def wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "_id": self.id, "rid": self.rid, "msg": self.msg, "ts": {"$date": self.ts},
            "u": {"_id": self.user_id, "username": USERS[self.user_id],
                  "name": USERS[self.user_id].title()},
            "mentions": [{"_id": uid, "username": USERS[uid]} for uid in self.mentions],
            "_updatedAt": {"$date": self.ts},
        }  # fmt: skip
        if self.tmid:
            out["tmid"] = self.tmid
        if self.file is not None:
            name, media, data = self.file
            out["file"] = {"_id": f"f{self.id}", "name": name, "type": media}
            out["attachments"] = [
                {"title": name, "title_link": f"/file-upload/f{self.id}/{name}",
                 "type": "file", "size": len(data)}
            ]  # fmt: skip
        return out


class FakeRocketChat:
    """The fake server (`async with`)."""

    def __init__(self, ping: float = 1.0) -> None:
        self.ping = ping
        self.messages: list[Message] = []
        self.logins: list[str] = []  # the resume token of each login
        self.subscribed = 0
        self.sends = 0
        self._ids = itertools.count(1)
        self._sockets: set[web.WebSocketResponse] = set()
        self._hold_after: int | None = None
        self._released = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> FakeRocketChat:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_get("/websocket", self._websocket)
        app.router.add_get("/api/v1/me", self._me)
        app.router.add_post("/api/v1/chat.postMessage", self._post)
        app.router.add_post("/api/v1/rooms.upload/{rid}", self._upload)
        app.router.add_get("/file-upload/{id}/{name}", self._file)
        self._runner = web.AppRunner(app, shutdown_timeout=0.5)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.port = self._runner.addresses[0][1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._released.set()
        await self.drop_sockets()
        if self._runner is not None:
            await self._runner.cleanup()

    # -- the test's hand ---------------------------------------------------------------

    async def say(
        self,
        text: str,
        *,
        rid: str = DM_ROOM,
        room_type: str = "d",
        mentions: list[str] | None = None,
        tmid: str = "",
        file: tuple[str, str, bytes] | None = None,
    ) -> Message:
        """Alice posts a message in a room the bot is in."""
        message = Message(
            f"m{next(self._ids):05d}", rid, ALICE_ID, text, room_type, tmid, mentions or [], file
        )
        await self._store(message)
        return message

    async def again(self, message: Message, *, edited: bool = False) -> None:
        """Stream a message once more: a duplicate the server sends, or its edit."""
        await self._emit(message, edited)

    def of(self, rid: str = DM_ROOM) -> list[Message]:
        return [m for m in self.messages if m.rid == rid]

    def hold_sends_after(self, count: int) -> None:
        """Answer no send after the first `count` (they hang until `release`)."""
        self._hold_after = count
        self._released.clear()

    def release(self) -> None:
        self._hold_after = None
        self._released.set()

    async def drop_sockets(self) -> None:
        for ws in list(self._sockets):
            await ws.close()

    async def wait_for(self, predicate: Any, timeout: float = 20.0) -> None:
        await eventually(predicate, what="the fake Rocket.Chat", timeout=timeout)

    # -- the server ----------------------------------------------------------------------

    async def _store(self, message: Message) -> None:
        self.messages.append(message)
        await self._emit(message)

    async def _emit(self, message: Message, edited: bool = False) -> None:
        wire = message.wire()
        if edited:
            wire["editedAt"] = {"$date": int(time.time() * 1000)}
            wire["editedBy"] = {"_id": message.user_id, "username": USERS[message.user_id]}
        room = {"roomParticipant": True, "roomType": message.room_type, "roomName": "dm"}
        event = {
            "msg": "changed", "collection": "stream-room-messages", "id": "id",
            "fields": {"eventName": "__my_messages__", "args": [wire, room]},
        }  # fmt: skip
        for ws in list(self._sockets):
            with contextlib.suppress(ConnectionError, RuntimeError):
                await ws.send_json(event)

    def _authorized(self, request: web.Request) -> bool:
        headers = request.headers
        return (headers.get("X-User-Id"), headers.get("X-Auth-Token")) == (BOT_ID, TOKEN)

    @staticmethod
    def _unauthorized() -> web.Response:
        return web.json_response(
            {"status": "error", "message": "You must be logged in to do this."}, status=401
        )

    async def _websocket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        pinger = asyncio.create_task(self._pings(ws))
        subscribed = False
        try:
            async for frame in ws:
                if frame.type != WSMsgType.TEXT:
                    break
                message = json.loads(frame.data)
                kind = message.get("msg")
                if kind == "connect":
                    await ws.send_json({"msg": "connected", "session": "s1"})
                elif kind == "method" and message.get("method") == "login":
                    token = message["params"][0].get("resume", "")
                    self.logins.append(token)
                    if token == TOKEN:
                        result = {"id": BOT_ID, "token": TOKEN, "type": "resume"}
                        await ws.send_json({"msg": "result", "id": message["id"], "result": result})
                    else:
                        error = {
                            "isClientSafe": True, "error": 403, "reason": "User not found",
                            "message": "User not found [403]", "errorType": "Meteor.Error",
                        }  # fmt: skip
                        await ws.send_json({"msg": "result", "id": message["id"], "error": error})
                elif kind == "sub" and message.get("name") == "stream-room-messages":
                    assert message["params"][0] == "__my_messages__"
                    subscribed = True
                    self._sockets.add(ws)
                    self.subscribed += 1
                    await ws.send_json({"msg": "ready", "subs": [message["id"]]})
        finally:
            pinger.cancel()
            if subscribed:
                self._sockets.discard(ws)
        return ws

    async def _pings(self, ws: web.WebSocketResponse) -> None:
        with contextlib.suppress(ConnectionError, RuntimeError):
            while not ws.closed:
                await asyncio.sleep(self.ping)
                await ws.send_json({"msg": "ping"})

    async def _me(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._unauthorized()
        return web.json_response(
            {"_id": BOT_ID, "username": BOT_USER, "name": "Habakkuk", "success": True}
        )

    async def _held(self) -> bool:
        self.sends += 1
        if self._hold_after is not None and self.sends > self._hold_after:
            await self._released.wait()
            return True
        return False

    async def _post(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._unauthorized()
        body = await request.json()
        if await self._held():
            return web.json_response({"success": False}, status=500)
        message = Message(
            f"b{next(self._ids):05d}",
            body["roomId"],
            BOT_ID,
            body["text"],
            tmid=body.get("tmid", ""),
        )
        await self._store(message)
        return web.json_response({"ts": message.ts, "message": message.wire(), "success": True})

    async def _upload(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._unauthorized()
        form = await request.post()
        upload = form.get("file")
        if not isinstance(upload, web.FileField):
            return web.json_response({"success": False, "error": "No file"}, status=400)
        if await self._held():
            return web.json_response({"success": False}, status=500)
        message = Message(
            f"b{next(self._ids):05d}",
            request.match_info["rid"],
            BOT_ID,
            str(form.get("msg", "")),
            file=(upload.filename, upload.content_type, upload.file.read()),
        )
        await self._store(message)
        return web.json_response({"message": message.wire(), "success": True})

    async def _file(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._unauthorized()
        for message in self.messages:
            if message.file is not None and f"f{message.id}" == request.match_info["id"]:
                return web.Response(body=message.file[2], content_type=message.file[1])
        return web.json_response({"success": False}, status=404)


class RocketDriver:
    """Alice in a direct message with the bot on the fake Rocket.Chat (approvals typed)."""

    kind = "rocketchat"
    has_buttons = False

    def __init__(self, fake: FakeRocketChat):
        self.fake = fake

    def channel_yaml(self, name: str) -> str:
        return (
            f"type: rocketchat\nbase_url: {self.fake.base_url}\nuser_id: {BOT_ID}\n"
            f'token_env: ROCKETCHAT_TEST_TOKEN\nallow_from: ["{ALICE}"]\n'
        )

    def env(self) -> dict[str, str]:
        return {"ROCKETCHAT_TEST_TOKEN": TOKEN}

    async def say(self, text: str) -> None:
        await self.fake.say(text)

    async def send_file(self, name: str, data: bytes, media_type: str, caption: str = "") -> None:
        await self.fake.say(caption, file=(name, media_type, data))

    async def press(self, label: str) -> None:
        raise AssertionError("Rocket.Chat approvals are typed")

    def texts(self) -> list[str]:
        return [m.msg for m in self.fake.of() if m.user_id == BOT_ID and m.file is None]

    def files(self) -> list[tuple[str, bytes]]:
        return [(m.file[0], m.file[2]) for m in self.fake.of() if m.user_id == BOT_ID and m.file]
