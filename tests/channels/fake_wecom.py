"""A fake WeCom on 127.0.0.1: the API the adapter calls (gettoken, message/send, media
upload and get) and the app's callback side, which encrypts each message as WeCom
documents it (AES-256-CBC with the key base64(EncodingAESKey + "="), its first 16 bytes
the IV, PKCS#7 to 32 bytes, the plaintext 16 random bytes + length + message + corp id)
and signs it (msg_signature: SHA-1 of the sorted token, timestamp, nonce and text).

Template cards (`msgtype: template_card`, card_type button_interaction) are checked as
WeCom documents them (a task_id of at most 128 bytes of letters, digits and `_-@`, unique
per app; 1 to 6 buttons whose key is at most 1024 bytes) and answered with a
response_code; a press posts the `template_card_event` callback WeCom posts (TaskId,
EventKey, CardType, a fresh ResponseCode), and message/update_template_card spends a
response_code once.

`WeComDriver` plays the one allowed member talking to the app.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import itertools
import json
import os
import re
import struct
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Any
from urllib.parse import urlencode

import aiohttp
from aiohttp import web
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

CORP_ID = "ww0123456789abcdef"
AGENT_ID = "1000002"
APP_SECRET = "wecom-test-app-secret-0123456789abcdefghij"
TOKEN = "wecomTestToken123"
AES_KEY = base64.b64encode(bytes(range(32))).decode().rstrip("=")  # 43 characters
ALICE = "alice"
MALLORY = "mallory"


def wecom_signature(token: str, timestamp: str, nonce: str, encrypted: str) -> str:
    """msg_signature, written here from WeCom's documentation."""
    return hashlib.sha1("".join(sorted([token, timestamp, nonce, encrypted])).encode()).hexdigest()


def wecom_encrypt(encoding_aes_key: str, message: bytes, receiver: str) -> str:
    """WeCom's encrypted text of `message` for `receiver`."""
    key = base64.b64decode(encoding_aes_key + "=")
    plain = os.urandom(16) + struct.pack(">I", len(message)) + message + receiver.encode()
    pad = 32 - len(plain) % 32
    encryptor = Cipher(algorithms.AES(key), modes.CBC(key[:16])).encryptor()
    data = encryptor.update(plain + bytes([pad]) * pad) + encryptor.finalize()
    return base64.b64encode(data).decode()


@dataclass
class Sent:
    """A message the app sent to a member."""

    msgid: str
    to: str
    msgtype: str
    content: dict[str, Any]


class FakeWeCom:
    """The API (access_token in the query) and a callback caller."""

    def __init__(self) -> None:
        self.corp_id, self.secret = CORP_ID, APP_SECRET
        self.sent: list[Sent] = []
        self.uploads: dict[str, tuple[str, bytes]] = {}
        self.media: dict[str, bytes] = {}
        # response_code -> the task_id and member it can update (once)
        self.codes: dict[str, tuple[str, str]] = {}
        self.updates: list[tuple[str, str]] = []  # (task_id, the greyed button's name)
        self.tokens: list[str] = []
        self.valid: set[str] = set()
        self.refuse_secret = False
        self.stale_answers = 0
        # while set, a send waits here unanswered and unrecorded (a crash test's window)
        self.hold: asyncio.Event | None = None
        self.held = 0
        self.callback_url = ""
        self.base_url = ""
        self._ids = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self._client: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> FakeWeCom:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_get("/cgi-bin/gettoken", self._token)
        app.router.add_post("/cgi-bin/message/send", self._send)
        app.router.add_post("/cgi-bin/message/update_template_card", self._update_card)
        app.router.add_post("/cgi-bin/media/upload", self._upload)
        app.router.add_get("/cgi-bin/media/get", self._media)
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
        """Every token handed out is stale from now on."""
        self.valid.clear()

    async def _token(self, request: web.Request) -> web.Response:
        wanted = (self.corp_id, self.secret)
        if (
            self.refuse_secret
            or (request.query.get("corpid"), request.query.get("corpsecret")) != wanted
        ):
            return web.json_response({"errcode": 40001, "errmsg": "invalid credential"})
        token = f"wc{next(self._ids):06d}{os.urandom(8).hex()}"
        self.tokens.append(token)
        self.valid.add(token)
        return web.json_response(
            {"errcode": 0, "errmsg": "ok", "access_token": token, "expires_in": 7200}
        )

    def _stale(self, request: web.Request) -> web.Response | None:
        if request.query.get("access_token", "") in self.valid:
            return None
        self.stale_answers += 1
        return web.json_response({"errcode": 42001, "errmsg": "access_token expired"})

    async def _send(self, request: web.Request) -> web.Response:
        if (refused := self._stale(request)) is not None:
            return refused
        body = await request.json()
        assert str(body["agentid"]) == AGENT_ID
        if self.hold is not None:
            self.held += 1
            await self.hold.wait()
            raise web.HTTPServiceUnavailable()
        msgid = f"msg{next(self._ids):08d}"
        kind = body["msgtype"]
        answer: dict[str, object] = {
            "errcode": 0,
            "errmsg": "ok",
            "invaliduser": "",
            "msgid": msgid,
        }
        if kind == "template_card":
            bad = self._bad_card(body[kind])
            if bad:
                return web.json_response({"errcode": 40058, "errmsg": bad})
            answer["response_code"] = self._code(body[kind]["task_id"], body["touser"])
        self.sent.append(Sent(msgid, body["touser"], kind, body[kind]))
        return web.json_response(answer)

    def _bad_card(self, card: dict[str, Any]) -> str:
        """Why WeCom would refuse a button_interaction card, or ""."""
        task = str(card.get("task_id", ""))
        buttons = card.get("button_list") or []
        if card.get("card_type") != "button_interaction":
            return "card_type"
        if not re.fullmatch(r"[A-Za-z0-9_\-@]{1,128}", task) or any(
            s.content.get("task_id") == task for s in self.sent if s.msgtype == "template_card"
        ):
            return "invalid task_id"
        if not 1 <= len(buttons) <= 6 or any(
            not b.get("text") or not 0 < len(str(b.get("key", "")).encode()) <= 1024
            for b in buttons
        ):
            return "invalid button_list"
        if not (card.get("main_title") or {}).get("title") and not card.get("sub_title_text"):
            return "main_title.title or sub_title_text is required"
        return ""

    def _code(self, task_id: str, user: str) -> str:
        code = f"rc{os.urandom(12).hex()}"
        self.codes[code] = (task_id, user)
        return code

    async def _update_card(self, request: web.Request) -> web.Response:
        if (refused := self._stale(request)) is not None:
            return refused
        body = await request.json()
        assert str(body["agentid"]) == AGENT_ID
        found = self.codes.pop(str(body.get("response_code", "")), None)
        if found is None or body.get("userids") != [found[1]]:
            return web.json_response({"errcode": 40058, "errmsg": "invalid response_code"})
        self.updates.append((found[0], str(body["button"]["replace_name"])))
        return web.json_response({"errcode": 0, "errmsg": "ok", "invaliduser": []})

    async def _upload(self, request: web.Request) -> web.Response:
        if (refused := self._stale(request)) is not None:
            return refused
        form = await request.post()
        media = form["media"]
        assert isinstance(media, web.FileField)
        media_id = f"3media{next(self._ids):08d}"
        self.uploads[media_id] = (media.filename, media.file.read())
        return web.json_response(
            {"errcode": 0, "errmsg": "", "type": request.query["type"], "media_id": media_id}
        )

    async def _media(self, request: web.Request) -> web.Response:
        if (refused := self._stale(request)) is not None:
            return refused
        found = self.media.get(request.query.get("media_id", ""))
        if found is None:
            return web.json_response({"errcode": 40007, "errmsg": "invalid media_id"})
        return web.Response(body=found, content_type="image/jpeg")

    # -- the callback side ------------------------------------------------------------

    def message(self, sender: str, text: str, *, msg_id: str = "") -> bytes:
        """The XML of a member's text message to the app."""
        msg_id = msg_id or str(7_000_000_000_000_000_000 + next(self._ids))
        return (
            f"<xml><ToUserName><![CDATA[{self.corp_id}]]></ToUserName>"
            f"<FromUserName><![CDATA[{sender}]]></FromUserName>"
            f"<CreateTime>{int(time.time())}</CreateTime><MsgType><![CDATA[text]]></MsgType>"
            f"<Content><![CDATA[{text}]]></Content><MsgId>{msg_id}</MsgId>"
            f"<AgentID>{AGENT_ID}</AgentID></xml>"
        ).encode()

    def image(self, sender: str, data: bytes) -> bytes:
        """The XML of a member's picture; its bytes are served under its MediaId."""
        media_id = f"2media{next(self._ids):08d}"
        self.media[media_id] = data
        return (
            f"<xml><ToUserName><![CDATA[{self.corp_id}]]></ToUserName>"
            f"<FromUserName><![CDATA[{sender}]]></FromUserName>"
            f"<CreateTime>{int(time.time())}</CreateTime><MsgType><![CDATA[image]]></MsgType>"
            f"<PicUrl><![CDATA[https://example.invalid/p.jpg]]></PicUrl>"
            f"<MediaId><![CDATA[{media_id}]]></MediaId>"
            f"<MsgId>{7_000_000_000_000_000_000 + next(self._ids)}</MsgId>"
            f"<AgentID>{AGENT_ID}</AgentID></xml>"
        ).encode()

    def card(self, label: str, to: str = ALICE) -> tuple[str, str]:
        """The newest card sent to `to` with a button labelled `label`: (task_id, key)."""
        for sent in reversed(self.sent):
            if sent.to != to or sent.msgtype != "template_card":
                continue
            for button in sent.content["button_list"]:
                if button["text"] == label:
                    return sent.content["task_id"], button["key"]
        raise AssertionError(f"no card with a {label!r} button")

    def press(self, sender: str, task_id: str, key: str) -> bytes:
        """The XML of the template_card_event a press posts (a fresh ResponseCode)."""
        return (
            f"<xml><ToUserName><![CDATA[{self.corp_id}]]></ToUserName>"
            f"<FromUserName><![CDATA[{sender}]]></FromUserName>"
            f"<CreateTime>{int(time.time())}</CreateTime><MsgType><![CDATA[event]]></MsgType>"
            f"<Event><![CDATA[template_card_event]]></Event>"
            f"<EventKey><![CDATA[{key}]]></EventKey><TaskId><![CDATA[{task_id}]]></TaskId>"
            f"<CardType><![CDATA[button_interaction]]></CardType>"
            f"<ResponseCode><![CDATA[{self._code(task_id, sender)}]]></ResponseCode>"
            f"<AgentID>{AGENT_ID}</AgentID></xml>"
        ).encode()

    def envelope(self, encrypted: str) -> bytes:
        """The POST body: the encrypted message in WeCom's XML envelope."""
        return (
            f"<xml><ToUserName><![CDATA[{self.corp_id}]]></ToUserName>"
            f"<Encrypt><![CDATA[{encrypted}]]></Encrypt>"
            f"<AgentID><![CDATA[{AGENT_ID}]]></AgentID></xml>"
        ).encode()

    async def post(
        self,
        message: bytes,
        *,
        token: str = TOKEN,
        aes_key: str = AES_KEY,
        receiver: str = "",
        timestamp: str = "",
        signature: str | None = None,
        body: bytes | None = None,
    ) -> tuple[int, str]:
        """POST a message as WeCom does; the overrides forge one. Returns (status, text)."""
        encrypted = wecom_encrypt(aes_key, message, receiver or self.corp_id)
        stamp, nonce = timestamp or str(int(time.time())), os.urandom(5).hex()
        if signature is None:
            signature = wecom_signature(token, stamp, nonce, encrypted)
        query = urlencode({"msg_signature": signature, "timestamp": stamp, "nonce": nonce})
        data = body if body is not None else self.envelope(encrypted)
        assert self._client is not None
        async with self._client.post(f"{self.callback_url}?{query}", data=data) as response:
            return response.status, await response.text()

    async def verify_url(self, *, token: str = TOKEN) -> tuple[int, str, str]:
        """The GET WeCom sends when the callback URL is saved: (status, body, the echo
        it expects back)."""
        echo = f"echo-{os.urandom(6).hex()}"
        encrypted = wecom_encrypt(AES_KEY, echo.encode(), self.corp_id)
        stamp, nonce = str(int(time.time())), os.urandom(5).hex()
        query = urlencode(
            {
                "msg_signature": wecom_signature(token, stamp, nonce, encrypted),
                "timestamp": stamp,
                "nonce": nonce,
                "echostr": encrypted,
            }
        )
        assert self._client is not None
        async with self._client.get(f"{self.callback_url}?{query}") as response:
            return response.status, await response.text(), echo


class WeComDriver:
    """The member (ALICE) talking to the app on the fake WeCom."""

    kind = "wecom"
    has_buttons = True

    def __init__(self, fake: FakeWeCom):
        self.fake = fake

    def channel_yaml(self, name: str) -> str:
        return (
            f"type: wecom\ncorp_id: {self.fake.corp_id}\nagent_id: '{AGENT_ID}'\n"
            "app_secret_env: WECOM_TEST_SECRET\ntoken_env: WECOM_TEST_TOKEN\n"
            f"aes_key_env: WECOM_TEST_AES_KEY\nbase_url: {self.fake.base_url}\n"
            f"allow_from: ['{ALICE}']\n"
        )

    def env(self) -> dict[str, str]:
        return {
            "WECOM_TEST_SECRET": self.fake.secret,
            "WECOM_TEST_TOKEN": TOKEN,
            "WECOM_TEST_AES_KEY": AES_KEY,
        }

    def called_at(self, url: str) -> None:
        """The app's callback URL now points at `url`."""
        self.fake.callback_url = url

    async def say(self, text: str) -> None:
        status, said = await self.fake.post(self.fake.message(ALICE, text))
        assert status == 200, (status, said)

    async def send_file(self, name: str, data: bytes, media_type: str, caption: str = "") -> None:
        raise AssertionError("a WeCom member sends pictures, voice and video, not files")

    async def press(self, label: str) -> None:
        status, said = await self.fake.post(self.fake.press(ALICE, *self.fake.card(label)))
        assert status == 200, (status, said)

    def texts(self) -> list[str]:
        return [card_text(sent) for sent in self.fake.sent if sent.to == ALICE and card_text(sent)]

    def files(self) -> list[tuple[str, bytes]]:
        return [
            self.fake.uploads[sent.content["media_id"]]
            for sent in self.fake.sent
            if sent.to == ALICE and sent.msgtype == "file"
        ]


def card_text(sent: Sent) -> str:
    """What a member reads of a text message or a card (its title over its text)."""
    if sent.msgtype == "text":
        return str(sent.content["content"])
    if sent.msgtype == "template_card":
        title = (sent.content.get("main_title") or {}).get("title", "")
        return "\n".join(x for x in (title, sent.content.get("sub_title_text", "")) if x)
    return ""


def sent_json(sent: Sent) -> str:
    """A sent message as JSON (assertion messages)."""
    return json.dumps(sent.__dict__)
