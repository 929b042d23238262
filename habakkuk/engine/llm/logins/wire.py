"""The HTTP of the sign-in and token endpoints: one request, its JSON answer, or an error.

A failure to reach the service (refused, reset, a timeout) is a `LoginUnreachable`,
which the token function reports as a network error (the router retries); a service
that answers is read whatever its status, and the caller decides what a status means.
Tokens travel in headers and bodies only and never appear in an error.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

from habakkuk.engine.errors import HabakkukError
from habakkuk.engine.http_read import read_upto

TIMEOUT = 30.0
MAX_BYTES = 1_000_000  # a token answer is a few KB


class LoginUnreachable(HabakkukError):
    """The sign-in or token endpoint could not be reached."""


class LoginRefused(HabakkukError):
    """The service refused the login (a refresh token it no longer takes, access
    denied, no subscription): only a new `habakkuk auth login` helps."""


@dataclass(frozen=True)
class Reply:
    """One answer: its status and its JSON object ({} when the body is not one)."""

    status: int
    data: dict[str, Any]

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def field(self, name: str) -> str:
        """A string field of the answer ("" when absent)."""
        value = self.data.get(name)
        return value if isinstance(value, str) else ""


async def call(
    method: str,
    url: str,
    *,
    json_body: dict[str, Any] | None = None,
    form: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
) -> Reply:
    """Send one request and read its answer; LoginUnreachable when there is none."""
    import aiohttp

    sent = {"Accept": "application/json", **(headers or {})}
    timeout = aiohttp.ClientTimeout(total=TIMEOUT)
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout) as http,
            http.request(method, url, json=json_body, data=form, headers=sent) as response,
        ):
            raw = await read_upto(response.content, MAX_BYTES)
            status = response.status
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        reason = str(exc) or type(exc).__name__
        raise LoginUnreachable.said("auth.unreachable", url=url, reason=reason) from None
    try:
        data = json.loads(raw.decode("utf-8", errors="replace")) if raw else {}
    except ValueError:
        data = {}
    return Reply(status, data if isinstance(data, dict) else {})


def jwt_claims(token: str) -> dict[str, Any]:
    """The claims of a JWT, unverified ({} when it is not one): the token came straight
    from the service over TLS, and only names the account."""
    parts = token.split(".")
    if len(parts) != 3:
        return {}
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = json.loads(base64.urlsafe_b64decode(payload))
    except ValueError:
        return {}
    return claims if isinstance(claims, dict) else {}
