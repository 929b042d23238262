"""What the fake servers share: an aiohttp app started on a free loopback port, and a
fake run on its own loop in a thread (for code under test that runs its own loop, such
as the CLI's `main`)."""

from __future__ import annotations

import asyncio
import threading
from typing import Generic, Protocol, TypeVar

from aiohttp import web


async def serve_on_loopback(app: web.Application) -> tuple[web.AppRunner, int]:
    """Start `app` on 127.0.0.1 at a free port: its runner (to clean up) and the port.

    A short shutdown grace: a test that abandons a stream must not hold the clean-up for
    aiohttp's default minute.
    """
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner, int(runner.addresses[0][1])


class Startable(Protocol):
    async def start(self) -> None: ...

    async def close(self) -> None: ...


F = TypeVar("F", bound=Startable)


class Threaded(Generic[F]):
    """`with Threaded(fake) as fake:` runs the fake on its own loop in a daemon thread."""

    def __init__(self, server: F) -> None:
        self.server = server
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> F:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(10)
        return self.server

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.server.close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()
