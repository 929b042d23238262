"""Discord's REST API over aiohttp: one request, its errors mapped for the delivery worker.

- Every request carries `Authorization: Bot <token>` (never logged) and a User-Agent of
  the form Discord asks bots for.
- Errors: 401 is fatal for the adapter (a revoked token); 429 is RetryAfter with the
  body's `retry_after`; 403 and 404 (Missing Access, Missing Permissions, Cannot send
  messages to this user, Unknown Channel, Unknown Message) are Undeliverable
  (`DiscordRefused`, with the code); other 4xx
  are Undeliverable too (the same request can never succeed), except where a caller asks
  for them (`DiscordBadRequest`); 5xx and connection failures are a SendError (retried).
- Rate limits are respected before they are hit: when a route's bucket says
  `X-RateLimit-Remaining: 0`, the next request on that route waits `Reset-After` first
  (bounded), so a burst of chunks does not collect 429s.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import dataclass
from typing import Any

import aiohttp

from .adapter import FatalAdapterError, RetryAfter, SendError, Undeliverable

DEFAULT_BASE_URL = "https://discord.com/api/v10"
USER_AGENT = "DiscordBot (https://github.com/habakkuk, 1.0)"
# waiting for a bucket longer than this is left to the 429 and the queue's backoff
MAX_BUCKET_WAIT = 5.0
_INTERACTION_TOKEN = re.compile(r"(/interactions/\d+/)[^/]+")


class DiscordBadRequest(Undeliverable):
    """A 4xx (other than 401, 403, 404, 429) a caller may turn into something else."""

    def __init__(self, message: str, status: int, code: int):
        super().__init__(message)
        self.status = status
        self.code = code


class DiscordRefused(Undeliverable):
    """A 403 or 404: undeliverable, with Discord's error code (10003 Unknown Channel is
    the answer to a send addressed to a user id, which a caller turns into a DM)."""

    def __init__(self, message: str, status: int, code: int):
        super().__init__(message)
        self.status = status
        self.code = code


@dataclass(frozen=True)
class RestError:
    """Discord's error body: `{"code": 50001, "message": "Missing Access"}`."""

    status: int
    code: int
    message: str
    retry_after: float

    @classmethod
    def parse(cls, status: int, text: str, headers: Any) -> RestError:
        try:
            body = json.loads(text) if text else {}
        except ValueError:
            body = {}
        if not isinstance(body, dict):
            body = {}
        retry = body.get("retry_after", headers.get("Retry-After", 1.0))
        try:
            retry_after = float(retry)
        except (TypeError, ValueError):
            retry_after = 1.0
        message = str(body.get("message") or text[:200] or f"HTTP {status}")
        code = body.get("code", 0)
        return cls(status, code if isinstance(code, int) else 0, message, retry_after)


def _route(method: str, path: str) -> str:
    """The rate-limit bucket key: the path with ids other than the major one generalised."""
    parts = path.strip("/").split("/")
    keep = 2 if parts and parts[0] in ("channels", "guilds", "webhooks") else 1
    return (
        method
        + " "
        + "/".join(p if i < keep or not p.isdigit() else "#" for i, p in enumerate(parts))
    )


class DiscordRest:
    """The REST half of one bot: `request(method, path, json=..., form=...)`."""

    def __init__(self, token: str, base_url: str | None = None):
        self._token = token
        self.base_url = (base_url or DEFAULT_BASE_URL).rstrip("/")
        self._http: aiohttp.ClientSession | None = None
        self._closed = False
        self._resets: dict[str, float] = {}  # route -> monotonic time its bucket refills

    def session(self) -> aiohttp.ClientSession:
        """The shared HTTP session (also used for the gateway's websocket)."""
        if self._closed:
            # A call in flight after close must not open a session nobody closes.
            raise SendError("discord: the adapter is closed")
        if self._http is None or self._http.closed:
            self._http = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=None, connect=15, sock_read=None),
                headers={"User-Agent": USER_AGENT},
            )
        return self._http

    async def close(self) -> None:
        """Close the HTTP session for good (idempotent)."""
        self._closed = True
        http, self._http = self._http, None
        if http is not None:
            await http.close()

    async def request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        form: aiohttp.FormData | None = None,
        auth: bool = True,
        timeout: float = 30.0,
    ) -> Any:
        """Call `METHOD base_url/path`; the decoded JSON answer (None for 204), or the mapped
        error."""
        route = _route(method, path)
        wait = self._resets.get(route, 0.0) - time.monotonic()
        if wait > 0:
            await asyncio.sleep(min(wait, MAX_BUCKET_WAIT))
        headers = {"Authorization": f"Bot {self._token}"} if auth else {}
        # an interaction's token is a credential for 15 minutes: never in an error
        what = method + " " + _INTERACTION_TOKEN.sub(r"\1…", path)
        try:
            async with self.session().request(
                method,
                f"{self.base_url}{path}",
                json=json_body if form is None else None,
                data=form,
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=timeout),
            ) as response:
                text = await response.text()
                status = response.status
                self._note_bucket(route, response.headers)
                if status < 400:
                    return json.loads(text) if text else None
                error = RestError.parse(status, text, response.headers)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise SendError(f"{what}: {type(exc).__name__}: {exc}".rstrip(": ")) from None
        except ValueError:
            raise SendError(f"{what}: HTTP {status}: not JSON") from None
        raise _mapped(what, error)

    def _note_bucket(self, route: str, headers: Any) -> None:
        if headers.get("X-RateLimit-Remaining") == "0":
            try:
                after = float(headers.get("X-RateLimit-Reset-After", "0"))
            except ValueError:
                after = 0.0
            self._resets[route] = time.monotonic() + after
        else:
            self._resets.pop(route, None)


def _mapped(what: str, error: RestError) -> Exception:
    # Discord's own message often starts with the status already ("401: Unauthorized")
    status = "" if error.message.startswith(str(error.status)) else f"{error.status} "
    message = f"{what}: {status}{error.message}"
    if error.code:
        message += f" (code {error.code})"
    if error.status == 401:
        return FatalAdapterError(f"{message} (check the bot token)")
    if error.status == 429:
        return RetryAfter(message, error.retry_after)
    if error.status in (403, 404):
        return DiscordRefused(message, error.status, error.code)
    if 400 <= error.status < 500:
        return DiscordBadRequest(message, error.status, error.code)
    return SendError(message)
