"""The turns service's Protocol, declared once for every surface that queues or waits on turns.

The service is habakkuk.services.turns.Turns; its Protocol and what it reports of a turn
(`TurnOutcome`) live here, beside what a turn job carries (requests.py), because surfaces
below the services use them too (the work layer's runs, the chat commands, the channels,
the MCP server).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from .requests import ReplyTo, session_of

if TYPE_CHECKING:
    from ..jobs import Job
    from ..llm.types import Block


@dataclass
class TurnOutcome:
    """How a turn ended, as a client reports it."""

    session: str
    turn: str
    status: str
    reply: str
    error: str | None


def outcome_of(job: Job) -> TurnOutcome:
    """A settled (or current) turn job as a client reports it."""
    result = job.result or {}
    return TurnOutcome(
        session=session_of(job),
        turn=job.id,
        status=job.status,
        reply=str(result.get("reply", "")),
        error=job.error,
    )


@dataclass(frozen=True)
class SentFile:
    """One file a message brought from the user's disk (a file dropped on the terminal)."""

    path: str  # where it was on the user's disk
    name: str
    size: int
    media_type: str
    saved: str = ""  # its copy, relative to the agent's workspace (inbox/...); "" when not
    note: str = ""  # why it was not attached (over the size cap, unreadable), else ""


@dataclass(frozen=True)
class FilesTurn:
    """A turn queued with files: its id and what became of each file."""

    turn: str
    files: tuple[SentFile, ...]


class TurnsAccess(Protocol):
    """The turn queue of the home and this process's pools (habakkuk.services.turns.Turns)."""

    async def submit(
        self,
        session_id: str,
        text: str,
        *,
        turn_id: str | None = None,
        attended: bool = False,
        reply_to: ReplyTo | None = None,
        blocks: Sequence[Block] = (),
        here: bool = False,
    ) -> str:
        """Queue a turn for `text` in the session; returns the turn id (a `turn_id` from
        the message's cause makes a redelivery a no-op). `here`: run it in this process,
        whose client follows it live (the terminal's chat), while this process lives."""
        ...

    async def submit_files(
        self,
        session_id: str,
        text: str,
        paths: Sequence[str],
        *,
        attended: bool = False,
        here: bool = False,
    ) -> FilesTurn:
        """Queue a turn for `text` with the files at `paths` (on this machine) attached by
        the channels' attachments rule; each is copied to the agent's inbox."""
        ...

    async def compact_session(
        self,
        session_id: str,
        *,
        job_id: str | None = None,
        reply_to: ReplyTo | None = None,
        here: bool = False,
    ) -> str:
        """Queue a compaction of the session; returns its job id (`here` as for submit)."""
        ...

    async def steer(self, session_id: str, text: str) -> bool:
        """Queue `text` as /steer guidance for the session's queued or running turn; False
        (nothing queued) when none is."""
        ...

    async def ask_aside(
        self,
        session_id: str,
        question: str,
        *,
        turn_id: str | None = None,
        attended: bool = False,
        reply_to: ReplyTo | None = None,
        here: bool = False,
    ) -> str:
        """Queue /btw's `question` in a throwaway session of the session's agent, beside
        its turn; the aside turn's id (the other arguments as for submit)."""
        ...

    async def stop_turn(self, turn_id: str) -> str | None:
        """Stop a queued or running turn; its status after the request."""
        ...

    async def wait_turn(self, turn_id: str, *, poll: float = 0.5) -> TurnOutcome:
        """Wait for the turn (or compaction) to settle, here or in another process."""
        ...

    async def turn_outcome(self, turn_id: str) -> TurnOutcome | None:
        """The turn's state now, or None when there is no such turn."""
        ...

    async def queue_depth(self) -> dict[tuple[str, str], int]:
        """Queued jobs by (kind, state)."""
        ...
