"""A fake Microsoft Teams on 127.0.0.1: the Bot Framework's login endpoint (client
credentials), its OpenID metadata and key set, the Bot Connector's REST API at a service
URL, and the webhook side, signing each activity it posts with the Bot Framework's own
scheme (an RS256 JWT: issuer https://api.botframework.com, audience the App ID, the
serviceUrl claim) and a test RSA key it publishes.

`TeamsDriver` plays the one allowed person in a personal chat with the bot.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import itertools
import json
import secrets
import time
from dataclasses import dataclass, field
from functools import cache
from types import TracebackType
from typing import Any

import aiohttp
import jwt
from aiohttp import web
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

APP_ID = "8f0c6a4e-1b2c-4d3e-9f00-0123456789ab"
PASSWORD = "teams-test-app-password-0123456789"
ISSUER = "https://api.botframework.com"
KID = "bf-test-key-1"
ALICE_ID = "29:1alice-teams-user-id"
ALICE = "a11ce000-0000-4000-8000-000000000001"  # her Entra object id
MALLORY_ID = "29:1mallory-teams-user-id"
CONVERSATION = "a:1personal-chat-with-alice"
FILE_INFO = "application/vnd.microsoft.teams.file.download.info"
CARD = "application/vnd.microsoft.card.adaptive"
CONSENT = "application/vnd.microsoft.teams.card.file.consent"
FILE_CARD = "application/vnd.microsoft.teams.card.file.info"


@cache
def signing_key(name: str) -> rsa.RSAPrivateKey:
    """An RSA key of the tests (one per name, made once per process)."""
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def jwk_of(key: rsa.RSAPrivateKey, kid: str, endorsements: list[str]) -> dict[str, Any]:
    """The public half of `key` as the Bot Framework publishes it."""
    found: dict[str, Any] = RSAAlgorithm.to_jwk(key.public_key(), as_dict=True)
    found.update(kid=kid, use="sig", endorsements=endorsements)
    return found


def public_pem(key: rsa.RSAPrivateKey) -> bytes:
    return key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unsigned_token(header: dict[str, Any], claims: dict[str, Any], sign: bytes = b"") -> str:
    """A JWT written by hand: `alg: none` (no signature) or HS256 keyed with `sign`."""
    head = b64url(json.dumps(header).encode()) + "." + b64url(json.dumps(claims).encode())
    if not sign:
        return head + "."
    mac = hmac.new(sign, head.encode(), hashlib.sha256).digest()
    return head + "." + b64url(mac)


async def post_bearer(
    client: aiohttp.ClientSession, url: str, data: bytes, token: str, method: str = "POST"
) -> tuple[int, str]:
    """A JSON request to our webhook with `Authorization: Bearer <token>` (none when
    `token` is empty): how Teams' Connector and Google Chat call the bot."""
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    async with client.request(method, url, data=data, headers=headers) as response:
        return response.status, await response.text()


@dataclass
class Posted:
    """An activity the bot posted to a conversation (and the files Teams fetched)."""

    id: str
    conversation: str
    activity: dict[str, Any]
    files: list[tuple[str, bytes]] = field(default_factory=list)
    consent: dict[str, Any] | None = None  # a file consent card's attachment

    @property
    def text(self) -> str:
        return str(self.activity.get("text") or "")

    def actions(self) -> list[dict[str, Any]]:
        return [
            action
            for attachment in self.activity.get("attachments") or []
            if attachment.get("contentType") == CARD
            for action in attachment["content"].get("actions", [])
        ]


class FakeTeams:
    """The Bot Framework's login, keys and Connector, and a caller of the bot's endpoint."""

    def __init__(self, app_id: str = APP_ID, password: str = PASSWORD):
        self.app_id, self.password = app_id, password
        self.key = signing_key("bot-framework")
        self.kid = KID
        self.published: list[dict[str, Any]] = [
            jwk_of(self.key, KID, ["msteams", "skype"]),
            jwk_of(signing_key("webchat-only"), "webchat-key", ["webchat"]),
        ]
        self.posted: list[Posted] = []
        self.tokens: set[str] = set()  # the bot tokens issued and still honoured
        self.token_requests = 0
        self.key_fetches = 0
        self.refuse_password = False
        self.expires_in = 3599
        # while set, a post waits here unanswered and unrecorded (a crash test's window)
        self.hold: asyncio.Event | None = None
        self.held = 0
        self.files: dict[str, tuple[bytes, str]] = {}  # token -> a person's uploaded file
        self.webhook_url = ""  # the bot's messaging endpoint
        self.auto_accept = True  # the person allows every file consent card at once
        self.uploaded: dict[str, bytes] = {}  # OneDrive upload id -> bytes
        self._tasks: set[asyncio.Future[Any]] = set()
        self._ids = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self._client: aiohttp.ClientSession | None = None
        self.base_url = ""

    @property
    def service_url(self) -> str:
        return f"{self.base_url}/teams/"

    async def __aenter__(self) -> FakeTeams:
        app = web.Application()
        app.router.add_post("/{tenant}/oauth2/v2.0/token", self._login)
        app.router.add_get("/v1/.well-known/openidconfiguration", self._metadata)
        app.router.add_get("/v1/.well-known/keys", self._keys)
        app.router.add_post("/teams/v3/conversations/{conversation}/activities", self._post)
        app.router.add_post("/teams/v3/conversations/{conversation}/activities/{id}", self._post)
        app.router.add_put("/teams/v3/conversations/{conversation}/activities/{id}", self._update)
        app.router.add_get("/files/{token}/{name}", self._file)
        app.router.add_put("/upload/{unique}", self._upload)
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
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._client is not None:
            await self._client.close()
        if self._runner is not None:
            await self._runner.cleanup()

    # -- the Bot Framework's side ----------------------------------------------------

    async def _login(self, request: web.Request) -> web.Response:
        form = await request.post()
        self.token_requests += 1
        good = (
            form.get("grant_type") == "client_credentials"
            and form.get("client_id") == self.app_id
            and hmac.compare_digest(str(form.get("client_secret", "")), self.password)
            and form.get("scope") == "https://api.botframework.com/.default"
        )
        if self.refuse_password or not good:
            return web.json_response(
                {"error": "invalid_client", "error_description": "AADSTS7000215"}, status=401
            )
        token = "bot-" + secrets.token_urlsafe(16)
        self.tokens.add(token)
        return web.json_response(
            {"token_type": "Bearer", "expires_in": self.expires_in, "access_token": token}
        )

    async def _metadata(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "issuer": ISSUER,
                "jwks_uri": f"{self.base_url}/v1/.well-known/keys",
                "id_token_signing_alg_values_supported": ["RS256"],
            }
        )

    async def _keys(self, request: web.Request) -> web.Response:
        self.key_fetches += 1
        return web.json_response({"keys": self.published})

    def revoke_tokens(self) -> None:
        """Every bot token issued so far is refused from now on (401)."""
        self.tokens.clear()

    async def _post(self, request: web.Request) -> web.Response:
        auth = request.headers.get("Authorization", "")
        if not auth.startswith("Bearer ") or auth[7:] not in self.tokens:
            return web.json_response(
                {"error": {"code": "Unauthorized", "message": "token"}}, status=401
            )
        activity = await request.json()
        if self.hold is not None and activity.get("type") == "message":
            self.held += 1
            await self.hold.wait()
            raise web.HTTPServiceUnavailable()
        posted = Posted(f"1:{next(self._ids)}", request.match_info["conversation"], activity)
        assert self._client is not None
        for attachment in activity.get("attachments") or []:
            kind = attachment.get("contentType")
            if kind == CARD:
                continue
            if kind == CONSENT:
                posted.consent = attachment
                if self.auto_accept:  # the person presses Allow on the card
                    self._later(self.answer_consent(posted, accept=True))
                continue
            if kind == FILE_CARD:  # the file the bot uploaded into the person's OneDrive
                unique = attachment["content"]["uniqueId"]
                posted.files.append((attachment["name"], self.uploaded[unique]))
                continue
            # Teams fetches a file attachment's contentUrl to show it.
            async with self._client.get(attachment["contentUrl"]) as response:
                if response.status != 200:
                    return web.json_response({"error": {"code": "BadArgument"}}, status=400)
                posted.files.append((attachment["name"], await response.read()))
        if activity.get("type") == "message":
            self.posted.append(posted)
        return web.json_response({"id": posted.id}, status=201)

    async def _update(self, request: web.Request) -> web.Response:
        auth = request.headers.get("Authorization", "")
        if not auth.startswith("Bearer ") or auth[7:] not in self.tokens:
            return web.json_response({"error": {"code": "Unauthorized"}}, status=401)
        for posted in self.posted:
            if posted.id == request.match_info["id"]:
                posted.activity = await request.json()
                return web.json_response({"id": posted.id})
        return web.json_response({"error": {"code": "ActivityNotFound"}}, status=404)

    def _later(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def answer_consent(self, posted: Posted, *, accept: bool) -> tuple[int, str]:
        """The person's answer to a file consent card: Teams invokes the bot with an
        upload URL in their OneDrive (on Allow)."""
        assert posted.consent is not None
        unique = secrets.token_hex(8)
        name = posted.consent["name"]
        content = posted.consent["content"]
        value: dict[str, Any] = {
            "type": "fileUpload",
            "action": "accept" if accept else "decline",
            "context": content["acceptContext" if accept else "declineContext"],
        }
        if accept:
            value["uploadInfo"] = {
                "contentUrl": f"{self.base_url}/drive/{unique}/{name}",
                "name": name,
                "uploadUrl": f"{self.base_url}/upload/{unique}",
                "uniqueId": unique,
                "fileType": name.rsplit(".", 1)[-1],
            }
        invoke = self.activity(conversation=posted.conversation, value=value)
        invoke.update(type="invoke", name="fileConsent/invoke")
        return await self.post(invoke)

    async def _upload(self, request: web.Request) -> web.Response:
        data = await request.read()
        if request.headers.get("Content-Range") != f"bytes 0-{len(data) - 1}/{len(data)}":
            return web.json_response({"error": {"code": "invalidRange"}}, status=400)
        self.uploaded[request.match_info["unique"]] = data
        return web.json_response({"id": request.match_info["unique"]}, status=201)

    async def _file(self, request: web.Request) -> web.Response:
        found = self.files.get(request.match_info["token"])
        if found is None:
            raise web.HTTPNotFound()
        return web.Response(body=found[0], content_type=found[1])

    # -- the webhook side ------------------------------------------------------------

    def token(
        self,
        *,
        key: rsa.RSAPrivateKey | None = None,
        kid: str | None = None,
        service_url: str | None = None,
        **claims: Any,
    ) -> str:
        """The JWT the Connector sends; the overrides forge one."""
        now = int(time.time())
        body: dict[str, Any] = {
            "iss": ISSUER,
            "aud": self.app_id,
            "serviceUrl": self.service_url if service_url is None else service_url,
            "nbf": now - 60,
            "iat": now - 60,
            "exp": now + 3600,
        }
        body.update(claims)
        return jwt.encode(
            body, key or self.key, algorithm="RS256", headers={"kid": kid or self.kid}
        )

    def activity(
        self,
        text: str = "",
        *,
        sender: str = ALICE_ID,
        conversation: str = CONVERSATION,
        **extra: Any,
    ) -> dict[str, Any]:
        """A message activity from `sender` in a personal chat with the bot."""
        found: dict[str, Any] = {
            "type": "message",
            "id": f"1{next(self._ids):012d}",
            "timestamp": "2026-12-07T21:00:00.000Z",
            "serviceUrl": self.service_url,
            "channelId": "msteams",
            "from": {"id": sender, "name": "Alice", "aadObjectId": ALICE},
            "conversation": {
                "conversationType": "personal",
                "tenantId": "72f988bf-0000-4000-8000-000000000000",
                "id": conversation,
            },
            "recipient": {"id": f"28:{self.app_id}", "name": "Habakkuk"},
            "textFormat": "plain",
            "locale": "en-US",
            "channelData": {"tenant": {"id": "72f988bf-0000-4000-8000-000000000000"}},
        }
        if sender != ALICE_ID:
            found["from"] = {"id": sender, "name": "Mallory"}
        if text:
            found["text"] = text
        found.update(extra)
        return found

    def with_file(self, caption: str, name: str, data: bytes, media_type: str) -> dict[str, Any]:
        """A message carrying a file, as Teams sends one from a personal chat."""
        token = secrets.token_urlsafe(8)
        self.files[token] = (data, media_type)
        url = f"{self.base_url}/files/{token}/{name}"
        attachment = {
            "contentType": FILE_INFO,
            "contentUrl": url,
            "name": name,
            "content": {"downloadUrl": url, "uniqueId": token, "fileType": name.rsplit(".")[-1]},
        }
        return self.activity(caption, attachments=[attachment])

    async def post(
        self,
        activity: dict[str, Any],
        *,
        token: str | None = None,
        body: bytes | None = None,
        method: str = "POST",
    ) -> tuple[int, str]:
        """POST an activity as the Connector does; the overrides forge one."""
        assert self._client is not None
        token = self.token() if token is None else token
        data = json.dumps(activity).encode() if body is None else body
        return await post_bearer(self._client, self.webhook_url, data, token, method)


class TeamsDriver:
    """Alice in her personal chat with the bot on the fake Teams."""

    kind = "teams"
    has_buttons = True

    def __init__(self, teams: FakeTeams):
        self.teams = teams

    def channel_yaml(self, name: str) -> str:
        return (
            f"type: teams\napp_id: {self.teams.app_id}\npassword_env: TEAMS_TEST_PASSWORD\n"
            f"base_url: {self.teams.base_url}\nallow_from: ['{ALICE}']\n"
        )

    def env(self) -> dict[str, str]:
        return {"TEAMS_TEST_PASSWORD": self.teams.password}

    def called_at(self, url: str) -> None:
        """The bot's messaging endpoint is now `url`."""
        self.teams.webhook_url = url

    async def _post(self, activity: dict[str, Any]) -> None:
        status, said = await self.teams.post(activity)
        assert status == 200, (status, said)

    async def say(self, text: str) -> None:
        await self._post(self.teams.activity(text))

    async def send_file(self, name: str, data: bytes, media_type: str, caption: str = "") -> None:
        await self._post(self.teams.with_file(caption, name, data, media_type))

    async def press(self, label: str) -> None:
        for posted in reversed(self._mine()):
            for action in posted.actions():
                if action["title"] == label:
                    # Action.Submit: Teams posts a message activity carrying the data.
                    await self._post(self.teams.activity(value=action["data"], replyToId=posted.id))
                    return
        raise AssertionError(f"no button {label!r} in {[p.actions() for p in self._mine()]}")

    def _mine(self) -> list[Posted]:
        return [p for p in self.teams.posted if p.conversation == CONVERSATION]

    def texts(self) -> list[str]:
        return [p.text for p in self._mine() if p.text]

    def files(self) -> list[tuple[str, bytes]]:
        return [found for p in self._mine() for found in p.files]
