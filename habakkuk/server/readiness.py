"""GET /readyz: the live checks, no token, nothing but check names, states and depth.

Each store answers a real query within a short timeout (control.db: the queue depth
read now; transcripts.db: the newest session; web.db: the newest conversation), and
every configured channel's recorded state (whichever process runs it) is read from
control.db; a channel waiting to restart (backoff) or given up on (fatal) is not
ready. 200 when every check passes, else 503 with a one-line reason per failing
check. A reason names the store or the channel and what went wrong, never an error's
text (that goes to the log).

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

from habakkuk.engine.overview import ChannelState
from habakkuk.engine.timeouts import wait_within

from .health_types import Check, QueueCounts, Readiness
from .served import json_response, server_of

if TYPE_CHECKING:
    from .host import ServerHost
    from .webstore import WebStore

log = logging.getLogger(__name__)

T = TypeVar("T")

# Each store has this long to answer a readiness query.
READY_SECONDS = 2.0
# A channel in one of these states receives nothing now (channels/health.py).
CHANNEL_DOWN = frozenset({"backoff", "fatal", "silent", "not running"})


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

    async def check(self) -> Readiness:
        """Every check, the stores asked at once."""
        control, transcripts, web, recorded = await asyncio.gather(
            self._ask("control.db", self.runtime.turns.queue_depth),
            self._ask("transcripts.db", lambda: self.runtime.sessions.list_sessions(limit=1)),
            self._ask("web.db", lambda: self.web_store().conversations(limit=1)),
            self._ask("channel states", self.runtime.control.channel_states),
        )
        checks = [control[1], transcripts[1], web[1]]
        channels: list[ChannelState] = []
        if recorded[0] is not None:
            for health in recorded[0]:
                channel = ChannelState(health.account, health.type, health.state)
                channels.append(channel)
                name = f"channel {channel.account}"
                if channel.state in CHANNEL_DOWN:
                    checks.append(Check(name, False, f"{name} is {channel.state}"))
                else:
                    checks.append(Check(name, True))
        elif self.runtime.config.channels:
            checks.append(recorded[1])
        queue = QueueCounts.of(control[0]) if control[0] is not None else None
        return Readiness(tuple(checks), tuple(channels), queue)

    async def _ask(self, name: str, query: Callable[[], Awaitable[T]]) -> tuple[T | None, Check]:
        """`query()`'s answer within the timeout, or None and why not."""
        task = self._asking.get(name)
        if task is None or task.done():
            task = asyncio.ensure_future(query())
            task.add_done_callback(_settled)
            self._asking[name] = task
        try:
            value: T = await wait_within(asyncio.shield(task), self.timeout)
        except TimeoutError:
            return None, Check(name, False, f"{name} did not answer within {self.timeout:g}s")
        except Exception as exc:  # not CancelledError (a BaseException): that propagates
            log.warning("readiness: %s failed: %s", name, exc)
            return None, Check(name, False, f"{name} failed ({type(exc).__name__})")
        return value, Check(name, True)

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
    """{"status": "ready" | "not ready", "checks": [{name, ok, reason}], "channels":
    [{account, type, state}], "queue": {"pending", "running"} | null}; 503 when not
    ready."""
    readiness = await server_of(request).readiness.check()
    body = asdict(readiness)
    body = {"status": "ready" if readiness.ready else "not ready", **body}
    return json_response(body, 200 if readiness.ready else 503)


def setup(app: web.Application) -> None:
    """Register /readyz."""
    app.router.add_get("/readyz", readyz)
