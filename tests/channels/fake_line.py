"""A fake LINE Platform on 127.0.0.1: the Messaging API (bot info, reply with one-use
reply tokens, push with X-Line-Retry-Key run once per key, message content) and the
webhook side, signing each request it makes with LINE's own algorithm (HMAC-SHA256 of
the body with the channel secret, base64) and a test channel secret.

`LineDriver` plays the one allowed person in a one-to-one chat with the bot.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import itertools
import json
import time
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import aiohttp
from aiohttp import web

TOKEN = "line-test-channel-access-token-0123456789"
SECRET = "0123456789abcdef0123456789abcdef"
BOT = "U" + "b0" * 16
ALICE = "U" + "a1" * 16
BOB = "U" + "b2" * 16
GROUP = "C" + "c3" * 16


def line_signature(secret: str, body: bytes) -> str:
    """LINE's X-Line-Signature, written here from its documentation."""
    return base64.b64encode(hmac.new(secret.encode(), body, hashlib.sha256).digest()).decode()


@dataclass
class Sent:
    """A message the bot sent (by reply or push), and the image LINE fetched for it."""

    id: str
    to: str
    message: dict[str, Any]
    how: str  # "reply" or "push"
    image: bytes = b""

    @property
    def text(self) -> str:
        if self.message.get("type") == "text":
            return str(self.message["text"])
        if self.message.get("type") == "flex":
            return str(self.message["contents"]["body"]["contents"][0]["text"])
        return ""

    @property
    def buttons(self) -> list[dict[str, Any]]:
        if self.message.get("type") != "flex":
            return []
        return [b["action"] for b in self.message["contents"]["footer"]["contents"]]


@dataclass
class _Token:
    to: str
    used: bool = False


@dataclass
class FakeLine:
    """The Messaging API (bearer token) and a webhook caller."""

    token: str = TOKEN
    secret: str = SECRET
    sent: list[Sent] = field(default_factory=list)
    content: dict[str, tuple[bytes, str]] = field(default_factory=dict)  # message id -> file
    refuse_token: bool = False
    # while set, a push waits here unanswered and unrecorded (a crash test's window)
    hold: asyncio.Event | None = None
    held: int = 0
    # with hold: take the push first (its key and message recorded), then hang, as when
    # an answer is lost
    hold_after: bool = False
    webhook_url: str = ""  # the channel's Webhook URL
    base_url: str = ""
    retry_keys: dict[str, str] = field(default_factory=dict)  # key -> accepted request id
    _tokens: dict[str, _Token] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _runner: web.AppRunner | None = None
    _client: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> FakeLine:
        app = web.Application()
        app.router.add_get("/v2/bot/info", self._info)
        app.router.add_post("/v2/bot/message/reply", self._reply)
        app.router.add_post("/v2/bot/message/push", self._push)
        app.router.add_get("/v2/bot/message/{id}/content", self._content)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]  # a started TCPSite has its server
        self.base_url = f"http://127.0.0.1:{port}"
        self._client = aiohttp.ClientSession()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._client is not None:
            await self._client.close()
        if self._runner is not None:
            await self._runner.cleanup()

    def _authorized(self, request: web.Request) -> bool:
        expected = f"Bearer {self.token}"
        return not self.refuse_token and request.headers.get("Authorization") == expected

    def _refused(self) -> web.Response:
        return web.json_response({"message": "Authentication failed"}, status=401)

    async def _info(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._refused()
        return web.json_response(
            {"userId": BOT, "basicId": "@123abcde", "displayName": "Habakkuk Test"}
        )

    async def _reply(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._refused()
        body = await request.json()
        token = self._tokens.get(str(body.get("replyToken")))
        if token is None or token.used:
            return web.json_response({"message": "Invalid reply token"}, status=400)
        if self.hold is not None and not self.hold_after:
            self.held += 1
            await self.hold.wait()
            raise web.HTTPServiceUnavailable()
        token.used = True
        return web.json_response(await self._deliver(token.to, body["messages"], "reply"))

    async def _push(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._refused()
        key = request.headers.get("X-Line-Retry-Key", "")
        body = await request.json()
        if key in self.retry_keys:
            return web.json_response(
                {"message": "The retry key is already accepted"},
                status=409,
                headers={"x-line-accepted-request-id": self.retry_keys[key]},
            )
        if self.hold is not None and not self.hold_after:
            self.held += 1
            await self.hold.wait()
            raise web.HTTPServiceUnavailable()
        if key:
            self.retry_keys[key] = f"req-{next(self._ids)}"
        answer = await self._deliver(str(body["to"]), body["messages"], "push")
        if self.hold is not None:
            self.held += 1
            await self.hold.wait()
            raise web.HTTPServiceUnavailable()
        return web.json_response(answer)

    async def _deliver(self, to: str, messages: list[dict[str, Any]], how: str) -> dict[str, Any]:
        ids = []
        for message in messages:
            sent = Sent(f"{next(self._ids):018d}", to, message, how)
            if message.get("type") == "image":
                # LINE fetches the image from its URL to show it.
                assert self._client is not None
                async with self._client.get(message["originalContentUrl"]) as response:
                    assert response.status == 200, response.status
                    sent.image = await response.read()
            self.sent.append(sent)
            ids.append({"id": sent.id, "quoteToken": f"q{sent.id}"})
        return {"sentMessages": ids}

    async def _content(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._refused()
        found = self.content.get(request.match_info["id"])
        if found is None:
            raise web.HTTPNotFound()
        return web.Response(body=found[0], content_type=found[1])

    # -- the webhook side ------------------------------------------------------------

    def event(
        self,
        kind: str,
        sender: str,
        *,
        group: str = "",
        redelivery: bool = False,
        event_id: str = "",
        **fields: Any,
    ) -> dict[str, Any]:
        """One webhook event from `sender` (in `group`, or a room when its id starts with
        R, when given), with a reply token."""
        source: dict[str, Any] = {"type": "group", "groupId": group, "userId": sender}
        if group.startswith("R"):  # a room: several people without a group
            source = {"type": "room", "roomId": group, "userId": sender}
        if not group:
            source = {"type": "user", "userId": sender}
        token = f"rt{next(self._ids):030x}"
        self._tokens[token] = _Token(group or sender)
        if fields.pop("no_reply_token", False):  # a token LINE no longer honours
            token = "stale"
        return {
            "type": kind,
            "mode": "active",
            "timestamp": int(time.time() * 1000),
            "source": source,
            "webhookEventId": event_id or f"01H{next(self._ids):023d}",
            "deliveryContext": {"isRedelivery": redelivery},
            "replyToken": token,
            **fields,
        }

    def text(self, sender: str, text: str, *, group: str = "", **extra: Any) -> dict[str, Any]:
        """A text message event."""
        message = {"type": "text", "id": f"{next(self._ids):018d}", "text": text, **extra}
        return self.event("message", sender, group=group, message=message)

    def file(self, sender: str, name: str, data: bytes, media_type: str) -> dict[str, Any]:
        """A file (or image) message event; its content is served by this fake."""
        message_id = f"{next(self._ids):018d}"
        self.content[message_id] = (data, media_type)
        message: dict[str, Any] = {"id": message_id, "type": "file", "fileName": name}
        message["fileSize"] = len(data)
        if media_type.startswith("image/"):
            message = {"id": message_id, "type": "image", "contentProvider": {"type": "line"}}
        return self.event("message", sender, message=message)

    def body(self, *events: dict[str, Any]) -> bytes:
        """The request body LINE posts for `events`."""
        return json.dumps({"destination": BOT, "events": list(events)}).encode()

    async def post(
        self,
        body: bytes,
        *,
        secret: str = "",
        signature: str | None = None,
        url: str = "",
    ) -> tuple[int, str]:
        """POST a webhook as LINE does; the overrides forge one. Returns (status, text)."""
        if signature is None:
            signature = line_signature(secret or self.secret, body)
        headers = {"Content-Type": "application/json", "X-Line-Signature": signature}
        if not signature:
            del headers["X-Line-Signature"]
        assert self._client is not None
        async with self._client.post(url or self.webhook_url, data=body, headers=headers) as r:
            return r.status, await r.text()

    async def events(self, *events: dict[str, Any]) -> tuple[int, str]:
        """POST `events` signed."""
        return await self.post(self.body(*events))

    def to(self, chat: str) -> list[Sent]:
        return [sent for sent in self.sent if sent.to == chat]


class LineDriver:
    """The person (ALICE) in a one-to-one chat with the bot on the fake LINE."""

    kind = "line"
    has_buttons = True

    def __init__(self, line: FakeLine):
        self.line = line

    def channel_yaml(self, name: str) -> str:
        return (
            "type: line\ntoken_env: LINE_TEST_TOKEN\nsecret_env: LINE_TEST_SECRET\n"
            f'base_url: {self.line.base_url}\nallow_from: ["{ALICE}"]\n'
        )

    def env(self) -> dict[str, str]:
        return {"LINE_TEST_TOKEN": self.line.token, "LINE_TEST_SECRET": self.line.secret}

    def called_at(self, url: str) -> None:
        """The channel's Webhook URL now points at `url`."""
        self.line.webhook_url = url

    async def say(self, text: str) -> None:
        status, said = await self.line.events(self.line.text(ALICE, text))
        assert status == 200, (status, said)

    async def send_file(self, name: str, data: bytes, media_type: str, caption: str = "") -> None:
        # LINE carries a file and its caption as two messages; the caption comes first.
        first = self.line.text(ALICE, caption) if caption else None
        file = self.line.file(ALICE, name, data, media_type)
        status, said = await self.line.events(*([first] if first else []), file)
        assert status == 200, (status, said)

    async def press(self, label: str) -> None:
        for sent in reversed(self.line.to(ALICE)):
            for action in sent.buttons:
                if action["label"] == label:
                    postback = {"data": action["data"]}
                    status, said = await self.line.events(
                        self.line.event("postback", ALICE, postback=postback)
                    )
                    assert status == 200, (status, said)
                    return
        raise AssertionError(f"no button {label!r} in {self.texts()}")

    def texts(self) -> list[str]:
        return [sent.text for sent in self.line.to(ALICE) if sent.text]

    def files(self) -> list[tuple[str, bytes]]:
        # An image message carries no file name: each is its bytes as LINE fetched them.
        return [("image", sent.image) for sent in self.line.to(ALICE) if sent.image]
