"""The one HTTP path of the providers: a request, its status turned into a clear error.

Every failure is a SearchError whose one line names the provider and the cause: a key
the service refused (401, 403: which variable held it), a rate limit (429), another
status (with the start of the body), a timeout, an unreachable address, an answer that
is not JSON or too big. The key is sent in a header and never appears in a message.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .types import SearchError

if TYPE_CHECKING:
    import aiohttp

MAX_BYTES = 5_000_000  # a results page is a few KB; more is not a search answer
DETAIL_CHARS = 200


@dataclass(frozen=True)
class Reply:
    """A successful response: its status and body text."""

    status: int
    text: str


async def request(
    http: aiohttp.ClientSession,
    provider: str,
    method: str,
    url: str,
    *,
    key_env: str | None = None,
    headers: dict[str, str] | None = None,
    params: dict[str, str] | None = None,
    json_body: dict[str, Any] | None = None,
    form: dict[str, str] | None = None,
) -> Reply:
    """Send one request; the reply of a 2xx status, else SearchError saying why."""
    import aiohttp

    try:
        async with http.request(
            method, url, headers=headers, params=params, json=json_body, data=form
        ) as response:
            body = await _read(response, provider)
            status = response.status
            retry_after = response.headers.get("Retry-After", "")
    except TimeoutError:
        total = http.timeout.total
        within = f" within {total:g}s" if total else " in time"
        raise SearchError(f"{provider} did not answer{within}") from None
    except aiohttp.ClientError as exc:
        why = str(exc) or type(exc).__name__
        raise SearchError(f"{provider}: cannot reach {_origin(url)}: {why}") from None
    text = body.decode("utf-8", errors="replace")
    if 200 <= status < 300:
        return Reply(status, text)
    raise SearchError(_status_message(provider, status, text, key_env, retry_after))


async def request_json(
    http: aiohttp.ClientSession, provider: str, method: str, url: str, **options: Any
) -> Any:
    """`request`, its body parsed as JSON; SearchError when it is not JSON."""
    reply = await request(http, provider, method, url, **options)
    try:
        return json.loads(reply.text)
    except ValueError:
        raise SearchError(
            f"{provider}: the answer was not JSON: {_detail(reply.text) or 'an empty body'}"
        ) from None


class KeyedProvider:
    """A search API that takes a key in a header: its name, the variable the key comes
    from, its address (the configured base URL, else the service's own) and the request
    path every such provider shares."""

    name: str
    default_base_url: str

    def __init__(self, *, key_env: str, base_url: str | None = None) -> None:
        self.key_env = key_env
        self.base_url = (base_url or self.default_base_url).rstrip("/")

    async def request_json(
        self, http: aiohttp.ClientSession, method: str, path: str, **options: Any
    ) -> Any:
        """`request_json` to `path` under the base URL; a refusal names the key's variable."""
        return await request_json(
            http, self.name, method, f"{self.base_url}{path}", key_env=self.key_env, **options
        )


async def _read(response: aiohttp.ClientResponse, provider: str) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(65536):
        size += len(chunk)
        if size > MAX_BYTES:
            raise SearchError(f"{provider}: the answer is over {MAX_BYTES:,} bytes; not read")
        chunks.append(chunk)
    return b"".join(chunks)


def _status_message(
    provider: str, status: int, text: str, key_env: str | None, retry_after: str
) -> str:
    detail = _detail(text)
    tail = f": {detail}" if detail else ""
    if status in (401, 403):
        if key_env:
            return f"{provider}: the key in {key_env} was refused (HTTP {status}){tail}"
        return f"{provider}: the search was refused (HTTP {status}){tail}"
    if status == 429:
        wait = f"; it asks to wait {retry_after}s" if retry_after.strip().isdigit() else ""
        return f"{provider}: too many searches, rate limited (HTTP 429){wait}; try again later"
    return f"{provider}: HTTP {status}{tail}"


def _detail(text: str) -> str:
    """The start of a body, on one line (an error's JSON or a page's first words)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= DETAIL_CHARS else flat[:DETAIL_CHARS] + "…"


def _origin(url: str) -> str:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.netloc else url
