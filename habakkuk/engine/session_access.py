"""The Protocols of the session services, declared once for every surface that uses them.

The services live in habakkuk/services/ (sessions.py, settings.py, checkpoints.py); their
Protocols live here, beside the session types they serve, because surfaces below the
services use them too (the work layer's runs, the chat commands, the channels, the MCP
server). A surface's host Protocol holds them as properties (`sessions: SessionsAccess`)
instead of restating their methods.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .config import ModelRef, Thinking
    from .jobs import Job
    from .llm.types import Message, Role, ToolResultBlock
    from .sessions import Compaction, SearchHit, Session, StoredMessage


class SessionsAccess(Protocol):
    """The home's sessions (habakkuk.services.sessions.Sessions)."""

    async def new_session(
        self,
        agent: str | None = None,
        *,
        origin: str = "cli",
        session_id: str | None = None,
        chat: bool = False,
        workspace: Path | None = None,
    ) -> Session:
        """A new session of `agent` (default: the default agent) with its frozen prompt.

        `chat`: a conversation with the user (it may take the one-time welcome); a
        `session_id` from its cause makes a repeat return the existing session;
        `workspace` replaces the agent's (a delegated child's worktree).
        """
        ...

    async def session(self, session_id: str) -> Session:
        """The session `session_id`; NotFound when there is none."""
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

    async def messages(self, session_id: str) -> list[StoredMessage]:
        """The session's stored messages, in order."""
        ...

    async def turn_messages(self, session_id: str, turn_id: str) -> list[StoredMessage]:
        """The messages one turn wrote, in order."""
        ...

    async def active_turns(self, session_id: str) -> list[Job]:
        """The session's queued or running turns, oldest first."""
        ...

    async def seed_session(
        self, session_id: str, history: Sequence[tuple[Role, str] | Message]
    ) -> None:
        """Append earlier messages to a new session without running a turn."""
        ...

    async def rename_session(self, session_id: str, title: str) -> Session:
        """Set the session's title by hand."""
        ...

    async def archive_session(self, session_id: str, archived: bool = True) -> None:
        """Hide a session from the recent list (or bring it back)."""
        ...

    async def fork_session(self, session_id: str) -> Session:
        """A copy of the session up to its last finished turn."""
        ...

    async def rewind_session(self, session_id: str, turns: int = 1) -> Session:
        """A fork without the session's last `turns` messages the user typed."""
        ...

    async def search_sessions(
        self, query: str, agent: str | None = None, *, limit: int = 20
    ) -> list[SearchHit]:
        """Full-text search over sessions, best first."""
        ...

    async def export_session(self, session_id: str, fmt: str) -> str:
        """The session's transcript as md, json or html text."""
        ...

    def export_default(self, session_id: str, fmt: str) -> str:
        """Where an export of the session goes when no path is given."""
        ...

    async def save_export(self, session_id: str, fmt: str, path: str | None = None) -> str:
        """Write the session's transcript to `path` (else the default); where it went."""
        ...

    async def compaction(self, session_id: str) -> Compaction | None:
        """The session's latest compaction, if any."""
        ...

    async def tool_output(self, session_id: str, call_id: str) -> ToolResultBlock | None:
        """The full result of a tool call, or None when none is recorded yet."""
        ...

    async def save_attachment(self, agent: str, filename: str, data: bytes) -> str:
        """Store an upload and copy it to the agent's workspace; returns the copy's path."""
        ...


class SettingsAccess(Protocol):
    """A session's /model, /think and /personality choices
    (habakkuk.services.settings.SessionSettings)."""

    async def set_session_thinking(
        self, session_id: str, level: str | None
    ) -> tuple[Thinking, bool]:
        """Choose the session's effort (None: the agent's); the effort now and whether
        /think chose it."""
        ...

    async def session_thinking(self, session_id: str) -> tuple[Thinking, bool]:
        """The session's effort and whether /think chose it."""
        ...

    async def set_session_model(self, session_id: str, model: str | None) -> ModelRef | None:
        """Choose the session's model (None: the agent's); the choice now."""
        ...

    async def session_model(self, session_id: str) -> ModelRef | None:
        """The model /model chose for the session, if any."""
        ...

    def personalities(self) -> list[str]:
        """The personas /personality can choose (built-ins, then the home's files)."""
        ...

    async def set_session_personality(self, session_id: str, name: str | None) -> str | None:
        """Choose the session's persona (None or "default": none); the persona now.
        HabakkukError (naming the choices) for an unknown name."""
        ...

    async def session_personality(self, session_id: str) -> str | None:
        """The persona /personality chose for the session, if any."""
        ...


class CheckpointsAccess(Protocol):
    """The workspace checkpoints (habakkuk.services.checkpoints.WorkspaceCheckpoints)."""

    async def undo(self, session_id: str) -> str:
        """/undo: put the workspace back to before the session's latest turn that changed
        it; a reply for the user."""
        ...
