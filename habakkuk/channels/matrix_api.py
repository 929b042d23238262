"""The Matrix client-server API over aiohttp: one request shape and its error mapping.

No matrix-nio: its weight is the end-to-end encryption (olm, a key store) that this
adapter does not do (it tells an encrypted room once that it cannot read it), and what
remains is a dozen JSON endpoints. Every call carries the access token in the
Authorization header, never in the URL, so it cannot reach a log line.

Errors map to what the delivery worker and the supervisor need:
429 / M_LIMIT_EXCEEDED is RetryAfter (retry_after_ms), 401 / M_UNKNOWN_TOKEN /
M_MISSING_TOKEN is fatal (the token is wrong or revoked), 403 / M_FORBIDDEN is
Undeliverable (not in the room, not allowed to post), anything else is a SendError
retried with backoff.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import aiohttp

from .adapter import FatalAdapterError, RetryAfter, SendError, Undeliverable
from .http_download import read_capped

CLIENT = "/_matrix/client/v3"
FATAL_CODES = frozenset({"M_UNKNOWN_TOKEN", "M_MISSING_TOKEN", "M_USER_DEACTIVATED"})
# A request the server refuses for what it is (too big, malformed): resending cannot help.
FINAL_CODES = frozenset({"M_TOO_LARGE", "M_BAD_JSON", "M_NOT_JSON", "M_INVALID_PARAM"})


class MatrixRefused(Undeliverable):
    """The server refused this request for what it is (M_FORBIDDEN, M_NOT_FOUND, too
    large); `code` is the Matrix errcode."""

    def __init__(self, message: str, code: str, status: int):
        super().__init__(message)
        self.code = code
        self.status = status


@dataclass(frozen=True)
class MatrixError:
    """The error body of a Matrix answer: {"errcode", "error", "retry_after_ms"}."""

    code: str
    message: str
    retry_after_ms: int | None

    @classmethod
    def parse(cls, body: object, status: int) -> MatrixError:
        data = body if isinstance(body, dict) else {}
        retry = data.get("retry_after_ms")
        return cls(
            str(data.get("errcode") or f"HTTP_{status}"),
            str(data.get("error") or ""),
            int(retry) if isinstance(retry, int | float) else None,
        )


def path(*parts: str) -> str:
    """URL path segments, each percent-encoded (room ids hold ! and :, event ids $)."""
    return "/".join(quote(part, safe="") for part in parts)


def mapped_error(what: str, status: int, error: MatrixError, retry_header: str | None) -> Exception:
    """The adapter error for a refused request (`what` names the request, not the token)."""
    message = f"{what}: {status} {error.code} {error.message}".strip()
    if status == 429 or error.code == "M_LIMIT_EXCEEDED":
        seconds = (error.retry_after_ms or 0) / 1000
        if not seconds and retry_header and retry_header.isdigit():
            seconds = float(retry_header)
        return RetryAfter(message, seconds or 5.0)
    if status == 401 or error.code in FATAL_CODES:
        return FatalAdapterError(f"{message} (check the access token)")
    if status in (403, 404) or error.code in FINAL_CODES or status == 413:
        return MatrixRefused(message, error.code, status)
    return SendError(message)


class MatrixClient:
    """The homeserver's API for one access token."""

    def __init__(self, base_url: str, token: str):
        self.base_url = base_url.rstrip("/")
        self.token = token
        self._http: aiohttp.ClientSession | None = None
        self._closed = False

    def _session(self) -> aiohttp.ClientSession:
        if self._closed:
            # A call in flight after close (a sync, a gateway task) must not open a new
            # session that nobody closes: the adapter is done.
            raise SendError("matrix: the adapter is closed")
        if self._http is None or self._http.closed:
            self._http = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=None, connect=15, sock_read=None)
            )
        return self._http

    async def close(self) -> None:
        """Close the HTTP session for good (idempotent; later calls raise SendError)."""
        self._closed = True
        http, self._http = self._http, None
        if http is not None:
            await http.close()

    def _headers(self, content_type: str = "") -> dict[str, str]:
        headers = {"Authorization": f"Bearer {self.token}"}
        if content_type:
            headers["Content-Type"] = content_type
        return headers

    async def request(
        self,
        method: str,
        route: str,
        body: dict[str, Any] | None = None,
        *,
        query: dict[str, str] | None = None,
        timeout: float = 30.0,
        what: str = "",
    ) -> dict[str, Any]:
        """A JSON request to `CLIENT + route` (or an absolute `/_matrix/...` route); the
        answer's JSON object, or the mapped error."""
        url = self.base_url + (route if route.startswith("/_matrix/") else CLIENT + route)
        what = what or f"{method} {route.split('?')[0]}"
        data = None if body is None else json.dumps(body, ensure_ascii=False).encode()
        try:
            async with self._session().request(
                method,
                url,
                data=data,
                params=query,
                headers=self._headers("application/json" if data is not None else ""),
                timeout=aiohttp.ClientTimeout(total=timeout),
            ) as response:
                text = await response.text()
                status = response.status
                retry_header = response.headers.get("Retry-After")
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise SendError(f"{what}: {type(exc).__name__}: {exc}".rstrip(": ")) from None
        try:
            answer = json.loads(text) if text else {}
        except ValueError:
            raise SendError(f"{what}: HTTP {status}: not JSON") from None
        if status == 200 and isinstance(answer, dict):
            return answer
        raise mapped_error(what, status, MatrixError.parse(answer, status), retry_header)

    async def upload(self, data: bytes, name: str, media_type: str) -> str:
        """Upload a file to the media repository; its mxc:// URI."""
        url = f"{self.base_url}/_matrix/media/v3/upload"
        try:
            async with self._session().post(
                url,
                data=data,
                params={"filename": name},
                headers=self._headers(media_type or "application/octet-stream"),
                timeout=aiohttp.ClientTimeout(total=300),
            ) as response:
                text = await response.text()
                status = response.status
                retry_header = response.headers.get("Retry-After")
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise SendError(f"upload {name}: {type(exc).__name__}: {exc}".rstrip(": ")) from None
        try:
            answer = json.loads(text) if text else {}
        except ValueError:
            raise SendError(f"upload {name}: HTTP {status}: not JSON") from None
        if status == 200 and isinstance(answer, dict) and answer.get("content_uri"):
            return str(answer["content_uri"])
        raise mapped_error(
            f"upload {name}", status, MatrixError.parse(answer, status), retry_header
        )

    async def download(self, mxc: str, limit: int) -> bytes:
        """The bytes of an mxc:// URI through authenticated media (the token in the header),
        at most `limit` bytes (Undeliverable past it). A homeserver older than Matrix 1.11
        does not know that endpoint (404 M_UNRECOGNIZED): its unauthenticated one is used."""
        server, _, media_id = mxc.removeprefix("mxc://").partition("/")
        if not mxc.startswith("mxc://") or not server or not media_id:
            raise Undeliverable(f"{mxc!r} is not an mxc:// URI")
        where = path(server, media_id)
        try:
            return await self._download(f"/_matrix/client/v1/media/download/{where}", mxc, limit)
        except MatrixRefused as exc:
            if exc.code != "M_UNRECOGNIZED":
                raise
        return await self._download(f"/_matrix/media/v3/download/{where}", mxc, limit)

    async def _download(self, route: str, mxc: str, limit: int) -> bytes:
        what = f"download {mxc}"
        try:
            async with self._session().get(
                self.base_url + route,
                headers=self._headers(),
                timeout=aiohttp.ClientTimeout(total=300),
            ) as response:
                if response.status != 200:
                    text = await response.text()
                    try:
                        answer: object = json.loads(text) if text else {}
                    except ValueError:
                        answer = {}
                    error = MatrixError.parse(answer, response.status)
                    raise mapped_error(
                        what, response.status, error, response.headers.get("Retry-After")
                    )
                return await read_capped(response, limit, mxc)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise SendError(f"{what}: {type(exc).__name__}: {exc}".rstrip(": ")) from None
