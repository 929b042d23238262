"""A fake Messenger Platform (or Instagram messaging) on 127.0.0.1: GET /me and the Send API
(POST /me/messages as JSON, or multipart with `filedata`; attachments by URL are fetched as
Meta fetches them), inbound media on a CDN path, and the webhook side: the hub.challenge
handshake and events POSTed with X-Hub-Signature-256 (HMAC-SHA256 of the raw body with the
test app's secret). `MessengerDriver` plays the person writing to the Page (or account).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import aiohttp
from aiohttp import web

from habakkuk.channels.metagraph import GRAPH_VERSION
from tests.channels.fake_graph import APP_SECRET, VERIFY_TOKEN, GraphError, hub_signature

PAGE_TOKEN = "EAAPage-test-token-0123456789"
PAGE_ID = "109876543210987"
ALICE = "6543210987654321"
MALLORY = "6543210987650000"


@dataclass
class Sent:
    """A message the bot sent through the Send API."""

    id: str
    to: str
    message: dict[str, Any]
    media: tuple[str, bytes] | None = None  # (file name, or type when by URL; bytes)


class FakeMessenger:
    """The Send API of one Page (`kind` "messenger") or Instagram account ("instagram")."""

    def __init__(self, kind: str = "messenger"):
        self.kind = kind
        self.sent: list[Sent] = []
        self.actions: list[tuple[str, str]] = []  # (recipient, sender_action)
        self.attempts = 0
        self.errors: list[GraphError] = []
        self.refuse_token = False
        self.hold: asyncio.Event | None = None
        self.held = 0
        self.cdn: dict[str, tuple[bytes, str]] = {}
        self.webhook_url = ""
        self._ids = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self._client: aiohttp.ClientSession | None = None
        self.base_url = ""

    @property
    def object(self) -> str:
        return "page" if self.kind == "messenger" else "instagram"

    async def __aenter__(self) -> FakeMessenger:
        app = web.Application()
        app.router.add_get(f"/{GRAPH_VERSION}/me", self._me)
        app.router.add_post(f"/{GRAPH_VERSION}/me/messages", self._send)
        app.router.add_get("/cdn/{path:.+}", self._cdn)
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

    # -- the Graph API ---------------------------------------------------------------

    def _authorized(self, request: web.Request) -> bool:
        given = request.headers.get("Authorization", "")
        return not self.refuse_token and given == f"Bearer {PAGE_TOKEN}"

    @staticmethod
    def _error(error: GraphError) -> web.Response:
        body: dict[str, Any] = {"message": error.message, "type": "OAuthException"}
        body |= {"code": error.code, "fbtrace_id": "AbCdEf"}
        if error.subcode:
            body["error_subcode"] = error.subcode
        return web.json_response({"error": body}, status=error.status, headers=error.headers)

    def _refused(self) -> web.Response:
        return self._error(GraphError(401, 190, "Error validating access token"))

    async def _me(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._refused()
        return web.json_response({"id": PAGE_ID, "name": "Test Page"})

    async def _cdn(self, request: web.Request) -> web.Response:
        found = self.cdn.get(request.match_info["path"])
        if found is None:
            raise web.HTTPNotFound()
        return web.Response(body=found[0], content_type=found[1])

    async def _send(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._refused()
        media: tuple[str, bytes] | None = None
        if request.content_type == "multipart/form-data":
            form = await request.post()
            upload = form.get("filedata")
            if not isinstance(upload, web.FileField):
                return self._error(GraphError(400, 100, "(#100) filedata is required"))
            body = {
                "recipient": json.loads(str(form["recipient"])),
                "message": json.loads(str(form["message"])),
            }
            media = (upload.filename, upload.file.read())
        else:
            body = await request.json()
        recipient = str((body.get("recipient") or {}).get("id", ""))
        if "sender_action" in body:
            self.actions.append((recipient, str(body["sender_action"])))
            return web.json_response({"recipient_id": recipient})
        self.attempts += 1
        if self.errors:
            return self._error(self.errors.pop(0))
        message = body.get("message") or {}
        if not recipient or not message:
            return self._error(GraphError(400, 100, "(#100) Invalid parameter"))
        if self.hold is not None:
            self.held += 1
            await self.hold.wait()
            raise web.HTTPServiceUnavailable()
        url = ((message.get("attachment") or {}).get("payload") or {}).get("url")
        if url and media is None:
            assert self._client is not None
            async with self._client.get(url) as fetched:  # Meta fetches a URL attachment
                if fetched.status != 200:
                    return self._error(GraphError(400, 100, "(#100) Failed to fetch the file"))
                media = (fetched.content_type, await fetched.read())
        mid = f"m_{next(self._ids):030d}"
        self.sent.append(Sent(mid, recipient, message, media))
        return web.json_response({"recipient_id": recipient, "message_id": mid})

    # -- the webhook side ------------------------------------------------------------

    def event(self, sender: str, **content: Any) -> dict[str, Any]:
        """One messaging event from `sender` (`message=...` or `postback=...`)."""
        now = int(time.time() * 1000)
        messaging = {
            "sender": {"id": sender},
            "recipient": {"id": PAGE_ID},
            "timestamp": now,
            **content,
        }
        return {
            "object": self.object,
            "entry": [{"id": PAGE_ID, "time": now, "messaging": [messaging]}],
        }

    def mid(self) -> str:
        return f"m_IN{next(self._ids):026d}"

    def text(self, sender: str, text: str) -> dict[str, Any]:
        """A text message event."""
        return self.event(sender, message={"mid": self.mid(), "text": text})

    def file(
        self, sender: str, name: str, data: bytes, media_type: str, text: str = ""
    ) -> dict[str, Any]:
        """A file message event; the file is on the CDN (Messenger keeps its name in the
        URL, Instagram's URL ends with the CDN's own `<id>_n.<suffix>`)."""
        import mimetypes

        n = next(self._ids)
        suffix = mimetypes.guess_extension(media_type) or ""
        path = f"{n}/{name}" if self.kind == "messenger" else f"ig/{n}_n{suffix}"
        self.cdn[path] = (data, media_type)
        attachment = {"type": "file", "payload": {"url": f"{self.base_url}/cdn/{path}"}}
        message: dict[str, Any] = {"mid": self.mid(), "attachments": [attachment]}
        if text:  # words typed with the file arrive in the same message
            message["text"] = text
        return self.event(sender, message=message)

    def quick_reply(self, sender: str, title: str, payload: str) -> dict[str, Any]:
        """The event of `sender` tapping a quick reply."""
        message = {"mid": self.mid(), "text": title, "quick_reply": {"payload": payload}}
        return self.event(sender, message=message)

    async def post(
        self,
        payload: dict[str, Any] | None = None,
        *,
        body: bytes | None = None,
        secret: str = APP_SECRET,
        signature: str | None = None,
        signed_body: bytes | None = None,
    ) -> tuple[int, str]:
        """POST an event as Meta does; the overrides forge one. Returns (status, text)."""
        data = body if body is not None else json.dumps(payload).encode()
        if signature is None:
            signature = hub_signature(secret, signed_body if signed_body is not None else data)
        headers = {"Content-Type": "application/json"}
        if signature:
            headers["X-Hub-Signature-256"] = signature
        assert self._client is not None
        async with self._client.post(self.webhook_url, data=data, headers=headers) as answer:
            return answer.status, await answer.text()

    async def handshake(
        self, token: str = VERIFY_TOKEN, challenge: str = "1158201444"
    ) -> tuple[int, str]:
        """Meta's GET verification of the callback URL."""
        params = {"hub.mode": "subscribe", "hub.verify_token": token, "hub.challenge": challenge}
        assert self._client is not None
        async with self._client.get(self.webhook_url, params=params) as answer:
            return answer.status, await answer.text()


class MessengerDriver:
    """The person (ALICE) writing to the Page or the Instagram account."""

    has_buttons = True

    def __init__(self, fake: FakeMessenger):
        self.fake = fake
        self.kind = fake.kind

    def channel_yaml(self, name: str) -> str:
        return (
            f"type: {self.kind}\ntoken_env: FB_TEST_TOKEN\napp_secret_env: FB_TEST_SECRET\n"
            f"verify_token_env: FB_TEST_VERIFY\nbase_url: {self.fake.base_url}\n"
            f'allow_from: ["{ALICE}"]\n'
        )

    def env(self) -> dict[str, str]:
        return {
            "FB_TEST_TOKEN": PAGE_TOKEN,
            "FB_TEST_SECRET": APP_SECRET,
            "FB_TEST_VERIFY": VERIFY_TOKEN,
        }

    def called_at(self, url: str) -> None:
        """The app's webhook callback URL now points at `url`."""
        self.fake.webhook_url = url

    async def say(self, text: str) -> None:
        status, said = await self.fake.post(self.fake.text(ALICE, text))
        assert status == 200, (status, said)

    async def send_file(self, name: str, data: bytes, media_type: str, caption: str = "") -> None:
        event = self.fake.file(ALICE, name, data, media_type, caption)
        status, said = await self.fake.post(event)
        assert status == 200, (status, said)

    async def press(self, label: str) -> None:
        [sent] = [s for s in self.fake.sent if s.message.get("quick_replies")][-1:]
        [reply] = [q for q in sent.message["quick_replies"] if q["title"] == label]
        event = self.fake.quick_reply(ALICE, label, reply["payload"])
        status, said = await self.fake.post(event)
        assert status == 200, (status, said)

    def texts(self) -> list[str]:
        return [
            str(s.message["text"])
            for s in self.fake.sent
            if s.to == ALICE and s.message.get("text")
        ]

    def files(self) -> list[tuple[str, bytes]]:
        return [s.media for s in self.fake.sent if s.to == ALICE and s.media is not None]
