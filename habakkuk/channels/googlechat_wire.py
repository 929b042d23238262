"""Google Chat's wire, with aiohttp: the tokens Google signs its requests with, the
service account's own token, and the Chat REST API.

- In: Google Chat POSTs each interaction event with `Authorization: Bearer <JWT>`, RS256.
  When the app's "Authentication audience" is the project number, the token's issuer is
  chat@system.gserviceaccount.com and its keys are that account's published key set;
  when it is the endpoint URL, the token is a Google ID token (issuer accounts.google.com,
  Google's OAuth keys) whose `email` is chat@system.gserviceaccount.com, verified.
- Out: the app's token by the JWT bearer grant (RFC 7523): an assertion signed RS256 with
  the service account's private key (scope chat.bot) is exchanged at its token_uri; the
  token is cached until five minutes before it expires. Messages are created with
  spaces.messages.create, with a client-assigned message id derived from the delivery, so
  a resend after a crash makes no second message (the API answers 409 ALREADY_EXISTS).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp

from .adapter import FatalAdapterError, RetryAfter, SendError, Undeliverable
from .jwks import TokenRules

CHAT_ISSUER = "chat@system.gserviceaccount.com"
GOOGLE_ISSUERS = ("https://accounts.google.com", "accounts.google.com")
CERTS_ROOT = "https://www.googleapis.com"
CHAT_KEYS_PATH = f"/service_accounts/v1/jwk/{CHAT_ISSUER}"
GOOGLE_KEYS_PATH = "/oauth2/v3/certs"
API_ROOT = "https://chat.googleapis.com"
SCOPE = "https://www.googleapis.com/auth/chat.bot"
GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
RENEW_BEFORE = 300.0


def by_url(audience: str) -> bool:
    """Whether the app's authentication audience is its endpoint URL (else its number)."""
    return audience.startswith("https://")


def keys_url(audience: str, base_url: str | None) -> str:
    """Where the keys of the tokens for `audience` are published."""
    root = (base_url or CERTS_ROOT).rstrip("/")
    return root + (GOOGLE_KEYS_PATH if by_url(audience) else CHAT_KEYS_PATH)


def token_rules(audience: str) -> TokenRules:
    """Who signs Google Chat's tokens for `audience`."""
    issuers = GOOGLE_ISSUERS if by_url(audience) else (CHAT_ISSUER,)
    return TokenRules(issuers=issuers, audiences=(audience,))


def from_chat(claims: Mapping[str, Any], audience: str) -> bool:
    """An ID token (endpoint URL audience) must be Google Chat's own, verified."""
    if not by_url(audience):
        return True
    return claims.get("email") == CHAT_ISSUER and claims.get("email_verified") in (True, "true")


@dataclass(frozen=True)
class ServiceAccountKey:
    """The JSON key file of the Chat app's service account."""

    client_email: str
    private_key: str
    private_key_id: str
    token_uri: str
    project_id: str = ""

    @classmethod
    def load(cls, path: Path) -> ServiceAccountKey:
        """Read the key file; ValueError saying what is wrong."""
        try:
            found = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ValueError(f"{path}: cannot read the key file ({exc.strerror})") from None
        except ValueError:
            raise ValueError(f"{path}: not a JSON key file") from None
        if not isinstance(found, dict) or found.get("type") != "service_account":
            raise ValueError(f"{path}: not a service account key (type service_account)")
        missing = [k for k in ("client_email", "private_key", "token_uri") if not found.get(k)]
        if missing:
            raise ValueError(f"{path}: the key file has no {', '.join(missing)}")
        return cls(
            str(found["client_email"]),
            str(found["private_key"]),
            str(found.get("private_key_id", "")),
            str(found["token_uri"]),
            str(found.get("project_id", "")),
        )


class AppToken:
    """The app's access token (JWT bearer grant), cached until five minutes before expiry."""

    def __init__(
        self,
        key: ServiceAccountKey,
        http: Callable[[], aiohttp.ClientSession],
        clock: Callable[[], float] = time.monotonic,
    ):
        self.key = key
        self.http = http
        self.clock = clock
        self._token = ""
        self._until = 0.0
        self.fetched = 0

    def drop(self) -> None:
        """Forget the token (the API called it stale)."""
        self._token, self._until = "", 0.0

    def assertion(self) -> str:
        """The signed JWT exchanged for a token (RFC 7523, Google's claims)."""
        import jwt

        now = int(time.time())
        claims = {
            "iss": self.key.client_email,
            "scope": SCOPE,
            "aud": self.key.token_uri,
            "iat": now,
            "exp": now + 3600,
        }
        headers = {"kid": self.key.private_key_id} if self.key.private_key_id else None
        try:
            return jwt.encode(claims, self.key.private_key, algorithm="RS256", headers=headers)
        except (ValueError, TypeError, jwt.InvalidKeyError) as exc:
            raise FatalAdapterError(f"googlechat: the key file's private_key: {exc}") from None

    async def get(self) -> str:
        """A token valid for five more minutes; FatalAdapterError when Google refuses the
        key, SendError when the token endpoint cannot be reached."""
        if self._token and self.clock() < self._until:
            return self._token
        form = {"grant_type": GRANT, "assertion": self.assertion()}
        try:
            async with self.http().post(self.key.token_uri, data=form) as response:
                status = response.status
                try:
                    found = await response.json(content_type=None)
                except ValueError:
                    found = {}
        except aiohttp.ClientError as exc:
            raise SendError(f"googlechat token: {exc}") from None
        found = found if isinstance(found, dict) else {}
        if status in (400, 401) and found.get("error") in ("invalid_grant", "invalid_client"):
            raise FatalAdapterError(
                f"googlechat: Google refused the service account key ({found.get('error')}: "
                f"{found.get('error_description', '')})"
            )
        token = found.get("access_token")
        if status != 200 or not isinstance(token, str) or not token:
            raise SendError(f"googlechat token: HTTP {status} {found.get('error', '')}".strip())
        self._token = token
        self._until = self.clock() + max(0.0, float(found.get("expires_in") or 3600) - RENEW_BEFORE)
        self.fetched += 1
        return token


class ChatApi:
    """The Chat REST API with the app's token."""

    def __init__(self, root: str, token: AppToken, http: Callable[[], aiohttp.ClientSession]):
        self.root = root.rstrip("/")
        self.token = token
        self.http = http

    async def create(self, space: str, body: Mapping[str, Any], message_id: str = "") -> str:
        """spaces.messages.create; returns the message's name. With `message_id` (client-)
        a second create of the same id is not a second message: its name is returned."""
        params: dict[str, str] = {}
        if message_id:
            params["messageId"] = message_id
        if "thread" in body:
            params["messageReplyOption"] = "REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD"
        try:
            found = await self.call("POST", f"/v1/{space}/messages", body, params)
        except _Exists:
            return f"{space}/messages/{message_id}"
        return str(found.get("name", ""))

    async def update(self, name: str, body: Mapping[str, Any], mask: str) -> None:
        """spaces.messages.patch of the fields in `mask` (e.g. a card's buttons removed)."""
        await self.call("PATCH", f"/v1/{name}", body, {"updateMask": mask})

    async def download(self, resource: str, limit: int) -> bytes:
        """media.download of an attachment a person sent."""
        from .http_download import read_capped

        url = f"{self.root}/v1/media/{quote(resource, safe='/')}"
        headers = {"Authorization": f"Bearer {await self.token.get()}"}
        try:
            async with self.http().get(url, params={"alt": "media"}, headers=headers) as response:
                if response.status >= 400:
                    raise SendError(f"googlechat media: HTTP {response.status}")
                return await read_capped(response, limit, "the attachment")
        except aiohttp.ClientError as exc:
            raise SendError(f"googlechat media: {exc}") from None

    async def call(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        params: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """One call; a token called stale (401) is fetched again and the call made once
        more."""
        for attempt in range(2):
            headers = {"Authorization": f"Bearer {await self.token.get()}"}
            try:
                async with self.http().request(
                    method, self.root + path, json=body, params=params, headers=headers
                ) as response:
                    status = response.status
                    retry = response.headers.get("Retry-After", "")
                    text = await response.text()
            except aiohttp.ClientError as exc:
                raise SendError(f"googlechat: {exc}") from None
            if status == 401 and attempt == 0:
                self.token.drop()
                continue
            return _answer(status, text, retry)
        raise AssertionError("unreachable: the second attempt returns or raises")


class _Exists(SendError):
    """409 ALREADY_EXISTS: a message of that client id was created before."""


def _answer(status: int, text: str, retry: str) -> dict[str, Any]:
    try:
        found = json.loads(text) if text else {}
    except ValueError:
        found = {}
    found = found if isinstance(found, dict) else {}
    if status < 400:
        return found
    error = found.get("error")
    detail = error if isinstance(error, dict) else {}
    message = f"googlechat: HTTP {status} {detail.get('status', '')} {detail.get('message', '')}"
    message = message.strip()
    if status == 409:
        raise _Exists(message)
    if status == 429:
        raise RetryAfter(message, float(retry) if retry.isdigit() else 5.0)
    if status in (403, 404):  # the app was removed from the space, the space is gone
        raise Undeliverable(message)
    raise SendError(message)
