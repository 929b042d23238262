"""A fake Rocket.Chat on 127.0.0.1: the realtime API at `/websocket` as DDP (`connect`,
the `login` method with a `resume` token, `sub` to `stream-room-messages`
`__my_messages__`, `changed` events, `ping`/`pong`) and the REST API with `X-User-Id` /
`X-Auth-Token`: `GET /api/v1/me`; `POST /api/v1/chat.sendMessage` (a message's own `_id`
taken; a repeat of a stored id refused with a 400, as the server does: its sendMessage
returns nothing for it and the route fails reading that nothing); `GET chat.getMessage`;
`POST chat.delete`; `GET subscriptions.get` and `im.history` / `channels.history` /
`groups.history` (`oldest`, `inclusive`, `count`, `offset`; newest first, times as ISO
strings as REST writes them); `POST /api/v1/rooms.upload/<rid>`; the uploads at
`/file-upload/...`. A test can hold sends (to kill a process mid-reply), have sends stored
but their answers lost, and drop every socket (a server restart).

A press of an attachment button with `msg_in_chat_window` and `msg_processing_type:
sendMessage` is what the person's client does: it posts the button's `msg` into the room
as the person (`press`).

`RocketDriver` plays Alice in a direct message with the bot.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
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
    actions: list[dict[str, Any]] = field(default_factory=list)  # attachments with buttons
    edited: bool = False

    def wire(self, rest: bool = False) -> dict[str, Any]:
        """The message as the realtime API (EJSON dates) or the REST API (ISO) writes it."""
        stamp: Any = _iso(self.ts) if rest else {"$date": self.ts}
        out: dict[str, Any] = {
            "_id": self.id, "rid": self.rid, "msg": self.msg, "ts": stamp,
            "u": {"_id": self.user_id, "username": USERS[self.user_id],
                  "name": USERS[self.user_id].title()},
            "mentions": [{"_id": uid, "username": USERS[uid]} for uid in self.mentions],
            "_updatedAt": stamp,
        }  # fmt: skip
        if self.edited:
            out["editedAt"] = stamp
            out["editedBy"] = {"_id": self.user_id, "username": USERS[self.user_id]}
        if self.actions:
            out["attachments"] = self.actions
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


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


def _parse_iso(text: str) -> int:
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


class FakeRocketChat:
    """The fake server (`async with`)."""

    def __init__(self, ping: float = 1.0) -> None:
        self.ping = ping
        self.messages: list[Message] = []
        self.logins: list[str] = []  # the resume token of each login
        self.subscribed = 0
        self.sends = 0
        self.history_reads: list[tuple[str, str]] = []  # (endpoint, roomId) of each read
        self.rooms: dict[str, str] = {DM_ROOM: "d"}  # the rooms the bot is in: id, type
        self._lose = 0
        self.refuse_deletes = False  # chat.delete refused (the bot lacks delete-own-message)
        self.unreadable: set[str] = set()  # rooms whose history the server will not show
        self.refuse_buttons = False  # attachment actions refused (an app vetoing them)
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
        app.router.add_post("/api/v1/chat.sendMessage", self._send)
        app.router.add_get("/api/v1/chat.getMessage", self._get_message)
        app.router.add_post("/api/v1/chat.delete", self._delete)
        app.router.add_get("/api/v1/subscriptions.get", self._subscriptions)
        for endpoint, kind in (("im", "d"), ("channels", "c"), ("groups", "p")):
            app.router.add_get(f"/api/v1/{endpoint}.history", self._history(kind))
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
        self.rooms.setdefault(rid, room_type)
        await self._store(message)
        return message

    async def press(self, label: str, rid: str = DM_ROOM) -> Message:
        """Alice presses the button labelled `label` on the newest message that has one
        (once it is shown: the buttons follow the prompt): her client posts the button's
        `msg` into the room as her."""

        def button() -> tuple[Message, dict[str, Any]] | None:
            for message in reversed(self.of(rid)):
                for attachment in message.actions:
                    for action in attachment.get("actions", []):
                        if action.get("type") == "button" and action.get("text") == label:
                            return message, action
            return None

        await eventually(lambda: button() is not None, what=f"a button {label!r} in {rid}")
        found = button()
        assert found is not None
        message, action = found
        assert action.get("msg_in_chat_window") is True
        assert action.get("msg_processing_type") == "sendMessage"
        return await self.say(
            action["msg"], rid=rid, room_type=message.room_type, tmid=message.tmid
        )

    def lose_answers(self, count: int) -> None:
        """Store the next `count` sends but lose their answers (a 504 from a proxy)."""
        self._lose = count

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
        if edited:
            message.edited = True
        wire = message.wire()
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

    async def _send(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._unauthorized()
        body = (await request.json())["message"]
        if await self._held():
            return web.json_response({"success": False}, status=500)
        if self.refuse_buttons and body.get("attachments"):
            error = "A Rocket.Chat App prevented the message sending."
            return web.json_response({"success": False, "error": error}, status=400)
        own = body.get("_id")
        if own is not None and any(m.id == own for m in self.messages):
            # sendMessage() returns nothing for a known id; normalizing it fails (400)
            error = "Cannot read properties of undefined (reading 'starred')"
            return web.json_response({"success": False, "error": error}, status=400)
        message = Message(
            own or f"b{next(self._ids):05d}",
            body["rid"],
            BOT_ID,
            body.get("msg", ""),
            room_type=self.rooms.get(body["rid"], "d"),
            tmid=body.get("tmid", ""),
            actions=body.get("attachments", []),
        )
        await self._store(message)
        if self._lose:
            self._lose -= 1
            return web.json_response({"message": "gateway timeout"}, status=504)
        return web.json_response({"message": message.wire(rest=True), "success": True})

    async def _get_message(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._unauthorized()
        for message in self.messages:
            if message.id == request.query.get("msgId"):
                return web.json_response({"message": message.wire(rest=True), "success": True})
        return web.json_response({"success": False}, status=400)

    async def _delete(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._unauthorized()
        body = await request.json()
        for message in self.messages:
            if message.id == body.get("msgId"):
                if message.rid != body.get("roomId"):
                    error = "The room id provided does not match where the message is from."
                    return web.json_response({"success": False, "error": error}, status=400)
                if message.user_id != BOT_ID or self.refuse_deletes:
                    return web.json_response(
                        {"success": False, "error": "error-action-not-allowed"}, status=400
                    )
                self.messages.remove(message)
                return web.json_response(
                    {"_id": message.id, "ts": str(int(time.time() * 1000)), "success": True}
                )
        error = f'No message found with the id of "{body.get("msgId")}".'
        return web.json_response({"success": False, "error": error}, status=400)

    async def _subscriptions(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._unauthorized()
        update = [
            {"_id": f"s{rid}", "rid": rid, "t": kind, "name": rid, "open": True,
             "u": {"_id": BOT_ID, "username": BOT_USER}}
            for rid, kind in self.rooms.items()
        ]  # fmt: skip
        return web.json_response({"update": update, "remove": [], "success": True})

    def _history(self, kind: str) -> Any:
        async def history(request: web.Request) -> web.Response:
            if not self._authorized(request):
                return self._unauthorized()
            query = request.query
            rid = query["roomId"]
            if self.rooms.get(rid) != kind:  # the wrong endpoint for the room's type
                return web.json_response(
                    {"success": False, "error": "error-room-not-found"}, status=400
                )
            if rid in self.unreadable:
                return web.json_response(
                    {"success": False, "error": "error-not-allowed"}, status=403
                )
            self.history_reads.append((request.path.rsplit("/", 1)[-1], rid))
            oldest = _parse_iso(query["oldest"]) if "oldest" in query else 0
            inclusive = query.get("inclusive") == "true"
            found = [m for m in self.of(rid) if m.ts > oldest or (inclusive and m.ts == oldest)]
            found.reverse()  # newest first (those of one millisecond too)
            offset, count = int(query.get("offset", "0")), int(query.get("count", "20"))
            page = [m.wire(rest=True) for m in found[offset : offset + count]]
            return web.json_response({"messages": page, "unreadNotLoaded": 0, "success": True})

        return history

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
    """Alice in a direct message with the bot on the fake Rocket.Chat (approvals by button)."""

    kind = "rocketchat"
    has_buttons = True

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
        await self.fake.press(label)

    def texts(self) -> list[str]:
        """The bot's texts (not the messages carrying buttons alone)."""
        return [
            m.msg
            for m in self.fake.of()
            if m.user_id == BOT_ID and m.file is None and not (m.actions and not m.msg)
        ]

    def files(self) -> list[tuple[str, bytes]]:
        return [(m.file[0], m.file[2]) for m in self.fake.of() if m.user_id == BOT_ID and m.file]
