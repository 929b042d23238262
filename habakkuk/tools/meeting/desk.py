"""The meetings of one home as the tools and the CLI use them: create an attendance (its
record and its job, in that order, both idempotent), ask one to leave, read them."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from pathlib import Path

from habakkuk.engine.jobs import JobQueue

from .kind import MEETING_KIND, MeetingRun, job_id_of
from .links import MeetingLink
from .record import FINAL, Meeting, MeetingStore

MAX_DURATION = 3 * 3600.0  # the cap on any attendance's time in the call (meeting.max_duration)
MIN_DURATION = 60.0
ATTEMPTS = 3  # an attendance whose process died is resumed this many times in all


@dataclass(frozen=True)
class JoinRequest:
    """What meeting_join asks: the link, the guest name, the limits, the reply address."""

    link: MeetingLink
    agent: str
    name: str
    origin: str
    session: str
    cause: str  # the turn and call that asked (the meeting's id derives from it)
    duration_limit: float | None = None  # None: the desk's default (meeting.duration_limit)
    notes_prompt: str = ""


class MeetingDesk:
    """A home's meetings (`home`/meetings) and the queue their jobs go to."""

    def __init__(
        self,
        home: Path,
        queue: JobQueue | None,
        *,
        default_limit: float = MAX_DURATION,
        max_duration: float = MAX_DURATION,
    ) -> None:
        self.store = MeetingStore(home / "meetings")
        self.queue = queue
        self.max_duration = max_duration  # the cap on any request
        self.default_limit = min(default_limit, max_duration)  # when a request names none

    def limit_of(self, request: JoinRequest) -> float:
        """The seconds `request` may stay in its call: its own limit, else the default,
        within one minute and max_duration."""
        asked = self.default_limit if request.duration_limit is None else request.duration_limit
        return max(MIN_DURATION, min(asked, self.max_duration))

    async def join(self, request: JoinRequest) -> tuple[Meeting, bool]:
        """Record the meeting and queue its attendance; (the meeting, True when new). The
        same call asked again (a turn resumed after a crash) finds the same meeting."""
        digest = hashlib.sha256(f"{request.cause}\n{request.link.url}".encode()).hexdigest()
        meeting = Meeting(
            id=f"mtg_{digest[:16]}",
            url=request.link.url,
            platform=request.link.platform,
            agent=request.agent,
            name=request.name,
            origin=request.origin,
            session=request.session,
            created=time.time(),
            duration_limit=self.limit_of(request),
            notes_prompt=request.notes_prompt,
        )
        new = self.store.create(meeting)
        if not new:
            meeting = self.store.get(meeting.id) or meeting
        if self.queue is not None:  # written first: the job reads the record
            await self.queue.enqueue(
                job_id_of(meeting.id),
                MEETING_KIND,
                MeetingRun(meeting.id),
                max_attempts=ATTEMPTS,
                agent=request.agent,
            )
        return meeting, new

    def leave(self, meeting_id: str, agent: str | None = None) -> Meeting | None:
        """Ask meeting `meeting_id` to leave (of `agent` only, when given); the meeting, or
        None when there is no such meeting (another agent's reads as missing)."""
        meeting = self.get(meeting_id, agent)
        if meeting is None:
            return None
        if meeting.state not in FINAL:
            self.store.ask_to_leave(meeting.id)
        return meeting

    def get(self, meeting_id: str, agent: str | None = None) -> Meeting | None:
        """Meeting `meeting_id` (of `agent` only, when given)."""
        meeting = self.store.get(meeting_id)
        if meeting is None or (agent is not None and meeting.agent != agent):
            return None
        return meeting

    def list(self, agent: str | None = None) -> list[Meeting]:
        """The meetings (of `agent` only, when given), newest first."""
        return [m for m in self.store.all() if agent is None or m.agent == agent]
