"""Live mode's calls (spec 000 "Media": Live mode; spec 001 "Live mode"): the voice
model's one tool, the call's transcript and its end, as rules over the web chat.

- ask: an ask_habakkuk call becomes a message of the conversation through the gateway
  (its session, agent, tools and approvals), with a turn id derived from the call id,
  so the same call id attaches to the first call's turn. The lines of the call the agent
  has not seen go in front of the request; the chat shows "(voice) <request>". It waits
  for the turn's reply; a turn stopped on an approval returns at once with what Habakkuk
  wants to do, and a later yes or no decides it and waits on the same turn again. After
  `answer_seconds` (four minutes) the voice model is told the answer will be in the chat.
- transcript: finished lines go into the chat's log at once as "(voice) <text>" and are
  kept in memory per conversation until the agent sees them (lost on a restart).
- end: what the agent has not seen goes into the session as a user note and a short
  acknowledgement, after any running turn, so the transcript stays alternating.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from habakkuk.conversation.answers import answer_word
from habakkuk.engine.events import ApprovalAsked, EventPayload, JobFinished
from habakkuk.engine.timeouts import wait_within

if TYPE_CHECKING:
    from habakkuk.engine.agent.turn_access import TurnOutcome
    from habakkuk.engine.events import EventBus
    from habakkuk.engine.jobs import Job

log = logging.getLogger(__name__)

LineRole = Literal["user", "assistant"]
ANSWER_SECONDS = 240.0
MAX_KEPT_LINES = 500  # per conversation: a call that never asks keeps only the newest
MAX_CALLS = 1000  # conversations with lines kept in memory
POLL_SECONDS = 0.5  # another process's approval or reply shows up in the stores
NOTE_HEAD = "[What was said on a live voice call]"
SEEN_HEAD = "[Said on the live voice call before this request]"
ACKNOWLEDGED = "Noted what was said on the call."
LATER = "This is taking a while: the answer will appear in the chat."


@dataclass(frozen=True)
class Line:
    """One finished line of the call's transcript."""

    role: LineRole
    text: str


@dataclass(frozen=True)
class Posted:
    """What the web chat did with a message: its turn (None for a command or an answer)
    and its note (a command's reply, an answer's notice)."""

    turn: str | None
    note: str


@dataclass(frozen=True)
class WaitingPrompt:
    """An approval the conversation's turn waits for."""

    turn: str
    tool: str
    summary: str


@dataclass(frozen=True)
class Ended:
    """What /end did: the lines noted, the session, and whether the note waits for a
    running turn (then it is written after it)."""

    noted: int
    session: str
    later: bool


class LiveChat(Protocol):
    """What the calls use of the web chat (the server's WebChannel)."""

    async def post(
        self, conversation: str, text: str, *, shown: str, agent: str | None, key: str | None
    ) -> Posted:
        """Send `text` through the gateway as a message (shown in the log as `shown`);
        `key` makes it idempotent and names its turn."""
        ...

    def turn_for(self, conversation: str, key: str) -> str:
        """The turn id a message of `key` gets."""
        ...

    async def record(self, conversation: str, role: LineRole, text: str) -> None:
        """Append a line to the conversation's log (display only)."""
        ...

    async def waiting_approval(self, conversation: str) -> WaitingPrompt | None:
        """The approval the conversation's running turn waits for, if any."""
        ...

    async def session_for(self, conversation: str, agent: str | None) -> str:
        """The conversation's session, started when it has none."""
        ...


class LiveTurns(Protocol):
    """What the calls use of the turns and sessions services."""

    async def turn_outcome(self, turn_id: str) -> TurnOutcome | None: ...

    async def wait_turn(self, turn_id: str, *, poll: float = 0.5) -> TurnOutcome: ...


class LiveSessions(Protocol):
    async def active_turns(self, session_id: str) -> list[Job]: ...

    async def seed_session(
        self, session_id: str, history: Sequence[tuple[LineRole, str]]
    ) -> None: ...


class LiveCalls:
    """The rules of Live mode's tool, transcript and end endpoints."""

    def __init__(
        self, chat: LiveChat, turns: LiveTurns, sessions: LiveSessions, bus: EventBus
    ) -> None:
        self.chat = chat
        self.turns = turns
        self.sessions = sessions
        self.bus = bus
        self.answer_seconds = ANSWER_SECONDS
        self._unseen: dict[str, list[Line]] = {}
        self._notes: set[asyncio.Task[None]] = set()

    def unseen(self, conversation: str) -> list[Line]:
        """The lines of the conversation's call the agent has not seen yet."""
        return list(self._unseen.get(conversation, ()))

    async def transcript(self, conversation: str, lines: Sequence[Line]) -> int:
        """Record finished lines in the chat's log and keep them for the agent."""
        for line in lines:
            await self.chat.record(conversation, line.role, f"(voice) {line.text}")
        kept = self._unseen.pop(conversation, [])
        kept.extend(lines)
        del kept[:-MAX_KEPT_LINES]
        self._unseen[conversation] = kept  # the newest call last
        while len(self._unseen) > MAX_CALLS:
            # Calls that never ended (a closed tab): the oldest's lines go first.
            del self._unseen[next(iter(self._unseen))]
        return len(lines)

    async def ask(
        self, conversation: str, request: str, *, agent: str | None, call_id: str | None
    ) -> str:
        """Run one ask_habakkuk call; the output for the voice model."""
        key = f"realtime:{call_id}" if call_id else None
        if key is not None and await self.turns.turn_outcome(self.chat.turn_for(conversation, key)):
            # The same call again (the page retried): attach to the first call's turn.
            return await self._wait(conversation, self.chat.turn_for(conversation, key))
        waiting = await self.chat.waiting_approval(conversation)
        if waiting is not None and answer_word(request) is not None:
            # A yes or no to the approval the voice model asked about: decide it through
            # the gateway (as a typed answer) and resume waiting on the same turn.
            await self.chat.post(
                conversation, request, shown=f"(voice) {request}", agent=None, key=key
            )
            return await self._wait(conversation, waiting.turn)
        if waiting is not None:
            # Anything else would queue behind the turn that waits: ask for the answer.
            return _needs(waiting)
        lines = self.unseen(conversation)
        text = request
        if lines:
            said = "\n".join(f"{line.role}: {line.text}" for line in lines)
            text = f"{SEEN_HEAD}\n{said}\n\n{request}"
        posted = await self.chat.post(
            conversation, text, shown=f"(voice) {request}", agent=agent, key=key
        )
        self._forget(conversation, lines)
        if posted.turn is None:
            return posted.note or "Done."
        return await self._wait(conversation, posted.turn)

    def _forget(self, conversation: str, lines: list[Line]) -> None:
        kept = self._unseen.get(conversation, [])
        del kept[: len(lines)]
        if not kept:
            self._unseen.pop(conversation, None)

    async def _wait(self, conversation: str, turn: str) -> str:
        """The turn's reply; what Habakkuk wants approved; or, after answer_seconds, that
        the answer will appear in the chat."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.answer_seconds

        def concerns(event: EventPayload) -> bool:
            if isinstance(event, JobFinished):
                return event.job == turn
            return isinstance(event, ApprovalAsked) and event.request.turn == turn

        with self.bus.subscribe(concerns, maxsize=16) as events:
            while True:
                outcome = await self.turns.turn_outcome(turn)
                if outcome is None:
                    return "Done."  # a message that made no turn (an answer, retried)
                if outcome.status in ("done", "failed", "cancelled"):
                    return _output(outcome)
                waiting = await self.chat.waiting_approval(conversation)
                if waiting is not None and waiting.turn == turn:
                    return _needs(waiting)
                remaining = deadline - loop.time()
                if remaining <= 0:
                    return LATER
                with contextlib.suppress(TimeoutError):
                    await wait_within(events.get(), min(POLL_SECONDS, remaining))

    async def end(self, conversation: str, agent: str | None) -> Ended:
        """Write what the agent has not seen into the session (after a running turn)."""
        session = await self.chat.session_for(conversation, agent)
        lines = self._unseen.pop(conversation, [])
        running = [job.id for job in await self.sessions.active_turns(session)]
        if not lines:
            return Ended(0, session, False)
        if not running:
            await self._note(session, lines)
            return Ended(len(lines), session, False)
        task = asyncio.create_task(self._note_after(session, lines, running))
        self._notes.add(task)
        task.add_done_callback(self._notes.discard)
        return Ended(len(lines), session, True)

    async def _note_after(self, session: str, lines: list[Line], running: list[str]) -> None:
        try:
            for turn in running:
                await self.turns.wait_turn(turn)
            # A turn queued meanwhile runs first too: the note follows it.
            while more := await self.sessions.active_turns(session):
                await self.turns.wait_turn(more[0].id)
            await self._note(session, lines)
        except Exception:
            log.exception("live call: the note for %s was lost", session)

    async def _note(self, session: str, lines: list[Line]) -> None:
        said = "\n".join(f"{line.role}: {line.text}" for line in lines)
        await self.sessions.seed_session(
            session, [("user", f"{NOTE_HEAD}\n{said}"), ("assistant", ACKNOWLEDGED)]
        )

    async def close(self) -> None:
        """Stop notes still waiting for a turn (their lines are lost, as on a restart)."""
        for task in list(self._notes):
            task.cancel()
        await asyncio.gather(*self._notes, return_exceptions=True)


def _needs(waiting: WaitingPrompt) -> str:
    return (
        f"Habakkuk needs approval to run {waiting.tool}: {waiting.summary[:500]}"
        "\nAsk the user, then call ask_habakkuk with their yes or no."
    )


def _output(outcome: TurnOutcome) -> str:
    if outcome.status == "done":
        return outcome.reply or "Done (Habakkuk had nothing to say)."
    if outcome.status == "cancelled":
        return "The request was stopped before it finished."
    return f"Habakkuk could not do it: {outcome.error or 'the turn failed'}"
