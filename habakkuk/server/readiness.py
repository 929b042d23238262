"""GET /readyz: ready only when every part is up; no token, nothing but states, names
and fixed reasons.

The parts (habakkuk.server.readiness_parts says what makes each ready):

- each store answers a real query within a short timeout (control.db: the queue depth
  read now; transcripts.db: the newest session; web.db: the newest conversation);
- the HTTP listener serves;
- every configured channel account is connected, here or in the process of the home
  holding its lease (read from control.db: whichever process runs it); one still
  connecting, waiting to reconnect, silent or given up on is not ready;
- every configured MCP server's link is up in this process;
- every worker pool of this process claims and runs jobs.

200 when every part is ready, else 503; each part carries its state, since when and,
when not ready, a one-line reason that names it and never carries an error's text
(that goes to the log).

A store that does not answer is asked once: later probes wait for the same query
instead of queueing more behind it on the store's thread.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, TypeVar

from aiohttp import web

from habakkuk.engine.timeouts import wait_within

from .health_types import Part, QueueCounts, Readiness
from .readiness_parts import (
    Since,
    channel_part,
    listener_part,
    mcp_part,
    no_pools_part,
    pool_part,
    store_part,
)
from .served import json_response, server_of

if TYPE_CHECKING:
    from .host import ServerHost
    from .webstore import WebStore

log = logging.getLogger(__name__)

T = TypeVar("T")

# Each store has this long to answer a readiness query.
READY_SECONDS = 2.0


class ReadinessProbe:
    """Runs the checks of /readyz, each store bounded by `timeout` seconds."""

    def __init__(
        self,
        runtime: ServerHost,
        web_store: Callable[[], WebStore],
        timeout: float = READY_SECONDS,
    ):
        self.runtime = runtime
        self.web_store = web_store
        self.timeout = timeout
        self._asking: dict[str, asyncio.Task[Any]] = {}
        self._since = Since()

    async def check(self) -> Readiness:
        """Every part, the stores asked at once."""
        control, transcripts, web, recorded = await asyncio.gather(
            self._ask("control.db", self.runtime.turns.queue_depth),
            self._ask("transcripts.db", lambda: self.runtime.sessions.list_sessions(limit=1)),
            self._ask("web.db", lambda: self.web_store().conversations(limit=1)),
            self._ask("channel states", self.runtime.control.channel_states),
        )
        room = self.runtime.control
        parts = [
            control[1],
            transcripts[1],
            web[1],
            listener_part(await room.listener(), self._since),
        ]
        if recorded[0] is not None:
            here = str(self.runtime.queue.owner)
            parts.extend(channel_part(health, here) for health in recorded[0])
        elif self.runtime.config.channels:
            parts.append(recorded[1])
        parts.extend(mcp_part(state, self._since) for state in room.mcp_states())
        pools = room.pool_states()
        parts.extend(pool_part(pool) for pool in pools)
        if not pools:
            parts.append(no_pools_part(self._since))
        queue = QueueCounts.of(control[0]) if control[0] is not None else None
        return Readiness(tuple(parts), queue)

    async def _ask(self, name: str, query: Callable[[], Awaitable[T]]) -> tuple[T | None, Part]:
        """`query()`'s answer within the timeout, or None and why not."""
        task = self._asking.get(name)
        if task is None or task.done():
            task = asyncio.ensure_future(query())
            task.add_done_callback(_settled)
            self._asking[name] = task
        try:
            value: T = await wait_within(asyncio.shield(task), self.timeout)
        except TimeoutError:
            reason = f"{name} did not answer within {self.timeout:g}s"
            return None, store_part(name, False, reason, self._since)
        except Exception as exc:  # not CancelledError (a BaseException): that propagates
            log.warning("readiness: %s failed: %s", name, exc)
            reason = f"{name} failed ({type(exc).__name__})"
            return None, store_part(name, False, reason, self._since)
        return value, store_part(name, True, "", self._since)

    async def stop(self) -> None:
        """Cancel the queries still waiting for an answer."""
        tasks, self._asking = list(self._asking.values()), {}
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _settled(task: asyncio.Task[Any]) -> None:
    # Its waiters may have given up (timeout): the outcome is read here, so an
    # exception is not reported as never retrieved.
    if not task.cancelled():
        task.exception()


async def readyz(request: web.Request) -> web.Response:
    """{"status": "ready" | "not ready", "parts": [{kind, name, ok, state, since, reason,
    served_by}], "queue": {"pending", "running"} | null}; 503 when not ready."""
    readiness = await server_of(request).readiness.check()
    body = asdict(readiness)
    body = {"status": "ready" if readiness.ready else "not ready", **body}
    return json_response(body, 200 if readiness.ready else 503)


def setup(app: web.Application) -> None:
    """Register /readyz."""
    app.router.add_get("/readyz", readyz)
