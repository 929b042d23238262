"""Twilio's wire: the X-Twilio-Signature check and the Messages REST API, with aiohttp.

The signature (Twilio's "Webhooks security"): the full URL Twilio requested, then for a
form POST each parameter name followed by its value, names in sorted order (a name given
twice contributes each value, values sorted), HMAC-SHA1 with the account's auth token,
base64. Replies: POST /2010-04-01/Accounts/<sid>/Messages.json with basic auth (account
SID, auth token); media go as MediaUrl parameters Twilio fetches.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

import aiohttp

from .adapter import FatalAdapterError, RetryAfter, SendError, Undeliverable

DEFAULT_BASE_URL = "https://api.twilio.com"
# Twilio error codes after which that number can never get a message from us.
_UNREACHABLE = frozenset({21211, 21408, 21610, 21612, 21614, 30003, 30005, 30006})


def form_params(body: bytes) -> list[tuple[str, str]]:
    """The pairs of an application/x-www-form-urlencoded body, in order; ValueError when
    the body is not one (bad encoding, a field without `=`)."""
    text = body.decode("utf-8")
    return parse_qsl(text, keep_blank_values=True, strict_parsing=bool(text))


def signature(token: str, url: str, params: Sequence[tuple[str, str]]) -> str:
    """X-Twilio-Signature for a request to `url` with form `params`."""
    payload = url + "".join(name + value for name, value in sorted(params))
    digest = hmac.new(token.encode(), payload.encode("utf-8"), hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


def signed(token: str, url: str, params: Sequence[tuple[str, str]], given: str) -> bool:
    """True when `given` is the signature of the request (compared in constant time)."""
    expected = signature(token, url, params)
    return hmac.compare_digest(given.encode("utf-8", "surrogateescape"), expected.encode())


@dataclass(frozen=True)
class TwilioAccount:
    """Who we are on Twilio (the setup check's answer)."""

    sid: str
    name: str
    status: str


class MessagesApi:
    """The Messages resource of one Twilio account."""

    def __init__(self, base_url: str, sid: str, token: str, http: aiohttp.ClientSession):
        self.base = base_url.rstrip("/") + f"/2010-04-01/Accounts/{sid}"
        credentials = base64.b64encode(f"{sid}:{token}".encode()).decode("ascii")
        self.headers = {"Authorization": f"Basic {credentials}"}
        self.http = http

    async def account(self) -> TwilioAccount:
        """GET the account itself; FatalAdapterError when the SID or token is refused."""
        found = await self._call("GET", ".json")
        return TwilioAccount(
            str(found.get("sid", "")),
            str(found.get("friendly_name", "")),
            str(found.get("status", "")),
        )

    async def send(self, sender: str, to: str, body: str, media: Sequence[str] = ()) -> str:
        """POST one message; returns its SID."""
        form: list[tuple[str, str]] = [("From", sender), ("To", to)]
        if body:
            form.append(("Body", body))
        form += [("MediaUrl", url) for url in media]
        try:
            found = await self._call("POST", "/Messages.json", form)
        except FatalAdapterError as exc:  # a token refused mid-run: the run's check says so
            raise SendError(str(exc)) from None
        return str(found.get("sid", ""))

    async def download(self, url: str, limit: int) -> bytes:
        """An inbound media file (Twilio's URL, basic auth), refused past `limit` bytes."""
        from .http_download import read_capped

        try:
            async with self.http.get(url, headers=self.headers) as response:
                if response.status >= 400:
                    raise SendError(f"twilio media: HTTP {response.status}")
                return await read_capped(response, limit, "the media file")
        except aiohttp.ClientError as exc:
            raise SendError(f"twilio media: {exc}") from None

    async def _call(
        self, method: str, path: str, form: Sequence[tuple[str, str]] | None = None
    ) -> dict[str, Any]:
        try:
            async with self.http.request(
                method, self.base + path, data=list(form) if form else None, headers=self.headers
            ) as response:
                try:
                    found = await response.json(content_type=None)
                except ValueError:
                    found = {}
                status = response.status
                retry = response.headers.get("Retry-After", "")
        except aiohttp.ClientError as exc:
            raise SendError(f"twilio: {exc}") from None
        found = found if isinstance(found, dict) else {}
        if status < 400:
            return found
        message = f"twilio: HTTP {status} {found.get('code', '')} {found.get('message', '')}"
        if status == 401:
            raise FatalAdapterError(message.strip() + " (check account_sid and the auth token)")
        if status == 429:
            raise RetryAfter(message, float(retry) if retry.isdigit() else 5.0)
        if found.get("code") in _UNREACHABLE:
            raise Undeliverable(message)
        raise SendError(message)
