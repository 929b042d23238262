"""Meta's Graph API, shared by the WhatsApp Business Cloud API, Messenger and Instagram.

One client (`GraphClient`) with the API version pinned here (`GRAPH_VERSION`), the access
token as a bearer header, and every error answer turned into the typed outcome the
delivery worker acts on (`graph_error`):

- fatal (`GraphFatal`, a FatalAdapterError): 190 (the token is invalid or expired),
  10 and 200 (a permission the token lacks): a restart with the same token cannot help;
- retry after (`RetryAfter`): the rate limits 4 (app), 17 (user), 32 (page), 613 (call
  rate), 80007 (WhatsApp Business Account), 130429 (Cloud API throughput), waiting what the
  answer says (Retry-After, else X-Business-Use-Case-Usage's estimated time), else a
  default per code;
- undeliverable (`Undeliverable`): 131026 (not a WhatsApp user, or an old app), 551 (the
  person is not available); the closed customer-service window (131047 on WhatsApp,
  subcode 2018278 of 10 on Messenger and Instagram) is `WindowClosed`, so the adapter can
  close its record of the window and answer with a template instead.

A 409 is `Conflict` (whatsappagent: another poller took the key). Anything else is a
`SendError` (the delivery worker retries with backoff). A 2xx answer
with no body (204) is an empty dict.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import aiohttp

from .adapter import FatalAdapterError, RetryAfter, SendError, Undeliverable

GRAPH_VERSION = "v21.0"  # the one place the Graph API version is chosen
DEFAULT_GRAPH_URL = "https://graph.facebook.com"

FATAL_CODES = frozenset({190, 10, 200})
# The rate limits, with how long to wait when the answer does not say.
RATE_LIMITS: Mapping[int, float] = {
    4: 60.0,
    17: 60.0,
    32: 60.0,
    613: 60.0,
    80007: 60.0,
    130429: 5.0,
}
UNDELIVERABLE_CODES = frozenset({131026, 551})
WINDOW_CLOSED = 131047  # WhatsApp: more than 24 hours since the customer last wrote
OUTSIDE_WINDOW_SUBCODE = 2018278  # Messenger/Instagram: code 10, sent outside the window


class GraphFatal(FatalAdapterError):
    """The token is refused or lacks a permission: no retry helps until it is replaced."""


class Conflict(SendError):
    """HTTP 409: another client holds what we asked for (a second poller of an agent)."""


class WindowClosed(Undeliverable):
    """The person last wrote more than 24 hours ago: only a template may reach them now."""


def graph_error(status: int, body: object, headers: Mapping[str, str]) -> Exception:
    """The typed outcome of a Graph error answer (`body` its parsed JSON, else anything)."""
    error = body.get("error") if isinstance(body, dict) else None
    error = error if isinstance(error, dict) else {}
    code = _int(error.get("code"))
    subcode = _int(error.get("error_subcode"))
    text = str(error.get("message") or f"HTTP {status}")
    message = f"graph: {text} (HTTP {status}, code {code}" + (
        f", subcode {subcode})" if subcode else ")"
    )
    if code == WINDOW_CLOSED or (code == 10 and subcode == OUTSIDE_WINDOW_SUBCODE):
        return WindowClosed(message)
    if code in FATAL_CODES or (not code and status == 401):
        return GraphFatal(message)
    if code in RATE_LIMITS or status == 429:
        return RetryAfter(message, retry_seconds(headers, RATE_LIMITS.get(code, 60.0)))
    if code in UNDELIVERABLE_CODES:
        return Undeliverable(message)
    if status == 409:
        return Conflict(message)
    return SendError(message)


def retry_seconds(headers: Mapping[str, str], default: float) -> float:
    """How long the answer asks us to wait: Retry-After (seconds), else the longest
    `estimated_time_to_regain_access` (minutes) in X-Business-Use-Case-Usage, else
    `default`."""
    given = headers.get("Retry-After", "").strip()
    if given.isdigit():
        return float(given)
    try:
        usage = json.loads(headers.get("X-Business-Use-Case-Usage", "") or "{}")
    except ValueError:
        usage = {}
    minutes = [
        _int(item.get("estimated_time_to_regain_access"))
        for items in (usage.values() if isinstance(usage, dict) else [])
        if isinstance(items, list)
        for item in items
        if isinstance(item, dict)
    ]
    return float(max(minutes) * 60) if minutes and max(minutes) > 0 else default


def _int(value: object) -> int:
    if isinstance(value, int):
        return value
    return int(value) if isinstance(value, str) and value.isdigit() else 0


class GraphClient:
    """Calls to `<base>/<GRAPH_VERSION>/...` with one access token."""

    def __init__(self, token: str, base_url: str = "", timeout: float = 60.0):
        self.token = token
        self.root = (base_url or DEFAULT_GRAPH_URL).rstrip("/")
        self.base = f"{self.root}/{GRAPH_VERSION}"
        self._timeout = timeout
        self._http: aiohttp.ClientSession | None = None

    @property
    def http(self) -> aiohttp.ClientSession:
        """The session (made on first use, in the running loop)."""
        if self._http is None or self._http.closed:
            self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self._timeout))
        return self._http

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    async def close(self) -> None:
        """Close the session."""
        if self._http is not None:
            await self._http.close()
            self._http = None

    async def get(self, path: str, params: Mapping[str, str] | None = None) -> dict[str, Any]:
        """GET `path` (below the version) with query `params`."""
        return await self.call("GET", path, params=params)

    async def post(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """POST `body` as JSON to `path`."""
        return await self.call("POST", path, json_body=body)

    async def call(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        json_body: Mapping[str, Any] | None = None,
        form: aiohttp.FormData | None = None,
    ) -> dict[str, Any]:
        """One call; its JSON answer, or the typed error (graph_error) raised."""
        url = path if path.startswith(("http://", "https://")) else f"{self.base}/{path}"
        try:
            async with self.http.request(
                method,
                url,
                params=dict(params) if params else None,
                json=dict(json_body) if json_body is not None else None,
                data=form,
                headers=self.headers,
            ) as response:
                raw = await response.read()
                status = response.status
                headers = dict(response.headers)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise SendError(f"graph: {type(exc).__name__}: {exc}") from None
        try:
            found: object = json.loads(raw) if raw.strip() else {}
        except ValueError:
            found = {}
        if status >= 400:
            raise graph_error(status, found, headers)
        return found if isinstance(found, dict) else {"data": found}

    async def download(self, url: str, limit: int, *, token: bool = True) -> bytes:
        """A media file at `url` (with the token unless `token` is False: a CDN's signed
        URL needs none), refused past `limit` bytes."""
        from .http_download import read_capped

        try:
            async with self.http.get(url, headers=self.headers if token else None) as response:
                if response.status >= 400:
                    raw = await response.read()
                    try:
                        found: object = json.loads(raw)
                    except ValueError:
                        found = {}
                    raise graph_error(response.status, found, dict(response.headers))
                return await read_capped(response, limit, "the media file")
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise SendError(f"graph media: {type(exc).__name__}: {exc}") from None
