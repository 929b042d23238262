"""Reading a platform's file download with the adapter's size cap."""

from __future__ import annotations

import aiohttp

from .adapter import Undeliverable


async def read_capped(response: aiohttp.ClientResponse, limit: int, name: str) -> bytes:
    """The body of a download, refused (Undeliverable) as soon as it passes `limit` bytes,
    so a file over the platform's cap is never held whole in memory."""
    data = bytearray()
    async for piece in response.content.iter_chunked(65536):
        data.extend(piece)
        if len(data) > limit:
            raise Undeliverable(f"{name} is over {limit // (1024 * 1024)} MB")
    return bytes(data)
