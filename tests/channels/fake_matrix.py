"""A fake Matrix homeserver on 127.0.0.1 speaking the client-server API's wire format.

It serves what the adapter uses, as the spec (v1.11) describes: `GET /account/whoami`,
`/profile/{user}/displayname`, `/sync` (long polling on a stream position, `since`,
`timeout` in ms, an inline JSON `filter` whose timeline types it applies; joined rooms'
state, timeline and summary, invites' invite_state), `POST /join/{room}`,
`/rooms/{room}/leave`, `GET /rooms/{room}/joined_members`, `/rooms/{room}/event/{id}`,
`PUT /rooms/{room}/send/{type}/{txnId}` (deduplicated per access token and txn id, as a
homeserver does), `/redact/{event}/{txnId}`, `/typing/{user}`, `POST /_matrix/media/v3/
upload` and authenticated `GET /_matrix/client/v1/media/download/{server}/{id}`. Errors
are Matrix's: `{"errcode": "M_...", "error": "..."}` with 401, 403, 404 and 429
(`retry_after_ms`).

Tests script people (`say`, `send_file`, `invite`, `encrypt`, `replay`), read what the bot
did (`calls`, `texts`, `events_of`), make it fail (`rate_limit`, `forbid`, `hold_sends`)
and drop the server (`stop` / `start` on the same port). `wait_for(predicate)` waits,
bounded, for a condition on what the server saw.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from aiohttp import web

from habakkuk.engine.timeouts import wait_within

SERVER = "fake.test"
BOT = f"@bot:{SERVER}"
ALICE = f"@alice:{SERVER}"
BOT_TOKEN = "syt_bot_secret"
CLIENT = "/_matrix/client/v3"


@dataclass
class Call:
    method: str
    path: str
    body: dict[str, Any]
    status: int = 0
    query: dict[str, str] = field(default_factory=dict)


@dataclass
class Room:
    id: str
    members: dict[str, str] = field(default_factory=dict)  # user -> membership
    encrypted: bool = False


@dataclass
class Event:
    pos: int
    room: str
    data: dict[str, Any]


class FakeMatrix:
    """The fake homeserver. Use as `async with FakeMatrix() as hs:`."""

    def __init__(self, token: str = BOT_TOKEN, user: str = BOT, port: int = 0):
        self.token = token
        self.user = user
        self.display_name = "Habakkuk"
        self.port = port
        self.calls: list[Call] = []
        self.rooms: dict[str, Room] = {}
        self.events: list[Event] = []
        self.media: dict[str, tuple[str, bytes]] = {}  # media id -> (content type, bytes)
        self.txns: dict[tuple[str, str, str], str] = {}  # (token, room, txn) -> event id
        self.deduplicated = 0  # sends answered from an earlier transaction
        self.posted = 0  # events the bot's sends created
        self._sends = 0  # send requests answered or held
        self.typing: list[str] = []
        self.synced: list[str] = []  # the `since` of every sync answered ("" for none)
        self.forbidden: set[str] = set()  # rooms where sends get 403 M_FORBIDDEN
        self.legacy_media = False  # a homeserver before Matrix 1.11 (no authenticated media)
        self.upload_limit: int | None = None  # bytes; a bigger upload gets 413 M_TOO_LARGE
        self._limits: dict[str, tuple[int, int]] = {}  # request kind -> (count, ms)
        self._hold: tuple[int, bool] | None = None
        self._release = asyncio.Event()
        self._changed = asyncio.Condition()
        self._next = 0
        self._runner: web.AppRunner | None = None

    # -- lifecycle ---------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/_matrix/{rest:.*}", self._dispatch)
        self._runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port, reuse_address=True)
        await site.start()
        if self.port == 0:
            self.port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        """Drop the server (open syncs are cut off)."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeMatrix:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._release.set()
        await self.stop()

    # -- scripting people ---------------------------------------------------------------

    def _id(self, sigil: str) -> str:
        self._next += 1
        return f"{sigil}{self._next:06d}x"

    def _append(self, room: str, data: dict[str, Any]) -> dict[str, Any]:
        data.setdefault("event_id", self._id("$"))
        data.setdefault("origin_server_ts", int(time.time() * 1000))
        data["room_id"] = room
        self.events.append(Event(len(self.events) + 1, room, data))
        asyncio.get_running_loop().create_task(self._notify())
        return data

    def _member(self, room: str, user: str, membership: str, by: str | None = None) -> None:
        self.rooms[room].members[user] = membership
        content = {"membership": membership}
        if user == self.user and membership == "join":
            content["displayname"] = self.display_name
        self._append(
            room,
            {"type": "m.room.member", "sender": by or user, "state_key": user, "content": content},
        )

    def room(self, *people: str, encrypted: bool = False) -> str:
        """A room the bot has joined with `people` (default: alice); its id. One person
        makes a private chat, more a group."""
        room = f"!{self._next + 1:04d}room:{SERVER}"
        self._next += 1
        self.rooms[room] = Room(room)
        for user in people or (ALICE,):
            self._member(room, user, "join")
        self._member(room, self.user, "join")
        if encrypted:
            self.encrypt(room)
        return room

    def invite(self, inviter: str) -> str:
        """`inviter` creates a room and invites the bot; the room's id."""
        room = f"!{self._next + 1:04d}inv:{SERVER}"
        self._next += 1
        self.rooms[room] = Room(room)
        self._member(room, inviter, "join")
        self._member(room, self.user, "invite", by=inviter)
        return room

    def encrypt(self, room: str) -> None:
        self.rooms[room].encrypted = True
        self._append(
            room,
            {
                "type": "m.room.encryption",
                "sender": ALICE,
                "state_key": "",
                "content": {"algorithm": "m.megolm.v1.aes-sha2"},
            },
        )

    def say(
        self,
        room: str,
        text: str,
        *,
        sender: str = ALICE,
        thread: str = "",
        reply_to: str = "",
        mentions: list[str] | None = None,
        **content: Any,
    ) -> dict[str, Any]:
        """`sender` writes `text` in `room`; the event."""
        body: dict[str, Any] = {"msgtype": "m.text", "body": text, **content}
        relates: dict[str, Any] = {}
        if thread:
            relates = {"rel_type": "m.thread", "event_id": thread, "is_falling_back": not reply_to}
        if reply_to or thread:
            relates["m.in_reply_to"] = {"event_id": reply_to or thread}
        if relates:
            body["m.relates_to"] = relates
        if mentions is not None:
            body["m.mentions"] = {"user_ids": mentions}
        return self._append(room, {"type": "m.room.message", "sender": sender, "content": body})

    def encrypted_message(self, room: str, sender: str = ALICE) -> dict[str, Any]:
        content = {"algorithm": "m.megolm.v1.aes-sha2", "ciphertext": "AwgAEn..."}
        return self._append(
            room, {"type": "m.room.encrypted", "sender": sender, "content": content}
        )

    def upload(self, data: bytes, content_type: str) -> str:
        """Media already on the server; its mxc:// URI."""
        media = self._id("m")
        self.media[media] = (content_type, data)
        return f"mxc://{SERVER}/{media}"

    def send_file(
        self,
        room: str,
        name: str,
        data: bytes,
        media_type: str,
        *,
        msgtype: str = "m.file",
        caption: str = "",
        voice: bool = False,
        sender: str = ALICE,
    ) -> dict[str, Any]:
        """`sender` posts a file (an m.image, m.file, m.audio...); the event."""
        content: dict[str, Any] = {
            "msgtype": msgtype,
            "body": caption or name,
            "url": self.upload(data, media_type),
            "info": {"mimetype": media_type, "size": len(data)},
        }
        if caption:
            content["filename"] = name
        if voice:
            content["org.matrix.msc3245.voice"] = {}
            content["org.matrix.msc1767.audio"] = {"duration": 2000}
        return self._append(room, {"type": "m.room.message", "sender": sender, "content": content})

    def replay(self, event: dict[str, Any]) -> None:
        """The same event comes again in a later batch (a position saved too late)."""
        self._append(event["room_id"], dict(event))

    def rate_limit(self, kind: str, count: int = 1, retry_after_ms: int = 100) -> None:
        """The next `count` requests of `kind` (send, sync, upload) get 429."""
        self._limits[kind] = (count, retry_after_ms)

    def forbid(self, room: str) -> None:
        """The bot may no longer post in `room` (403 M_FORBIDDEN)."""
        self.forbidden.add(room)

    def hold_sends(self, after: int, *, created: bool) -> None:
        """Message sends after the first `after` hang until `release_sends`; with
        `created` the event is posted before the hang (only the answer is lost), else the
        send is dropped (502)."""
        self._hold = (after, created)
        self._release.clear()

    def release_sends(self) -> None:
        self._hold = None
        self._release.set()

    # -- inspecting ----------------------------------------------------------------------

    def events_of(self, room: str, kind: str = "m.room.message", sender: str = "") -> list[Any]:
        sender = sender or self.user
        return [
            e.data
            for e in self.events
            if e.room == room and e.data["type"] == kind and e.data["sender"] == sender
        ]

    def sent(self, room: str) -> list[dict[str, Any]]:
        """The bot's messages in `room` (not edits), oldest first."""
        return [
            e
            for e in self.events_of(room)
            if e["content"].get("m.relates_to", {}).get("rel_type") != "m.replace"
        ]

    def texts(self, room: str) -> list[str]:
        """The plain bodies of the bot's text messages in `room`."""
        return [
            e["content"]["body"]
            for e in self.sent(room)
            if e["content"].get("msgtype") in ("m.text", "m.notice")
        ]

    def of(self, method: str, fragment: str) -> list[Call]:
        return [c for c in self.calls if c.method == method and fragment in c.path]

    @property
    def position(self) -> str:
        return f"s{len(self.events)}"

    def read_past(self, position: str) -> bool:
        """The bot synced from `position` or later (it handled everything before it)."""
        wanted = int(position[1:])
        return any(int(s[1:]) >= wanted for s in self.synced if s)

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 15.0) -> None:
        """Wait until `predicate()` holds (checked after every request), at most `timeout`."""

        async def _wait() -> None:
            async with self._changed:
                await self._changed.wait_for(predicate)

        await wait_within(_wait(), timeout)

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    # -- the API -------------------------------------------------------------------------

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        route = request.path  # decoded: room ids read as they are
        body: dict[str, Any] = {}
        raw = await request.read()
        if raw and request.content_type == "application/json":
            loaded = json.loads(raw)
            body = loaded if isinstance(loaded, dict) else {}
        call = Call(request.method, route, body, query=dict(request.query))
        self.calls.append(call)
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            response = _error(401, "M_UNKNOWN_TOKEN", "Invalid access token passed.")
        else:
            response = await self._route(request, route, body, raw)
        call.status = response.status
        await self._notify()
        return response

    def _limited(self, kind: str) -> web.Response | None:
        count, ms = self._limits.get(kind, (0, 0))
        if count <= 0:
            return None
        self._limits[kind] = (count - 1, ms)
        return web.json_response(
            {"errcode": "M_LIMIT_EXCEEDED", "error": "Too Many Requests", "retry_after_ms": ms},
            status=429,
        )

    async def _route(
        self, request: web.Request, route: str, body: dict[str, Any], raw: bytes
    ) -> web.Response:
        parts = route.split("/")
        if route.startswith("/_matrix/media/v3/upload") and request.method == "POST":
            return self._limited("upload") or self._upload(request, raw)
        if route.startswith("/_matrix/client/v1/media/download/") and not self.legacy_media:
            return self._download(parts[7] if len(parts) > 7 else "")
        if route.startswith("/_matrix/media/v3/download/") and self.legacy_media:
            return self._download(parts[6] if len(parts) > 6 else "")
        if not route.startswith(CLIENT):
            return _error(404, "M_UNRECOGNIZED", "Unrecognized request")
        rest = parts[4:]
        match (request.method, rest):
            case ("GET", ["account", "whoami"]):
                return web.json_response({"user_id": self.user, "device_id": "FAKEDEVICE"})
            case ("GET", ["profile", _, "displayname"]):
                return web.json_response({"displayname": self.display_name})
            case ("GET", ["sync"]):
                return self._limited("sync") or await self._sync(request)
            case ("POST", ["join", room]):
                return self._join(room)
            case ("POST", ["rooms", room, "leave"]):
                if room in self.rooms:
                    self._member(room, self.user, "leave")
                return web.json_response({})
            case ("GET", ["rooms", room, "joined_members"]):
                if room not in self.rooms:
                    return _error(403, "M_FORBIDDEN", "You aren't a member of the room")
                joined = [u for u, m in self.rooms[room].members.items() if m == "join"]
                return web.json_response({"joined": {u: {} for u in joined}})
            case ("GET", ["rooms", room, "event", event_id]):
                for event in self.events:
                    if event.room == room and event.data["event_id"] == event_id:
                        return web.json_response(event.data)
                return _error(404, "M_NOT_FOUND", "Event not found")
            case ("PUT", ["rooms", room, "send", kind, txn]):
                return self._limited("send") or await self._send(room, kind, txn, body)
            case ("PUT", ["rooms", room, "redact", event_id, txn]):
                redaction = self._append(
                    room, {"type": "m.room.redaction", "sender": self.user, "redacts": event_id}
                )
                return web.json_response({"event_id": redaction["event_id"]})
            case ("PUT", ["rooms", room, "typing", _]):
                self.typing.append(room)
                return web.json_response({})
        return _error(404, "M_UNRECOGNIZED", "Unrecognized request")

    def _join(self, room: str) -> web.Response:
        if self.rooms.get(room) is None or self.rooms[room].members.get(self.user) != "invite":
            return _error(403, "M_FORBIDDEN", "You are not invited to this room.")
        self._member(room, self.user, "join")
        return web.json_response({"room_id": room})

    async def _send(self, room: str, kind: str, txn: str, body: dict[str, Any]) -> web.Response:
        if (
            room in self.forbidden
            or self.rooms.get(room, Room(room)).members.get(self.user) != "join"
        ):
            return _error(403, "M_FORBIDDEN", "User not in room or not allowed to post")
        key = (self.token, room, unquote(txn))
        if key in self.txns:
            self.deduplicated += 1
            return web.json_response({"event_id": self.txns[key]})
        self._sends += 1
        hold = self._hold
        if hold is not None and self._sends > hold[0]:
            if hold[1]:  # posted; only the answer never reaches the bot
                event = self._append(room, {"type": kind, "sender": self.user, "content": body})
                self.txns[key] = event["event_id"]
                self.posted += 1
            await self._release.wait()
            return _error(502, "M_UNKNOWN", "held send dropped")
        event = self._append(room, {"type": kind, "sender": self.user, "content": body})
        self.txns[key] = event["event_id"]
        self.posted += 1
        return web.json_response({"event_id": event["event_id"]})

    def _upload(self, request: web.Request, raw: bytes) -> web.Response:
        if self.upload_limit is not None and len(raw) > self.upload_limit:
            return _error(413, "M_TOO_LARGE", "Upload request body is too large")
        media = self._id("m")
        self.media[media] = (request.content_type, raw)
        return web.json_response({"content_uri": f"mxc://{SERVER}/{media}"})

    def _download(self, media: str) -> web.Response:
        if media not in self.media:
            return _error(404, "M_NOT_FOUND", "Not found")
        content_type, data = self.media[media]
        return web.Response(body=data, content_type=content_type)

    async def _sync(self, request: web.Request) -> web.Response:
        since = request.query.get("since", "")
        timeout = int(request.query.get("timeout", "0")) / 1000
        wanted = json.loads(request.query.get("filter", "{}"))
        timeline = wanted.get("room", {}).get("timeline", {})
        types = set(timeline.get("types", []) or [])
        not_senders = set(timeline.get("not_senders", []) or [])
        start = int(since[1:]) if since else 0

        def fresh() -> list[Event]:
            return [
                e
                for e in self.events[start:]
                if _invites_bot(e, self.user)
                or ((not types or e.data["type"] in types) and e.data["sender"] not in not_senders)
            ]

        self.synced.append(since)  # asking from here: everything before it was handled
        await self._notify()
        if since and not fresh() and timeout:
            try:
                async with self._changed:
                    await wait_within(self._changed.wait_for(lambda: bool(fresh())), timeout)
            except TimeoutError:
                pass
        position = self.position
        rooms_join: dict[str, Any] = {}
        rooms_invite: dict[str, Any] = {}
        for event in fresh() if since else []:
            room = self.rooms[event.room]
            mine = room.members.get(self.user)
            if _invites_bot(event, self.user) and mine == "invite":
                rooms_invite[room.id] = {"invite_state": {"events": [_stripped(event.data)]}}
            elif mine == "join":
                entry = rooms_join.setdefault(room.id, {"timeline": {"events": []}})
                entry["timeline"]["events"].append(_client_event(event.data))
                if event.data["type"] == "m.room.member":
                    joined = sum(1 for m in room.members.values() if m == "join")
                    entry["summary"] = {"m.joined_member_count": joined}
        if not since:  # an initial sync: each joined room's state, recent timeline
            for room in self.rooms.values():
                if room.members.get(self.user) == "join":
                    state = [_client_event(e.data) for e in self.events if e.room == room.id]
                    state = [e for e in state if "state_key" in e]
                    rooms_join[room.id] = {"state": {"events": state}, "timeline": {"events": []}}
                elif room.members.get(self.user) == "invite":
                    invited = [e for e in self.events if _invites_bot(e, self.user)]
                    rooms_invite[room.id] = {
                        "invite_state": {"events": [_stripped(invited[-1].data)]}
                    }
        rooms = {"join": rooms_join, "invite": rooms_invite, "leave": {}}
        return web.json_response({"next_batch": position, "rooms": rooms})


def _invites_bot(event: Event, user: str) -> bool:
    data = event.data
    return (
        data["type"] == "m.room.member"
        and data.get("state_key") == user
        and data["content"].get("membership") == "invite"
    )


def _client_event(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k != "room_id"}


def _stripped(data: dict[str, Any]) -> dict[str, Any]:
    keys = ("type", "sender", "state_key", "content")
    return {k: data[k] for k in keys}


def _error(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"errcode": code, "error": message}, status=status)


class MatrixDriver:
    """The PlatformDriver of the fake homeserver: alice in a private room with the bot."""

    kind = "matrix"
    has_buttons = False

    def __init__(self, hs: FakeMatrix):
        self.hs = hs
        self.room = hs.room(ALICE)

    def channel_yaml(self, name: str) -> str:
        return (
            f"type: matrix\nhomeserver: {self.hs.base_url}\nuser_id: '{self.hs.user}'\n"
            f"token_env: MATRIX_TOKEN\nallow_from: ['{ALICE}']\npoll_timeout: 1\n"
        )

    def env(self) -> dict[str, str]:
        return {"MATRIX_TOKEN": self.hs.token}

    async def say(self, text: str) -> None:
        self.hs.say(self.room, text)

    async def send_file(self, name: str, data: bytes, media_type: str, caption: str = "") -> None:
        msgtype = "m.image" if media_type.startswith("image/") else "m.file"
        self.hs.send_file(self.room, name, data, media_type, msgtype=msgtype, caption=caption)

    async def press(self, label: str) -> None:
        raise AssertionError("Matrix has no buttons: approvals are typed (yes / no)")

    def texts(self) -> list[str]:
        return self.hs.texts(self.room)

    def files(self) -> list[tuple[str, bytes]]:
        found = []
        for event in self.hs.sent(self.room):
            content = event["content"]
            if content.get("msgtype") in ("m.image", "m.file", "m.audio", "m.video"):
                media = str(content["url"]).rsplit("/", 1)[1]
                found.append(
                    (str(content.get("filename") or content["body"]), self.hs.media[media][1])
                )
        return found
