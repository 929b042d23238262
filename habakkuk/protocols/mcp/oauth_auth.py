"""The MCP transport's auth for an `auth: oauth` server: the stored token, refreshed as
needed, and a 401 answered by one refresh.

Its own module so that httpx2 (the mcp SDK's HTTP client) is imported only when such a
server connects: the doctor and the `mcp login` commands use habakkuk.protocols.mcp.oauth.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator

import httpx2

from habakkuk.engine.auth_store import LoginStore
from habakkuk.engine.config import McpServerConfig
from habakkuk.engine.home import Environment, Home

from .oauth import (
    REFUSAL_WINDOW,
    LoginRequired,
    auth_key,
    error_text,
    expired,
    token_request,
    tokens_from,
)


class OAuthHandler(httpx2.Auth):
    """httpx2 auth for an `auth: oauth` server: the stored token, refreshed as needed."""

    requires_request_body = True  # a refused request is sent again

    def __init__(self, home: Home, server: McpServerConfig, env: Environment):
        self.store = LoginStore(home.root)
        self.server = server
        self.env = env
        self.key = auth_key(server.name)
        self._last_refresh = 0.0
        self._lock = asyncio.Lock()

    def _login_required(self, why: str) -> LoginRequired:
        return LoginRequired(f"{why}; run `habakkuk mcp login {self.server.name}`")

    async def token(self, rejected: str | None = None) -> str:
        """A usable access token; refreshes when expired or when `rejected` is current."""
        async with self._lock:
            record = await asyncio.to_thread(self.store.get, self.key)
            if record is None:
                raise self._login_required(f"not signed in to MCP server {self.server.name}")
            if rejected is None and not expired(record):
                return str(record["access_token"])
            return await self._refresh(rejected)

    async def _refresh(self, rejected: str | None) -> str:
        async with self.store.locked():  # one refresh across processes
            record = await asyncio.to_thread(self.store.get, self.key)
            if record is None:
                raise self._login_required(f"not signed in to MCP server {self.server.name}")
            current = str(record.get("access_token", ""))
            if current and current != rejected and not expired(record):
                return current  # another process refreshed it meanwhile
            refresh = record.get("refresh_token")
            if not refresh:
                raise self._login_required(f"the login to {self.server.name} has expired")
            status, body = await token_request(
                str(record["token_endpoint"]),
                record,
                {
                    "grant_type": "refresh_token",
                    "refresh_token": str(refresh),
                    "resource": str(record.get("resource") or self.server.url),
                },
            )
            if status != 200:
                raise self._login_required(
                    f"{self.server.name} refused the refresh token ({error_text(body)})"
                )
            record.update(tokens_from(body, record))
            await asyncio.to_thread(self.store.put, self.key, record)
            self._last_refresh = time.monotonic()
            return str(record["access_token"])

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        """Send the request with the token; once more with a refreshed one on a 401."""
        if self.requires_request_body:
            await request.aread()
        token = await self.token()
        request.headers["Authorization"] = f"Bearer {token}"
        response = yield request
        if response.status_code != 401:
            return
        if time.monotonic() - self._last_refresh < REFUSAL_WINDOW:
            raise self._login_required(f"{self.server.name} refused a fresh token")
        token = await self.token(rejected=token)
        request.headers["Authorization"] = f"Bearer {token}"
        response = yield request
        if response.status_code == 401:
            raise self._login_required(f"{self.server.name} refused a fresh token")
