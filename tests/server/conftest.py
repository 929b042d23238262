"""Fixtures for the HTTP surface: a runtime with its server on a free loopback port."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest

from habakkuk.runtime import Runtime

TOKEN = "test-token-0123456789abcdef"


@dataclass
class Served:
    """A running runtime and server, plus a client session for requests."""

    runtime: Runtime
    server: Any
    client: aiohttp.ClientSession
    token: str | None

    @property
    def url(self) -> str:
        return str(self.server.url)

    def auth(self, **extra: str) -> dict[str, str]:
        headers = dict(extra)
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return headers

    async def get_json(self, path: str, status: int = 200) -> Any:
        async with self.client.get(self.url + path, headers=self.auth()) as response:
            assert response.status == status, (response.status, await response.text())
            return await response.json()

    async def post_json(self, path: str, body: Any, status: int = 202, **headers: str) -> Any:
        async with self.client.post(
            self.url + path, json=body, headers=self.auth(**headers)
        ) as response:
            assert response.status == status, (response.status, await response.text())
            return await response.json()


ServeFactory = Callable[..., Awaitable[Served]]
HTTP_SECTION = re.compile(r"^http:[ \t]*(.*?)[ \t]*$", re.MULTILINE)


@pytest.fixture
async def serve(
    runtime_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[ServeFactory]:
    """`await serve(config_text, token=True)`: runtime + workers + server on port 0."""
    clients: list[aiohttp.ClientSession] = []

    async def _serve(config_text: str, *, token: bool = True, workers: bool = True) -> Served:
        # The config's own top-level `http:` line, not "http:" inside a URL (a
        # `base_url: http://...` once left such a test with no http section and no token).
        section = HTTP_SECTION.search(config_text)
        if token:
            monkeypatch.setenv("HABAKKUK_TEST_TOKEN", TOKEN)
            if section is not None and section.group(1) == "":
                config_text = HTTP_SECTION.sub(
                    "http:\n  token_env: HABAKKUK_TEST_TOKEN", config_text, count=1
                )
            elif section is not None:
                raise ValueError("serve(token=True) needs the config's http: as a block")
            else:
                config_text += "http:\n  token_env: HABAKKUK_TEST_TOKEN\n"
        elif section is None:
            config_text += "http: {}\n"
        runtime: Runtime = await runtime_factory(config_text)
        if workers:
            runtime.start_workers()
        server = await runtime.http.start("127.0.0.1:0")
        client = aiohttp.ClientSession()
        clients.append(client)
        return Served(runtime, server, client, TOKEN if token else None)

    yield _serve
    for client in clients:
        await client.close()


class SSEReader:
    """Reads Server-Sent Events frames from an aiohttp response."""

    def __init__(self, response: aiohttp.ClientResponse):
        self.response = response
        self.comments: list[str] = []

    async def next(self, timeout: float = 15.0) -> dict[str, Any]:
        """The next event frame as {"id", "event", "data"} (comments are collected)."""
        return await asyncio.wait_for(self._next(), timeout)

    async def _next(self) -> dict[str, Any]:
        frame: dict[str, Any] = {}
        data: list[str] = []
        while True:
            raw = await self.response.content.readline()
            if not raw:
                raise EOFError("stream ended")
            line = raw.decode().rstrip("\n")
            if line == "":
                if data or frame.get("event"):
                    frame["data"] = json.loads("\n".join(data)) if data else None
                    return frame
                continue
            if line.startswith(":"):
                self.comments.append(line[1:].strip())
                continue
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "data":
                data.append(value)
            elif name in ("id", "event"):
                frame[name] = value

    async def until(self, predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """Skip frames until one matches."""
        while True:
            frame = await self.next()
            if predicate(frame):
                return frame
