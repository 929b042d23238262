"""A fake DingTalk on 127.0.0.1: the OpenAPI the adapter calls (accessToken, the robot's
one-to-one and group sends), the session webhooks of each message, and the robot's
callback side, signing each request as DingTalk documents it (`sign`: base64
HMAC-SHA256 of "timestamp\\nAppSecret" keyed by the AppSecret).

ActionCards (the session webhook's `actionCard` with `btns`, the OpenAPI's
sampleActionCard to sampleActionCard5) are kept with their buttons; pressing a button
whose actionURL is `dtmd://dingtalkclient/sendMessage?content=<text>` does what the
DingTalk client does: the person sends <text> into the chat, a message like any other.

`DingTalkDriver` plays the one allowed person in a one-to-one chat with the robot.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import itertools
import json
import os
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Any
from urllib.parse import unquote

import aiohttp
from aiohttp import web

APP_KEY = "dingabcdef0123456789"
APP_SECRET = "dingtalk-test-app-secret-0123456789abcdef"
ALICE = "staff-alice-001"
MALLORY = "staff-mallory-666"
GROUP = "cidGroupTest0000000000000000=="


SEND_MESSAGE = "dtmd://dingtalkclient/sendMessage?content="


def robot_buttons(body: dict[str, Any], param: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """An OpenAPI ActionCard's buttons: sampleActionCard has one (singleTitle, singleURL),
    sampleActionCardN has N (actionTitleK, actionURLK)."""
    key = body["msgKey"]
    assert param["title"] and param["text"]
    if key == "sampleActionCard":
        return ((param["singleTitle"], param["singleURL"]),)
    count = int(key.removeprefix("sampleActionCard"))
    assert 2 <= count <= 5, key
    return tuple((param[f"actionTitle{k}"], param[f"actionURL{k}"]) for k in range(1, count + 1))


def dingtalk_sign(timestamp: str, secret: str) -> str:
    """The `sign` header, written here from DingTalk's documentation."""
    mac = hmac.new(secret.encode(), f"{timestamp}\n{secret}".encode(), hashlib.sha256)
    return base64.b64encode(mac.digest()).decode()


@dataclass
class Sent:
    """A text the robot sent: to a person's staff id or a group, and by which way."""

    chat: str
    text: str
    via: str  # "session" or "api"
    file: tuple[str, bytes] | None = None  # a sampleFile: the uploaded (name, bytes)
    buttons: tuple[tuple[str, str], ...] = ()  # an ActionCard's (title, actionURL)s


class FakeDingTalk:
    """The OpenAPI (x-acs-dingtalk-access-token), session webhooks and a callback caller."""

    def __init__(self) -> None:
        self.app_key, self.secret = APP_KEY, APP_SECRET
        self.sent: list[Sent] = []
        self.tokens: list[str] = []
        self.valid: set[str] = set()
        self.sessions: dict[str, str] = {}  # session id -> chat
        self.uploads: dict[str, tuple[str, bytes]] = {}  # media_id -> (name, bytes)
        self.files: dict[str, bytes] = {}  # downloadCode -> a person's file
        self.refuse_secret = False
        self.stale_answers = 0
        # while set, a send waits here unanswered and unrecorded (a crash test's window)
        self.hold: asyncio.Event | None = None
        self.held = 0
        self.robot_url = ""
        self.base_url = ""
        self._ids = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self._client: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> FakeDingTalk:
        app = web.Application()
        app.router.add_post("/v1.0/oauth2/accessToken", self._token)
        app.router.add_post("/v1.0/robot/oToMessages/batchSend", self._to_person)
        app.router.add_post("/v1.0/robot/groupMessages/send", self._to_group)
        app.router.add_post("/robot/sendBySession", self._by_session)
        app.router.add_post("/media/upload", self._upload)
        app.router.add_post("/v1.0/robot/messageFiles/download", self._download_url)
        app.router.add_get("/oss/{code}", self._file)
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
        body = await request.json()
        if self.refuse_secret or (body.get("appKey"), body.get("appSecret")) != (
            self.app_key,
            self.secret,
        ):
            return web.json_response(
                {"code": "invalidClientIdOrSecret", "message": "bad appKey or appSecret"},
                status=400,
            )
        token = f"dt{next(self._ids):06d}{os.urandom(8).hex()}"
        self.tokens.append(token)
        self.valid.add(token)
        return web.json_response({"accessToken": token, "expireIn": 7200})

    async def _authorized(self, request: web.Request) -> web.Response | None:
        if request.headers.get("x-acs-dingtalk-access-token", "") in self.valid:
            return None
        self.stale_answers += 1
        return web.json_response(
            {"code": "InvalidAuthentication", "message": "token is not authorized"}, status=401
        )

    async def _record(
        self,
        chat: str,
        text: str,
        via: str,
        body: dict[str, Any] | None = None,
        buttons: tuple[tuple[str, str], ...] = (),
    ) -> None:
        if self.hold is not None:
            self.held += 1
            await self.hold.wait()
            raise web.HTTPServiceUnavailable()
        param = json.loads(body["msgParam"]) if body is not None else {}
        if body is not None and body["msgKey"] == "sampleFile":
            name, data = self.uploads[param["mediaId"]]
            assert param["fileName"] == name
            self.sent.append(Sent(chat, "", via, (name, data)))
            return
        if body is not None and body["msgKey"].startswith("sampleActionCard"):
            self.sent.append(Sent(chat, param["text"], via, buttons=robot_buttons(body, param)))
            return
        assert body is None or body["msgKey"] == "sampleText"
        self.sent.append(Sent(chat, text if body is None else param["content"], via, None, buttons))

    async def _to_person(self, request: web.Request) -> web.Response:
        if (refused := await self._authorized(request)) is not None:
            return refused
        body = await request.json()
        assert body["robotCode"] == self.app_key
        [staff] = body["userIds"]
        await self._record(staff, "", "api", body)
        return web.json_response(
            {"processQueryKey": f"pq{next(self._ids)}", "invalidStaffIdList": []}
        )

    async def _to_group(self, request: web.Request) -> web.Response:
        if (refused := await self._authorized(request)) is not None:
            return refused
        body = await request.json()
        await self._record(body["openConversationId"], "", "api", body)
        return web.json_response({"processQueryKey": f"pq{next(self._ids)}"})

    async def _by_session(self, request: web.Request) -> web.Response:
        chat = self.sessions.get(request.query.get("session", ""))
        if chat is None:
            return web.json_response({"errcode": 300001, "errmsg": "session expired"})
        body = await request.json()
        if body["msgtype"] == "actionCard":
            card = body["actionCard"]
            assert card["title"] and card["btns"]
            buttons = tuple((b["title"], b["actionURL"]) for b in card["btns"])
            await self._record(chat, card["text"], "session", buttons=buttons)
            return web.json_response({"errcode": 0, "errmsg": "ok"})
        assert body["msgtype"] == "text"
        await self._record(chat, body["text"]["content"], "session")
        return web.json_response({"errcode": 0, "errmsg": "ok"})

    async def _upload(self, request: web.Request) -> web.Response:
        if request.query.get("access_token", "") not in self.valid:
            self.stale_answers += 1
            return web.json_response({"errcode": 40014, "errmsg": "invalid access_token"})
        assert request.query.get("type") == "file"
        form = await request.post()
        media = form["media"]
        assert isinstance(media, web.FileField)
        media_id = f"@media{next(self._ids):06d}"
        self.uploads[media_id] = (media.filename, media.file.read())
        return web.json_response(
            {"errcode": 0, "errmsg": "ok", "type": "file", "media_id": media_id}
        )

    async def _download_url(self, request: web.Request) -> web.Response:
        if (refused := await self._authorized(request)) is not None:
            return refused
        body = await request.json()
        assert body["robotCode"] == self.app_key
        if body["downloadCode"] not in self.files:
            return web.json_response(
                {"code": "invalidParameter", "message": "bad code"}, status=400
            )
        return web.json_response({"downloadUrl": f"{self.base_url}/oss/{body['downloadCode']}"})

    async def _file(self, request: web.Request) -> web.Response:
        return web.Response(body=self.files[request.match_info["code"]])

    # -- the robot's callbacks --------------------------------------------------------

    def press(self, sender: str, label: str) -> dict[str, Any]:
        """The message the DingTalk client sends for `sender` pressing the button
        labelled `label` on the newest card that has one (its actionURL's content)."""
        for sent in reversed(self.sent):
            for title, url in sent.buttons if sent.chat == sender else ():
                if title == label:
                    assert url.startswith(SEND_MESSAGE), url
                    return self.message(sender, unquote(url[len(SEND_MESSAGE) :]))
        raise AssertionError(f"no card with a {label!r} button")

    def file_message(self, sender: str, name: str, data: bytes) -> dict[str, Any]:
        """A one-to-one file message: its bytes behind a downloadCode."""
        code = f"dc{next(self._ids):08d}{os.urandom(4).hex()}"
        self.files[code] = data
        message = self.message(sender, "")
        del message["text"]
        message["msgtype"] = "file"
        message["content"] = {"downloadCode": code, "fileName": name}
        return message

    def message(
        self,
        sender: str,
        text: str,
        *,
        group: bool = False,
        msg_id: str = "",
        session_seconds: float = 5400,
    ) -> dict[str, Any]:
        """The JSON the robot's HTTP mode posts for a message (a fresh session webhook)."""
        chat = GROUP if group else sender
        session = os.urandom(8).hex()
        self.sessions[session] = chat
        now = int(time.time() * 1000)
        return {
            "conversationId": GROUP if group else f"cid{sender}==",
            "conversationType": "2" if group else "1",
            "msgId": msg_id or f"msg{next(self._ids):012d}",
            "senderNick": sender.split("-")[1].title(),
            "isAdmin": False,
            "senderStaffId": sender,
            "senderId": f"$:LWCP_v1:${sender}",
            "sessionWebhook": f"{self.base_url}/robot/sendBySession?session={session}",
            "sessionWebhookExpiredTime": now + int(session_seconds * 1000),
            "createAt": now,
            "chatbotUserId": "$:LWCP_v1:$robot",
            "robotCode": self.app_key,
            "msgtype": "text",
            "text": {"content": text},
            "isInAtList": group,
        }

    async def post(
        self,
        message: dict[str, Any],
        *,
        secret: str = "",
        timestamp: str = "",
        sign: str | None = None,
        body: bytes | None = None,
    ) -> tuple[int, str]:
        """POST a message as DingTalk does; the overrides forge one. Returns (status, text)."""
        stamp = timestamp or str(int(time.time() * 1000))
        headers = {
            "Content-Type": "application/json",
            "timestamp": stamp,
            "sign": dingtalk_sign(stamp, secret or self.secret) if sign is None else sign,
        }
        data = body if body is not None else json.dumps(message).encode()
        assert self._client is not None
        async with self._client.post(self.robot_url, data=data, headers=headers) as response:
            status, text = response.status, await response.text()
        # A message in the answer is posted into the chat (msgtype empty: nothing).
        answer = json.loads(text) if status == 200 and text.startswith("{") else {}
        if answer.get("msgtype") == "text":
            chat = GROUP if message.get("conversationType") == "2" else message["senderStaffId"]
            self.sent.append(Sent(chat, answer["text"]["content"], "answer"))
        return status, text


class DingTalkDriver:
    """The person (ALICE) in a one-to-one chat with the robot on the fake DingTalk."""

    kind = "dingtalk"
    has_buttons = True

    def __init__(self, fake: FakeDingTalk):
        self.fake = fake

    def channel_yaml(self, name: str) -> str:
        return (
            f"type: dingtalk\napp_id: {self.fake.app_key}\napp_secret_env: DINGTALK_TEST_SECRET\n"
            f"base_url: {self.fake.base_url}\nallow_from: ['{ALICE}']\n"
        )

    def env(self) -> dict[str, str]:
        return {"DINGTALK_TEST_SECRET": self.fake.secret}

    def called_at(self, url: str) -> None:
        """The robot's message receiving URL now points at `url`."""
        self.fake.robot_url = url

    async def say(self, text: str) -> None:
        status, said = await self.fake.post(self.fake.message(ALICE, text))
        assert status == 200, (status, said)

    async def send_file(self, name: str, data: bytes, media_type: str, caption: str = "") -> None:
        # A DingTalk file message has no caption: the file goes alone.
        status, said = await self.fake.post(self.fake.file_message(ALICE, name, data))
        assert status == 200, (status, said)

    async def press(self, label: str) -> None:
        status, said = await self.fake.post(self.fake.press(ALICE, label))
        assert status == 200, (status, said)

    def texts(self) -> list[str]:
        return [sent.text for sent in self.fake.sent if sent.chat == ALICE and sent.file is None]

    def files(self) -> list[tuple[str, bytes]]:
        return [sent.file for sent in self.fake.sent if sent.chat == ALICE and sent.file]
