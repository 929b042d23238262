"""The board's values and the narrow Protocol every surface and tool uses (spec 000
"Board", spec 001 "Board").

A card is work one agent (or the user) hands to another. It outlives the conversation
and the process that created it: cards live in control.db, and a dispatcher (one per
home at a time, through a named lease) claims each ready card by compare-and-swap
(todo -> doing, attempt + 1) and enqueues its card job, `card_job_id(card, attempt)`,
the assignee's turn in a fresh session, `attempt_session(card, attempt)`.

Who acts is `by`: USER ("user": the CLI, the HTTP API, the MCP server, the terminal),
who may change any card, or an agent's name, who completes or blocks only cards
assigned to it and updates (reassign, reprioritise, cancel, reopen) only cards it
created or holds.

Errors are HabakkukError subclasses with one-line messages: NotFound (no such card, or
an id prefix that names none), BoardRefused (the rules say no: another agent's card,
a dependency that does not exist, a finished card changed, a card out of attempts),
HabakkukError for other bad input (an empty title, a priority out of range, an unknown
agent, an id prefix that names two cards).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from habakkuk.engine import payloads
from habakkuk.engine.agent.requests import ReplyTo
from habakkuk.engine.errors import HabakkukError
from habakkuk.engine.jobs import JobKind, declare_kind
from habakkuk.engine.payloads import JsonObject

CardStatus = Literal["todo", "doing", "blocked", "done", "cancelled"]
STATUSES: tuple[CardStatus, ...] = ("todo", "doing", "blocked", "done", "cancelled")
OPEN_STATUSES: tuple[CardStatus, ...] = ("todo", "doing", "blocked")
# Why a card is blocked, so the board says who must act: "question" (the agent asked a
# human something: board_block), "failed" (its turn failed, was stopped, ran out of
# attempts, or ended with the card still in progress); "" when not blocked.
BlockKind = Literal["", "question", "failed"]
# What one entry of a card's event log records.
EventKind = Literal[
    "created",
    "assigned",
    "priority",
    "claimed",  # the dispatcher took attempt N (text: the attempt's job)
    "completed",
    "blocked",
    "cancelled",
    "reopened",
    "failed",  # an attempt's job failed for good, or its turn ended with the card doing
    "stopped",  # an attempt's job was cancelled (reassigned, cancelled)
    "notified",  # the result went back to the creator's session or chat
]

USER = "user"
CARD_KIND = "card"  # the job kind of a card's attempt
CARD_ID_PREFIX = "card_"
PRIORITY_RANGE = (-100, 100)  # higher runs first; default 0
TITLE_MAX = 200
TEXT_MAX = 20_000  # body, comment, result, reason
# Touched under the home's root by a change made in a process without the dispatcher
# (the CLI), whose dispatcher watches its mtime: woken there too, not only every 5 s.
WAKE_FILE = "board.wake"
# PostgreSQL: a card written on any node is heard by every node's dispatcher at commit
# (LISTEN, engine/pg_wakeups.py); the wake file only reaches processes of one home folder.
WAKE_CHANNEL = "habakkuk_board"
DISPATCHER_LEASE = "board-dispatcher"  # the named lease (engine/leases.py): one per home


class BoardRefused(HabakkukError):
    """The board's rules refuse this change (the message says which rule)."""


def card_job_id(card_id: str, attempt: int) -> str:
    """The job of one attempt: the card plus the attempt number, so an enqueue is idempotent."""
    return f"{card_id}_a{attempt}"


def attempt_session(card_id: str, attempt: int) -> str:
    """The fresh session of one attempt (derived, so a crash resumes the same transcript)."""
    return f"ses_{card_id}_a{attempt}"


@dataclass(frozen=True)
class CardRun:
    """A card job's payload (kind CARD_KIND): one attempt of a card, run as its assignee's
    turn in the attempt's own session. Stored {"card", "attempt", "session", "agent"}."""

    card: str
    attempt: int
    session: str  # attempt_session(card, attempt)
    agent: str  # the assignee when the attempt was claimed

    def to_json(self) -> JsonObject:
        return {
            "card": self.card,
            "attempt": self.attempt,
            "session": self.session,
            "agent": self.agent,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CardRun:
        return cls(
            payloads.text(data, "card"),
            payloads.integer(data, "attempt"),
            payloads.text(data, "session"),
            payloads.text(data, "agent"),
        )


CARD_RUNS: JobKind[CardRun] = declare_kind(JobKind(CARD_KIND, payload=CardRun, noun="card job"))


def notice_id(card_id: str, revision: int) -> str:
    """The id of the notice a card's change at `revision` sends (a turn or a delivery), so
    each is sent once."""
    return f"turn_{card_id}_r{revision}"


@dataclass(frozen=True)
class CardComment:
    author: str  # USER or an agent
    text: str
    at: float


@dataclass(frozen=True)
class CardEvent:
    author: str  # USER, an agent, or "board" (the dispatcher)
    kind: EventKind
    text: str
    at: float


@dataclass(frozen=True)
class NewCard:
    """What `create` takes."""

    title: str
    body: str = ""
    assignee: str = ""  # "" : unassigned (never dispatched until assigned)
    priority: int = 0
    parent: str | None = None
    depends_on: tuple[str, ...] = ()  # must exist now; fixed at creation (no cycles)
    # Where the result goes back: the creator's session (an agent's card), with the
    # reply address of the chat its turn answers to; else `deliver_to`
    # (CHANNEL:CHAT[:THREAD], `habakkuk board add --deliver`); else nowhere but the board.
    creator_session: str = ""
    reply_to: ReplyTo | None = None
    deliver_to: str | None = None


HoldKind = Literal["question", "failed", "blocked", "waiting", "unassigned"]


@dataclass(frozen=True)
class Hold:
    """Why an open card is not moving, decided once: each surface only words it.

    question: blocked on a question to the user; failed / blocked: blocked after a
    failed attempt (or with no kind recorded), for the user to reopen; waiting: on
    dependencies not done (`waiting_on`); unassigned: nobody to dispatch it to.
    """

    kind: HoldKind
    reason: str = ""  # a blocked card's reason
    waiting_on: tuple[tuple[str, CardStatus], ...] = ()


@dataclass(frozen=True)
class Card:
    """One stored card (spec 001's shape plus what the screen and CLI show)."""

    id: str  # CARD_ID_PREFIX + 10 hex
    title: str
    body: str
    assignee: str
    created_by: str
    status: CardStatus
    priority: int
    result: str  # board_complete's result; "" until done
    parent: str | None
    depends_on: tuple[str, ...]
    attempt: int  # attempts dispatched so far (0: never)
    session: str  # the latest attempt's session ("" before the first)
    created_at: float
    updated_at: float
    revision: int  # + 1 on every change: notices derive their ids from it
    blocked_kind: BlockKind = ""
    blocked_reason: str = ""
    creator_session: str = ""
    reply_to: ReplyTo | None = None
    deliver_to: str | None = None
    # Dependencies not done yet, with their status, so a card waiting on a blocked one
    # says so instead of waiting silently.
    waiting_on: tuple[tuple[str, CardStatus], ...] = ()
    comments: tuple[CardComment, ...] = field(default=())
    events: tuple[CardEvent, ...] = field(default=())

    @property
    def open(self) -> bool:
        return self.status in OPEN_STATUSES

    def hold(self) -> Hold | None:
        """What holds this card, or None: done, cancelled, doing or ready to dispatch."""
        if self.status == "blocked":
            return Hold(self.blocked_kind or "blocked", self.blocked_reason)
        if self.status == "todo":
            if self.waiting_on:
                return Hold("waiting", waiting_on=self.waiting_on)
            if not self.assignee:
                return Hold("unassigned")
        return None

    def attempt_sessions(self) -> list[tuple[int, str]]:
        """(attempt, session) of every attempt dispatched, oldest first."""
        return [(n, attempt_session(self.id, n)) for n in range(1, self.attempt + 1)]


class BoardAccess(Protocol):
    """The home's board as every surface and tool uses it. Every change returns the card
    read back after it, and wakes the dispatcher."""

    async def create(self, new: NewCard, *, by: str = USER) -> Card:
        """Store a card (todo). HabakkukError for bad input, NotFound for a dependency or
        parent that does not exist."""
        ...

    async def list_cards(
        self, *, status: str = "open", assignee: str | None = None, limit: int = 200
    ) -> list[Card]:
        """Cards without comments and events, highest priority first then oldest. `status`:
        "open" (todo, doing, blocked), "all", or one status (HabakkukError for another
        word); `assignee` "" lists unassigned cards."""
        ...

    async def get(self, card_id: str) -> Card:
        """One card with its comments and events; a unique id prefix (with or without
        "card_") is enough. NotFound; HabakkukError when the prefix names several."""
        ...

    async def assign(self, card_id: str, assignee: str, *, by: str = USER) -> Card:
        """Reassign ("" unassigns). A card in progress has its run stopped and goes back
        to todo."""
        ...

    async def set_priority(self, card_id: str, priority: int, *, by: str = USER) -> Card: ...

    async def comment(self, card_id: str, text: str, *, by: str = USER) -> Card: ...

    async def cancel(self, card_id: str, *, by: str = USER) -> Card:
        """Cancel an open card; a running attempt is stopped."""
        ...

    async def reopen(self, card_id: str, *, by: str = USER) -> Card:
        """A blocked, done or cancelled card goes back to todo for another attempt. An
        agent cannot reopen a card that has used board.max_attempts attempts."""
        ...

    async def complete(self, card_id: str, result: str, *, by: str, session: str = "") -> Card:
        """The assignee finishes its open card with a result (required, with its proof).
        `session`: the calling turn's session, recorded in the card's event log."""
        ...

    async def block(
        self,
        card_id: str,
        reason: str,
        *,
        by: str,
        kind: BlockKind = "question",
        session: str = "",
    ) -> Card:
        """The assignee blocks its open card with the reason (kind "question": a human
        must answer; "failed": it could not be done)."""
        ...

    async def counts(self) -> dict[str, int]:
        """Cards per status (every status present, zeros included), for the overview's
        `open_cards` (todo + doing + blocked)."""
        ...

    def wake(self) -> None:
        """Ask this process's dispatcher to look now (a change elsewhere: the CLI)."""
        ...
