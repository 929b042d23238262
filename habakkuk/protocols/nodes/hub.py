"""The device nodes of this process: the live connections, pairing and login checks with
their throttle, the invoke round trip, revocation.

A connection is a `Link` (a websocket, or a browser's event stream with its results
posted back). While a node is connected, `watch` re-reads it from nodes.db every
heartbeat: a node revoked, or paired again (its secret replaced), by any process is cut
off within one beat. A second connection under the same name replaces the first.

nodes.db records which process holds each connection; a call from a process that does
not hold the node goes through the job queue to the one that does (relay.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from habakkuk.engine.errors import HabakkukError
from habakkuk.engine.events import EventBus, NodeChanged
from habakkuk.engine.jobs import Lease, payload_of
from habakkuk.engine.timeouts import wait_within

from .relay import NODE_CALLS, NODE_INVOKE_KIND, CallId, NodeCall, call_id_for, relay
from .store import NodeRecord, NodeStore, PairCode
from .wire import Invoke, NodeResult, ResultFrame

if TYPE_CHECKING:
    from habakkuk.engine.device_config import NodesConfig
    from habakkuk.engine.jobs import JobQueue
    from habakkuk.engine.pools import Pool
    from habakkuk.engine.storage import Storage

log = logging.getLogger(__name__)

# The websocket close code for a refused or revoked node: the device stops retrying.
POLICY_VIOLATION = 1008
# Failed pairings or logins within THROTTLE_WINDOW that close the door for everyone.
THROTTLE_FAILURES = 20
THROTTLE_WINDOW = 60.0
DEFAULT_TIMEOUT = 30.0
# How long past a call's own timeout its caller waits for the holder to take it up.
CLAIM_SLACK = 10.0
MAX_TIMEOUT = 600.0


class NodeRefused(HabakkukError):
    """A pairing or login that is refused; `status` is the HTTP status to answer."""

    def __init__(self, message: str, status: int = 401) -> None:
        super().__init__(message)
        self.status = status


class NodeUnavailable(HabakkukError):
    """The node is not paired, not connected, or does not offer the command."""


class Link(Protocol):
    """One live connection to a device."""

    async def send(self, frame: dict[str, Any]) -> None:
        """Send one frame to the device."""
        ...

    async def close(self, code: int, reason: str) -> None:
        """End the connection (POLICY_VIOLATION: the device must not retry)."""
        ...


@dataclass(eq=False)
class LiveNode:
    """A connected node and its invocations waiting for a result."""

    name: str
    platform: str
    caps: tuple[str, ...]
    secret_hash: str
    link: Link
    since: float = field(default_factory=time.time)
    pending: dict[str, asyncio.Future[NodeResult]] = field(default_factory=dict)

    def fail_pending(self, why: str) -> None:
        """Every invocation still waiting ends with `why`."""
        for future in self.pending.values():
            if not future.done():
                future.set_result(NodeResult(error=why))
        self.pending.clear()


@dataclass(frozen=True)
class NodeView:
    """A node as GET /api/nodes and nodes_list show it."""

    name: str
    platform: str
    caps: tuple[str, ...]
    paired_at: float
    last_seen: float
    online: bool

    def to_json(self) -> dict[str, Any]:
        """The API's shape of a node."""
        return {
            "name": self.name,
            "platform": self.platform,
            "caps": list(self.caps),
            "paired_at": self.paired_at,
            "last_seen": self.last_seen,
            "online": self.online,
        }


class Throttle:
    """Failed attempts of the last minute; past the limit every attempt is refused."""

    def __init__(self, limit: int = THROTTLE_FAILURES, window: float = THROTTLE_WINDOW) -> None:
        self.limit, self.window = limit, window
        self._failures: deque[float] = deque()

    def _trim(self, now: float) -> None:
        while self._failures and self._failures[0] <= now - self.window:
            self._failures.popleft()

    def closed(self, now: float | None = None) -> bool:
        """True while the limit is reached."""
        self._trim(time.monotonic() if now is None else now)
        return len(self._failures) >= self.limit

    def failed(self, now: float | None = None) -> None:
        """Count one failure."""
        self._failures.append(time.monotonic() if now is None else now)


class NodeHub:
    """Device nodes for one process: nodes.db (opened on first use) and the live links."""

    def __init__(
        self,
        config: NodesConfig,
        storage: Storage,
        queue: JobQueue | None = None,
        bus: EventBus | None = None,
    ) -> None:
        self.config = config
        self.storage = storage
        # Where paired / connected / disconnected / revoked are told (the terminal, the
        # dashboard); None: nobody listens.
        self.bus = bus
        # The home's job queue: calls to nodes other processes hold (None: this one only).
        self.queue = queue
        self.throttle = Throttle()
        self.live: dict[str, LiveNode] = {}
        self._store: NodeStore | None = None
        self._opening = asyncio.Lock()
        self._watchers: dict[str, asyncio.Task[None]] = {}
        self._letting_go: set[asyncio.Task[None]] = set()
        # Callers in this process awaiting a node_invoke job this process's pool runs.
        self._answers: dict[str, asyncio.Future[NodeResult]] = {}

    @property
    def heartbeat(self) -> float:
        """Seconds between pings and re-reads of a live node (nodes.heartbeat)."""
        return self.config.heartbeat_seconds

    async def store(self) -> NodeStore:
        """nodes.db, opened (and migrated) on first use."""
        if self._store is None:
            async with self._opening:
                if self._store is None:
                    self._store = await NodeStore.open_on(self.storage)
        return self._store

    def _tell(self, node: str, change: Any, platform: str = "", caps: Sequence[str] = ()) -> None:
        if self.bus is not None:
            self.bus.publish(
                NodeChanged(node=node, change=change, platform=platform, caps=list(caps))
            )

    @property
    def holder(self) -> str:
        """What this process is known by as a node's holder (its queue's pin)."""
        return self.queue.node if self.queue is not None else ""

    def pools(self) -> list[Pool]:
        """The pool that runs the node_invoke jobs pinned to this process (none without
        a queue)."""
        from habakkuk.engine.pools import Pool

        if self.queue is None:
            return []
        return [Pool(self.queue, [NODE_INVOKE_KIND], self._run_call)]

    async def _run_call(self, lease: Lease) -> dict[str, Any]:
        """A node_invoke job pinned here: invoke the node connected here, keep its answer."""
        call = payload_of(lease.job, NODE_CALLS)
        try:
            result = await self.invoke_here(call.node, call.command, dict(call.args), call.timeout)
        except NodeUnavailable as exc:
            result = NodeResult(error=str(exc))
        waiting = self._answers.get(lease.job.id)
        if waiting is not None and not waiting.done():
            waiting.set_result(result)
        return result.to_json()

    async def close(self) -> None:
        """Cut every live node and close nodes.db."""
        for live in list(self.live.values()):
            await self._cut(live, "the server is stopping", code=1001)
        if self._letting_go:
            await asyncio.gather(*self._letting_go, return_exceptions=True)
        if self._store is not None:
            store, self._store = self._store, None
            await store.close()

    # -- pairing and login -----------------------------------------------------------

    def _check_throttle(self) -> None:
        if self.throttle.closed():
            raise NodeRefused("too many failed attempts; try again in a minute", 429)

    async def new_code(self) -> PairCode:
        """A one-time pairing code (nodes.pair_ttl)."""
        return await (await self.store()).new_code(self.config.pair_ttl_seconds)

    async def pair(self, code: str, name: str, platform: str, caps: Sequence[str]) -> str:
        """Redeem `code` for `name`: the node's fresh secret; NodeRefused otherwise."""
        from habakkuk.engine.device_config import NODE_NAME

        self._check_throttle()
        if not NODE_NAME.match(name):
            raise NodeRefused(f"{name!r} is not a node name (letters, digits, . _ -)", 400)
        secret = await (await self.store()).redeem(code, name, platform, caps)
        if secret is None:
            self.throttle.failed()
            raise NodeRefused("the pairing code is wrong, used or expired")
        live = self.live.get(name)
        if live is not None:  # paired again: the old secret's connection ends now
            await self._cut(live, "this node was paired again")
        self._tell(name, "paired", platform, caps)
        return secret

    async def login(self, name: str, secret: str) -> NodeRecord:
        """The node when `secret` is its secret; NodeRefused otherwise (counted)."""
        self._check_throttle()
        found = await (await self.store()).check(name, secret)
        if found is None:
            self.throttle.failed()
            raise NodeRefused("unknown node or wrong secret")
        return found

    # -- live links ----------------------------------------------------------------

    async def attach(
        self, record: NodeRecord, platform: str, caps: Sequence[str], link: Link
    ) -> LiveNode:
        """Register a logged-in connection (replacing one of the same name) and watch it."""
        old = self.live.get(record.name)
        if old is not None:
            await self._cut(old, "another connection took this node's name")
        live = LiveNode(record.name, platform, tuple(caps), record.secret_hash, link)
        self.live[record.name] = live
        await (await self.store()).seen(record.name, platform, live.caps, time.time(), self.holder)
        self._watchers[record.name] = asyncio.create_task(
            self._watch(live), name=f"node-{record.name}"
        )
        self._tell(record.name, "connected", platform, live.caps)
        return live

    def detach(self, live: LiveNode) -> None:
        """The connection ended: forget it (if it is still the node's) and fail its calls."""
        if self.live.get(live.name) is live:
            del self.live[live.name]
            watcher = self._watchers.pop(live.name, None)
            if watcher is not None and watcher is not asyncio.current_task():
                watcher.cancel()
            if self._store is not None and self.holder:
                task = asyncio.get_running_loop().create_task(
                    self._store.let_go(live.name, self.holder)
                )
                self._letting_go.add(task)
                task.add_done_callback(self._letting_go.discard)
            self._tell(live.name, "disconnected")
        live.fail_pending(f"node {live.name} disconnected")

    async def _cut(self, live: LiveNode, why: str, code: int = POLICY_VIOLATION) -> None:
        self.detach(live)
        with contextlib.suppress(Exception):
            await live.link.close(code, why)

    async def _watch(self, live: LiveNode) -> None:
        """Every heartbeat: is the node still paired with the same secret? Else cut it."""
        while self.live.get(live.name) is live:
            await asyncio.sleep(self.heartbeat)
            try:
                found = await (await self.store()).get(live.name)
            except Exception:
                log.exception("node %s: cannot read nodes.db", live.name)
                continue
            if found is None or found.secret_hash != live.secret_hash:
                log.info("node %s was revoked or paired again: cut off", live.name)
                if found is None:
                    self._tell(live.name, "revoked")
                await self._cut(live, "this node was revoked")
                return
            with contextlib.suppress(Exception):
                await (await self.store()).touch(live.name, time.time())

    def deliver(self, live: LiveNode, frame: ResultFrame) -> bool:
        """A result from the device; False when no invocation waits for that id."""
        future = live.pending.pop(frame.id, None)
        if future is None or future.done():
            return False
        future.set_result(frame.result)
        return True

    # -- what the tools and the API do ---------------------------------------------

    async def invoke(
        self,
        name: str,
        command: str,
        args: dict[str, Any],
        timeout: float = DEFAULT_TIMEOUT,
        call: CallId | None = None,
    ) -> NodeResult:
        """Run `command` on node `name`, wherever it is connected, and wait for its result.

        `call` (a turn and its tool call) names the invocation, which is then a job
        (relay.py): a turn run again after a crash gets the first run's answer and the
        device is not told twice. A node held by another process is always reached
        through the job queue; a call without `call` to a node held here goes directly."""
        timeout = min(max(timeout, 0.1), MAX_TIMEOUT)
        if self.queue is None or (call is None and name in self.live):
            return await self.invoke_here(name, command, args, timeout)
        found = await (await self.store()).get(name)
        if found is None:
            raise NodeUnavailable(f"there is no node {name!r} (see nodes_list)")
        live = self.live.get(name)
        if live is not None:
            holder, caps = self.holder, live.caps
        elif found.holder and time.time() - found.last_seen <= 2 * self.heartbeat + 5:
            holder, caps = found.holder, found.caps
        else:
            raise NodeUnavailable(f"node {name!r} is not connected")
        _offers(name, command, caps)
        job = call_id_for(*call) if call is not None else f"nodecall_{secrets.token_hex(12)}"
        payload = NodeCall(name, command, args, timeout)
        bound = timeout + CLAIM_SLACK
        if holder != self.holder:
            return await relay(self.queue, job, holder, payload, bound=bound)
        here = self._answers[job] = asyncio.get_running_loop().create_future()
        try:
            return await relay(self.queue, job, holder, payload, bound=bound, here=here)
        finally:
            self._answers.pop(job, None)

    async def invoke_here(
        self, name: str, command: str, args: dict[str, Any], timeout: float = DEFAULT_TIMEOUT
    ) -> NodeResult:
        """Run `command` on node `name` connected to this process and wait for its result."""
        live = self.live.get(name)
        if live is None:
            if await (await self.store()).get(name) is None:
                raise NodeUnavailable(f"there is no node {name!r} (see nodes_list)")
            raise NodeUnavailable(f"node {name!r} is not connected")
        _offers(name, command, live.caps)
        ident = secrets.token_hex(8)
        future: asyncio.Future[NodeResult] = asyncio.get_running_loop().create_future()
        live.pending[ident] = future
        try:
            await live.link.send(Invoke(ident, command, args).to_json())
            return await wait_within(future, min(max(timeout, 0.1), MAX_TIMEOUT))
        except TimeoutError:
            return NodeResult(error=f"node {name} did not answer within {timeout:g} seconds")
        except (ConnectionError, RuntimeError) as exc:
            self.detach(live)
            return NodeResult(error=f"node {name} disconnected ({exc})")
        finally:
            live.pending.pop(ident, None)

    async def nodes(self) -> list[NodeView]:
        """Every paired node by name; a connected node's caps are what it offers now."""
        found = await (await self.store()).nodes()
        views = []
        for record in found:
            live = self.live.get(record.name)
            ok = live is not None and live.secret_hash == record.secret_hash
            views.append(
                NodeView(
                    record.name,
                    live.platform if ok and live is not None else record.platform,
                    live.caps if ok and live is not None else record.caps,
                    record.paired_at,
                    record.last_seen,
                    ok,
                )
            )
        return views

    async def revoke(self, name: str) -> bool:
        """Delete the node and drop its connection; False when there is no such node."""
        gone = await (await self.store()).revoke(name)
        if gone:
            self._tell(name, "revoked")
        live = self.live.get(name)
        if live is not None:
            await self._cut(live, "this node was revoked")
        return gone


def _offers(name: str, command: str, caps: Sequence[str]) -> None:
    """NodeUnavailable unless the node offers `command`."""
    if command not in caps:
        offered = ", ".join(caps) or "nothing"
        raise NodeUnavailable(f"node {name!r} does not offer {command} (it offers {offered})")
