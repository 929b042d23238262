"""The HTTP the providers share: one call per function, errors as GenerationError.

Keys travel only to the configured API's origin: a download from another host (fal's
file CDN, the redirect of Gemini's file download) goes without them, and redirects are
followed by hand so a key header is never carried to another host. A provider's error
text is passed on in one line; the key never is (it is only ever in a header).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit

from habakkuk.engine.http_read import read_upto

from .types import GenerationError, TransientError

MAX_JSON_BYTES = 64 * 1024 * 1024  # a JSON answer with base64 images in it
MAX_FILE_BYTES = 512 * 1024 * 1024  # a clip
MAX_REDIRECTS = 5
REQUEST_SECONDS = 300.0  # a synchronous image request can take minutes


class ApiProvider:
    """A provider over one HTTP API: its name, its model, and how its key is sent
    (`key_header`, `key_prefix`) to the API at the configured base URL."""

    name: str
    key_header: str  # "Authorization", "x-goog-api-key"
    key_prefix: str = ""  # "Bearer ", "Key "

    def __init__(self, model: str, base_url: str) -> None:
        self.model = model
        self.api = Api(self.name, base_url, self.key_header, self.key_prefix)


def origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) of a URL, for the same-origin checks."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.scheme, (parts.hostname or "").lower(), port


def same_origin(url: str, base: str) -> bool:
    return origin(url) == origin(base)


@dataclass(frozen=True)
class Api:
    """One provider's API: its base URL and how its key is sent."""

    provider: str
    base_url: str
    key_header: str  # "Authorization", "x-goog-api-key"
    key_prefix: str = ""  # "Bearer ", "Key "

    def headers(self, key: str, url: str) -> dict[str, str]:
        """The key header, for a URL of this API only."""
        if not same_origin(url, self.base_url):
            return {}
        return {self.key_header: f"{self.key_prefix}{key}"}

    async def request(
        self,
        method: str,
        url: str,
        *,
        key: str,
        json_body: Any = None,
        form: Any = None,
        poll: bool = False,
        timeout: float = REQUEST_SECONDS,
    ) -> dict[str, Any]:
        """A JSON request to the API; its JSON answer. `poll`: a failure that may pass
        (5xx, 429, a dropped connection) is a TransientError."""
        import aiohttp

        try:
            async with (
                aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as client,
                client.request(
                    method,
                    url,
                    json=json_body,
                    data=form,
                    headers=self.headers(key, url),
                    allow_redirects=False,
                ) as response,
            ):
                body = await read_upto(response.content, MAX_JSON_BYTES + 1)
                status = response.status
        except (aiohttp.ClientError, TimeoutError) as exc:
            problem = f"{self.provider}: cannot reach {_shown(url)}: {_why(exc)}"
            raise (TransientError if poll else GenerationError)(problem) from None
        if len(body) > MAX_JSON_BYTES:
            raise GenerationError(f"{self.provider}: the answer is over {MAX_JSON_BYTES:,} bytes")
        if status >= 400:
            problem = f"{self.provider}: HTTP {status}: {_error_text(body)}"
            transient = poll and (status >= 500 or status == 429)
            raise (TransientError if transient else GenerationError)(problem)
        try:
            value = json.loads(body or b"{}")
        except ValueError:
            raise GenerationError(f"{self.provider}: the answer is not JSON") from None
        if not isinstance(value, dict):
            raise GenerationError(f"{self.provider}: the answer is not a JSON object")
        return value

    async def download(self, url: str, *, key: str, timeout: float = REQUEST_SECONDS) -> bytes:
        """A file's bytes (the key only to the API's own origin, redirects by hand); a
        failure that may pass is a TransientError, so the file can be fetched again."""
        import aiohttp

        try:
            async with aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=timeout)
            ) as client:
                for _ in range(MAX_REDIRECTS + 1):
                    if urlsplit(url).scheme not in ("http", "https"):
                        raise GenerationError(f"{self.provider}: not an http(s) URL: {_shown(url)}")
                    async with client.get(
                        url, headers=self.headers(key, url), allow_redirects=False
                    ) as response:
                        if response.status in (301, 302, 303, 307, 308):
                            url = urljoin(url, response.headers.get("Location", ""))
                            continue
                        body = await read_upto(response.content, MAX_FILE_BYTES + 1)
                        status = response.status
                    break
                else:
                    raise GenerationError(f"{self.provider}: too many redirects for the file")
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise TransientError(
                f"{self.provider}: cannot download {_shown(url)}: {_why(exc)}"
            ) from None
        if status >= 400:
            problem = f"{self.provider}: HTTP {status} for the file: {_error_text(body)}"
            raise (TransientError if status >= 500 or status == 429 else GenerationError)(problem)
        if len(body) > MAX_FILE_BYTES:
            raise GenerationError(f"{self.provider}: the file is over {MAX_FILE_BYTES:,} bytes")
        return body


def _shown(url: str) -> str:
    """A URL as messages show it: no query (a signed link's token stays out of them)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}{parts.path}"[:200]


def _why(exc: BaseException) -> str:
    return str(exc)[:200] or type(exc).__name__


def _error_text(body: bytes) -> str:
    """The provider's error message ({"error": {"message"}}, {"detail"}, ...) in one line."""
    text = body[:4000].decode("utf-8", errors="replace")
    try:
        value = json.loads(text)
    except ValueError:
        return " ".join(text.split())[:300] or "no details"
    found: Any = value
    if isinstance(value, dict):
        found = value.get("error", value.get("detail", value.get("message", value)))
        if isinstance(found, dict):
            found = found.get("message", found)
    if isinstance(found, list) and found and isinstance(found[0], dict):
        found = found[0].get("msg", found[0])
    return " ".join(str(found).split())[:300]
