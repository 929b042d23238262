"""The Bot Framework's wire for Microsoft Teams, with aiohttp: the bot's token, the
Connector REST API, the keys its requests are signed with, and the service URLs kept per
conversation.

- In: the Bot Connector POSTs each activity with `Authorization: Bearer <JWT>` signed
  RS256 by a key published at the OpenID metadata's `jwks_uri`; the token's issuer is
  https://api.botframework.com, its audience our App ID, and its `serviceUrl` claim the
  activity's (Microsoft's "Authenticate requests from the Bot Connector service").
- Out: a token from the login endpoint (OAuth client credentials with the App ID and its
  password, scope https://api.botframework.com/.default), cached until five minutes
  before it expires and fetched again once when the Connector calls it stale; then
  POST {serviceUrl}/v3/conversations/{id}/activities.
- Teams cannot tell us a conversation's service URL later, so the last one each
  conversation came with is kept in channels/teams-<account>.json (written atomically).
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

from habakkuk.engine.home import write_private_file

from .adapter import FatalAdapterError, RetryAfter, SendError, Undeliverable
from .jwks import TokenRules

LOGIN_URL = "https://login.microsoftonline.com"
OPENID_URL = "https://login.botframework.com"
OPENID_PATH = "/v1/.well-known/openidconfiguration"
ISSUER = "https://api.botframework.com"
SCOPE = "https://api.botframework.com/.default"
DEFAULT_TENANT = "botframework.com"  # multi-tenant bots log in here
RENEW_BEFORE = 300.0  # a token is renewed five minutes before it expires


@dataclass(frozen=True)
class Endpoints:
    """Where the bot logs in and where the signing keys are described. `base_url` (tests,
    a private cloud) serves both from one root."""

    token_url: str
    metadata_url: str

    @classmethod
    def of(cls, tenant: str | None, base_url: str | None) -> Endpoints:
        """The endpoints of a bot in `tenant` (default: multi-tenant)."""
        login = (base_url or LOGIN_URL).rstrip("/")
        openid = (base_url or OPENID_URL).rstrip("/")
        return cls(
            f"{login}/{quote(tenant or DEFAULT_TENANT)}/oauth2/v2.0/token", openid + OPENID_PATH
        )


def token_rules(app_id: str) -> TokenRules:
    """What the Bot Connector's tokens say: issued by the Bot Framework, for our App ID."""
    return TokenRules(issuers=(ISSUER,), audiences=(app_id,))


class BotToken:
    """The bot's access token for the Connector, cached until five minutes before expiry."""

    def __init__(
        self,
        url: str,
        app_id: str,
        password: str,
        http: Callable[[], aiohttp.ClientSession],
        clock: Callable[[], float] = time.monotonic,
    ):
        self.url, self.app_id, self.password = url, app_id, password
        self.http = http
        self.clock = clock
        self._token = ""
        self._until = 0.0
        self.fetched = 0  # how many tokens were fetched (tests read it)

    def drop(self) -> None:
        """Forget the token (the Connector called it stale)."""
        self._token, self._until = "", 0.0

    async def get(self) -> str:
        """A token valid for at least five more minutes; FatalAdapterError when the App ID
        or its password is refused, SendError when the login endpoint cannot be reached."""
        if self._token and self.clock() < self._until:
            return self._token
        form = {
            "grant_type": "client_credentials",
            "client_id": self.app_id,
            "client_secret": self.password,
            "scope": SCOPE,
        }
        try:
            async with self.http().post(self.url, data=form) as response:
                status = response.status
                try:
                    found = await response.json(content_type=None)
                except ValueError:
                    found = {}
        except aiohttp.ClientError as exc:
            raise SendError(f"teams login: {exc}") from None
        found = found if isinstance(found, dict) else {}
        if status in (400, 401) and found.get("error") in ("invalid_client", "unauthorized_client"):
            raise FatalAdapterError(
                f"teams login: the App ID or its password was refused ({found.get('error')}); "
                "check app_id and the password's variable"
            )
        token = found.get("access_token")
        if status != 200 or not isinstance(token, str) or not token:
            raise SendError(f"teams login: HTTP {status} {found.get('error', '')}".strip())
        lifetime = float(found.get("expires_in") or 3600)
        self._token = token
        self._until = self.clock() + max(0.0, lifetime - RENEW_BEFORE)
        self.fetched += 1
        return token


class Connector:
    """The Bot Connector REST API at each conversation's service URL."""

    def __init__(self, token: BotToken, http: Callable[[], aiohttp.ClientSession]):
        self.token = token
        self.http = http

    async def send(
        self, service_url: str, conversation: str, activity: Mapping[str, Any], reply_to: str = ""
    ) -> str:
        """Post an activity to the conversation (in reply to `reply_to`); returns its id."""
        path = f"/v3/conversations/{quote(conversation, safe='')}/activities"
        if reply_to:
            path += "/" + quote(reply_to, safe="")
        found = await self.call("POST", service_url, path, activity)
        return str(found.get("id", ""))

    async def update(
        self, service_url: str, conversation: str, activity_id: str, activity: Mapping[str, Any]
    ) -> None:
        """Replace a posted activity (UpdateActivity)."""
        path = f"/v3/conversations/{quote(conversation, safe='')}/activities/"
        await self.call("PUT", service_url, path + quote(activity_id, safe=""), activity)

    async def call(
        self, method: str, service_url: str, path: str, body: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """One Connector call with the bot's token; a token called stale is fetched again
        and the call made once more."""
        url = service_url.rstrip("/") + path
        for attempt in range(2):
            token = await self.token.get()
            headers = {"Authorization": f"Bearer {token}"}
            try:
                async with self.http().request(method, url, json=body, headers=headers) as response:
                    status = response.status
                    retry = response.headers.get("Retry-After", "")
                    text = await response.text()
            except aiohttp.ClientError as exc:
                raise SendError(f"teams: {exc}") from None
            if status == 401 and attempt == 0:
                self.token.drop()
                continue
            return _answer(status, text, retry)
        raise AssertionError("unreachable: the second attempt returns or raises")

    async def download(self, url: str, limit: int, *, authorized: bool) -> bytes:
        """A file a person sent: Teams' pre-authorized download URL, or an inline image on
        the service URL (with the bot's token)."""
        from .http_download import read_capped

        headers = {"Authorization": f"Bearer {await self.token.get()}"} if authorized else {}
        try:
            async with self.http().get(url, headers=headers) as response:
                if response.status >= 400:
                    raise SendError(f"teams file: HTTP {response.status}")
                return await read_capped(response, limit, "the file")
        except aiohttp.ClientError as exc:
            raise SendError(f"teams file: {exc}") from None


def _answer(status: int, text: str, retry: str) -> dict[str, Any]:
    try:
        found = json.loads(text) if text else {}
    except ValueError:
        found = {}
    found = found if isinstance(found, dict) else {}
    if status < 400:
        return found
    error = found.get("error")
    code = error.get("code", "") if isinstance(error, dict) else ""
    message = f"teams: HTTP {status} {code}".strip()
    if status == 429:
        raise RetryAfter(message, float(retry) if retry.isdigit() else 5.0)
    if status in (403, 404):  # the bot was removed, the conversation is gone
        raise Undeliverable(message)
    raise SendError(message)


class ServiceUrls:
    """Each conversation's service URL, as its last activity said, kept in a file."""

    def __init__(self, path: Path):
        self.path = path
        self._urls: dict[str, str] = {}
        if path.exists():
            try:
                found = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                found = {}
            urls = found.get("service_urls") if isinstance(found, dict) else None
            if isinstance(urls, dict):
                self._urls = {str(k): str(v) for k, v in urls.items()}

    def get(self, conversation: str) -> str:
        """The service URL of `conversation`, or "" when it never wrote to us."""
        return self._urls.get(conversation, "")

    def hosts(self) -> set[str]:
        """Every service URL we know (inline images are fetched from these only)."""
        return set(self._urls.values())

    def remember(self, conversation: str, service_url: str) -> None:
        """Keep the conversation's service URL (written at once, atomically, when new)."""
        if not service_url or self._urls.get(conversation) == service_url:
            return
        self._urls[conversation] = service_url
        text = json.dumps({"service_urls": self._urls}, indent=1, sort_keys=True)
        write_private_file(self.path, text)
