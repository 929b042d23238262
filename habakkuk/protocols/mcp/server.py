"""Habakkuk as an MCP server: other MCP clients talk to its agents.

Tools: habakkuk_ask(message, agent?, session?) runs an ordinary turn job and
returns the reply; habakkuk_sessions_list and habakkuk_session_read show
transcripts; habakkuk_schedules_list(agent?) shows the schedules (next fire times,
last status and output, failure streak) in the HTTP API's shape;
habakkuk_send(account, conversation, text) queues a durable chat delivery and exists
only with `mcp_server.allow_send: true`. habakkuk_board_create(title, body?, assignee?,
priority?, parent?, depends_on?) adds a card as the user and habakkuk_board_list(status?,
assignee?) lists cards, both in the HTTP API's card shape.

`serve_stdio(runtime)` is `habakkuk mcp serve`. For /mcp, `McpHttpEndpoint`
bridges aiohttp to the SDK's Streamable HTTP session manager; mount it with
`endpoint.install(app)` (a route for /mcp plus a cleanup context that runs the
session manager).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from habakkuk.engine.timeouts import wait_within

if TYPE_CHECKING:
    from aiohttp import web
    from mcp.server.mcpserver import MCPServer

    from habakkuk.engine.agent.turn_access import TurnsAccess
    from habakkuk.engine.config import Config
    from habakkuk.engine.outbox_access import TextOutbox
    from habakkuk.engine.session_access import SessionsAccess
    from habakkuk.work.board_types import BoardAccess
    from habakkuk.work.schedule_types import SchedulesAccess


class McpHost(Protocol):
    """What the MCP server uses of the runtime (habakkuk.runtime.Runtime provides it); the
    services in it are typed by their own Protocols, declared once in the engine."""

    config: Config

    @property
    def outbox(self) -> TextOutbox:
        """Where `habakkuk_send` queues its message."""
        ...

    @property
    def sessions(self) -> SessionsAccess: ...

    @property
    def turns(self) -> TurnsAccess: ...


log = logging.getLogger(__name__)

READ_LIMIT = 200
TEXT_LIMIT = 4000

ASK_DOC = (
    "Ask a Habakkuk agent something. It runs one full turn (with the agent's tools and "
    "permissions) and returns the reply. Pass `session` (from an earlier answer) to continue "
    "that conversation, or `agent` to pick an agent for a new one (default: the default agent)."
)


def _message_lines(stored: Any) -> str:
    """One stored message as readable text: its text, tool calls and results in short."""
    message = stored.message
    parts = [message.text] if message.text else []
    for use in message.tool_uses:
        parts.append(f"[tool call {use.tool}]")
    for result in message.tool_results:
        mark = "error" if result.is_error else "result"
        parts.append(f"[tool {mark}: {result.text[:300]}]")
    text = "\n".join(parts)
    return text if len(text) <= TEXT_LIMIT else text[:TEXT_LIMIT] + " …[cut]"


def build_server(runtime: McpHost) -> MCPServer:
    """The MCP server offering Habakkuk's tools on top of `runtime`."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    from habakkuk import __version__
    from habakkuk.engine.errors import HabakkukError

    # MCPServer calls logging.basicConfig with a Rich handler; with a placeholder
    # handler on the root that is a no-op, so Habakkuk's own logging stays in charge.
    root = logging.getLogger()
    placeholder = logging.NullHandler() if not root.handlers else None
    if placeholder is not None:
        root.addHandler(placeholder)
    try:
        server: MCPServer = MCPServer(
            "habakkuk",
            version=__version__,
            instructions="Habakkuk's agents: ask them with habakkuk_ask; read their sessions.",
            log_level="WARNING",
        )
    finally:
        if placeholder is not None:
            root.removeHandler(placeholder)

    async def habakkuk_ask(
        message: str, agent: str | None = None, session: str | None = None
    ) -> dict[str, Any]:
        if not message.strip():
            raise ToolError("message is empty")
        try:
            if session:
                found = await runtime.sessions.session(session)
                if agent and agent != found.agent:
                    raise ToolError(f"session {session} belongs to agent {found.agent!r}")
                session_id = found.id
            else:
                session_id = (await runtime.sessions.new_session(agent, origin="mcp")).id
            turn = await runtime.turns.submit(session_id, message)
            outcome = await runtime.turns.wait_turn(turn)
        except HabakkukError as exc:
            raise ToolError(str(exc)) from None
        if outcome.status != "done":
            why = f": {outcome.error}" if outcome.error else ""
            raise ToolError(f"the turn {outcome.status}{why} (session {session_id}, turn {turn})")
        return {"reply": outcome.reply, "session": session_id, "turn": turn}

    async def habakkuk_sessions_list(agent: str | None = None, limit: int = 20) -> dict[str, Any]:
        from habakkuk.engine.export import session_json

        try:
            # Every session, each with its origin: the client tells chats from work.
            sessions = await runtime.sessions.list_sessions(
                agent, limit=max(1, min(limit, 200)), include_work=True
            )
        except HabakkukError as exc:
            raise ToolError(str(exc)) from None
        return {"sessions": [dict(session_json(s), origin=s.origin) for s in sessions]}

    async def habakkuk_session_read(session: str, limit: int = 50) -> dict[str, Any]:
        try:
            found = await runtime.sessions.session(session)
            messages = await runtime.sessions.messages(session)
        except HabakkukError as exc:
            raise ToolError(str(exc)) from None
        limit = max(1, min(limit, READ_LIMIT))
        shown = messages[-limit:]
        return {
            "session": found.id,
            "agent": found.agent,
            "title": found.title,
            "total": len(messages),
            "messages": [{"seq": m.seq, "role": m.role, "text": _message_lines(m)} for m in shown],
        }

    server.add_tool(habakkuk_ask, description=ASK_DOC)
    server.add_tool(
        habakkuk_sessions_list,
        description="Recent Habakkuk sessions, newest first (optionally of one agent).",
    )
    server.add_tool(
        habakkuk_session_read,
        description="The last `limit` messages of a Habakkuk session, as text.",
    )

    async def habakkuk_schedules_list(agent: str | None = None) -> dict[str, Any]:
        return await _schedules_list(runtime, agent)

    server.add_tool(
        habakkuk_schedules_list,
        description=(
            "Habakkuk's schedules (optionally of one agent), next to run first: each with "
            "its timetable, next fire times, last status and output, and failure streak."
        ),
    )

    async def habakkuk_board_create(
        title: str,
        body: str = "",
        assignee: str = "",
        priority: int = 0,
        parent: str | None = None,
        depends_on: list[str] | None = None,
    ) -> dict[str, Any]:
        return await _board_create(
            runtime, title, body, assignee, priority, parent, list(depends_on or [])
        )

    async def habakkuk_board_list(
        status: str = "open", assignee: str | None = None
    ) -> dict[str, Any]:
        return await _board_list(runtime, status, assignee)

    server.add_tool(
        habakkuk_board_create,
        description=(
            "Add a card to Habakkuk's board as the user: `assignee` (an agent) runs it when "
            "its `depends_on` cards are done; higher `priority` (-100 to 100) runs first. "
            "Returns the card."
        ),
    )
    server.add_tool(
        habakkuk_board_list,
        description=(
            "Cards on Habakkuk's board, highest priority first: `status` open (todo, doing, "
            "blocked; the default), all, or one status; `assignee` one agent's cards."
        ),
    )
    if runtime.config.mcp_server.allow_send:

        async def habakkuk_send(account: str, conversation: str, text: str) -> dict[str, Any]:
            return await _send(runtime, account, conversation, text)

        server.add_tool(
            habakkuk_send,
            description=(
                "Send a message to a chat through one of Habakkuk's channel accounts: "
                "`account` is the account name, `conversation` the chat id. It is queued as "
                "a durable delivery."
            ),
        )
    return server


async def _send(runtime: McpHost, account: str, conversation: str, text: str) -> dict[str, Any]:
    from mcp.server.mcpserver.exceptions import ToolError

    channels = runtime.config.channels
    if account not in channels:
        known = ", ".join(sorted(channels)) or "none"
        raise ToolError(f"channel account {account!r} is not configured (accounts: {known})")
    if not text.strip():
        raise ToolError("text is empty")
    address = f"{account}:{conversation}"
    job_id = f"send:{secrets.token_hex(8)}"
    try:
        await runtime.outbox.send_text(job_id, address, text)
    except ValueError as exc:
        raise ToolError(f"conversation: {exc}") from None
    return {"queued": job_id, "to": address}


async def _schedules_list(runtime: McpHost, agent: str | None) -> dict[str, Any]:
    from mcp.server.mcpserver.exceptions import ToolError

    from habakkuk.engine.errors import HabakkukError
    from habakkuk.work import schedule_views as views

    schedules: SchedulesAccess | None = getattr(runtime, "schedules", None)
    if schedules is None:
        raise ToolError("this process has no schedules service")
    try:
        if agent:
            agent = runtime.config.agent(agent).name
        found = await schedules.list_schedules(agent or None)
    except HabakkukError as exc:
        raise ToolError(str(exc)) from None
    shown = []
    for schedule in found:
        shown.append(views.schedule_json(schedule, next_runs=schedules.upcoming(schedule) or None))
    return {"schedules": shown}


def _board(runtime: McpHost) -> BoardAccess:
    from mcp.server.mcpserver.exceptions import ToolError

    board: BoardAccess | None = getattr(runtime, "board", None)
    if board is None:
        raise ToolError("this process has no board service")
    return board


async def _board_create(
    runtime: McpHost,
    title: str,
    body: str,
    assignee: str,
    priority: int,
    parent: str | None,
    depends_on: list[str],
) -> dict[str, Any]:
    from mcp.server.mcpserver.exceptions import ToolError

    from habakkuk.engine.errors import HabakkukError
    from habakkuk.work.board_types import USER, NewCard
    from habakkuk.work.board_views import card_json

    board = _board(runtime)
    if not title.strip():
        raise ToolError("title is empty")
    try:
        if assignee.strip():
            assignee = runtime.config.agent(assignee.strip()).name
        new = NewCard(
            title=title.strip(),
            body=body.strip(),
            assignee=assignee.strip(),
            priority=priority,
            parent=(parent or "").strip() or None,
            depends_on=tuple(dict.fromkeys(d.strip() for d in depends_on if d.strip())),
        )
        card = await board.get((await board.create(new, by=USER)).id)  # read back
    except HabakkukError as exc:  # bad input, NotFound, BoardRefused, unknown agent
        raise ToolError(str(exc)) from None
    return card_json(card)


async def _board_list(runtime: McpHost, status: str, assignee: str | None) -> dict[str, Any]:
    from mcp.server.mcpserver.exceptions import ToolError

    from habakkuk.engine.errors import HabakkukError
    from habakkuk.work.board_views import card_json

    board = _board(runtime)
    try:
        cards = await board.list_cards(status=status or "open", assignee=assignee or None)
    except HabakkukError as exc:  # an unknown status word
        raise ToolError(str(exc)) from None
    return {"cards": [card_json(card, history=False) for card in cards]}


async def serve_stdio(runtime: McpHost) -> None:
    """`habakkuk mcp serve`: MCP on stdin/stdout until the client goes away."""
    server = build_server(runtime)
    await server.run_stdio_async()


class McpHttpEndpoint:
    """/mcp over Streamable HTTP inside Habakkuk's aiohttp server.

    Stateless (every POST stands alone, JSON responses), so several processes or
    restarts need no session affinity. `token`, when given, is required as a
    bearer token (the API token); leave it None when the app's own middleware
    already checks it.
    """

    def __init__(
        self,
        runtime: McpHost,
        token: str | None = None,
        *,
        read_body: Callable[[web.Request], Awaitable[bytes]] | None = None,
    ):
        """`read_body`: how the request body is read (the server's reader, with its size
        cap and deadline); aiohttp's `request.read()` when None."""
        self.runtime = runtime
        self.token = token
        self._read_body = read_body
        self._manager: Any = None
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    def install(self, app: web.Application, path: str = "/mcp") -> None:
        """Add the route and the session manager's lifetime to an aiohttp app."""
        app.router.add_route("*", path, self.handle)
        app.cleanup_ctx.append(self.lifespan)

    async def lifespan(self, app: web.Application) -> AsyncIterator[None]:
        """aiohttp cleanup context: the session manager runs while the app does."""
        await self.start()
        try:
            yield
        finally:
            await self.stop()

    async def start(self) -> None:
        """Run the SDK's session manager in its own task (its task group lives there)."""
        if self._task is not None:
            return
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

        server = build_server(self.runtime)
        self._manager = StreamableHTTPSessionManager(
            app=server._lowlevel_server,  # the SDK's documented HTTP path does the same
            json_response=True,
            stateless=True,
        )
        ready = asyncio.Event()
        self._stop = asyncio.Event()

        async def run() -> None:
            async with self._manager.run():
                ready.set()
                await self._stop.wait()

        self._task = asyncio.create_task(run(), name="mcp-http")
        waiter = asyncio.create_task(ready.wait())
        done, _ = await asyncio.wait([waiter, self._task], return_when=asyncio.FIRST_COMPLETED)
        if self._task in done:
            waiter.cancel()
            self._task.result()  # raises why it could not start

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            task, self._task = self._task, None
            with contextlib.suppress(Exception):
                await wait_within(task, 10)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """Bridge one aiohttp request to the SDK's ASGI handler."""
        from aiohttp import web

        if self.token is not None:
            given = request.headers.get("Authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {self.token}".encode()):
                return web.json_response({"error": "missing or wrong API token"}, status=401)
        if self._manager is None:
            return web.json_response({"error": "the MCP endpoint is not running"}, status=503)
        if request.method != "POST":
            # Stateless: no server-sent stream to GET and no session to DELETE.
            return web.json_response(
                {"error": "only POST is served here"}, status=405, headers={"Allow": "POST"}
            )
        body = await self._read_body(request) if self._read_body else await request.read()
        scope: dict[str, Any] = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": f"{request.version.major}.{request.version.minor}",
            "method": request.method,
            "scheme": request.scheme,
            "path": request.path,
            "raw_path": request.raw_path.split("?")[0].encode(),
            "query_string": request.query_string.encode(),
            "root_path": "",
            "headers": [(k.lower().encode(), v.encode()) for k, v in request.headers.items()],
            "client": (request.remote or "", 0),
            "server": (request.host, 0),
        }
        finished = asyncio.Event()
        sent_body = False
        response: web.StreamResponse | None = None

        async def receive() -> dict[str, Any]:
            nonlocal sent_body
            if not sent_body:
                sent_body = True
                return {"type": "http.request", "body": body, "more_body": False}
            await finished.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            nonlocal response
            if message["type"] == "http.response.start":
                response = web.StreamResponse(status=int(message["status"]))
                for key, value in message.get("headers", []):
                    name = key.decode("latin-1")
                    if name.lower() in ("content-length", "transfer-encoding"):
                        continue
                    response.headers.add(name, value.decode("latin-1"))
                await response.prepare(request)
            elif message["type"] == "http.response.body" and response is not None:
                chunk = message.get("body", b"")
                if chunk:
                    await response.write(chunk)
                if not message.get("more_body", False):
                    finished.set()

        try:
            await self._manager.handle_request(scope, receive, send)
        finally:
            finished.set()
        if response is None:
            return web.json_response({"error": "no response"}, status=500)
        await response.write_eof()
        return response
