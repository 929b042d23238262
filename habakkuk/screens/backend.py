"""What the terminal's screens use of the runtime: a narrow Protocol, `TerminalBackend`.

Screens type the open runtime by it, never by `habakkuk.runtime.Runtime` (which provides
it: habakkuk/app.py has mypy check that). It is built from what the screens call, each
service by its own small Protocol; the chat commands' `Services` and the widgets'
`WidgetBackend` are part of it because the chat screen runs the commands and hosts the
widgets. A new section's service joins here as one more property.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from habakkuk.conversation.commands import CommandSessions, CommandTurns, Services
from habakkuk.widgets.backend import WidgetApprovals, WidgetBackend, WidgetSessions

if TYPE_CHECKING:
    from collections.abc import Sequence

    from habakkuk.engine.agent.requests import ReplyTo
    from habakkuk.engine.llm.types import Block
    from habakkuk.engine.overview import Overview
    from habakkuk.engine.sessions import SearchHit, Session
    from habakkuk.engine.toolkit.approvals import ApprovalRequest
    from habakkuk.engine.toolkit.waiting import WaitingApproval
    from habakkuk.services.turns import TurnOutcome
    from habakkuk.tools.clarify import ClarifyRequest
    from habakkuk.work.board_types import BoardAccess
    from habakkuk.work.schedule_types import SchedulesAccess


class TerminalSessions(CommandSessions, WidgetSessions, Protocol):
    """What the screens use of the sessions service (habakkuk.services.sessions)."""

    async def new_session(
        self, agent: str | None = None, *, origin: str = "cli", chat: bool = False
    ) -> Session:
        """A new session of `agent` (default: the default agent); `chat`: a conversation
        with the user (it may take the one-time welcome)."""
        ...

    async def list_sessions(
        self,
        agent: str | None = None,
        *,
        limit: int = 50,
        archived: bool = False,
        include_work: bool = False,
    ) -> list[Session]:
        """Recent sessions (of `agent`), newest first (`include_work`: board cards' and
        sub-agents' too)."""
        ...

    async def search_sessions(
        self, query: str, agent: str | None = None, *, limit: int = 20
    ) -> list[SearchHit]:
        """Full-text search over sessions, best first."""
        ...

    async def archive_session(self, session_id: str, archived: bool = True) -> None:
        """Hide a session from the recent list (or bring it back)."""
        ...

    def export_default(self, session_id: str, fmt: str) -> str:
        """Where an export of the session goes when no path is given."""
        ...


class TerminalTurns(CommandTurns, Protocol):
    """What the screens use of the turns service (habakkuk.services.turns)."""

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

    async def compact_session(self, session_id: str) -> str:
        """Queue a compaction of the session; returns its job id."""
        ...

    async def wait_turn(self, turn_id: str) -> TurnOutcome:
        """Wait for the turn (or compaction) to settle."""
        ...


class TerminalApprovals(WidgetApprovals, Protocol):
    """What the screens use of the approvals service (habakkuk.services.approvals)."""

    @property
    def pending(self) -> list[ApprovalRequest]:
        """This process's waiting requests, oldest first."""
        ...

    @property
    def questions(self) -> list[ClarifyRequest]:
        """Waiting clarify requests, oldest first."""
        ...

    def answer_question(self, question_id: str, text: str) -> bool:
        """Answer a waiting clarify request; False when it no longer waits."""
        ...

    async def waiting(self) -> list[WaitingApproval]:
        """Every call waiting for approval on this home, oldest first."""
        ...


class TerminalControl(Protocol):
    """What the overview screen uses of the control room (habakkuk.services.overview)."""

    async def overview(self) -> Overview:
        """The control room in one read."""
        ...


class TerminalBackend(Services, WidgetBackend, Protocol):
    """The open runtime as the terminal's screens see it."""

    @property
    def sessions(self) -> TerminalSessions: ...

    @property
    def turns(self) -> TerminalTurns: ...

    @property
    def approvals(self) -> TerminalApprovals: ...

    @property
    def control(self) -> TerminalControl: ...

    @property
    def schedules(self) -> SchedulesAccess:
        """The home's schedules (the Schedules screen)."""
        ...

    @property
    def board(self) -> BoardAccess:
        """The home's board (the Board screen)."""
        ...

    # `memory` (the Memory screen's MemoryAccess) comes with the commands' Services.
