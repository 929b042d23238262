"""A fake Slack on 127.0.0.1: the Web API and a Socket Mode websocket, on the real wire.

Web API: ``POST /api/<method>`` with ``Authorization: Bearer <token>`` (or a ``token``
form field), JSON or form bodies, answered ``{"ok": true, ...}`` or ``{"ok": false,
"error": "<code>"}`` (HTTP 200), and 429 with ``Retry-After`` when rate limited. Methods:
auth.test, apps.connections.open (the app-level token only), chat.postMessage,
chat.update, chat.delete, reactions.add/remove, conversations.history/replies (over
what people wrote and the bot posted, with its message metadata, paged as Slack
documents them: tests/channels/fake_slack_history.py), files.getUploadURLExternal (its
upload URL is ``POST /upload/<file id>``) and files.completeUploadExternal. Files users
share are downloaded from ``GET /files/<id>/<name>`` with the bot token (without it:
Slack's sign-in page, HTML); a button's ``response_url`` is ``POST /respond/<trigger id>``.

Socket Mode: ``GET /link/?ticket=...`` upgrades to a websocket that says ``hello`` and
sends envelopes (``events_api``, ``interactive``, ``slash_commands``); each stays
pending until acknowledged with its ``envelope_id`` and is sent again (retry_attempt
+ 1) on the next connection while it is not. Tests make users write (`message`),
press buttons (`press`), run slash commands (`command`), redeliver (`replay`), rotate
the connection (`disconnect`), drop it (`drop`), hold sends to stop the bot
mid-delivery (`hold_posts_after`, the message made or not), hold downloads
(`hold_downloads`) and close chats (`block`).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import BodyPartReader, WSMsgType, web

from habakkuk.channels.slack_format import mrkdwn_to_plain
from tests.channels.fake_slack_history import HistoryError, Stored, history, replies

TEAM = "T0001"
BOT_USER = "UBOT"
BOT_ID = "BBOT"
PERSON = "U0042"
DM = "D0042"
BOT_TOKEN = "xoxb-1-fake-bot"
APP_TOKEN = "xapp-1-fake-app"


@dataclass
class Call:
    method: str
    params: dict[str, Any]
    answered: bool = True


@dataclass
class Posted:
    """A message the bot posted (and, after chat.update, its latest text)."""

    channel: str
    ts: str
    text: str
    thread_ts: str = ""
    blocks: list[dict[str, Any]] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)  # chat.postMessage's, as sent


@dataclass
class Shared:
    """A file the bot shared (files.completeUploadExternal)."""

    channel: str
    name: str
    data: bytes
    thread_ts: str = ""
    comment: str = ""


class FakeSlack:
    """The fake Slack. Use as `async with FakeSlack() as slack:`."""

    def __init__(self, port: int = 0):
        self.port = port
        self.bot_token = BOT_TOKEN
        self.app_token = APP_TOKEN
        self.calls: list[Call] = []
        self.posted: list[Posted] = []
        self.shared: list[Shared] = []
        self.reactions: list[tuple[str, str, str, str]] = []  # (add/remove, channel, ts, name)
        self.ephemeral: list[str] = []  # texts sent to response_urls
        self.acks: list[str] = []
        self.connections = 0
        self.pending: dict[str, dict[str, Any]] = {}  # envelope id -> unacknowledged envelope
        self.blocked: dict[str, str] = {}  # channel -> error code
        self.files: dict[str, tuple[str, bytes]] = {}  # users' files: id -> (name, data)
        self.uploads: dict[str, tuple[str, bytes]] = {}  # the bot's, before completion
        self.refused_files = ""
        self.rate_limited = 0  # that many chat.postMessage calls get 429 first
        self._ts = itertools.count(1)
        self._hold_after: int | None = None
        self._hold_made = False
        self.heard: dict[str, list[Stored]] = {}  # channel -> what people wrote there
        self._downloads = asyncio.Event()
        self._downloads.set()
        self._release = asyncio.Event()
        self._changed = asyncio.Condition()
        self._new = asyncio.Event()
        self._sockets: list[web.WebSocketResponse] = []
        self._runner: web.AppRunner | None = None

    # -- lifecycle ---------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """The Web API root (what `base_url:` in the channel's config names)."""
        return f"http://127.0.0.1:{self.port}/api"

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/api/{method}", self._method)
        app.router.add_get("/link/", self._socket)
        app.router.add_get("/files/{id}/{name}", self._download)
        app.router.add_post("/upload/{id}", self._upload)
        app.router.add_post("/respond/{id}", self._respond)
        self._runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port, reuse_address=True)
        await site.start()
        if self.port == 0:
            self.port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        """Drop the server and every socket."""
        for ws in list(self._sockets):
            await ws.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeSlack:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._release.set()
        self._downloads.set()
        await self.stop()

    # -- scripting users -----------------------------------------------------------------

    def next_ts(self) -> str:
        return f"{int(time.time())}.{next(self._ts):06d}"

    def _push(self, kind: str, payload: dict[str, Any], retry: int = 0) -> dict[str, Any]:
        envelope_id = str(uuid.uuid4())
        envelope: dict[str, Any] = {
            "envelope_id": envelope_id,
            "type": kind,
            "payload": payload,
            "accepts_response_payload": kind != "events_api",
            "retry_attempt": retry,
            "retry_reason": "timeout" if retry else "",
        }
        self.pending[envelope_id] = envelope
        self._new.set()
        return envelope

    def message(
        self,
        text: str = "",
        *,
        channel: str = DM,
        user: str = PERSON,
        channel_type: str = "im",
        thread_ts: str = "",
        files: list[dict[str, Any]] | None = None,
        kind: str = "message",
        team: str = TEAM,
        **extra: Any,
    ) -> dict[str, Any]:
        """A person writes; returns the envelope (its event: `envelope["payload"]["event"]`)."""
        event: dict[str, Any] = {
            "type": kind,
            "channel": channel,
            "user": user,
            "text": text,
            "ts": self.next_ts(),
            "team": team,
            "channel_type": channel_type,
            "user_profile": {"display_name": f"person {user}", "name": user.lower()},
            **extra,
        }
        if kind == "app_mention":
            event.pop("channel_type")
        if thread_ts:
            event["thread_ts"] = thread_ts
        if files:
            event["files"] = files
            event["subtype"] = "file_share"
        said = Stored(event["ts"], text, thread_ts, user=user)
        self.heard.setdefault(channel, []).append(said)
        return self._push("events_api", self._callback(event, team))

    def _callback(self, event: dict[str, Any], team: str = TEAM) -> dict[str, Any]:
        return {
            "token": "verification-token",
            "team_id": team,
            "api_app_id": "A0001",
            "event": event,
            "type": "event_callback",
            "event_id": f"Ev{uuid.uuid4().hex[:10].upper()}",
            "event_time": int(time.time()),
        }

    def event(self, event: dict[str, Any]) -> dict[str, Any]:
        """Any other event (message_changed, a bot's message, ...)."""
        return self._push("events_api", self._callback(event))

    def share(self, name: str, data: bytes, mimetype: str, **extra: Any) -> dict[str, Any]:
        """A file a person uploaded: its object for `message(files=[...])`."""
        file_id = f"F{len(self.files) + 1:04d}"
        self.files[file_id] = (name, data)
        return {
            "id": file_id,
            "name": name,
            "title": name,
            "mimetype": mimetype,
            "filetype": name.rsplit(".", 1)[-1],
            "size": len(data),
            "url_private": f"{self.root}/files/{file_id}/{name}",
            "url_private_download": f"{self.root}/files/{file_id}/{name}?download=1",
            **extra,
        }

    def press(
        self, value: str, *, message_ts: str, channel: str = DM, user: str = PERSON
    ) -> dict[str, Any]:
        """A person presses a Block Kit button; returns the envelope."""
        trigger = f"{next(self._ts)}.{uuid.uuid4().hex[:8]}"
        posted = self.message_at(channel, message_ts)
        payload = {
            "type": "block_actions",
            "team": {"id": TEAM, "domain": "fake"},
            "user": {"id": user, "username": user.lower(), "name": user.lower(), "team_id": TEAM},
            "api_app_id": "A0001",
            "trigger_id": trigger,
            "container": {
                "type": "message",
                "message_ts": message_ts,
                "channel_id": channel,
                "is_ephemeral": False,
                **({"thread_ts": posted.thread_ts} if posted and posted.thread_ts else {}),
            },
            "channel": {"id": channel, "name": "directmessage"},
            "message": {"type": "message", "ts": message_ts, "text": posted.text if posted else ""},
            "response_url": f"{self.root}/respond/{trigger}",
            "actions": [
                {
                    "action_id": "fy_0_0",
                    "block_id": "fy_0",
                    "value": value,
                    "type": "button",
                    "action_ts": str(time.time()),
                }
            ],
        }
        return self._push("interactive", payload)

    def command(self, command: str, text: str = "", *, channel: str = DM) -> dict[str, Any]:
        """A person runs a slash command; returns the envelope."""
        return self._push(
            "slash_commands",
            {
                "token": "verification-token",
                "team_id": TEAM,
                "channel_id": channel,
                "user_id": PERSON,
                "user_name": "person",
                "command": command,
                "text": text,
                "trigger_id": f"{next(self._ts)}.{uuid.uuid4().hex[:8]}",
                "response_url": f"{self.root}/respond/cmd",
            },
        )

    def replay(self, envelope: dict[str, Any]) -> dict[str, Any]:
        """Slack's retry of an envelope (a new envelope id, the same payload)."""
        return self._push(envelope["type"], envelope["payload"], envelope["retry_attempt"] + 1)

    async def disconnect(self, reason: str = "refresh_requested") -> None:
        """Slack's rotation: a `disconnect` frame on every open socket."""
        frame = {"type": "disconnect", "reason": reason, "debug_info": {"host": "fake"}}
        for ws in list(self._sockets):
            await ws.send_str(json.dumps(frame))

    async def drop(self) -> None:
        """Close every open socket without a word."""
        for ws in list(self._sockets):
            await ws.close(code=1011)

    def block(self, channel: str, error: str = "channel_not_found") -> None:
        self.blocked[channel] = error

    def refuse_files(self, error: str) -> None:
        """files.completeUploadExternal answers this error code."""
        self.refused_files = error

    def hold_posts_after(self, count: int | None, *, made: bool = False) -> None:
        """chat.postMessage calls after the first `count` hang until `release_posts`,
        then fail (the bot was killed while waiting for the answer); with `made`, Slack
        posts the message first (the bot was killed before the answer reached it)."""
        self._hold_after = count
        self._hold_made = made
        self._release.clear()

    def hold_downloads(self) -> None:
        """File downloads hang until `release_downloads` (a large file on a slow link)."""
        self._downloads.clear()

    def release_downloads(self) -> None:
        self._downloads.set()

    def release_posts(self) -> None:
        self._hold_after = None
        self._release.set()

    # -- inspecting ----------------------------------------------------------------------

    def of(self, method: str, *, answered: bool | None = True) -> list[Call]:
        return [
            c
            for c in self.calls
            if c.method == method and (answered is None or c.answered == answered)
        ]

    def texts(self, channel: str = DM) -> list[str]:
        """The mrkdwn of every message the bot posted to `channel`, in order."""
        return [p.text for p in self.posted if p.channel == channel]

    def plain(self, channel: str = DM) -> list[str]:
        return [mrkdwn_to_plain(t) for t in self.texts(channel)]

    def message_at(self, channel: str, ts: str) -> Posted | None:
        return next((p for p in self.posted if p.channel == channel and p.ts == ts), None)

    def with_buttons(self, channel: str = DM) -> list[Posted]:
        return [p for p in self.posted if p.channel == channel and _buttons(p.blocks)]

    def buttons(self, posted: Posted) -> list[tuple[str, str]]:
        """(label, value) of a posted message's buttons."""
        return _buttons(posted.blocks)

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 15.0) -> None:
        """Wait until `predicate()` holds (checked after every request), at most `timeout`."""

        async def _wait() -> None:
            async with self._changed:
                await self._changed.wait_for(predicate)

        await asyncio.wait_for(_wait(), timeout)

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    # -- Socket Mode -------------------------------------------------------------------

    async def _socket(self, request: web.Request) -> web.StreamResponse:
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self.connections += 1
        self._sockets.append(ws)
        await self._notify()
        sender = asyncio.create_task(self._send_envelopes(ws))
        try:
            async for message in ws:
                if message.type != WSMsgType.TEXT:
                    continue
                ack = json.loads(message.data)
                envelope_id = str(ack.get("envelope_id", ""))
                if self.pending.pop(envelope_id, None) is not None:
                    self.acks.append(envelope_id)
                await self._notify()
        finally:
            sender.cancel()
            await asyncio.gather(sender, return_exceptions=True)
            self._sockets.remove(ws)
            await self._notify()
        return ws

    async def _send_envelopes(self, ws: web.WebSocketResponse) -> None:
        hello = {
            "type": "hello",
            "num_connections": len(self._sockets),
            "debug_info": {"host": "fake", "approximate_connection_time": 18060},
            "connection_info": {"app_id": "A0001"},
        }
        await ws.send_str(json.dumps(hello))
        sent: set[str] = set()
        while not ws.closed:
            self._new.clear()
            for envelope_id, envelope in list(self.pending.items()):
                if envelope_id not in sent:
                    sent.add(envelope_id)
                    await ws.send_str(json.dumps(envelope))
            await self._new.wait()

    # -- the Web API ---------------------------------------------------------------------

    async def _params(self, request: web.Request) -> dict[str, Any]:
        if request.content_type == "application/json":
            body = await request.json()
            return dict(body) if isinstance(body, dict) else {}
        form = await request.post()
        params: dict[str, Any] = {}
        for key, value in form.items():
            text = str(value)
            params[key] = json.loads(text) if text[:1] in "[{" else text
        return params

    def _token(self, request: web.Request, params: dict[str, Any]) -> str:
        header = request.headers.get("Authorization", "")
        return header.removeprefix("Bearer ").strip() or str(params.pop("token", ""))

    async def _method(self, request: web.Request) -> web.StreamResponse:
        method = request.match_info["method"]
        params = await self._params(request)
        token = self._token(request, params)
        call = Call(method, params, answered=False)
        self.calls.append(call)
        await self._notify()
        try:
            response = await self._answer(method, params, token)
        finally:
            await self._notify()
        call.answered = response.status == 200 and json.loads(response.text or "{}").get("ok")
        await self._notify()
        return response

    async def _answer(self, method: str, params: dict[str, Any], token: str) -> web.Response:
        if not token:
            return _error("not_authed")
        wanted = self.app_token if method == "apps.connections.open" else self.bot_token
        if token != wanted:
            known = token in (self.app_token, self.bot_token)
            return _error("not_allowed_token_type" if known else "invalid_auth")
        handler = getattr(self, "_m_" + method.replace(".", "_"), None)
        if handler is None:
            return _error("unknown_method")
        result = await handler(params)
        if isinstance(result, web.Response):
            return result
        return web.json_response({"ok": True, **result})

    async def _m_auth_test(self, params: dict[str, Any]) -> Any:
        return {
            "url": "https://fake.slack.com/",
            "team": "Fake Team",
            "user": "habakkuk",
            "team_id": TEAM,
            "user_id": BOT_USER,
            "bot_id": BOT_ID,
        }

    async def _m_apps_connections_open(self, params: dict[str, Any]) -> Any:
        return {"url": f"ws://127.0.0.1:{self.port}/link/?ticket={uuid.uuid4()}"}

    async def _m_chat_postMessage(self, params: dict[str, Any]) -> Any:
        channel = str(params.get("channel", ""))
        if channel in self.blocked:
            return _error(self.blocked[channel])
        if self.rate_limited:
            self.rate_limited -= 1
            return web.json_response(
                {"ok": False, "error": "ratelimited"}, status=429, headers={"Retry-After": "1"}
            )
        held = self._hold_after is not None and len(self.of("chat.postMessage", answered=None)) > (
            self._hold_after
        )
        if held and not self._hold_made:
            await self._release.wait()
            return web.json_response({"ok": False, "error": "fatal_error"}, status=500)
        text = str(params.get("text", ""))
        if not text.strip() and not params.get("blocks"):
            return _error("no_text")
        if len(text) > 40000:
            return _error("msg_too_long")
        for block in params.get("blocks") or []:
            if block.get("type") == "section" and len(block["text"]["text"]) > 3000:
                return _error("invalid_blocks")
        metadata = params.get("metadata") or {}
        if metadata and not (isinstance(metadata, dict) and metadata.get("event_type")):
            return _error("invalid_metadata_format")
        posted = Posted(
            channel,
            self.next_ts(),
            text,
            str(params.get("thread_ts", "")),
            list(params.get("blocks") or []),
            dict(metadata),
        )
        self.posted.append(posted)
        if held:  # made, but the answer never reaches the bot
            await self._notify()
            await self._release.wait()
            return web.json_response({"ok": False, "error": "fatal_error"}, status=500)
        return {"channel": channel, "ts": posted.ts, "message": {"text": text, "ts": posted.ts}}

    async def _m_chat_update(self, params: dict[str, Any]) -> Any:
        posted = self.message_at(str(params.get("channel", "")), str(params.get("ts", "")))
        if posted is None:
            return _error("message_not_found")
        posted.text = str(params.get("text", posted.text))
        if "blocks" in params:
            posted.blocks = list(params.get("blocks") or [])
        return {"channel": posted.channel, "ts": posted.ts, "text": posted.text}

    async def _m_chat_delete(self, params: dict[str, Any]) -> Any:
        posted = self.message_at(str(params.get("channel", "")), str(params.get("ts", "")))
        if posted is None:
            return _error("message_not_found")
        self.posted.remove(posted)
        return {"channel": posted.channel, "ts": posted.ts}

    async def _m_reactions_add(self, params: dict[str, Any]) -> Any:
        return self._react("add", params)

    async def _m_reactions_remove(self, params: dict[str, Any]) -> Any:
        return self._react("remove", params)

    def _react(self, how: str, params: dict[str, Any]) -> Any:
        channel, ts = str(params.get("channel", "")), str(params.get("timestamp", ""))
        self.reactions.append((how, channel, ts, str(params.get("name", ""))))
        return {}

    def stored(self, channel: str) -> list[Stored]:
        """Every message in `channel` (people's and the bot's), in the order written."""
        ours = [
            Stored(p.ts, p.text, p.thread_ts, p.metadata, bot_id=BOT_ID, user=BOT_USER)
            for p in self.posted
            if p.channel == channel
        ]
        return sorted(self.heard.get(channel, []) + ours, key=lambda m: float(m.ts))

    async def _m_conversations_history(self, params: dict[str, Any]) -> Any:
        channel = str(params.get("channel", ""))
        if channel in self.blocked:
            return _error(self.blocked[channel])
        return history(self.stored(channel), params)

    async def _m_conversations_replies(self, params: dict[str, Any]) -> Any:
        channel = str(params.get("channel", ""))
        if channel in self.blocked:
            return _error(self.blocked[channel])
        try:
            return replies(self.stored(channel), params)
        except HistoryError as exc:
            return _error(exc.code)

    async def _m_files_getUploadURLExternal(self, params: dict[str, Any]) -> Any:
        file_id = f"FB{len(self.uploads) + 1:04d}"
        self.uploads[file_id] = (str(params.get("filename", "")), b"")
        return {"upload_url": f"{self.root}/upload/{file_id}", "file_id": file_id}

    async def _m_files_completeUploadExternal(self, params: dict[str, Any]) -> Any:
        channel = str(params.get("channel_id", ""))
        if channel in self.blocked:
            return _error(self.blocked[channel])
        if self.refused_files:
            return _error(self.refused_files)
        done = []
        for item in params.get("files") or []:
            name, data = self.uploads.get(str(item.get("id")), ("", b""))
            if not data:
                return _error("file_not_found")
            self.shared.append(
                Shared(
                    channel,
                    str(item.get("title") or name),
                    data,
                    str(params.get("thread_ts", "")),
                    str(params.get("initial_comment", "")),
                )
            )
            done.append({"id": item.get("id"), "title": item.get("title") or name})
        return {"files": done}

    # -- files and response URLs --------------------------------------------------------

    async def _download(self, request: web.Request) -> web.StreamResponse:
        header = request.headers.get("Authorization", "")
        if header != f"Bearer {self.bot_token}":
            # What Slack does without a token that may read the file: its sign-in page.
            return web.Response(text="<html>sign in</html>", content_type="text/html")
        await self._downloads.wait()
        found = self.files.get(request.match_info["id"])
        if found is None:
            return web.Response(status=404)
        return web.Response(body=found[1], content_type="application/octet-stream")

    async def _upload(self, request: web.Request) -> web.StreamResponse:
        file_id = request.match_info["id"]
        if file_id not in self.uploads:
            return web.Response(status=404)
        data = b""
        if request.content_type.startswith("multipart/"):
            async for part in await request.multipart():
                assert isinstance(part, BodyPartReader)
                data = await part.read()
        else:
            data = await request.read()
        self.uploads[file_id] = (self.uploads[file_id][0], bytes(data))
        await self._notify()
        return web.Response(text="OK - " + str(len(data)))

    async def _respond(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.ephemeral.append(str(body.get("text", "")))
        await self._notify()
        return web.json_response({"ok": True})


def _error(code: str) -> web.Response:
    return web.json_response({"ok": False, "error": code})


def _buttons(blocks: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [
        (str(e["text"]["text"]), str(e["value"]))
        for b in blocks
        if b.get("type") == "actions"
        for e in b.get("elements", [])
    ]


class SlackDriver:
    """The allowed person in a DM with the bot (tests/channels/platform_driver.py)."""

    kind = "slack"
    has_buttons = True

    def __init__(self, fake: FakeSlack):
        self.fake = fake

    def channel_yaml(self, name: str) -> str:
        return (
            "type: slack\n"
            "app_token_env: SLACK_APP_TOKEN\n"
            "bot_token_env: SLACK_BOT_TOKEN\n"
            f"base_url: {self.fake.base_url}\n"
            f'allow_from: ["{PERSON}"]\n'
            "silent_limit: 40s\n"
        )

    def env(self) -> dict[str, str]:
        return {"SLACK_APP_TOKEN": self.fake.app_token, "SLACK_BOT_TOKEN": self.fake.bot_token}

    async def say(self, text: str) -> None:
        self.fake.message(text)

    async def send_file(self, name: str, data: bytes, media_type: str, caption: str = "") -> None:
        self.fake.message(caption, files=[self.fake.share(name, data, media_type)])

    async def press(self, label: str) -> None:
        for posted in reversed(self.fake.with_buttons()):
            for text, value in self.fake.buttons(posted):
                if text == label:
                    self.fake.press(value, message_ts=posted.ts)
                    return
            break
        raise AssertionError(f"no button {label!r} on the newest message with buttons")

    def texts(self) -> list[str]:
        return self.fake.plain()

    def files(self) -> list[tuple[str, bytes]]:
        return [(s.name, s.data) for s in self.fake.shared if s.channel == DM]
