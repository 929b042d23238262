"""A fake Google Chat on 127.0.0.1: Google's published key sets (the Chat system account's
and Google's OAuth keys), the OAuth token endpoint taking a service account's signed
assertion (RFC 7523), the Chat REST API (spaces.messages.create with client message ids,
media.download), and the HTTP endpoint side: interaction events POSTed with a bearer
token signed RS256 as Google signs them, with test keys.

`GoogleChatDriver` plays the one allowed person in a direct message with the app.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import secrets
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import aiohttp
import jwt
from aiohttp import web
from cryptography.hazmat.primitives import serialization

from tests.channels.fake_teams import jwk_of, post_bearer, signing_key

PROJECT = "123456789012"  # the project number: the tokens' audience
CHAT_ISSUER = "chat@system.gserviceaccount.com"
APP_EMAIL = "habakkuk@test-project.iam.gserviceaccount.com"
ALICE = "alice@example.com"
ALICE_USER = "users/1111111111"
MALLORY_USER = "users/6666666666"
DM = "spaces/AAAAdm-alice"
CHAT_KID = "chat-test-key"
GOOGLE_KID = "google-test-key"


@dataclass
class Created:
    """A message the app created."""

    name: str
    space: str
    body: dict[str, Any]

    @property
    def text(self) -> str:
        return str(self.body.get("text") or "")

    def buttons(self) -> list[dict[str, Any]]:
        return [
            button
            for card in self.body.get("cardsV2") or []
            for section in card["card"]["sections"]
            for widget in section["widgets"]
            for button in widget.get("buttonList", {}).get("buttons", [])
        ]


class FakeGoogleChat:
    """Google's keys, token endpoint and Chat API, and a caller of the app's endpoint."""

    def __init__(self) -> None:
        self.chat_key = signing_key("google-chat")
        self.google_key = signing_key("google-oauth")
        self.account_key = signing_key("service-account")
        self.created: list[Created] = []
        self.ids: set[str] = set()  # client message ids taken
        self.tokens: set[str] = set()
        self.token_requests = 0
        self.refuse_key = False
        # while set, a create is made but its answer waits here (a crash test's window)
        self.hold: asyncio.Event | None = None
        self.held = 0
        self.media: dict[str, tuple[bytes, str]] = {}
        self.webhook_url = ""
        self._ids = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self._client: aiohttp.ClientSession | None = None
        self._dir = tempfile.TemporaryDirectory()
        self.key_file = Path(self._dir.name) / "service-account.json"
        self.base_url = ""

    async def __aenter__(self) -> FakeGoogleChat:
        app = web.Application()
        app.router.add_get(f"/service_accounts/v1/jwk/{CHAT_ISSUER}", self._chat_keys)
        app.router.add_get("/oauth2/v3/certs", self._google_keys)
        app.router.add_post("/token", self._token)
        app.router.add_post("/v1/spaces/{space}/messages", self._create)
        app.router.add_patch("/v1/spaces/{space}/messages/{message}", self._patch)
        app.router.add_get("/v1/media/{resource:.+}", self._download)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]  # a started TCPSite has its server
        self.base_url = f"http://127.0.0.1:{port}"
        pem = self.account_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()
        key = {
            "type": "service_account",
            "project_id": "test-project",
            "private_key_id": "sa-key-1",
            "private_key": pem,
            "client_email": APP_EMAIL,
            "token_uri": f"{self.base_url}/token",
        }
        self.key_file.write_text(json.dumps(key))
        self.key_file.chmod(0o600)
        self._client = aiohttp.ClientSession()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._client is not None:
            await self._client.close()
        if self._runner is not None:
            await self._runner.cleanup()
        self._dir.cleanup()

    # -- Google's side ---------------------------------------------------------------

    async def _chat_keys(self, request: web.Request) -> web.Response:
        return web.json_response({"keys": [jwk_of(self.chat_key, CHAT_KID, [])]})

    async def _google_keys(self, request: web.Request) -> web.Response:
        return web.json_response({"keys": [jwk_of(self.google_key, GOOGLE_KID, [])]})

    async def _token(self, request: web.Request) -> web.Response:
        form = await request.post()
        self.token_requests += 1
        try:
            claims = jwt.decode(
                str(form.get("assertion", "")),
                self.account_key.public_key(),
                algorithms=["RS256"],
                audience=f"{self.base_url}/token",
                issuer=APP_EMAIL,
            )
        except jwt.InvalidTokenError:
            claims = {}
        grant = form.get("grant_type") == "urn:ietf:params:oauth:grant-type:jwt-bearer"
        scoped = claims.get("scope") == "https://www.googleapis.com/auth/chat.bot"
        if self.refuse_key or not (grant and scoped):
            return web.json_response(
                {"error": "invalid_grant", "error_description": "Invalid JWT Signature."},
                status=400,
            )
        token = "ya29." + secrets.token_urlsafe(16)
        self.tokens.add(token)
        return web.json_response(
            {"access_token": token, "expires_in": 3599, "token_type": "Bearer"}
        )

    def _authorized(self, request: web.Request) -> bool:
        auth = request.headers.get("Authorization", "")
        return auth.startswith("Bearer ") and auth[7:] in self.tokens

    async def _create(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return web.json_response(
                {"error": {"code": 401, "status": "UNAUTHENTICATED"}}, status=401
            )
        space = "spaces/" + request.match_info["space"]
        client_id = request.query.get("messageId", "")
        if client_id in self.ids:
            return web.json_response(
                {"error": {"code": 409, "status": "ALREADY_EXISTS", "message": "exists"}},
                status=409,
            )
        if client_id:
            self.ids.add(client_id)
        name = f"{space}/messages/{client_id or f'm{next(self._ids)}'}"
        self.created.append(Created(name, space, await request.json()))
        if self.hold is not None:  # created, but the answer never comes (a crash's window)
            self.held += 1
            await self.hold.wait()
            raise web.HTTPServiceUnavailable()
        return web.json_response({"name": name, "text": self.created[-1].text})

    async def _patch(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return web.json_response({"error": {"code": 401}}, status=401)
        name = f"spaces/{request.match_info['space']}/messages/{request.match_info['message']}"
        body = await request.json()
        for created in self.created:
            if created.name == name:
                for field_name in request.query.get("updateMask", "").split(","):
                    created.body[field_name] = body.get(field_name)
                return web.json_response({"name": name})
        return web.json_response({"error": {"code": 404, "status": "NOT_FOUND"}}, status=404)

    async def _download(self, request: web.Request) -> web.Response:
        if not self._authorized(request) or request.query.get("alt") != "media":
            return web.json_response({"error": {"code": 401}}, status=401)
        found = self.media.get(request.match_info["resource"])
        if found is None:
            raise web.HTTPNotFound()
        return web.Response(body=found[0], content_type=found[1])

    # -- the endpoint side -----------------------------------------------------------

    def token(self, *, by_url: bool = False, key: Any = None, kid: str = "", **claims: Any) -> str:
        """The bearer token Google Chat sends (for the project number, or as an ID token
        for the endpoint URL); the overrides forge one."""
        now = int(time.time())
        if by_url:
            body: dict[str, Any] = {
                "iss": "https://accounts.google.com",
                "aud": self.webhook_url,
                "email": CHAT_ISSUER,
                "email_verified": True,
                "iat": now - 10,
                "exp": now + 3600,
            }
            default_key, default_kid = self.google_key, GOOGLE_KID
        else:
            body = {"iss": CHAT_ISSUER, "aud": PROJECT, "iat": now - 10, "exp": now + 3600}
            default_key, default_kid = self.chat_key, CHAT_KID
        body.update(claims)
        return jwt.encode(
            body, key or default_key, algorithm="RS256", headers={"kid": kid or default_kid}
        )

    def event(
        self, text: str = "", *, sender: str = ALICE_USER, space: str = DM, **extra: Any
    ) -> dict[str, Any]:
        """A MESSAGE interaction event in a direct message with the app."""
        user = {
            "name": sender,
            "displayName": "Alice" if sender == ALICE_USER else "Mallory",
            "email": ALICE if sender == ALICE_USER else "mallory@example.com",
            "type": "HUMAN",
        }
        room = {"name": space, "type": "DM", "spaceType": "DIRECT_MESSAGE", "singleUserBotDm": True}
        message: dict[str, Any] = {
            "name": f"{space}/messages/{secrets.token_hex(6)}.{next(self._ids)}",
            "sender": user,
            "createTime": "2026-12-07T21:00:00.000000Z",
            "text": text,
            "argumentText": text,
            "thread": {"name": f"{space}/threads/t{next(self._ids)}"},
            "space": room,
        }
        message.update(extra)
        return {
            "type": "MESSAGE",
            "eventTime": "2026-12-07T21:00:00.000000Z",
            "message": message,
            "user": user,
            "space": room,
            "configCompleteRedirectUrl": "https://chat.google.com/api/bot_config_complete",
        }

    def with_file(self, caption: str, name: str, data: bytes, media_type: str) -> dict[str, Any]:
        """A message carrying an uploaded file (fetched with media.download)."""
        resource = "ATT" + secrets.token_urlsafe(12)
        self.media[resource] = (data, media_type)
        attachment = {
            "name": f"{DM}/messages/x/attachments/{resource}",
            "contentName": name,
            "contentType": media_type,
            "attachmentDataRef": {"resourceName": resource},
            "source": "UPLOADED_CONTENT",
        }
        return self.event(caption, attachment=[attachment])

    def click(self, created: Created, data: str) -> dict[str, Any]:
        """The CARD_CLICKED event of a press on one of the card's buttons."""
        event = self.event()
        event["type"] = "CARD_CLICKED"
        event["eventTime"] = f"2026-12-07T21:00:{next(self._ids) % 60:02d}.000000Z"
        event["message"] = {"name": created.name, "space": event["space"]}
        event["action"] = {
            "actionMethodName": "habakkuk",
            "parameters": [{"key": "data", "value": data}],
        }
        event["common"] = {"invokedFunction": "habakkuk", "parameters": {"data": data}}
        return event

    async def post(
        self,
        event: dict[str, Any],
        *,
        token: str | None = None,
        body: bytes | None = None,
        method: str = "POST",
    ) -> tuple[int, str]:
        """POST an event as Google Chat does; the overrides forge one."""
        assert self._client is not None
        token = self.token() if token is None else token
        data = json.dumps(event).encode() if body is None else body
        return await post_bearer(self._client, self.webhook_url, data, token, method)


class GoogleChatDriver:
    """Alice in her direct message with the app on the fake Google Chat."""

    kind = "googlechat"
    has_buttons = True

    def __init__(self, chat: FakeGoogleChat):
        self.chat = chat

    def channel_yaml(self, name: str) -> str:
        return (
            f"type: googlechat\naudience: '{PROJECT}'\nkey_file: {self.chat.key_file}\n"
            f"base_url: {self.chat.base_url}\nallow_from: ['{ALICE}']\n"
        )

    def env(self) -> dict[str, str]:
        return {}

    def called_at(self, url: str) -> None:
        """The app's HTTP endpoint is now `url`."""
        self.chat.webhook_url = url

    async def _post(self, event: dict[str, Any]) -> None:
        status, said = await self.chat.post(event)
        assert status == 200, (status, said)

    async def say(self, text: str) -> None:
        await self._post(self.chat.event(text))

    async def send_file(self, name: str, data: bytes, media_type: str, caption: str = "") -> None:
        await self._post(self.chat.with_file(caption, name, data, media_type))

    async def press(self, label: str) -> None:
        for created in reversed(self._mine()):
            for button in created.buttons():
                if button["text"] == label:
                    [parameter] = button["onClick"]["action"]["parameters"]
                    await self._post(self.chat.click(created, parameter["value"]))
                    return
        raise AssertionError(f"no button {label!r}")

    def _mine(self) -> list[Created]:
        return [c for c in self.chat.created if c.space == DM]

    def texts(self) -> list[str]:
        return [c.text for c in self._mine() if c.text]

    def files(self) -> list[tuple[str, bytes]]:
        return []  # a Chat app uploads no files (media.upload needs a user's authorization)
