"""Reading an HTTP body up to a bound.

`StreamReader.read(n)` returns what is buffered, at most n bytes: one network chunk of a
larger body, not the body. Every capped read of a response goes through `read_upto`."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # light at start-up: the callers import aiohttp when they call
    import aiohttp


async def read_upto(stream: aiohttp.StreamReader, limit: int) -> bytes:
    """The body from `stream` until its end or `limit` bytes, whichever comes first (read
    `limit + 1` to tell a body over `limit` from one exactly that long)."""
    data = bytearray()
    while len(data) < limit:
        piece = await stream.read(limit - len(data))
        if not piece:
            break
        data.extend(piece)
    return bytes(data)
