"""HTTP for installs: downloads with a size cap, timeouts and checked redirects.

Redirects are followed by hand (at most five) and only to http or https URLs; an
Authorization header goes only to the host it was meant for, never to the host a
redirect leads to (GitHub's tarball endpoint redirects to codeload, whose URL carries
its own short-lived token). A body larger than the cap is refused as it streams in,
whatever Content-Length said.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import urljoin, urlsplit

import aiohttp

from habakkuk.engine.errors import HabakkukError

MB = 1 << 20
DOWNLOAD_CAP = 25 * MB  # one archive or file
JSON_CAP = 5 * MB  # an API answer or a registry index
MAX_REDIRECTS = 5
USER_AGENT = "habakkuk-skills"
TIMEOUT = aiohttp.ClientTimeout(total=300, sock_connect=15, sock_read=60)


class DownloadError(HabakkukError):
    """A request failed: the message names the URL and what happened."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Downloaded:
    """A body saved to a file: its path, size, SHA-256 (hex) and the URL it came from."""

    path: Path
    bytes: int
    sha256: str
    url: str


def check_url(url: str) -> None:
    """DownloadError unless `url` is an http(s) URL with a host."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise DownloadError(f"{url}: only http and https URLs are fetched")


class Http:
    """One aiohttp session for an install (use `async with Http() as http`)."""

    def __init__(self) -> None:
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Http:
        self._session = aiohttp.ClientSession(
            timeout=TIMEOUT, headers={"User-Agent": USER_AGENT}, trust_env=False
        )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise RuntimeError("Http used outside `async with`")
        return self._session

    async def _stream(
        self, url: str, headers: dict[str, str], cap: int, sink: Any
    ) -> tuple[str, int, str]:
        """GET `url` (redirects checked), feeding chunks to `sink`; (final URL, size, sha256)."""
        current = url
        for _ in range(MAX_REDIRECTS + 1):
            check_url(current)
            try:
                async with self.session.get(current, headers=headers, allow_redirects=False) as r:
                    if r.status in (301, 302, 303, 307, 308):
                        target = r.headers.get("Location", "")
                        if not target:
                            raise DownloadError(f"{current}: a redirect without a Location")
                        following = urljoin(current, target)
                        if urlsplit(following).netloc != urlsplit(current).netloc:
                            headers = {
                                k: v for k, v in headers.items() if k.lower() != "authorization"
                            }
                        current = following
                        continue
                    if r.status != 200:
                        raise DownloadError(f"{current}: HTTP {r.status} {r.reason}", r.status)
                    if r.content_length is not None and r.content_length > cap:
                        raise DownloadError(
                            f"{current}: {r.content_length} bytes, over the limit of {cap}"
                        )
                    digest = hashlib.sha256()
                    size = 0
                    async for chunk in r.content.iter_chunked(1 << 16):
                        size += len(chunk)
                        if size > cap:
                            raise DownloadError(f"{current}: more than {cap} bytes; stopped")
                        digest.update(chunk)
                        sink(chunk)
                    return current, size, digest.hexdigest()
            except aiohttp.ClientError as exc:
                raise DownloadError(f"{current}: {exc.__class__.__name__}: {exc}") from None
            except TimeoutError:
                raise DownloadError(f"{current}: timed out") from None
        raise DownloadError(f"{url}: more than {MAX_REDIRECTS} redirects")

    async def download(
        self,
        url: str,
        dest: Path,
        *,
        headers: dict[str, str] | None = None,
        cap: int = DOWNLOAD_CAP,
    ) -> Downloaded:
        """Save the body of `url` to `dest` (0600), refusing more than `cap` bytes."""
        dest.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with dest.open("xb") as out:
            dest.chmod(0o600)
            final, size, sha = await self._stream(url, dict(headers or {}), cap, out.write)
        return Downloaded(dest, size, sha, final)

    async def get_json(self, url: str, *, headers: dict[str, str] | None = None) -> Any:
        """The JSON body of `url` (at most JSON_CAP bytes)."""
        body = bytearray()
        await self._stream(url, dict(headers or {}), JSON_CAP, body.extend)
        try:
            return json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise DownloadError(f"{url}: the answer is not JSON") from None
