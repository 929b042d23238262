"""A fake BlueBubbles server on 127.0.0.1: its REST API (server info, send text, send
attachment, message query, attachment download; the password as the `password` query
parameter) and its webhook side, POSTing `new-message` events as JSON to the URL it was
given (which carries the secret), as the real server does.

`BlueBubblesDriver` plays the one allowed person in a one-to-one iMessage chat.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import aiohttp
from aiohttp import web

PASSWORD = "bluebubbles-test-password"
SECRET = "bb-webhook-secret-0123456789abcdef"
ALICE = "+15557654321"
BOB = "bob@icloud.com"
ALICE_CHAT = f"iMessage;-;{ALICE}"
GROUP_CHAT = "iMessage;+;chat000111222333"


@dataclass
class Sent:
    """A message of ours (the bot's) as the server stored it."""

    guid: str
    chat: str
    text: str
    temp_guid: str
    at_ms: int
    attachment: tuple[str, bytes] | None = None

    def row(self) -> dict[str, Any]:
        attachments = []
        if self.attachment is not None:
            name, data = self.attachment
            attachments.append(
                {"guid": f"at-{self.guid}", "transferName": name, "totalBytes": len(data)}
            )
        return {
            "guid": self.guid,
            "text": self.text,
            "isFromMe": True,
            "dateCreated": self.at_ms,
            "attachments": attachments,
            "chats": [{"guid": self.chat}],
        }


@dataclass
class FakeBlueBubbles:
    """The server's REST API and its webhook caller."""

    password: str = PASSWORD
    secret: str = SECRET
    sent: list[Sent] = field(default_factory=list)
    attachments: dict[str, tuple[bytes, str, str]] = field(default_factory=dict)  # guid -> file
    refuse_password: bool = False
    # while set, a send is stored (it reached the chat) and then hangs unanswered: a
    # crash test's window
    hold: asyncio.Event | None = None
    held: int = 0
    store_held: bool = True  # False: a held send never reaches the chat
    webhook_url: str = ""  # /channels/<account>, without the secret
    base_url: str = ""
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _runner: web.AppRunner | None = None
    _client: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> FakeBlueBubbles:
        app = web.Application(client_max_size=200 * 1024 * 1024)
        app.router.add_get("/api/v1/server/info", self._info)
        app.router.add_post("/api/v1/message/text", self._text)
        app.router.add_post("/api/v1/message/attachment", self._attachment)
        app.router.add_post("/api/v1/message/query", self._query)
        app.router.add_get("/api/v1/attachment/{guid}/download", self._download)
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

    def _refused(self, request: web.Request) -> web.Response | None:
        if not self.refuse_password and request.query.get("password") == self.password:
            return None
        error = {"type": "Authentication Error", "message": "Unauthorized"}
        return web.json_response(
            {"status": 401, "message": "Unauthorized", "error": error}, status=401
        )

    async def _info(self, request: web.Request) -> web.Response:
        refused = self._refused(request)
        if refused is not None:
            return refused
        data = {
            "server_version": "1.9.9",
            "detected_icloud": "bot@icloud.com",
            "private_api": False,
        }
        return web.json_response({"status": 200, "message": "Success", "data": data})

    async def _store(self, sent: Sent) -> web.Response:
        if self.hold is None or self.store_held:
            self.sent.append(sent)
        if self.hold is not None:
            self.held += 1
            await self.hold.wait()
            raise web.HTTPServiceUnavailable()
        data = {**sent.row(), "tempGuid": sent.temp_guid}
        return web.json_response({"status": 200, "message": "Message sent!", "data": data})

    def _bad(self, why: str) -> web.Response:
        error = {"type": "Validation Error", "message": why}
        return web.json_response(
            {"status": 400, "message": "Bad Request", "error": error}, status=400
        )

    async def _text(self, request: web.Request) -> web.Response:
        refused = self._refused(request)
        if refused is not None:
            return refused
        body = await request.json()
        if not body.get("chatGuid") or not body.get("tempGuid") or not body.get("message"):
            return self._bad("chatGuid, tempGuid and message are required")
        guid = f"{next(self._ids):08X}-5E17-4000-8000-000000000001"
        now = int(time.time() * 1000)
        return await self._store(
            Sent(guid, body["chatGuid"], body["message"], body["tempGuid"], now)
        )

    async def _attachment(self, request: web.Request) -> web.Response:
        refused = self._refused(request)
        if refused is not None:
            return refused
        form = await request.post()
        upload = form.get("attachment")
        if not isinstance(upload, web.FileField) or not form.get("tempGuid"):
            return self._bad("Attachment not provided or was empty!")
        guid = f"{next(self._ids):08X}-F11E-4000-8000-000000000002"
        now = int(time.time() * 1000)
        sent = Sent(guid, str(form["chatGuid"]), "", str(form["tempGuid"]), now)
        sent.attachment = (str(form["name"]), upload.file.read())
        return await self._store(sent)

    async def _query(self, request: web.Request) -> web.Response:
        refused = self._refused(request)
        if refused is not None:
            return refused
        body = await request.json()
        after = int(body.get("after") or 0)
        rows = [
            s.row()
            for s in reversed(self.sent)
            if s.chat == body.get("chatGuid") and s.at_ms >= after
        ]
        limit = int(body.get("limit") or 100)
        return web.json_response({"status": 200, "message": "Success", "data": rows[:limit]})

    async def _download(self, request: web.Request) -> web.Response:
        refused = self._refused(request)
        if refused is not None:
            return refused
        found = self.attachments.get(request.match_info["guid"])
        if found is None:
            raise web.HTTPNotFound()
        return web.Response(body=found[0], content_type=found[1])

    # -- the webhook side ------------------------------------------------------------

    def message(
        self,
        sender: str,
        text: str,
        *,
        chat: str = "",
        guid: str = "",
        attachments: list[dict[str, Any]] | None = None,
        from_me: bool = False,
    ) -> dict[str, Any]:
        """A `new-message` event from `sender` in `chat` (their one-to-one chat by default)."""
        chat = chat or f"iMessage;-;{sender}"
        style = 43 if ";+;" in chat else 45
        data = {
            "guid": guid or f"{next(self._ids):08X}-1111-4000-8000-000000000003",
            "text": text,
            "isFromMe": from_me,
            "dateCreated": int(time.time() * 1000),
            "handle": {"address": sender, "service": "iMessage"},
            "chats": [
                {
                    "guid": chat,
                    "style": style,
                    "chatIdentifier": chat.rsplit(";", 1)[-1],
                    "displayName": "",
                }
            ],
            "attachments": attachments or [],
        }
        return {"type": "new-message", "data": data}

    def with_file(
        self, sender: str, caption: str, name: str, data: bytes, media_type: str
    ) -> dict[str, Any]:
        """A message carrying a file the server serves for download."""
        guid = f"at-{next(self._ids):08X}"
        self.attachments[guid] = (data, media_type, name)
        item = {"guid": guid, "transferName": name, "mimeType": media_type, "totalBytes": len(data)}
        text = (caption + "\ufffc") if caption else "\ufffc"
        return self.message(sender, text, attachments=[item])

    async def post(
        self, event: dict[str, Any] | bytes, *, secret: str | None = None, url: str = ""
    ) -> tuple[int, str]:
        """POST a webhook as the server does, to the URL with the secret (overridable to
        forge one). Returns (status, text)."""
        body = event if isinstance(event, bytes) else json.dumps(event).encode()
        target = url or f"{self.webhook_url}/{self.secret if secret is None else secret}"
        if secret == "":
            target = url or self.webhook_url
        assert self._client is not None
        headers = {"Content-Type": "application/json"}
        async with self._client.post(target, data=body, headers=headers) as response:
            return response.status, await response.text()

    def to(self, chat: str) -> list[Sent]:
        return [sent for sent in self.sent if sent.chat == chat]


class BlueBubblesDriver:
    """The person (ALICE) in her one-to-one iMessage chat with the bot's Mac."""

    kind = "bluebubbles"
    has_buttons = False

    def __init__(self, server: FakeBlueBubbles):
        self.server = server

    def channel_yaml(self, name: str) -> str:
        return (
            f"type: bluebubbles\nbase_url: {self.server.base_url}\n"
            "password_env: BB_TEST_PASSWORD\nsecret_env: BB_TEST_SECRET\n"
            f'allow_from: ["{ALICE}"]\n'
        )

    def env(self) -> dict[str, str]:
        return {"BB_TEST_PASSWORD": self.server.password, "BB_TEST_SECRET": self.server.secret}

    def called_at(self, url: str) -> None:
        """The server's webhook now points at `url` (plus the secret)."""
        self.server.webhook_url = url

    async def say(self, text: str) -> None:
        status, said = await self.server.post(self.server.message(ALICE, text))
        assert status == 200, (status, said)

    async def send_file(self, name: str, data: bytes, media_type: str, caption: str = "") -> None:
        status, said = await self.server.post(
            self.server.with_file(ALICE, caption, name, data, media_type)
        )
        assert status == 200, (status, said)

    async def press(self, label: str) -> None:
        raise AssertionError("iMessage has no buttons")

    def texts(self) -> list[str]:
        return [sent.text for sent in self.server.to(ALICE_CHAT) if sent.text]

    def files(self) -> list[tuple[str, bytes]]:
        return [sent.attachment for sent in self.server.to(ALICE_CHAT) if sent.attachment]
