"""What the HTTP server uses of the runtime: a narrow Protocol, so server/ never imports it.

`habakkuk.runtime.Runtime` provides it; the server is started by the runtime's HTTP
listener (`habakkuk.server.listener`) and is handed the runtime as a `ServerHost`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from habakkuk.conversation.commands import CommandSessions, CommandTurns, CommandUsage, Services
from habakkuk.protocols.mcp.server import McpHost, McpSessions, McpTurns, TurnOutcomeView

if TYPE_CHECKING:
    from habakkuk.engine.agent.requests import ReplyTo
    from habakkuk.engine.config import Config
    from habakkuk.engine.events import EventBus
    from habakkuk.engine.home import Environment, Home
    from habakkuk.engine.jobs import JobQueue
    from habakkuk.engine.llm.types import Block, Message
    from habakkuk.engine.llm.usage import UsageTotal
    from habakkuk.engine.overview import Overview
    from habakkuk.engine.sessions import Compaction, SearchHit, Session, StoredMessage
    from habakkuk.engine.store import BlobStore
    from habakkuk.engine.toolkit.approvals import Answer, ApprovalRequest
    from habakkuk.engine.toolkit.waiting import WaitingApproval


class ServerApprovals(Protocol):
    """What the server uses of the approvals service."""

    @property
    def pending(self) -> list[ApprovalRequest]:
        """This process's waiting requests, oldest first."""
        ...

    async def waiting(self) -> list[WaitingApproval]:
        """Every call waiting for approval on this home, oldest first."""
        ...

    async def respond(self, approval_id: str, answer: Answer, by: str) -> bool:
        """Answer a waiting approval wherever it waits; False when it no longer waits."""
        ...


class ServerSessions(McpSessions, CommandSessions, Protocol):
    """What the server uses of the sessions service (MCP's and the commands' included)."""

    async def new_session(
        self,
        agent: str | None = None,
        *,
        origin: str = ...,
        session_id: str | None = None,
        chat: bool = ...,
    ) -> Session:
        """A new session of `agent`; a `session_id` from its cause makes a repeat idempotent;
        `chat` for a conversation with the user (it may take the one-time welcome)."""
        ...

    async def seed_session(
        self, session_id: str, history: Sequence[tuple[str, str] | Message]
    ) -> None:
        """Append earlier messages to a new session without running a turn."""
        ...

    async def search_sessions(
        self, query: str, agent: str | None = None, *, limit: int = 20
    ) -> list[SearchHit]:
        """Full-text search over sessions, best first."""
        ...

    async def turn_messages(self, session_id: str, turn_id: str) -> list[StoredMessage]:
        """The messages one turn wrote, in order."""
        ...

    async def compaction(self, session_id: str) -> Compaction | None:
        """The session's latest compaction, if any."""
        ...

    async def save_attachment(self, agent: str, filename: str, data: bytes) -> str:
        """Store an upload and copy it to the agent's workspace; returns the copy's path."""
        ...


class ServerTurns(McpTurns, CommandTurns, Protocol):
    """What the server uses of the turns service (MCP's and the commands' included)."""

    async def submit(
        self,
        session_id: str,
        text: str,
        *,
        turn_id: str | None = None,
        attended: bool = False,
        reply_to: ReplyTo | None = None,
        blocks: Sequence[Block] = (),
    ) -> str:
        """Queue a turn for `text` in the session; returns the turn id."""
        ...

    async def compact_session(
        self, session_id: str, *, job_id: str | None = None, reply_to: ReplyTo | None = None
    ) -> str:
        """Queue a compaction of the session; returns its job id."""
        ...

    async def turn_outcome(self, turn_id: str) -> TurnOutcomeView | None:
        """The turn's state now, or None when there is no such turn."""
        ...


class ServerUsage(CommandUsage, Protocol):
    """What the server uses of the usage ledger (the commands' part included)."""

    async def usage_since(self, since: float, *, agent: str | None = None) -> list[UsageTotal]:
        """Usage totals by model and agent since `since` (epoch seconds)."""
        ...

    def call_cost(self, model: str, usage: dict[str, Any]) -> float | None:
        """Dollars of one model call, None when unpriced."""
        ...


class DoctorCheck(Protocol):
    """One of the doctor's checks as the server shows it (habakkuk.services.doctor.Check)."""

    @property
    def status(self) -> str:
        """ok, WARN or FAIL."""
        ...

    @property
    def name(self) -> str:
        """What was checked ("config", "key anthropic", ...)."""
        ...

    @property
    def detail(self) -> str:
        """What was found, in a line."""
        ...


class ServerControl(Protocol):
    """What the server uses of the control room (habakkuk.services.overview)."""

    async def doctor(self, home: Home) -> Sequence[DoctorCheck]:
        """The doctor's checks of the home, in order."""
        ...

    async def channel_states(self) -> list[dict[str, Any]]:
        """Every configured channel account with its last recorded state."""
        ...

    async def overview(self) -> Overview:
        """The control room in one read."""
        ...


class ServerHost(McpHost, Services, Protocol):
    """The runtime as the server sees it: sessions, turns, approvals, usage and state.

    It includes what the MCP endpoint (McpHost) and the chat commands (Services) use.
    """

    config: Config
    env: Environment
    home: Home
    bus: EventBus
    blobs: BlobStore
    queue: JobQueue

    def channel_service(self) -> Any:
        """The chat channels (habakkuk.channels.service.ChannelService), made on first use."""
        ...

    @property
    def approvals(self) -> ServerApprovals:
        """This process's approval hub and the one answer path (services.approvals)."""
        ...

    @property
    def sessions(self) -> ServerSessions:
        """The home's sessions (services.sessions)."""
        ...

    @property
    def turns(self) -> ServerTurns:
        """The turn queue and this process's pools (services.turns)."""
        ...

    @property
    def ledger(self) -> ServerUsage:
        """Tokens and dollars (services.usage)."""
        ...

    @property
    def control(self) -> ServerControl:
        """The control room's reads (services.overview)."""
        ...
