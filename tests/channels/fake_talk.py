"""A fake Nextcloud Talk on 127.0.0.1: the bot API (`POST /ocs/v2.php/apps/spreed/api/v1/
bot/<token>/message`, its `X-Nextcloud-Talk-Bot-Random` / `-Signature` checked with
Talk's own algorithm, HMAC-SHA256 of the random and the message) and `/status.php`, and
the webhook side: each message of the conversation POSTed to the bot's URL as Talk does,
an ActivityStreams body signed with `X-Nextcloud-Talk-Signature` (HMAC-SHA256 of the
random and the body) and the test secret.

`TalkDriver` plays Alice in the conversation the bot was added to.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import json
import secrets
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import aiohttp
from aiohttp import web

SECRET = "talk-bot-test-secret-" + "0123456789abcdef" * 3
ROOM = "n3xtc10ud"
ALICE = "alice"


def sign(secret: str, random: str, payload: bytes) -> str:
    """Talk's signature, written here from its documentation."""
    return hmac.new(secret.encode(), random.encode() + payload, hashlib.sha256).hexdigest()


@dataclass
class Posted:
    """A message the bot posted to a conversation."""

    room: str
    message: str
    reference: str
    reply_to: int | None
    silent: bool


@dataclass
class Webhook:
    """One webhook request as Talk makes it (the test may change a part to forge it)."""

    body: bytes
    random: str
    signature: str
    backend: str


class FakeTalk:
    """The Talk server's bot API and a caller of the bot's webhook."""

    def __init__(self, secret: str = SECRET):
        self.secret = secret
        self.posted: list[Posted] = []
        self.refused_sends = 0
        self.webhook_url = ""  # the bot's URL (occ talk:bot:install ... <url>)
        # while set, a send waits here unanswered and unrecorded (a crash test's window)
        self.hold: asyncio.Event | None = None
        self.held = 0
        self._ids = itertools.count(1001)
        self._runner: web.AppRunner | None = None
        self._client: aiohttp.ClientSession | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> FakeTalk:
        app = web.Application()
        app.router.add_get("/status.php", self._status)
        app.router.add_post("/ocs/v2.php/apps/spreed/api/v1/bot/{token}/message", self._message)
        self._runner = web.AppRunner(app, shutdown_timeout=0.5)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.port = self._runner.addresses[0][1]
        self._client = aiohttp.ClientSession()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.hold is not None:
            self.hold.set()
        if self._client is not None:
            await self._client.close()
        if self._runner is not None:
            await self._runner.cleanup()

    # -- the webhook side ------------------------------------------------------------

    def message(self, text: str, *, user: str = ALICE, parameters: Any = None) -> Webhook:
        """A message of `user` in the conversation, signed as Talk signs it."""
        number = next(self._ids)
        content = json.dumps({"message": text, "parameters": parameters or []})
        activity = {
            "type": "Create",
            "actor": {"type": "Person", "id": f"users/{user}", "name": user.title(),
                      "talkParticipantType": "3"},
            "object": {"type": "Note", "id": str(number), "name": "message",
                       "content": content, "mediaType": "text/markdown"},
            "target": {"type": "Collection", "id": ROOM, "name": "Planning"},
        }  # fmt: skip
        body = json.dumps(activity).encode()
        random = secrets.token_hex(32)
        return Webhook(body, random, sign(self.secret, random, body), self.base_url)

    async def call(self, hook: Webhook) -> tuple[int, str]:
        """POST a webhook to the bot as Talk does. Returns (status, text)."""
        headers = {
            "Content-Type": "application/json",
            "X-Nextcloud-Talk-Random": hook.random,
            "X-Nextcloud-Talk-Signature": hook.signature,
            "X-Nextcloud-Talk-Backend": hook.backend,
        }
        assert self._client is not None
        async with self._client.post(self.webhook_url, data=hook.body, headers=headers) as answer:
            return answer.status, await answer.text()

    # -- the server ------------------------------------------------------------------

    async def _status(self, request: web.Request) -> web.Response:
        return web.json_response(
            {"installed": True, "maintenance": False, "versionstring": "29.0.1",
             "productname": "Nextcloud"}
        )  # fmt: skip

    async def _message(self, request: web.Request) -> web.Response:
        body = await request.json()
        random = request.headers.get("X-Nextcloud-Talk-Bot-Random", "")
        given = request.headers.get("X-Nextcloud-Talk-Bot-Signature", "")
        message = str(body.get("message", ""))
        if request.headers.get("OCS-APIRequest") != "true" or not hmac.compare_digest(
            sign(self.secret, random, message.encode()), given
        ):
            self.refused_sends += 1
            return web.json_response(
                {"ocs": {"meta": {"status": "failure", "statuscode": 401}, "data": []}}, status=401
            )
        if self.hold is not None:
            self.held += 1
            await self.hold.wait()
            return web.json_response({"ocs": {"meta": {"statuscode": 500}, "data": []}}, status=500)
        self.posted.append(
            Posted(
                request.match_info["token"],
                message,
                str(body.get("referenceId", "")),
                body.get("replyTo"),
                bool(body.get("silent", False)),
            )
        )
        return web.json_response(
            {"ocs": {"meta": {"status": "ok", "statuscode": 201, "message": "OK"}, "data": []}},
            status=201,
        )


class TalkDriver:
    """Alice in the conversation with the bot on the fake Talk (approvals typed)."""

    kind = "nextcloud"
    has_buttons = False

    def __init__(self, talk: FakeTalk):
        self.talk = talk

    def channel_yaml(self, name: str) -> str:
        return (
            f"type: nextcloud\nbase_url: {self.talk.base_url}\n"
            f'token_env: TALK_TEST_SECRET\nallow_from: ["{ALICE}"]\n'
        )

    def env(self) -> dict[str, str]:
        return {"TALK_TEST_SECRET": self.talk.secret}

    def called_at(self, url: str) -> None:
        """The bot was installed with `url` as its webhook."""
        self.talk.webhook_url = url

    async def say(self, text: str) -> None:
        status, said = await self.talk.call(self.talk.message(text))
        assert status == 200, (status, said)

    async def send_file(self, name: str, data: bytes, media_type: str, caption: str = "") -> None:
        raise AssertionError("a Talk bot cannot fetch files")

    async def press(self, label: str) -> None:
        raise AssertionError("Talk bots have no buttons: approvals are typed")

    def texts(self) -> list[str]:
        return [p.message for p in self.talk.posted if p.room == ROOM]

    def files(self) -> list[tuple[str, bytes]]:
        return []
