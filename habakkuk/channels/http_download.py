"""Reading a platform's file download with the adapter's size cap."""

from __future__ import annotations

import aiohttp

from .adapter import SendError, Undeliverable


async def read_capped(response: aiohttp.ClientResponse, limit: int, name: str) -> bytes:
    """The body of a download, refused (Undeliverable) as soon as it passes `limit` bytes,
    so a file over the platform's cap is never held whole in memory."""
    data = bytearray()
    async for piece in response.content.iter_chunked(65536):
        data.extend(piece)
        if len(data) > limit:
            raise Undeliverable(f"{name} is over {limit // (1024 * 1024)} MB")
    return bytes(data)


async def download_capped(
    session: aiohttp.ClientSession, url: str, limit: int, name: str, *, timeout: float = 300
) -> bytes:
    """GET a platform's file whole, refused past `limit` bytes (Undeliverable); a status
    other than 200 or a failed connection is a SendError (retried)."""
    try:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=timeout)) as response:
            if response.status != 200:
                raise SendError(f"download {name}: HTTP {response.status}")
            return await read_capped(response, limit, name)
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise SendError(f"download: {type(exc).__name__}: {exc}".rstrip(": ")) from None
