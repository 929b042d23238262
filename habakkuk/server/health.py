"""GET /healthz: liveness from memory, no token, nothing but channel states and queue depth.

It answers without a query and without awaiting anything: the process is up and its
event loop turns. The channel states are what this process's supervisor holds in
memory; the queue depth is the last one a background refresher read from control.db
(once a second), with its age, so a locked or slow database shows as a growing age,
never as a health check that hangs. The live checks (the stores answer, the depth
read now) are readiness: GET /readyz (habakkuk.server.readiness).

Health checks come often (load balancers, uptime monitors), so the body is built once
and served as bytes until what it says changes (the age moves in tenths of a second).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from dataclasses import asdict
from typing import TYPE_CHECKING

from aiohttp import web

from habakkuk.engine.overview import ChannelState
from habakkuk.engine.timeouts import wait_within

from .health_types import Health, QueueCounts, QueueHealth
from .served import server_of

if TYPE_CHECKING:
    from .host import ServerHost

log = logging.getLogger(__name__)

# How often the refresher reads the queue depth; the age /healthz reports is at most
# about this while control.db answers.
REFRESH_SECONDS = 1.0
# Start-up waits at most this for the first read (a locked database must not hold it).
FIRST_READ_SECONDS = 2.0


def queue_summary(depth: dict[tuple[str, str], int]) -> dict[str, int]:
    """{"pending", "running"} totals from depth by (kind, status)."""
    return asdict(QueueCounts.of(depth))


class HealthMonitor:
    """The queue depth kept fresh in the background, and /healthz's body from memory."""

    def __init__(self, runtime: ServerHost, refresh_seconds: float = REFRESH_SECONDS):
        self.runtime = runtime
        self.refresh_seconds = refresh_seconds
        self._counts: QueueCounts | None = None
        self._read_at = 0.0  # time.monotonic() of the last read
        self._first = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._key: tuple[list[ChannelState], QueueCounts | None, float] | None = None
        self._body = b""

    async def start(self) -> None:
        """Start the refresher; wait (briefly) for its first read."""
        if self._task is None:
            self._task = asyncio.create_task(self._refresh_loop(), name="healthz-refresher")
        with contextlib.suppress(TimeoutError):
            await wait_within(self._first.wait(), FIRST_READ_SECONDS)

    async def stop(self) -> None:
        """Stop the refresher."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _refresh_loop(self) -> None:
        while True:
            try:
                depth = await self.runtime.turns.queue_depth()
            except Exception as exc:  # the age grows; /readyz names the failure
                log.debug("healthz: could not read the queue depth: %s", exc)
            else:
                self._counts = QueueCounts.of(depth)
                self._read_at = time.monotonic()
                self._first.set()
            await asyncio.sleep(self.refresh_seconds)

    def body(self) -> bytes:
        """/healthz's JSON, from memory, built again only when what it says changed."""
        now = self._now()
        if now != self._key:
            self._body = json.dumps(asdict(self._health(*now)), separators=(",", ":")).encode()
            self._key = now
        return self._body

    def _now(self) -> tuple[list[ChannelState], QueueCounts | None, float]:
        """What /healthz says, unbuilt: channel states, the last depth and its age."""
        age = round(time.monotonic() - self._read_at, 1)
        return self.runtime.control.channel_states_now(), self._counts, age

    @staticmethod
    def _health(channels: list[ChannelState], counts: QueueCounts | None, age: float) -> Health:
        if counts is None:
            return Health("ok", tuple(channels), QueueHealth(None, None, None))
        return Health("ok", tuple(channels), QueueHealth(counts.pending, counts.running, age))


async def healthz(request: web.Request) -> web.Response:
    """{"status": "ok", "channels": [{account, type, state}], "queue": {"pending",
    "running", "age_seconds"}}: from memory, no query, nothing awaited."""
    body = server_of(request).health.body()
    return web.Response(body=body, content_type="application/json", charset="utf-8")


def setup(app: web.Application) -> None:
    """Register /healthz."""
    app.router.add_get("/healthz", healthz)
