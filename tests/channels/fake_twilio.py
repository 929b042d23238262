"""A fake Twilio on 127.0.0.1: the Accounts and Messages REST API, inbound media, and the
webhook side, signing each request it makes with Twilio's own algorithm (HMAC-SHA1 over
the URL and the sorted form, base64) and the account's test auth token.

`SmsDriver` plays the one allowed person texting the bot's number.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import TracebackType
from urllib.parse import urlencode

import aiohttp
from aiohttp import web

SID = "AC" + "0123456789abcdef" * 2
TOKEN = "twilio-test-auth-token-0123456789"
BOT_NUMBER = "+15550001111"
ALICE = "+15557654321"
MALLORY = "+15559990000"


def twilio_signature(token: str, url: str, params: Sequence[tuple[str, str]]) -> str:
    """Twilio's X-Twilio-Signature, written here from its documentation."""
    data = url + "".join(k + v for k, v in sorted(params))
    return base64.b64encode(hmac.new(token.encode(), data.encode(), hashlib.sha1).digest()).decode()


@dataclass
class Sent:
    """A message the bot sent through the Messages API (and what Twilio fetched)."""

    sid: str
    to: str
    sender: str
    body: str
    media: list[tuple[str, bytes]] = field(default_factory=list)


class FakeTwilio:
    """The REST API (basic auth with SID and token) and a webhook caller."""

    def __init__(self, sid: str = SID, token: str = TOKEN):
        self.sid, self.token = sid, token
        self.sent: list[Sent] = []
        self.media: dict[str, tuple[bytes, str]] = {}  # path -> inbound media
        self.refuse_token = False
        # while set, a send waits here unanswered and unrecorded (a crash test's window)
        self.hold: asyncio.Event | None = None
        self.held = 0
        self.webhook_url = ""  # where the number's "A message comes in" points
        self._ids = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self._client: aiohttp.ClientSession | None = None
        self.base_url = ""

    async def __aenter__(self) -> FakeTwilio:
        app = web.Application()
        root = f"/2010-04-01/Accounts/{self.sid}"
        app.router.add_get(root + ".json", self._account)
        app.router.add_post(root + "/Messages.json", self._send)
        app.router.add_get(root + "/Messages/{msg}/Media/{media}", self._media)
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
        expected = "Basic " + base64.b64encode(f"{self.sid}:{self.token}".encode()).decode()
        return not self.refuse_token and request.headers.get("Authorization") == expected

    def _refused(self) -> web.Response:
        return web.json_response(
            {"code": 20003, "message": "Authenticate", "status": 401}, status=401
        )

    async def _account(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._refused()
        return web.json_response({"sid": self.sid, "friendly_name": "Test", "status": "active"})

    async def _send(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._refused()
        form = await request.post()
        if self.hold is not None:
            self.held += 1
            await self.hold.wait()
            raise web.HTTPServiceUnavailable()
        sid = f"SM{next(self._ids):032x}"
        sent = Sent(sid, str(form["To"]), str(form["From"]), str(form.get("Body", "")))
        assert self._client is not None
        for url in form.getall("MediaUrl", []):
            # Twilio fetches each MediaUrl before it sends the MMS.
            async with self._client.get(str(url)) as response:
                if response.status != 200:
                    return web.json_response(
                        {"code": 11200, "message": "media unreachable", "status": 400}, status=400
                    )
                sent.media.append((response.content_type, await response.read()))
        self.sent.append(sent)
        return web.json_response({"sid": sid, "status": "queued"}, status=201)

    async def _media(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._refused()
        found = self.media.get(request.path)
        if found is None:
            raise web.HTTPNotFound()
        return web.Response(body=found[0], content_type=found[1])

    # -- the webhook side ------------------------------------------------------------

    def message(
        self, sender: str, text: str, *, sid: str = "", **extra: str
    ) -> list[tuple[str, str]]:
        """The form Twilio posts for an incoming SMS."""
        sid = sid or f"SM{next(self._ids):032x}"
        params = {
            "MessageSid": sid,
            "SmsSid": sid,
            "AccountSid": self.sid,
            "From": sender,
            "To": BOT_NUMBER,
            "Body": text,
            "NumMedia": "0",
            "ApiVersion": "2010-04-01",
        }
        params.update(extra)
        return list(params.items())

    def with_media(
        self, sender: str, caption: str, data: bytes, media_type: str
    ) -> list[tuple[str, str]]:
        """An MMS: its media is served by this fake under the account, as Twilio does."""
        sid = f"MM{next(self._ids):032x}"
        path = f"/2010-04-01/Accounts/{self.sid}/Messages/{sid}/Media/ME{sid[2:]}"
        self.media[path] = (data, media_type)
        return self.message(
            sender,
            caption,
            sid=sid,
            NumMedia="1",
            MediaUrl0=self.base_url + path,
            MediaContentType0=media_type,
        )

    async def post(
        self,
        params: Sequence[tuple[str, str]],
        *,
        url: str = "",
        signed_url: str = "",
        token: str = "",
        signature: str | None = None,
        body: bytes | None = None,
    ) -> tuple[int, str]:
        """POST a webhook as Twilio does; the overrides forge one. Returns (status, text)."""
        url = url or self.webhook_url
        if signature is None:
            signature = twilio_signature(token or self.token, signed_url or url, params)
        data = body if body is not None else urlencode(list(params)).encode()
        headers = {
            "Content-Type": "application/x-www-form-urlencoded",
            "X-Twilio-Signature": signature,
            "I-Twilio-Idempotency-Token": "test",
        }
        assert self._client is not None
        async with self._client.post(url, data=data, headers=headers) as response:
            return response.status, await response.text()


class SmsDriver:
    """The person (ALICE) texting the bot's number through the fake Twilio."""

    kind = "sms"
    has_buttons = False

    def __init__(self, twilio: FakeTwilio):
        self.twilio = twilio

    def channel_yaml(self, name: str) -> str:
        return (
            f"type: sms\naccount_sid: {self.twilio.sid}\ntoken_env: TWILIO_TEST_TOKEN\n"
            f'from: "{BOT_NUMBER}"\nbase_url: {self.twilio.base_url}\n'
            f'allow_from: ["{ALICE}"]\n'
        )

    def env(self) -> dict[str, str]:
        return {"TWILIO_TEST_TOKEN": self.twilio.token}

    async def say(self, text: str) -> None:
        status, said = await self.twilio.post(self.twilio.message(ALICE, text))
        assert status == 200, (status, said)

    async def send_file(self, name: str, data: bytes, media_type: str, caption: str = "") -> None:
        status, said = await self.twilio.post(
            self.twilio.with_media(ALICE, caption, data, media_type)
        )
        assert status == 200, (status, said)

    def called_at(self, url: str) -> None:
        """The number's "A message comes in" webhook now points at `url`."""
        self.twilio.webhook_url = url

    async def press(self, label: str) -> None:
        raise AssertionError("SMS has no buttons")

    def texts(self) -> list[str]:
        return [sent.body for sent in self.twilio.sent if sent.to == ALICE and sent.body]

    def files(self) -> list[tuple[str, bytes]]:
        # An MMS carries no file name: each is its media's type and bytes.
        return [
            (media_type, data)
            for sent in self.twilio.sent
            if sent.to == ALICE
            for media_type, data in sent.media
        ]
