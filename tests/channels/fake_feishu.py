"""A fake Feishu/Lark on 127.0.0.1: the Open API the adapter calls (tenant_access_token,
bot info, messages with their uuid, card updates, file upload and message resources) and
the event side, which encrypts each event with the app's Encrypt Key (AES-256-CBC under
its SHA-256, a random IV first, base64) and signs it (X-Lark-Signature: SHA-256 of
timestamp + nonce + key + body), as Feishu's documentation says.

`FeishuDriver` plays the one allowed person in a private chat with the bot.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import itertools
import json
import os
import time
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import aiohttp
from aiohttp import web
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

APP_ID = "cli_a1b2c3d4e5f60718"
APP_SECRET = "feishu-test-app-secret-0123456789"
ENCRYPT_KEY = "feishu-test-encrypt-key"
VERIFICATION_TOKEN = "feishu-test-verification-token"
BOT_OPEN_ID = "ou_bot000000000000000000000000000"
ALICE = "ou_alice0000000000000000000000000"
MALLORY = "ou_mallory00000000000000000000000"
ALICE_CHAT = "oc_alicechat000000000000000000000"
GROUP = "oc_group000000000000000000000000"


def lark_signature(timestamp: str, nonce: str, key: str, body: bytes) -> str:
    """X-Lark-Signature, written here from Feishu's documentation."""
    return hashlib.sha256((timestamp + nonce + key).encode() + body).hexdigest()


def lark_encrypt(key: str, plain: bytes) -> str:
    """The `encrypt` field: base64 of a random IV and AES-256-CBC (PKCS#7) under
    SHA-256(key)."""
    iv = os.urandom(16)
    pad = 16 - len(plain) % 16
    encryptor = Cipher(algorithms.AES(hashlib.sha256(key.encode()).digest()), modes.CBC(iv))
    sealed = encryptor.encryptor()
    data = sealed.update(plain + bytes([pad]) * pad) + sealed.finalize()
    return base64.b64encode(iv + data).decode()


@dataclass
class Sent:
    """A message the bot posted (or the card it updated)."""

    message_id: str
    chat: str
    msg_type: str
    content: dict[str, Any]
    uuid: str = ""
    buttons: list[tuple[str, str]] = field(default_factory=list)  # (label, value data)


class FakeFeishu:
    """The Open API (Bearer tenant_access_token) and an event caller."""

    def __init__(self) -> None:
        self.app_id, self.secret = APP_ID, APP_SECRET
        self.sent: list[Sent] = []
        self.uploads: dict[str, tuple[str, bytes]] = {}  # file_key -> (name, data)
        self.resources: dict[tuple[str, str], bytes] = {}  # (message id, key) -> bytes
        self.tokens: list[str] = []  # every token handed out, oldest first
        self.valid: set[str] = set()
        self.lifetime = 7200
        self.refuse_secret = False
        self.stale_answers = 0  # how many calls were refused with 99991663
        # while set, a send is posted, then waits here unanswered (a crash test's window)
        self.hold: asyncio.Event | None = None
        self.held = 0
        self.event_url = ""
        self.base_url = ""
        self._ids = itertools.count(1)
        self._by_uuid: dict[str, str] = {}
        self._runner: web.AppRunner | None = None
        self._client: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> FakeFeishu:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/open-apis/auth/v3/tenant_access_token/internal", self._token)
        app.router.add_get("/open-apis/bot/v3/info", self._bot)
        app.router.add_post("/open-apis/im/v1/messages", self._send)
        app.router.add_patch("/open-apis/im/v1/messages/{id}", self._patch)
        app.router.add_post("/open-apis/im/v1/files", self._upload)
        app.router.add_get("/open-apis/im/v1/messages/{id}/resources/{key}", self._resource)
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

    def expire_tokens(self) -> None:
        """Every token handed out is stale from now on (rotated, revoked)."""
        self.valid.clear()

    # -- the API ----------------------------------------------------------------------

    async def _token(self, request: web.Request) -> web.Response:
        body = await request.json()
        if self.refuse_secret or (body.get("app_id"), body.get("app_secret")) != (
            self.app_id,
            self.secret,
        ):
            return web.json_response({"code": 10014, "msg": "app secret invalid"})
        token = f"t-{next(self._ids):08x}{os.urandom(8).hex()}"
        self.tokens.append(token)
        self.valid.add(token)
        return web.json_response(
            {"code": 0, "msg": "ok", "tenant_access_token": token, "expire": self.lifetime}
        )

    def _stale(self, request: web.Request) -> web.Response | None:
        given = request.headers.get("Authorization", "").removeprefix("Bearer ")
        if given in self.valid:
            return None
        self.stale_answers += 1
        return web.json_response(
            {"code": 99991663, "msg": "Invalid access token for authorization"}, status=400
        )

    async def _bot(self, request: web.Request) -> web.Response:
        if (refused := self._stale(request)) is not None:
            return refused
        bot = {"app_name": "Habakkuk", "open_id": BOT_OPEN_ID, "activate_status": 2}
        return web.json_response({"code": 0, "msg": "ok", "bot": bot})

    async def _send(self, request: web.Request) -> web.Response:
        if (refused := self._stale(request)) is not None:
            return refused
        assert request.query.get("receive_id_type") == "chat_id"
        body = await request.json()
        uuid = str(body.get("uuid", ""))
        if uuid and uuid in self._by_uuid:  # Feishu posts once per uuid (within an hour)
            return web.json_response(
                {"code": 0, "msg": "success", "data": {"message_id": self._by_uuid[uuid]}}
            )
        message_id = f"om_{next(self._ids):032x}"
        content = json.loads(body["content"])
        buttons = [
            (action["text"]["content"], action["value"]["data"])
            for element in content.get("elements", [])
            if element.get("tag") == "action"
            for action in element["actions"]
        ]
        self.sent.append(
            Sent(message_id, body["receive_id"], body["msg_type"], content, uuid, buttons)
        )
        if uuid:
            self._by_uuid[uuid] = message_id
        if self.hold is not None:  # posted, but the answer never reaches the bot
            self.held += 1
            await self.hold.wait()
            raise web.HTTPServiceUnavailable()
        return web.json_response({"code": 0, "msg": "success", "data": {"message_id": message_id}})

    async def _patch(self, request: web.Request) -> web.Response:
        if (refused := self._stale(request)) is not None:
            return refused
        body = await request.json()
        for sent in self.sent:
            if sent.message_id == request.match_info["id"] and sent.msg_type == "interactive":
                sent.content = json.loads(body["content"])
                sent.buttons = []
                return web.json_response({"code": 0, "msg": "success", "data": {}})
        return web.json_response({"code": 230001, "msg": "message not found"}, status=400)

    async def _upload(self, request: web.Request) -> web.Response:
        if (refused := self._stale(request)) is not None:
            return refused
        form = await request.post()
        upload = form["file"]
        assert isinstance(upload, web.FileField)
        key = f"file_v2_{next(self._ids):08x}"
        self.uploads[key] = (str(form["file_name"]), upload.file.read())
        return web.json_response({"code": 0, "msg": "success", "data": {"file_key": key}})

    async def _resource(self, request: web.Request) -> web.Response:
        if (refused := self._stale(request)) is not None:
            return refused
        found = self.resources.get((request.match_info["id"], request.match_info["key"]))
        if found is None:
            return web.json_response({"code": 234003, "msg": "file not found"}, status=400)
        return web.Response(body=found, content_type="application/octet-stream")

    # -- the event side ---------------------------------------------------------------

    def message_event(
        self,
        sender: str,
        text: str = "",
        *,
        chat: str = ALICE_CHAT,
        group: bool = False,
        message_id: str = "",
        kind: str = "text",
        content: dict[str, Any] | None = None,
        mentions: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """An im.message.receive_v1 event (schema 2.0) as Feishu sends it."""
        message_id = message_id or f"om_in{next(self._ids):030x}"
        return {
            "schema": "2.0",
            "header": {
                "event_id": f"ev{next(self._ids):030x}",
                "token": VERIFICATION_TOKEN,
                "create_time": str(int(time.time() * 1000)),
                "event_type": "im.message.receive_v1",
                "tenant_key": "tenant-test",
                "app_id": self.app_id,
            },
            "event": {
                "sender": {
                    "sender_id": {"open_id": sender, "union_id": "on_" + sender[3:], "user_id": ""},
                    "sender_type": "user",
                    "tenant_key": "tenant-test",
                },
                "message": {
                    "message_id": message_id,
                    "create_time": str(int(time.time() * 1000)),
                    "chat_id": chat,
                    "chat_type": "group" if group else "p2p",
                    "message_type": kind,
                    "content": json.dumps(content if content is not None else {"text": text}),
                    "mentions": mentions or [],
                },
            },
        }

    def file_event(self, sender: str, name: str, data: bytes) -> dict[str, Any]:
        """A file message; its bytes are served as the message's resource."""
        message_id = f"om_in{next(self._ids):030x}"
        key = f"file_v2_in{next(self._ids):08x}"
        self.resources[(message_id, key)] = data
        return self.message_event(
            sender,
            message_id=message_id,
            kind="file",
            content={"file_key": key, "file_name": name},
        )

    def press_event(self, operator: str, sent: Sent, data: str) -> dict[str, Any]:
        """A card.action.trigger callback for a button of `sent`."""
        return {
            "schema": "2.0",
            "header": {
                "event_id": f"ev{next(self._ids):030x}",
                "token": VERIFICATION_TOKEN,
                "create_time": str(int(time.time() * 1000)),
                "event_type": "card.action.trigger",
                "tenant_key": "tenant-test",
                "app_id": self.app_id,
            },
            "event": {
                "operator": {"open_id": operator, "tenant_key": "tenant-test"},
                "token": "c-card-token",
                "action": {"value": {"data": data}, "tag": "button"},
                "context": {"open_message_id": sent.message_id, "open_chat_id": sent.chat},
            },
        }

    def sealed(self, event: dict[str, Any], key: str = ENCRYPT_KEY) -> bytes:
        """The request body: the event encrypted with `key`."""
        return json.dumps({"encrypt": lark_encrypt(key, json.dumps(event).encode())}).encode()

    async def post(
        self,
        event: dict[str, Any],
        *,
        key: str = ENCRYPT_KEY,
        sign_key: str = ENCRYPT_KEY,
        timestamp: str = "",
        body: bytes | None = None,
        signature: str | None = None,
        signed_body: bytes | None = None,
    ) -> tuple[int, str]:
        """POST an event as Feishu does; the overrides forge one. Returns (status, text)."""
        data = body if body is not None else self.sealed(event, key)
        stamp = timestamp or str(int(time.time()))
        nonce = os.urandom(8).hex()
        if signature is None:
            signature = lark_signature(stamp, nonce, sign_key, signed_body or data)
        headers = {
            "Content-Type": "application/json",
            "X-Lark-Request-Timestamp": stamp,
            "X-Lark-Request-Nonce": nonce,
            "X-Lark-Signature": signature,
        }
        assert self._client is not None
        async with self._client.post(self.event_url, data=data, headers=headers) as response:
            return response.status, await response.text()

    async def challenge(self, token: str = VERIFICATION_TOKEN) -> tuple[int, str]:
        """The url_verification request the console sends when the URL is saved."""
        event = {
            "challenge": "ch-" + os.urandom(6).hex(),
            "token": token,
            "type": "url_verification",
        }
        assert self._client is not None
        async with self._client.post(self.event_url, data=self.sealed(event)) as response:
            return response.status, await response.text()


class FeishuDriver:
    """The person (ALICE) in a private chat with the bot on the fake Feishu."""

    kind = "feishu"
    has_buttons = True

    def __init__(self, feishu: FakeFeishu):
        self.feishu = feishu

    def channel_yaml(self, name: str) -> str:
        return (
            f"type: feishu\napp_id: {self.feishu.app_id}\napp_secret_env: FEISHU_TEST_SECRET\n"
            "encrypt_key_env: FEISHU_TEST_ENCRYPT_KEY\n"
            "verification_token_env: FEISHU_TEST_VERIFICATION\n"
            f"base_url: {self.feishu.base_url}\nallow_from: ['{ALICE}']\n"
        )

    def env(self) -> dict[str, str]:
        return {
            "FEISHU_TEST_SECRET": self.feishu.secret,
            "FEISHU_TEST_ENCRYPT_KEY": ENCRYPT_KEY,
            "FEISHU_TEST_VERIFICATION": VERIFICATION_TOKEN,
        }

    def called_at(self, url: str) -> None:
        """The app's event subscription now points at `url`."""
        self.feishu.event_url = url

    async def say(self, text: str) -> None:
        status, said = await self.feishu.post(self.feishu.message_event(ALICE, text))
        assert status == 200, (status, said)

    async def send_file(self, name: str, data: bytes, media_type: str, caption: str = "") -> None:
        # A Feishu file message has no caption: the file goes alone.
        status, said = await self.feishu.post(self.feishu.file_event(ALICE, name, data))
        assert status == 200, (status, said)

    async def press(self, label: str) -> None:
        for sent in reversed(self.feishu.sent):
            for text, data in sent.buttons:
                if text == label:
                    event = self.feishu.press_event(ALICE, sent, data)
                    status, said = await self.feishu.post(event)
                    assert status == 200, (status, said)
                    return
        raise AssertionError(f"no button {label!r}")

    def texts(self) -> list[str]:
        said = []
        for sent in self.feishu.sent:
            if sent.chat != ALICE_CHAT:
                continue
            if sent.msg_type == "text":
                said.append(str(sent.content["text"]))
            elif sent.msg_type == "interactive":
                said.append(str(sent.content["elements"][0]["text"]["content"]))
        return said

    def files(self) -> list[tuple[str, bytes]]:
        return [
            self.feishu.uploads[sent.content["file_key"]]
            for sent in self.feishu.sent
            if sent.chat == ALICE_CHAT and sent.msg_type == "file"
        ]
