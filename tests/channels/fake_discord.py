"""A fake Discord (Gateway websocket and REST API) on 127.0.0.1, speaking the real wire.

REST under `/api/v10` (the `base_url` a bot is given), answering as Discord does
(`Authorization: Bot <token>` or 401; errors as `{"code": N, "message": "..."}`; 204 for
typing, reactions, deletes and interaction callbacks; 429 with `retry_after`):
GET /users/@me, POST /users/@me/channels (a user's DM channel, the same one each time;
10013 Unknown User, 50007 for a user who takes no DMs), GET /gateway/bot (whose `url` is
this server's websocket), POST/PATCH/DELETE
/channels/{id}/messages[/{id}] (JSON or multipart `payload_json` + `files[n]`, nonces
enforced; a channel the fake does not know is 404 10003 Unknown Channel, as a user id
is), POST /channels/{id}/typing, PUT/DELETE reactions, POST
/interactions/{id}/{token}/callback, and GET /attachments/{name} (the CDN).

The Gateway (`/gateway`): Hello (op 10) with `heartbeat_interval`, heartbeats answered with
op 11 (unless `acks` is off: a zombie), Identify (op 2) checked (token: close 4004; the
Message Content intent refused with `refuse_intents`: close 4014) and answered with READY,
Resume (op 6) replaying every dispatch after the given sequence number then RESUMED (an
unknown session gets op 9 d=false), dispatches with increasing `s`, and the controls a test
needs: `drop` (close with a code, or cut the socket), `reconnect` (op 7), `invalidate`
(op 9), `ack`.

Tests script people (`message`, `press`, `replay`), inspect what the bot did (`calls`,
`texts`, `files`), hold sends to stop the bot mid-delivery, and wait, bounded, with
`wait_for(predicate)`. `DiscordDriver` is the fake's PlatformDriver.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import BodyPartReader, WSMsgType, web

BOT_TOKEN = "MTAx.discord.bot-token"  # the `dc` fixture's bot (tests/conftest.py)
BOT = {"id": "900000000000000001", "username": "habakkuk", "global_name": None, "bot": True}
USER_ID = "100000000000000042"  # the allowed person of the e2e tests
DM_CHANNEL = "200000000000000042"
GUILD = "300000000000000001"
GUILD_CHANNEL = "300000000000000100"
MESSAGE_CONTENT = 1 << 15
API = "/api/v10"


@dataclass
class Call:
    """One REST request the bot made: a route name, the channel, the JSON body."""

    route: str
    channel: str
    body: dict[str, Any]
    status: int = 0
    files: list[tuple[str, bytes]] = field(default_factory=list)
    path: str = ""
    # a post whose nonce Discord had seen: answered with the message made before
    deduped: bool = False

    @property
    def answered(self) -> bool:
        return 200 <= self.status < 300


@dataclass
class _Connection:
    ws: web.WebSocketResponse
    outgoing: asyncio.Queue[dict[str, Any] | None] = field(default_factory=asyncio.Queue)


@dataclass
class _Session:
    id: str
    seq: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)
    connection: _Connection | None = None


class FakeDiscord:
    """The fake Discord. Use as `async with FakeDiscord() as dc:`."""

    def __init__(self, token: str = BOT_TOKEN, port: int = 0, heartbeat_interval: int = 5000):
        self.token = token
        self.port = port
        self.heartbeat_interval = heartbeat_interval  # milliseconds, as Hello says it
        self.calls: list[Call] = []
        self.messages: dict[str, dict[str, Any]] = {}
        self.attachments: dict[str, bytes] = {}
        self.blocked: set[str] = set()
        # channels that exist: the constants', any a person wrote in, DMs opened
        self.channels: set[str] = {DM_CHANNEL, GUILD_CHANNEL}
        self.users: dict[str, dict[str, Any]] = {
            USER_ID: {"id": USER_ID, "username": "alice", "global_name": "Alice"}
        }
        self.dms: dict[str, str] = {USER_ID: DM_CHANNEL}  # user id -> DM channel id
        self.no_dms: set[str] = set()  # users whose settings refuse the bot's DMs
        self.identifies: list[dict[str, Any]] = []
        self.resumes: list[dict[str, Any]] = []
        self.heartbeats: list[int | None] = []
        self.connections = 0
        self.acks = True
        self.refuse_intents = False
        self.identify_close: int | None = None  # close every Identify with this code
        self.session_starts = 999  # what GET /gateway/bot says remains of the daily limit
        self.session: _Session | None = None
        self.sessions: dict[str, _Session] = {}
        self.pending: list[tuple[str, dict[str, Any]]] = []  # dispatched before any session
        self.interactions: dict[str, str] = {}  # interaction id -> token
        self._ids = itertools.count(1_100_000_000_000_000_000)
        self._nonces: dict[tuple[str, str], str] = {}
        self._rate_limited = 0
        self._hold_after: int | None = None
        self._hold_made = False
        self._release = asyncio.Event()
        self._changed = asyncio.Condition()
        self._runner: web.AppRunner | None = None
        self._sockets: set[web.WebSocketResponse] = set()

    # -- lifecycle ---------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """The REST root a bot's `base_url` names."""
        return f"http://127.0.0.1:{self.port}{API}"

    @property
    def connected(self) -> bool:
        """A session is live on an open socket (READY or RESUMED was sent)."""
        return self.session is not None and self.session.connection is not None

    async def start(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_get("/gateway", self._gateway)
        app.router.add_get("/attachments/{name}", self._attachment)
        app.router.add_route("*", API + "/{path:.*}", self._rest)
        self._runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port, reuse_address=True)
        await site.start()
        if self.port == 0:
            self.port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        """Drop the server: every socket cut, nothing listening until `start`."""
        for ws in list(self._sockets):
            with contextlib.suppress(Exception):
                await ws.close(code=1001)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeDiscord:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._release.set()
        await self.stop()

    # -- people ---------------------------------------------------------------------------

    def snowflake(self) -> str:
        return str(next(self._ids))

    def add_attachment(self, name: str, data: bytes, content_type: str) -> dict[str, Any]:
        """A file uploaded to the CDN; returns the attachment object a message carries."""
        attachment_id = self.snowflake()
        key = f"{attachment_id}-{name}"
        self.attachments[key] = data
        return {
            "id": attachment_id,
            "filename": name,
            "size": len(data),
            "content_type": content_type,
            "url": f"http://127.0.0.1:{self.port}/attachments/{key}",
        }

    def message(
        self,
        text: str = "",
        *,
        channel: str = DM_CHANNEL,
        user: str = USER_ID,
        username: str = "alice",
        guild: str | None = None,
        mention: bool = False,
        reply_to: str | None = None,
        attachments: list[dict[str, Any]] | None = None,
        flags: int = 0,
        bot: bool = False,
    ) -> dict[str, Any]:
        """A person writes (in a DM unless `guild`); returns the MESSAGE_CREATE data."""
        self.channels.add(channel)
        author: dict[str, Any] = {"id": user, "username": username, "global_name": username.title()}
        if bot:
            author["bot"] = True
        content = f"<@{BOT['id']}> {text}" if mention else text
        data: dict[str, Any] = {
            "id": self.snowflake(),
            "channel_id": channel,
            "author": author,
            "content": content,
            "timestamp": datetime.now(UTC).isoformat(),
            "type": 19 if reply_to else 0,
            "flags": flags,
            "mentions": [BOT] if mention else [],
            "attachments": attachments or [],
        }
        if guild:
            data["guild_id"] = guild
            data["member"] = {"roles": []}
        if reply_to:
            data["message_reference"] = {"message_id": reply_to, "channel_id": channel}
            data["referenced_message"] = self.messages.get(reply_to)
        self.messages[data["id"]] = data  # the bot may react to it
        self.dispatch("MESSAGE_CREATE", data)
        return data

    def press(
        self, custom_id: str, *, message_id: str, channel: str = DM_CHANNEL, user: str = USER_ID
    ) -> dict[str, Any]:
        """A person presses a button (INTERACTION_CREATE type 3); returns its data."""
        self.channels.add(channel)
        interaction_id = self.snowflake()
        token = f"itoken-{interaction_id}"
        self.interactions[interaction_id] = token
        data = {
            "id": interaction_id,
            "application_id": BOT["id"],
            "type": 3,
            "token": token,
            "version": 1,
            "channel_id": channel,
            "user": {"id": user, "username": "alice", "global_name": "Alice"},
            "data": {"custom_id": custom_id, "component_type": 2},
            "message": self.messages.get(message_id, {"id": message_id}),
        }
        self.dispatch("INTERACTION_CREATE", data)
        return data

    def replay(self, data: dict[str, Any], event: str = "MESSAGE_CREATE") -> None:
        """The same event again under a new sequence number (a redelivery)."""
        self.dispatch(event, data)

    def dispatch(self, event: str, data: dict[str, Any]) -> None:
        """Send an event to the bot's session (kept for a resume when it is not connected)."""
        session = self.session
        if session is None:
            self.pending.append((event, data))
            return
        session.seq += 1
        payload = {"op": 0, "t": event, "s": session.seq, "d": data}
        session.events.append(payload)
        if session.connection is not None:
            session.connection.outgoing.put_nowait(payload)

    # -- gateway controls -----------------------------------------------------------

    def _socket(self) -> _Connection:
        assert self.session is not None and self.session.connection is not None, "not connected"
        return self.session.connection

    async def drop(self, code: int | None = 4000) -> None:
        """Close the bot's socket with `code` (None: cut it without a close frame)."""
        connection = self._socket()
        if self.session is not None:
            self.session.connection = None
        if code is None:
            connection.outgoing.put_nowait(None)  # the writer cuts the transport
        else:
            await connection.ws.close(code=code, message=b"closed by the test")

    def reconnect(self) -> None:
        """Op 7: the bot should reconnect and resume."""
        self._socket().outgoing.put_nowait({"op": 7, "d": None, "s": None, "t": None})

    def invalidate(self, resumable: bool) -> None:
        """Op 9; d=false also forgets the session (a resume of it gets op 9 again)."""
        connection = self._socket()
        if not resumable and self.session is not None:
            self.sessions.pop(self.session.id, None)
            self.session.connection = None
            self.session = None
        connection.outgoing.put_nowait({"op": 9, "d": resumable, "s": None, "t": None})

    # -- REST controls ----------------------------------------------------------------

    def add_user(self, user: str, username: str = "bob", *, dms: bool = True) -> None:
        """A user the bot shares a server with (no DM channel until one is opened); with
        `dms` off their privacy settings refuse the bot's messages (50007)."""
        self.users[user] = {"id": user, "username": username, "global_name": username.title()}
        if not dms:
            self.no_dms.add(user)

    def block(self, channel: str) -> None:
        """Sends to `channel` get 403 Missing Access."""
        self.blocked.add(channel)

    def rate_limit(self, count: int = 1) -> None:
        """The next `count` message posts get 429 with a short retry_after."""
        self._rate_limited = count

    def hold_sends_after(self, count: int | None, *, made: bool = False) -> None:
        """Message posts after the first `count` hang until `release_sends`, then fail;
        with `made`, Discord made the message all the same (the bot never heard)."""
        self._hold_after = count
        self._hold_made = made
        self._release.clear()

    def release_sends(self) -> None:
        self._hold_after = None
        self._release.set()

    # -- inspecting -------------------------------------------------------------------

    def of(self, route: str, *, answered: bool | None = True) -> list[Call]:
        return [
            c
            for c in self.calls
            if c.route == route and (answered is None or c.answered == answered)
        ]

    def posts(self, channel: str = DM_CHANNEL) -> list[Call]:
        """Messages the bot created in `channel` that were accepted, in order (a retry
        Discord answered with the message its nonce made before is not a second one)."""
        return [c for c in self.of("create_message") if c.channel == channel and not c.deduped]

    def texts(self, channel: str = DM_CHANNEL) -> list[str]:
        """Texts of the messages the bot created in `channel` (not files), in order."""
        return [str(c.body.get("content", "")) for c in self.posts(channel) if not c.files]

    def made(self, channel: str = DM_CHANNEL) -> list[str]:
        """The texts of the bot's messages that exist in `channel` (whether or not the bot
        heard the answer), oldest first."""
        return [
            str(m["content"])
            for m in self.messages.values()
            if m["channel_id"] == channel and m["author"]["id"] == BOT["id"]
        ]

    def files(self, channel: str = DM_CHANNEL) -> list[tuple[str, bytes]]:
        return [f for c in self.posts(channel) for f in c.files]

    def message_with(self, text: str, channel: str = DM_CHANNEL) -> dict[str, Any]:
        """The bot's message in `channel` whose content includes `text` (newest first)."""
        for message in reversed(self.messages.values()):
            mine = message["author"]["id"] == BOT["id"]
            if mine and message["channel_id"] == channel and text in str(message["content"]):
                return message
        raise KeyError(text)

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 15.0) -> None:
        """Wait until `predicate()` holds (checked after every request and frame)."""

        async def _wait() -> None:
            async with self._changed:
                await self._changed.wait_for(predicate)

        await asyncio.wait_for(_wait(), timeout)

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    # -- the gateway ------------------------------------------------------------------

    async def _gateway(self, request: web.Request) -> web.StreamResponse:
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self._sockets.add(ws)
        self.connections += 1
        connection = _Connection(ws)
        writer = asyncio.create_task(self._write(connection, request))
        connection.outgoing.put_nowait(
            {"op": 10, "d": {"heartbeat_interval": self.heartbeat_interval}, "s": None, "t": None}
        )
        try:
            async for frame in ws:
                if frame.type != WSMsgType.TEXT:
                    continue
                await self._on_frame(connection, json.loads(frame.data))
                await self._notify()
        finally:
            self._sockets.discard(ws)
            session = self.session
            if session is not None and session.connection is connection:
                session.connection = None
            connection.outgoing.put_nowait(None)
            with contextlib.suppress(Exception):
                await writer
            await self._notify()
        return ws

    async def _write(self, connection: _Connection, request: web.Request) -> None:
        while True:
            payload = await connection.outgoing.get()
            if payload is None:
                if not connection.ws.closed and request.transport is not None:
                    request.transport.close()  # cut: no close frame
                return
            if connection.ws.closed:
                return
            try:
                await connection.ws.send_str(json.dumps(payload))
            except (ConnectionError, RuntimeError):
                return
            await self._notify()

    async def _on_frame(self, connection: _Connection, payload: dict[str, Any]) -> None:
        op, data = payload.get("op"), payload.get("d")
        if op == 1:
            self.heartbeats.append(data if isinstance(data, int) else None)
            if self.acks:
                connection.outgoing.put_nowait({"op": 11, "d": None, "s": None, "t": None})
        elif op == 2 and isinstance(data, dict):
            self.identifies.append(data)
            if self.identify_close is not None:
                await connection.ws.close(code=self.identify_close, message=b"refused")
            elif data.get("token") != self.token:
                await connection.ws.close(code=4004, message=b"Authentication failed.")
            elif self.refuse_intents and int(data.get("intents", 0)) & MESSAGE_CONTENT:
                await connection.ws.close(code=4014, message=b"Disallowed intent(s).")
            else:
                self._identified(connection)
        elif op == 6 and isinstance(data, dict):
            self.resumes.append(data)
            self._resumed(connection, data)

    def _identified(self, connection: _Connection) -> None:
        session = _Session(f"session-{self.snowflake()}")
        self.sessions[session.id] = session
        self._attach(session, connection)
        self.dispatch(
            "READY",
            {
                "v": 10,
                "user": BOT,
                "guilds": [{"id": GUILD, "unavailable": True}],
                "session_id": session.id,
                "resume_gateway_url": f"ws://127.0.0.1:{self.port}/gateway",
                "application": {"id": BOT["id"], "flags": 0},
            },
        )
        pending, self.pending = self.pending, []
        for event, data in pending:
            self.dispatch(event, data)

    def _resumed(self, connection: _Connection, data: dict[str, Any]) -> None:
        session = self.sessions.get(str(data.get("session_id")))
        if session is None or data.get("token") != self.token:
            connection.outgoing.put_nowait({"op": 9, "d": False, "s": None, "t": None})
            return
        self._attach(session, connection)
        after = int(data.get("seq") or 0)
        for payload in session.events:
            if payload["s"] > after:
                connection.outgoing.put_nowait(payload)
        self.dispatch("RESUMED", {})

    def _attach(self, session: _Session, connection: _Connection) -> None:
        old = session.connection
        if old is not None and old is not connection:
            old.outgoing.put_nowait(None)
        session.connection = connection
        self.session = session

    # -- REST --------------------------------------------------------------------------

    async def _attachment(self, request: web.Request) -> web.StreamResponse:
        data = self.attachments.get(request.match_info["name"])
        return web.Response(body=data) if data is not None else web.Response(status=404)

    async def _rest(self, request: web.Request) -> web.StreamResponse:
        path = "/" + request.match_info["path"]
        parts = path.strip("/").split("/")
        interaction = parts[0] == "interactions"
        if not interaction and request.headers.get("Authorization") != f"Bot {self.token}":
            return _error(401, 0, "401: Unauthorized")
        body, files = await _body(request)
        route, channel = _route(request.method, parts)
        call = Call(route, channel, body, files=files, path=path)
        self.calls.append(call)
        await self._notify()
        try:
            response = await self._answer(call, parts)
        finally:
            await self._notify()
        call.status = response.status
        await self._notify()
        return response

    async def _answer(self, call: Call, parts: list[str]) -> web.Response:
        route, channel, body = call.route, call.channel, call.body
        if route == "get_me":
            return web.json_response(BOT)
        if route == "get_gateway":
            return web.json_response(
                {
                    "url": f"ws://127.0.0.1:{self.port}/gateway",
                    "shards": 1,
                    "session_start_limit": {
                        "total": 1000,
                        "remaining": self.session_starts,
                        "reset_after": 14400000,
                        "max_concurrency": 1,
                    },
                }
            )
        if route == "open_dm":
            return self._open_dm(body)
        if route == "interaction_callback":
            if self.interactions.get(parts[1]) != parts[2]:
                return _error(404, 10062, "Unknown interaction")
            return web.Response(status=204)
        if channel not in self.channels:
            return _error(404, 10003, "Unknown Channel")
        if channel in self.blocked:
            return _error(403, 50001, "Missing Access")
        if route == "create_message":
            return await self._create(call)
        message = self.messages.get(parts[3]) if len(parts) > 3 else None
        if route in ("edit_message", "delete_message", "react", "unreact") and (
            message is None or message["channel_id"] != channel
        ):
            return _error(404, 10008, "Unknown Message")
        assert message is not None or route == "typing"
        mine = message is not None and message["author"]["id"] == BOT["id"]
        if route in ("edit_message", "delete_message") and not mine:
            return _error(403, 50005, "Cannot edit a message authored by another user")
        if route == "edit_message" and message is not None:
            for key in ("content", "components"):
                if key in body:
                    message[key] = body[key]
            return web.json_response(message)
        if route == "delete_message":
            self.messages.pop(parts[3], None)
        return web.Response(status=204)

    def _open_dm(self, body: dict[str, Any]) -> web.Response:
        user = self.users.get(str(body.get("recipient_id", "")))
        if user is None:
            return _error(404, 10013, "Unknown User")
        if user["id"] in self.no_dms:
            return _error(403, 50007, "Cannot send messages to this user")
        channel = self.dms.setdefault(user["id"], self.snowflake())
        self.channels.add(channel)
        return web.json_response(
            {"id": channel, "type": 1, "last_message_id": None, "flags": 0, "recipients": [user]}
        )

    async def _create(self, call: Call) -> web.Response:
        channel, body, files = call.channel, call.body, call.files
        if self._rate_limited:
            self._rate_limited -= 1
            return web.json_response(
                {"message": "You are being rate limited.", "retry_after": 0.05, "global": False},
                status=429,
                headers={"Retry-After": "1", "X-RateLimit-Scope": "user"},
            )
        if self._hold_after is not None and len(self.of("create_message", answered=None)) > (
            self._hold_after
        ):
            # Held until released, then dropped: the chat never got this message (the bot
            # was killed while waiting for the answer).
            await self._release.wait()
            if self._hold_made:
                await self._create(Call(call.route, channel, body, files=files))
            return _error(502, 0, "Bad Gateway")
        content = str(body.get("content") or "")
        if not content.strip() and not files and "poll" not in body:
            return _error(400, 50006, "Cannot send an empty message")
        if len(content) > 2000:
            return _error(
                400, 50035, "Invalid Form Body: content: Must be 2000 or fewer in length."
            )
        nonce = str(body.get("nonce") or "")
        if nonce and body.get("enforce_nonce"):
            existing = self._nonces.get((channel, nonce))
            if existing is not None and existing in self.messages:
                call.deduped = True
                return web.json_response(self.messages[existing])
        message = {
            "id": self.snowflake(),
            "channel_id": channel,
            "author": BOT,
            "content": content,
            "timestamp": datetime.now(UTC).isoformat(),
            "type": 19 if body.get("message_reference") else 0,
            "components": body.get("components", []),
            "attachments": [{"filename": name, "size": len(data)} for name, data in files],
            "flags": body.get("flags", 0),
        }
        if nonce:
            message["nonce"] = nonce
            self._nonces[(channel, nonce)] = message["id"]
        self.messages[message["id"]] = message
        return web.json_response(message)


def _route(method: str, parts: list[str]) -> tuple[str, str]:
    """The name of a REST route and the channel it addresses."""
    if parts == ["users", "@me", "channels"] and method == "POST":
        return "open_dm", ""
    if parts[:2] == ["users", "@me"]:
        return "get_me", ""
    if parts[:2] == ["gateway", "bot"]:
        return "get_gateway", ""
    if parts[0] == "interactions":
        return "interaction_callback", ""
    channel = parts[1] if len(parts) > 1 else ""
    if len(parts) == 3 and parts[2] == "typing":
        return "typing", channel
    if len(parts) == 3 and parts[2] == "messages" and method == "POST":
        return "create_message", channel
    if len(parts) >= 5 and parts[4] == "reactions":
        return ("react" if method == "PUT" else "unreact"), channel
    if len(parts) == 4 and method == "PATCH":
        return "edit_message", channel
    if len(parts) == 4 and method == "DELETE":
        return "delete_message", channel
    return f"{method} {'/'.join(parts)}", channel


async def _body(request: web.Request) -> tuple[dict[str, Any], list[tuple[str, bytes]]]:
    if request.content_type == "application/json":
        body = await request.json()
        return (dict(body) if isinstance(body, dict) else {}), []
    if not request.content_type.startswith("multipart/"):
        return {}, []
    payload: dict[str, Any] = {}
    files: list[tuple[str, bytes]] = []
    async for part in await request.multipart():
        assert isinstance(part, BodyPartReader) and part.name is not None
        if part.name == "payload_json":
            payload = json.loads(await part.text())
        elif part.filename:
            files.append((part.filename, bytes(await part.read())))
    return payload, files


def _error(status: int, code: int, message: str) -> web.Response:
    return web.json_response({"code": code, "message": message}, status=status)


class DiscordDriver:
    """The allowed person in a DM with the bot on the fake (a PlatformDriver)."""

    kind = "discord"
    has_buttons = True

    def __init__(self, fake: FakeDiscord):
        self.fake = fake

    def channel_yaml(self, name: str) -> str:
        return textwrap.dedent(
            f"""\
            type: discord
            token_env: DISCORD_TOKEN
            base_url: {self.fake.base_url}
            allow_from: ["{USER_ID}"]
            """
        )

    def env(self) -> dict[str, str]:
        return {"DISCORD_TOKEN": self.fake.token}

    async def say(self, text: str) -> None:
        self.fake.message(text)

    async def send_file(self, name: str, data: bytes, media_type: str, caption: str = "") -> None:
        self.fake.message(caption, attachments=[self.fake.add_attachment(name, data, media_type)])

    async def press(self, label: str) -> None:
        for message in reversed(self.fake.messages.values()):
            if message["channel_id"] != DM_CHANNEL or message["author"]["id"] != BOT["id"]:
                continue
            for row in message.get("components") or []:
                for button in row.get("components", []):
                    if button.get("label") == label:
                        self.fake.press(button["custom_id"], message_id=message["id"])
                        return
        raise KeyError(f"no button labelled {label!r}")

    def texts(self) -> list[str]:
        return self.fake.texts()

    def files(self) -> list[tuple[str, bytes]]:
        return self.fake.files()
