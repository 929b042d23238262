"""A fake Meta Graph API on 127.0.0.1 for the WhatsApp Business Cloud API: the phone
number, /messages, /media uploads, inbound media (its id, then its URL fetched with the
token), and the webhook side: the hub.challenge handshake, and events POSTed with
X-Hub-Signature-256 computed as Meta does (HMAC-SHA256 of the raw body with the app
secret, hex, "sha256=") with the test app's secret.

Errors answer as Graph does: `{"error": {"message", "type", "code", "error_subcode",
"fbtrace_id"}}` with its HTTP status. `WhatsAppCloudDriver` plays the customer.
"""

from __future__ import annotations

import asyncio
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

from habakkuk.channels.metagraph import GRAPH_VERSION

ACCESS_TOKEN = "EAAG-test-access-token-0123456789"
APP_SECRET = "0123456789abcdef0123456789abcdef"
VERIFY_TOKEN = "verify-me-please"
PHONE_NUMBER_ID = "106540352242922"
WABA_ID = "102290129340398"
BOT_DISPLAY = "+1 555-000-1111"
ALICE = "15557654321"
MALLORY = "15559990000"


def hub_signature(secret: str, body: bytes) -> str:
    """Meta's X-Hub-Signature-256, written here from its documentation."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


@dataclass
class Sent:
    """A message the bot sent through /messages."""

    id: str
    to: str
    body: dict[str, Any]
    media: tuple[str, bytes, str] | None = None  # (file name, bytes, type) of its upload


@dataclass
class GraphError:
    """An error /messages answers once (the next send gets it)."""

    status: int
    code: int
    message: str = "error"
    subcode: int = 0
    headers: dict[str, str] = field(default_factory=dict)


class FakeWhatsAppCloud:
    """The Cloud API of one phone number, and Meta's webhook caller."""

    def __init__(self) -> None:
        self.sent: list[Sent] = []
        self.attempts = 0  # every /messages call that was authorized
        self.uploads: dict[str, tuple[str, bytes, str]] = {}
        self.inbound_media: dict[str, tuple[bytes, str]] = {}
        self.errors: list[GraphError] = []
        self.refuse_token = False
        # while set, a send waits here unanswered and unrecorded (a crash test's window)
        self.hold: asyncio.Event | None = None
        self.held = 0
        self.webhook_url = ""
        self._ids = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self._client: aiohttp.ClientSession | None = None
        self.base_url = ""

    async def __aenter__(self) -> FakeWhatsAppCloud:
        app = web.Application()
        root = f"/{GRAPH_VERSION}"
        app.router.add_get(root + "/{node}", self._node)
        app.router.add_post(root + f"/{PHONE_NUMBER_ID}/messages", self._send)
        app.router.add_post(root + f"/{PHONE_NUMBER_ID}/media", self._upload)
        app.router.add_get("/whatsapp_business/attachments/", self._media_file)
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
        return not self.refuse_token and given == f"Bearer {ACCESS_TOKEN}"

    @staticmethod
    def _error(error: GraphError) -> web.Response:
        body: dict[str, Any] = {
            "message": error.message,
            "type": "OAuthException",
            "code": error.code,
            "fbtrace_id": "AbCdEf",
        }
        if error.subcode:
            body["error_subcode"] = error.subcode
        return web.json_response({"error": body}, status=error.status, headers=error.headers)

    def _refused(self) -> web.Response:
        return self._error(GraphError(401, 190, "Error validating access token"))

    async def _node(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._refused()
        node = request.match_info["node"]
        if node == PHONE_NUMBER_ID:
            return web.json_response(
                {
                    "display_phone_number": BOT_DISPLAY,
                    "verified_name": "Test Business",
                    "id": PHONE_NUMBER_ID,
                }
            )
        found = self.inbound_media.get(node)
        if found is None:
            return self._error(GraphError(400, 100, "Unsupported get request", 33))
        data, media_type = found
        return web.json_response(
            {
                "messaging_product": "whatsapp",
                "url": f"{self.base_url}/whatsapp_business/attachments/?mid={node}",
                "mime_type": media_type,
                "sha256": hashlib.sha256(data).hexdigest(),
                "file_size": len(data),
                "id": node,
            }
        )

    async def _media_file(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return web.Response(status=401)
        found = self.inbound_media.get(request.query.get("mid", ""))
        if found is None:
            raise web.HTTPNotFound()
        return web.Response(body=found[0], content_type=found[1])

    async def _upload(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._refused()
        form = await request.post()
        upload = form.get("file")
        if form.get("messaging_product") != "whatsapp" or not isinstance(upload, web.FileField):
            return self._error(GraphError(400, 100, "(#100) The parameter file is required"))
        media_id = f"{next(self._ids) + 900000000000}"
        self.uploads[media_id] = (upload.filename, upload.file.read(), str(form.get("type")))
        return web.json_response({"id": media_id})

    async def _send(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._refused()
        body = await request.json()
        self.attempts += 1
        if self.errors:
            return self._error(self.errors.pop(0))
        if body.get("messaging_product") != "whatsapp" or not body.get("to"):
            return self._error(GraphError(400, 100, "(#100) Invalid parameter"))
        if self.hold is not None:
            self.held += 1
            await self.hold.wait()
            raise web.HTTPServiceUnavailable()
        kind = body.get("type", "text")
        media = None
        if kind in ("image", "document", "audio", "video"):
            media = self.uploads.get(str(body[kind].get("id")))
            if media is None:
                return self._error(GraphError(400, 131053, "Media upload error"))
        wamid = f"wamid.HBgL{next(self._ids):020d}"
        self.sent.append(Sent(wamid, str(body["to"]), body, media))
        return web.json_response(
            {
                "messaging_product": "whatsapp",
                "contacts": [{"input": body["to"], "wa_id": body["to"]}],
                "messages": [{"id": wamid}],
            }
        )

    # -- the webhook side ------------------------------------------------------------

    def event(self, *messages: dict[str, Any], sender: str = ALICE) -> dict[str, Any]:
        """The `messages` webhook event carrying `messages` from `sender`."""
        return {
            "object": "whatsapp_business_account",
            "entry": [
                {
                    "id": WABA_ID,
                    "changes": [
                        {
                            "field": "messages",
                            "value": {
                                "messaging_product": "whatsapp",
                                "metadata": {
                                    "display_phone_number": "15550001111",
                                    "phone_number_id": PHONE_NUMBER_ID,
                                },
                                "contacts": [{"profile": {"name": "Alice"}, "wa_id": sender}],
                                "messages": list(messages),
                            },
                        }
                    ],
                }
            ],
        }

    def message(
        self, sender: str, kind: str, content: dict[str, Any], **extra: Any
    ) -> dict[str, Any]:
        """One inbound message (`content` under its `kind`), sent now."""
        return {
            "from": sender,
            "id": f"wamid.IN{next(self._ids):020d}",
            "timestamp": str(int(time.time())),
            "type": kind,
            kind: content,
            **extra,
        }

    def text(self, sender: str, text: str, **extra: Any) -> dict[str, Any]:
        """A text event from `sender`."""
        return self.event(self.message(sender, "text", {"body": text}, **extra), sender=sender)

    def document(
        self, sender: str, name: str, data: bytes, media_type: str, caption: str = ""
    ) -> dict[str, Any]:
        """A document event; its bytes are served as Meta serves inbound media."""
        media_id = f"{next(self._ids) + 700000000000}"
        self.inbound_media[media_id] = (data, media_type)
        content = {"id": media_id, "filename": name, "mime_type": media_type}
        if caption:
            content["caption"] = caption
        return self.event(self.message(sender, "document", content), sender=sender)

    def pressed(self, sender: str, sent: Sent, title: str) -> dict[str, Any]:
        """The event of `sender` pressing the reply button titled `title` on `sent`."""
        interactive = sent.body["interactive"]
        if interactive["type"] == "button":
            choices = [b["reply"] for b in interactive["action"]["buttons"]]
        else:
            choices = [row for s in interactive["action"]["sections"] for row in s["rows"]]
        [choice] = [c for c in choices if c["title"] == title]
        reply = {"type": "button_reply", "button_reply": {"id": choice["id"], "title": title}}
        content = self.message(
            sender, "interactive", reply, context={"from": "15550001111", "id": sent.id}
        )
        return self.event(content, sender=sender)

    async def post(
        self,
        payload: dict[str, Any] | None = None,
        *,
        body: bytes | None = None,
        secret: str = APP_SECRET,
        signature: str | None = None,
        signed_body: bytes | None = None,
        url: str = "",
    ) -> tuple[int, str]:
        """POST an event as Meta does; the overrides forge one. Returns (status, text)."""
        data = body if body is not None else json.dumps(payload).encode()
        if signature is None:
            signature = hub_signature(secret, signed_body if signed_body is not None else data)
        headers = {"Content-Type": "application/json"}
        if signature:
            headers["X-Hub-Signature-256"] = signature
        assert self._client is not None
        async with self._client.post(url or self.webhook_url, data=data, headers=headers) as answer:
            return answer.status, await answer.text()

    async def handshake(
        self, token: str = VERIFY_TOKEN, challenge: str = "1158201444", mode: str = "subscribe"
    ) -> tuple[int, str]:
        """Meta's GET verification of the callback URL."""
        params = {"hub.mode": mode, "hub.verify_token": token, "hub.challenge": challenge}
        assert self._client is not None
        async with self._client.get(self.webhook_url, params=params) as answer:
            return answer.status, await answer.text()


def text_of(sent: Sent) -> str:
    """What the customer reads of a sent message (the template's parameter, outside the
    window)."""
    body = sent.body
    kind = body.get("type")
    if kind == "text":
        return str(body["text"]["body"])
    if kind == "interactive":
        return str(body["interactive"]["body"]["text"])
    if kind == "template":
        return " ".join(
            p["text"] for c in body["template"].get("components", []) for p in c["parameters"]
        )
    return str(body.get(str(kind), {}).get("caption", ""))


class WhatsAppCloudDriver:
    """The customer (ALICE) writing to the business number."""

    kind = "whatsappcloud"
    has_buttons = True

    def __init__(self, fake: FakeWhatsAppCloud):
        self.fake = fake

    def channel_yaml(self, name: str) -> str:
        return (
            f"type: whatsappcloud\nphone_number_id: '{PHONE_NUMBER_ID}'\n"
            "token_env: WA_TEST_TOKEN\napp_secret_env: WA_TEST_SECRET\n"
            f"verify_token_env: WA_TEST_VERIFY\nbase_url: {self.fake.base_url}\n"
            f'allow_from: ["{ALICE}"]\n'
        )

    def env(self) -> dict[str, str]:
        return {
            "WA_TEST_TOKEN": ACCESS_TOKEN,
            "WA_TEST_SECRET": APP_SECRET,
            "WA_TEST_VERIFY": VERIFY_TOKEN,
        }

    def called_at(self, url: str) -> None:
        """The app's webhook callback URL now points at `url`."""
        self.fake.webhook_url = url

    async def say(self, text: str) -> None:
        status, said = await self.fake.post(self.fake.text(ALICE, text))
        assert status == 200, (status, said)

    async def send_file(self, name: str, data: bytes, media_type: str, caption: str = "") -> None:
        event = self.fake.document(ALICE, name, data, media_type, caption)
        status, said = await self.fake.post(event)
        assert status == 200, (status, said)

    async def press(self, label: str) -> None:
        [sent] = [s for s in self.fake.sent if s.body.get("type") == "interactive"][-1:]
        status, said = await self.fake.post(self.fake.pressed(ALICE, sent, label))
        assert status == 200, (status, said)

    def texts(self) -> list[str]:
        return [text_of(s) for s in self.fake.sent if s.to == ALICE and text_of(s)]

    def files(self) -> list[tuple[str, bytes]]:
        return [(s.media[0], s.media[1]) for s in self.fake.sent if s.to == ALICE and s.media]
