"""GET /healthz: no token, and nothing but channel states and queue depth."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from .served import json_response, server_of


def queue_summary(depth: dict[tuple[str, str], int]) -> dict[str, int]:
    """{"pending", "running"} totals from depth by (kind, status)."""
    pending = sum(n for (_, status), n in depth.items() if status == "queued")
    running = sum(n for (_, status), n in depth.items() if status == "running")
    return {"pending": pending, "running": running}


# Health checks may come often (load balancers, uptime monitors); a depth at most
# this old is as good, and one query serves every request that arrives meanwhile.
DEPTH_TTL_SECONDS = 1.0


class DepthCache:
    """Queue depth read at most once per TTL; concurrent readers share one query."""

    def __init__(self, runtime: Any):
        self.runtime = runtime
        self._value: dict[tuple[str, str], int] = {}
        self._at = float("-inf")
        self._pending: asyncio.Future[dict[tuple[str, str], int]] | None = None

    async def get(self) -> dict[tuple[str, str], int]:
        loop = asyncio.get_running_loop()
        if loop.time() - self._at < DEPTH_TTL_SECONDS:
            return self._value
        if self._pending is None:
            self._pending = asyncio.ensure_future(self.runtime.turns.queue_depth())
            self._pending.add_done_callback(self._settle)
        return await asyncio.shield(self._pending)

    def _settle(self, future: asyncio.Future[dict[tuple[str, str], int]]) -> None:
        self._pending = None
        if not future.cancelled() and future.exception() is None:
            self._value = future.result()
            self._at = asyncio.get_running_loop().time()


async def healthz(request: web.Request) -> web.Response:
    """{"status": "ok", "channels": [...], "queue": {"pending", "running"}}."""
    server = server_of(request)
    depth = await server.depth_cache.get()
    channels = [
        {"account": c["account"], "type": c["type"], "state": c["state"]}
        for c in await server.runtime.control.channel_states()
    ]
    return json_response({"status": "ok", "channels": channels, "queue": queue_summary(depth)})


def setup(app: web.Application) -> None:
    """Register /healthz."""
    app.router.add_get("/healthz", healthz)
