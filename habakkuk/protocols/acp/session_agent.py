"""The agent side of the Agent Client Protocol: what an editor's requests do.

- session/new makes a session of the agent (`habakkuk acp --agent`, else the default)
  whose workspace, named in its frozen prompt, is the editor's cwd (kind.py).
- session/prompt queues the message as an editor turn (its own kind, pinned to this
  process) and streams the session's events to the editor while it runs: text and
  thinking as message and thought chunks, tool calls as tool_call and tool_call_update,
  a successful update_plan as a plan, and each approval as session/request_permission,
  whose answer goes down the one approvals path (`respond`). It answers with the stop
  reason once the turn has ended: end_turn, or cancelled.
- session/cancel stops the turn at once (its task is cancelled here; a queued one is
  cancelled in the queue) and the prompt answers cancelled.
- session/load replays an editor session's stored messages as the updates they streamed.

Protocol errors (an unknown session, a second prompt while one runs, bad params) answer
the request with a JSON-RPC error; the process goes on serving.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from habakkuk.engine.errors import HabakkukError, NotFound
from habakkuk.engine.events import (
    ApprovalAnswered,
    ApprovalAsked,
    ApprovalWithdrawn,
    EventPayload,
    JobFinished,
    ToolEnded,
    ToolStarted,
    TurnEnded,
    TurnText,
    TurnThinking,
)
from habakkuk.engine.i18n import t
from habakkuk.engine.timeouts import wait_within
from habakkuk.engine.toolkit.registry import ToolError

from .kind import origin_for, workspace_of
from .mapping import (
    PLAN_TOOL,
    diff_content,
    locations,
    plan_entries,
    prompt_text,
    replay,
    tool_ended,
    tool_kind,
    tool_started,
)

if TYPE_CHECKING:
    from acp.interfaces import Client
    from acp.schema import (
        ClientCapabilities,
        Implementation,
        InitializeResponse,
        LoadSessionResponse,
        NewSessionResponse,
        PromptResponse,
    )

    from habakkuk.engine.config import Config
    from habakkuk.engine.events import EventBus, Subscription
    from habakkuk.engine.jobs import Job, JobQueue
    from habakkuk.engine.session_access import SessionsAccess
    from habakkuk.engine.sessions import TranscriptStore
    from habakkuk.engine.toolkit.approvals import Answer, ApprovalRequest

    from .mapping import PromptBlock

log = logging.getLogger(__name__)

# How often a prompt looks at its job while no event comes (a turn cancelled in the queue
# settles without events; the bus wakes it otherwise).
POLL_SECONDS = 0.5
# Events a prompt may have waiting: a long stream of text deltas must never be dropped.
BACKLOG = 100_000
# The permission options, by the approvals' answer each stands for.
OPTION_KINDS: dict[str, str] = {
    "allow_once": "allow_once",
    "allow_session": "allow_always",
    "deny": "reject_once",
}


class Releasable(Protocol):
    """Attendance on the approvals (services.approvals.Attendance)."""

    def release(self) -> None: ...


class AcpApprovals(Protocol):
    """What the editor uses of the approvals (services.approvals.Approvals)."""

    def attach(self, *, questions: bool = False) -> Releasable:
        """Attend: turns submitted as attended ask a human while someone attends."""
        ...

    async def respond(
        self, approval_id: str, answer: Answer, by: str, *, notify: bool = True
    ) -> bool:
        """Answer a waiting approval wherever it waits."""
        ...


class AcpHost(Protocol):
    """What `habakkuk acp` uses of the runtime (habakkuk.runtime.Runtime provides it)."""

    config: Config
    bus: EventBus
    queue: JobQueue
    transcripts: TranscriptStore

    @property
    def sessions(self) -> SessionsAccess: ...

    @property
    def approvals(self) -> AcpApprovals: ...

    def job_settled(self, job: Job) -> None:
        """Publish job.finished for a job settled outside a pool."""
        ...


class TurnQueue(Protocol):
    """Where editor turns are queued and stopped (runs.py's)."""

    async def submit(self, session: str, text: str, workspace: Path) -> str:
        """Queue an editor turn of `session`; its id."""
        ...

    async def stop(self, turn: str) -> None:
        """Stop the turn at once (running here) or in the queue."""
        ...


@dataclass
class OpenSession:
    """A session this connection has opened (new or loaded)."""

    id: str
    workspace: Path
    turn: str | None = None
    cancelled: bool = False
    asking: dict[str, asyncio.Task[None]] = field(default_factory=dict)  # approval id -> ask
    inputs: dict[str, dict[str, Any]] = field(default_factory=dict)  # call id -> its input


def _bad_params(message: str, **data: object) -> Exception:
    from acp import RequestError

    return RequestError.invalid_params({"message": message, **data})


class SessionAgent:
    """One editor connection's agent (acp.interfaces.Agent), over one runtime."""

    def __init__(self, host: AcpHost, agent: str | None, title: Any = None):
        self.host = host
        self.agent = agent
        self.turns: TurnQueue | None = None  # set by serve.py once the pool exists
        self.title = title or (lambda tool, given: tool)
        self.conn: Client | None = None
        self.fs_read = False
        self.fs_write = False
        self.opened: dict[str, OpenSession] = {}

    # -- the connection ----------------------------------------------------------------

    def on_connect(self, conn: Client) -> None:
        """The connection to the editor (to send updates and ask it things)."""
        self.conn = conn

    def _client(self) -> Client:
        if self.conn is None:
            raise RuntimeError("no editor connection")
        return self.conn

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: ClientCapabilities | None = None,
        client_info: Implementation | None = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        """Agree on the protocol version and say what Habakkuk offers; note the editor's
        file system."""
        from acp import PROTOCOL_VERSION
        from acp.schema import (
            AgentCapabilities,
            InitializeResponse,
            PromptCapabilities,
        )
        from acp.schema import Implementation as Info

        from habakkuk import __version__

        fs = client_capabilities.fs if client_capabilities is not None else None
        self.fs_read = bool(fs and fs.read_text_file)
        self.fs_write = bool(fs and fs.write_text_file)
        return InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=AgentCapabilities(
                load_session=True,
                prompt_capabilities=PromptCapabilities(
                    image=False, audio=False, embedded_context=True
                ),
            ),
            agent_info=Info(name="habakkuk", title="Habakkuk", version=__version__),
            auth_methods=[],
        )

    async def authenticate(self, method_id: str, **kwargs: Any) -> None:
        """No authentication: the editor started this process as its user."""
        return None

    # -- sessions ----------------------------------------------------------------------

    async def new_session(
        self, cwd: str, mcp_servers: Any = None, **kwargs: Any
    ) -> NewSessionResponse:
        """A new session whose workspace is the editor's folder `cwd`."""
        from acp.schema import NewSessionResponse

        folder = Path(cwd)
        if not folder.is_absolute() or not folder.is_dir():
            raise _bad_params(t("acp.bad_cwd", cwd=cwd), cwd=cwd)
        try:
            session = await self.host.sessions.new_session(
                self.agent, origin=origin_for(str(folder)), chat=True, workspace=folder
            )
        except HabakkukError as exc:
            raise _bad_params(str(exc)) from None
        self.opened[session.id] = OpenSession(session.id, folder)
        return NewSessionResponse(session_id=session.id)

    async def load_session(
        self, cwd: str, session_id: str, mcp_servers: Any = None, **kwargs: Any
    ) -> LoadSessionResponse:
        """Open an editor session again and replay its messages to the editor."""
        from acp.schema import LoadSessionResponse

        try:
            session = await self.host.sessions.session(session_id)
        except NotFound:
            raise _bad_params(t("acp.unknown_session", session=session_id)) from None
        where = workspace_of(session.origin)
        if where is None:
            raise _bad_params(t("acp.not_editor_session", session=session_id))
        opened = self.opened.setdefault(session.id, OpenSession(session.id, Path(where)))
        stored = await self.host.sessions.messages(session.id)
        client = self._client()
        for update in replay(stored, opened.workspace, self.title):
            await client.session_update(session_id=session.id, update=update)
        return LoadSessionResponse()

    def _open(self, session_id: str) -> OpenSession:
        found = self.opened.get(session_id)
        if found is None:
            raise _bad_params(t("acp.unknown_session", session=session_id))
        return found

    # -- prompts -----------------------------------------------------------------------

    async def prompt(
        self, prompt: list[PromptBlock], session_id: str, **kwargs: Any
    ) -> PromptResponse:
        """Run the message as a turn, streaming it; the stop reason when it has ended."""
        from acp.schema import PromptResponse

        opened = self._open(session_id)
        if opened.turn is not None:
            from acp import RequestError

            raise RequestError.invalid_request({"message": t("acp.busy", session=session_id)})
        text = prompt_text(prompt)
        if not text.strip():
            raise _bad_params(t("acp.empty_prompt"))
        if self.turns is None:
            raise RuntimeError("the editor turns' pool is not running")
        opened.cancelled = False
        opened.turn = ""  # taken: a second prompt is refused, a cancel is kept for it
        with self.host.bus.subscribe(
            lambda event: event.session == session_id, maxsize=BACKLOG
        ) as events:
            try:
                turn = await self.turns.submit(session_id, text, opened.workspace)
            except BaseException:
                opened.turn = None
                raise
            opened.turn = turn
            if opened.cancelled:  # cancelled while it was being queued
                await self.turns.stop(turn)
            try:
                stop = await self._follow(opened, turn, events)
            finally:
                opened.turn = None
                await self._stop_asking(opened)
                opened.inputs.clear()
        return PromptResponse(stop_reason=stop)

    async def _follow(self, opened: OpenSession, turn: str, events: Subscription) -> Any:
        """Stream the turn's events until it ends; its stop reason."""
        while True:
            try:
                event = await wait_within(events.get(), POLL_SECONDS)
            except TimeoutError:
                job = await self.host.queue.get(turn)
                if job is None or not job.finished:
                    continue
                return self._ended(opened, job.status, job.error or "")
            ended = await self._forward(opened, turn, event)
            if ended is not None:
                return ended

    async def _forward(self, opened: OpenSession, turn: str, event: EventPayload) -> Any:
        """Send one event to the editor; the stop reason when it ends the turn."""
        from acp import update_agent_message_text, update_agent_thought_text, update_plan

        client = self._client()
        session = opened.id
        if isinstance(event, TurnText) and event.turn == turn:
            await client.session_update(session, update_agent_message_text(event.text))
        elif isinstance(event, TurnThinking) and event.turn == turn:
            await client.session_update(session, update_agent_thought_text(event.text))
        elif isinstance(event, ToolStarted):
            opened.inputs[event.call_id] = dict(event.input)
            update = tool_started(
                event.call_id, event.tool, event.title, event.input, opened.workspace
            )
            await client.session_update(session, update)
        elif isinstance(event, ToolEnded):
            given = opened.inputs.pop(event.call_id, {})
            if event.tool == PLAN_TOOL and event.status == "ok":
                await client.session_update(session, update_plan(plan_entries(given)))
            done = tool_ended(
                event.call_id, event.tool, given, event.is_error, event.preview, opened.workspace
            )
            await client.session_update(session, done)
        elif isinstance(event, ApprovalAsked):
            ask = asyncio.create_task(self._ask(opened, event.request), name=f"acp-ask:{event.id}")
            opened.asking[event.id] = ask
        elif isinstance(event, ApprovalAnswered | ApprovalWithdrawn):
            waiting = opened.asking.pop(event.id, None)
            if waiting is not None and not waiting.done():
                waiting.cancel()
        elif isinstance(event, TurnEnded) and event.turn == turn:
            return self._ended(opened, event.status, event.error)
        elif isinstance(event, JobFinished) and event.job == turn:
            job = await self.host.queue.get(turn)
            return self._ended(opened, event.status, job.error or "" if job else "")
        return None

    def _ended(self, opened: OpenSession, status: str, error: str) -> Any:
        """The stop reason of a turn that ended with `status`; a failed turn answers the
        prompt with its error."""
        if opened.cancelled or status in ("stopped", "cancelled"):
            return "cancelled"
        if status == "done":
            return "end_turn"
        from acp import RequestError

        raise RequestError.internal_error({"message": error or status})

    # -- permissions -------------------------------------------------------------------

    async def _ask(self, opened: OpenSession, request: ApprovalRequest) -> None:
        """Put one approval to the editor and answer it with the option chosen (deny
        when the editor cancels or cannot be asked)."""
        from acp.schema import AllowedOutcome, PermissionOption, ToolCallUpdate

        options = [
            PermissionOption(option_id=answer, name=t(f"acp.option.{answer}"), kind=kind)  # type: ignore[arg-type]  # OPTION_KINDS' values are the schema's literals
            for answer, kind in OPTION_KINDS.items()
        ]
        call = ToolCallUpdate(
            tool_call_id=request.call_id or request.id,
            title=request.summary or request.tool,
            kind=tool_kind(request.tool),
            status="pending",
            locations=locations(request.input, opened.workspace),
            content=diff_content(request.tool, request.input, opened.workspace) or None,
            raw_input=dict(request.input),
        )
        answer: Answer = "deny"
        try:
            response = await self._client().request_permission(
                session_id=opened.id, tool_call=call, options=options
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the editor failed to answer: nobody allowed it
            log.warning("permission request for %s failed: %s", request.tool, exc)
        else:
            outcome = response.outcome
            if isinstance(outcome, AllowedOutcome):
                chosen = outcome.option_id
                answer = "allow_once" if chosen == "allow_once" else answer
                answer = "allow_session" if chosen == "allow_session" else answer
        await self.host.approvals.respond(request.id, answer, by="editor", notify=False)

    async def _stop_asking(self, opened: OpenSession) -> None:
        waiting = list(opened.asking.values())
        opened.asking.clear()
        for task in waiting:
            task.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)

    # -- cancel ------------------------------------------------------------------------

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        """Stop the session's turn at once; its prompt answers cancelled."""
        opened = self.opened.get(session_id)
        if opened is None or opened.turn is None or self.turns is None:
            return
        opened.cancelled = True
        await self._stop_asking(opened)
        if opened.turn:  # "": still being queued; the prompt stops it once it is
            await self.turns.stop(opened.turn)

    async def close(self) -> None:
        """The editor went away: stop every turn it started."""
        for opened in self.opened.values():
            if opened.turn and self.turns is not None:
                opened.cancelled = True
                with contextlib.suppress(Exception):
                    await self.turns.stop(opened.turn)

    # -- the editor's file system (editor_tools.EditorFiles) ---------------------------

    def reads(self, session: str) -> bool:
        """Whether the session's editor reads files for us (fs.readTextFile)."""
        return self.fs_read and session in self.opened

    def writes(self, session: str) -> bool:
        """Whether the session's editor writes files for us (fs.writeTextFile)."""
        return self.fs_write and session in self.opened

    async def read_text(self, session: str, path: str) -> str:
        """The file's text as the editor has it, unsaved changes included."""
        try:
            response = await self._client().read_text_file(session_id=session, path=path)
        except Exception as exc:
            raise ToolError(f"{path}: the editor could not read it: {exc}") from None
        return response.content

    async def write_text(self, session: str, path: str, content: str) -> None:
        """Write the file through the editor."""
        try:
            await self._client().write_text_file(session_id=session, path=path, content=content)
        except Exception as exc:
            raise ToolError(f"{path}: the editor could not write it: {exc}") from None

    def live(self, session: str) -> bool:
        """Whether this connection has the session open (its turns can run here)."""
        return session in self.opened
