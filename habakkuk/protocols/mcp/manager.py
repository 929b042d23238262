"""Connections to every configured MCP server, kept up in the background.

`McpManager.start()` connects to all servers in parallel and waits at most
`START_WAIT` seconds in all; a server that is not up by then keeps retrying
with backoff (1 s doubling to 5 minutes) and its tools appear once it
connects. Tools are only added or replaced in the registry, never removed, and
keep their names across reconnects. While a server is down its tools answer at
once with an error naming why. A call that fails at the transport level drops
the session (the supervisor reconnects) and tells the model the call may or
may not have run.

Each connection lives in its own supervisor task because the SDK's client must
be entered and left in the same task.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from habakkuk.engine.config import Config, McpServerConfig
from habakkuk.engine.home import Environment, Home
from habakkuk.engine.timeouts import wait_within
from habakkuk.engine.toolkit.registry import ToolError, ToolRegistry

from .naming import tool_names
from .results import McpResult, result_content
from .tools import McpTool
from .transport import StdioProcess, TransportError, open_transport

if TYPE_CHECKING:
    from anyio import CancelScope
    from mcp import Client

log = logging.getLogger(__name__)

START_WAIT = 20.0
CONNECT_TIMEOUT = 30.0
CLOSE_GRACE = 15.0  # how long close() lets a connected session end before cancelling it
BACKOFF_FIRST = 1.0
BACKOFF_MAX = 300.0
STABLE_AFTER = 30.0  # a session that lasted this long resets the backoff
LIST_PAGES = 100


@dataclass
class ServerStatus:
    """One server as `habakkuk mcp` shows it."""

    name: str
    transport: str
    state: str  # connecting | up | down | closed
    error: str | None
    tools: list[str] = field(default_factory=list)  # model-facing names
    real_tools: list[str] = field(default_factory=list)
    attempts: int = 0


def describe_failure(exc: BaseException) -> str:
    """A one-line reason for a failed connection or call."""
    if isinstance(exc, TransportError):
        return str(exc)
    inner = getattr(exc, "exceptions", None)
    if inner:  # an exception group from a task group: the first real cause
        return describe_failure(inner[0])
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    name = type(exc).__name__
    if isinstance(exc, TimeoutError):
        return f"timed out ({text})" if text else "timed out"
    return f"{name}: {text}" if text else name


class ServerLink:
    """One server: its supervisor task, current client, tools and last error."""

    def __init__(self, config: McpServerConfig, manager: McpManager):
        self.config = config
        self.manager = manager
        self.state = "connecting"
        self.error: str | None = None
        self.attempts = 0
        self.client: Client | None = None
        self.process = StdioProcess()
        self.tools: dict[str, McpTool] = {}  # real name -> tool
        self.names: dict[str, str] = {}  # real name -> model-facing name (kept forever)
        self.attempted = asyncio.Event()
        self._changed = asyncio.Event()
        self._drop = asyncio.Event()
        self._closing = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._reported: str | None = None  # the start-up failure last logged
        # The cancel scope of a connect under way (None once connected, or between tries).
        self._connecting: CancelScope | None = None

    def _notify(self) -> None:
        """Wake everyone in `wait_for` (state, error or attempts changed)."""
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_for(self, predicate: Callable[[ServerLink], bool]) -> None:
        """Return once `predicate(self)` holds (callers bound it with a timeout)."""
        while not predicate(self):
            await self._changed.wait()

    @property
    def transport(self) -> str:
        return "stdio" if self.config.command is not None else "http"

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._supervise(), name=f"mcp:{self.config.name}")

    async def close(self) -> None:
        self._closing.set()
        self._drop.set()
        if self._connecting is not None:
            # A server that has not answered its handshake has no session to end: its
            # connect ends now, as at its timeout (shutdown waited out the grace below).
            self._connecting.cancel()
        if self._task is not None:
            try:
                await wait_within(asyncio.shield(self._task), CLOSE_GRACE)
            except TimeoutError:
                self._task.cancel()
                await asyncio.gather(self._task, return_exceptions=True)
            except Exception:
                log.exception("mcp server %s: supervisor failed", self.config.name)
        self.state = "closed"
        self._notify()

    def drop(self, reason: str) -> None:
        """Give up the current session (the supervisor reconnects)."""
        if self.client is not None and self.error is None:
            tail = self.process.last_error_line() if self.transport == "stdio" else ""
            self.error = f"{reason} (stderr: {tail})" if tail and tail not in reason else reason
        self._drop.set()

    async def _supervise(self) -> None:
        delay = BACKOFF_FIRST
        while not self._closing.is_set():
            self.attempts += 1
            self._drop.clear()
            lasted = 0.0
            try:
                lasted = await self._session()
            except Exception as exc:  # any failure: record why and retry later
                reason = describe_failure(exc)
                tail = self.process.last_error_line() if self.transport == "stdio" else ""
                if tail and tail not in reason:
                    reason = f"{reason} (stderr: {tail})"
                self.error = reason
                # Retries repeat the same failure every few seconds: report each reason
                # once (again only after it changed or the server was up in between).
                if reason != self._reported:
                    self._reported = reason
                    log.warning("mcp server %s: %s", self.config.name, reason)
            finally:
                self.client = None
            if self._closing.is_set():
                break
            self.state = "down"
            if self.error is None:
                self.error = "the connection closed"
            self.attempted.set()
            self._notify()
            if lasted >= STABLE_AFTER:
                delay = BACKOFF_FIRST  # a server that crashes right after connecting backs off
            with contextlib.suppress(TimeoutError, asyncio.TimeoutError):
                await wait_within(self._closing.wait(), delay)
            delay = min(delay * 2, BACKOFF_MAX)

    async def _session(self) -> float:
        """Connect, list tools, serve calls until dropped; how long it was connected."""
        import anyio
        from mcp import Client
        from mcp_types import Implementation

        from habakkuk import __version__

        manager = self.manager
        self.process = StdioProcess()
        auth = manager.auth_for(self.config)
        transport = open_transport(
            self.config,
            manager.env,
            manager.home,
            info=self.process,
            on_exit=lambda: self.drop("the server process exited"),
            auth=auth,
        )
        client = Client(
            transport,
            client_info=Implementation(name="habakkuk", version=__version__),
            cache=None,
        )
        # The client's task group must be left in this task, so the connect
        # timeout is a cancel scope around the whole session that a timer cancels
        # unless the tools were listed in time.
        with anyio.CancelScope() as scope:
            timer = asyncio.get_running_loop().call_later(CONNECT_TIMEOUT, scope.cancel)
            self._connecting = scope
            if self._closing.is_set():
                scope.cancel()
            try:
                async with client:
                    listed = await self._list_tools(client)
                    timer.cancel()
                    self._connecting = None
                    self._install(listed)
                    self.client = client
                    self.state = "up"
                    self.error = None
                    self._reported = None
                    self.attempted.set()
                    self._notify()
                    log.info("mcp server %s: connected, %d tools", self.config.name, len(listed))
                    connected_at = time.monotonic()
                    await self._drop.wait()
                    self.client = None
                    return time.monotonic() - connected_at
            finally:
                timer.cancel()
                self._connecting = None
                self.client = None
        if self._closing.is_set():
            return 0.0  # closed before it connected: nothing failed
        raise TimeoutError(f"no answer within {CONNECT_TIMEOUT:g}s")

    async def _list_tools(self, client: Client) -> list[Any]:
        tools: list[Any] = []
        cursor: str | None = None
        for _ in range(LIST_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    def _install(self, listed: list[Any]) -> None:
        allow = self.config.allow
        listed = [t for t in listed if allow is None or t.name in allow]
        fresh = tool_names(self.config.name, [*self.names, *(t.name for t in listed)])
        for real, name in fresh.items():
            self.names.setdefault(real, name)
        for item in listed:
            tool = McpTool(
                self,
                item.name,
                self.names[item.name],
                item.description or "",
                item.input_schema if isinstance(item.input_schema, dict) else None,
            )
            self.tools[item.name] = tool
            self.manager.publish_tool(tool, f"mcp:{self.config.name}")

    async def call(self, tool: str, args: dict[str, Any]) -> McpResult:
        """Call `tool` on the server; ToolError (model-readable) when it cannot."""
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        name = self.config.name
        client = self.client
        if client is None:
            why = self.error or "still connecting"
            raise ToolError(f"MCP server {name} is unavailable: {why}")
        timeout = self.config.timeout_seconds
        started = time.monotonic()
        try:
            result = await wait_within(
                client.call_tool(tool, args, read_timeout_seconds=timeout), timeout + 5
            )
        except TimeoutError:
            raise ToolError(
                f"{tool} on MCP server {name} timed out after {timeout:g}s;"
                " it may or may not have finished"
            ) from None
        except MCPError as exc:
            if exc.code == REQUEST_TIMEOUT:
                raise ToolError(
                    f"{tool} on MCP server {name} timed out after {timeout:g}s;"
                    " it may or may not have finished"
                ) from None
            if exc.code == CONNECTION_CLOSED:
                raise self._transport_failure(tool, "the connection closed") from None
            raise ToolError(f"MCP server {name} refused {tool}: {exc.error.message}") from None
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if type(exc).__name__ == "ValidationError":
                raise ToolError(f"MCP server {name} sent an invalid result for {tool}") from None
            raise self._transport_failure(tool, describe_failure(exc)) from None
        log.debug("mcp %s.%s took %.2fs", name, tool, time.monotonic() - started)
        return result_content(result)

    def _transport_failure(self, tool: str, reason: str) -> ToolError:
        tail = self.process.last_error_line() if self.transport == "stdio" else ""
        if tail:
            reason = f"{reason}; stderr: {tail}"
        self.drop(reason)
        return ToolError(
            f"MCP server {self.config.name} failed during {tool} ({reason});"
            " the call may or may not have run"
        )

    def status(self) -> ServerStatus:
        return ServerStatus(
            name=self.config.name,
            transport=self.transport,
            state=self.state,
            error=self.error,
            tools=sorted(t.name for t in self.tools.values()),
            real_tools=sorted(self.tools),
            attempts=self.attempts,
        )


class McpManager:
    """Every configured server's link; tools go into `registry` as they appear."""

    def __init__(
        self,
        config: Config,
        env: Environment,
        home: Home,
        registry: ToolRegistry | None = None,
        servers: list[str] | None = None,
    ):
        self.config = config
        self.env = env
        self.home = home
        self.registry = registry
        chosen = (
            config.mcp_servers if servers is None else {n: config.mcp_servers[n] for n in servers}
        )
        self.links = {name: ServerLink(server, self) for name, server in chosen.items()}
        self._started = False

    def auth_for(self, server: McpServerConfig) -> Any:
        """The httpx2 auth for an `auth: oauth` server, else None."""
        if server.auth != "oauth":
            return None
        from .oauth_auth import OAuthHandler

        return OAuthHandler(self.home, server, self.env)

    def publish_tool(self, tool: McpTool, toolset: str) -> None:
        if self.registry is not None:
            self.registry.register(tool, toolset)

    async def start(self, wait: float = START_WAIT) -> None:
        """Connect to every server in parallel; return once all tried or `wait` passed."""
        if self._started:
            return
        self._started = True
        for link in self.links.values():
            link.start()
        waits = [asyncio.create_task(link.attempted.wait()) for link in self.links.values()]
        if not waits:
            return
        _done, pending = await asyncio.wait(waits, timeout=wait)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    def status(self) -> list[ServerStatus]:
        return [link.status() for link in self.links.values()]

    async def close(self) -> None:
        """Shut every server down (stdin closed, then signals, then the group killed)."""
        await asyncio.gather(*(link.close() for link in self.links.values()))
