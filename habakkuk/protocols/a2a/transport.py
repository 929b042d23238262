"""An httpx transport that sends through an aiohttp session: the a2a-sdk's client (httpx)
on the SSRF-guarded session of habakkuk.tools.netguard.

The guard lives in the aiohttp session (a resolver that refuses private addresses, and a
check of every request URL), so every request the SDK makes, redirects included (httpx
follows them hop by hop through this transport), is checked. aiohttp has already decoded
the body, so the encoding headers are not passed on.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import httpx

if TYPE_CHECKING:
    import aiohttp

_DROPPED = frozenset({"content-encoding", "content-length", "transfer-encoding"})


class _Body(httpx.AsyncByteStream):
    """The aiohttp response's body as httpx reads it."""

    def __init__(self, response: aiohttp.ClientResponse):
        self.response = response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.response.content.iter_any():
            yield chunk

    async def aclose(self) -> None:
        self.response.release()


class SessionTransport(httpx.AsyncBaseTransport):
    """Send httpx requests with an aiohttp session (which it closes with itself)."""

    def __init__(self, session: aiohttp.ClientSession):
        self.session = session

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """One request, its response streamed back."""
        import aiohttp

        body = await request.aread()
        headers = {k: v for k, v in request.headers.items() if k.lower() != "host"}
        try:
            response = await self.session.request(
                request.method,
                str(request.url),
                headers=headers,
                data=body or None,
                allow_redirects=False,
            )
        except TimeoutError as exc:
            raise httpx.ReadTimeout(str(exc) or "timed out", request=request) from exc
        except (aiohttp.ClientError, OSError) as exc:  # SSRFError is an OSError
            raise httpx.ConnectError(str(exc), request=request) from exc
        kept = [(k, v) for k, v in response.headers.items() if k.lower() not in _DROPPED]
        return httpx.Response(
            status_code=response.status, headers=kept, stream=_Body(response), request=request
        )

    async def aclose(self) -> None:
        """Close the session."""
        await self.session.close()
