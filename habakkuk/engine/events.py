"""The in-process events bus: streaming deltas, tool activity and job changes for clients.

Every event is a frozen dataclass of the catalogue below, one class per kind, each
carrying the session it belongs to. Consumers dispatch on the class (`match`,
`isinstance`), never on the dotted wire name in `kind`, which only names the event
where it leaves the process (`to_json`).

`publish` never blocks and never awaits: each subscriber has its own bounded
queue, and a subscriber that falls behind loses its oldest events (counted in
`dropped`) instead of slowing the turn that publishes. Closing a subscription
ends its iteration and wakes a reader waiting in `get()` (which then raises
`SubscriptionClosed`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from .toolkit.outcome import Outcome

if TYPE_CHECKING:
    from .toolkit.approvals import ApprovalRequest

TurnStatus = Literal["done", "failed", "stopped"]
# The fields every event has, which are not part of its data.
ENVELOPE = ("session", "at")


@dataclass(frozen=True, kw_only=True)
class EventPayload:
    """One thing that happened in `session` ("" for none), at `at` (epoch seconds)."""

    kind: ClassVar[str] = ""
    session: str = ""
    at: float = field(default_factory=time.time, compare=False)

    @property
    def data(self) -> dict[str, Any]:
        """The event's own fields (not session and time), as Python values."""
        return {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.name not in ENVELOPE
        }

    def to_json(self) -> dict[str, Any]:
        """The event as JSON: its wire name, session, time and data (objects as dicts)."""
        return {
            "kind": self.kind,
            "session": self.session,
            "at": self.at,
            "data": {name: _json_value(value) for name, value in self.data.items()},
        }


def _json_value(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value


# -- turns ----------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class TurnEvent(EventPayload):
    """Something in one turn (or /compact job) of the session."""

    turn: str


@dataclass(frozen=True, kw_only=True)
class TurnStarted(TurnEvent):
    kind: ClassVar[str] = "turn.start"
    agent: str
    compact: bool = False  # a /compact job, not a model turn


@dataclass(frozen=True, kw_only=True)
class TurnEnded(TurnEvent):
    kind: ClassVar[str] = "turn.end"
    status: TurnStatus
    reply: str = ""
    error: str = ""


@dataclass(frozen=True, kw_only=True)
class TurnText(TurnEvent):
    """A piece of the reply text as it streams."""

    kind: ClassVar[str] = "turn.text"
    text: str


@dataclass(frozen=True, kw_only=True)
class TurnThinking(TurnEvent):
    """A piece of the model's thinking as it streams."""

    kind: ClassVar[str] = "turn.thinking"
    text: str


@dataclass(frozen=True, kw_only=True)
class ToolCallStreamed(TurnEvent):
    """The model began writing a tool call (its arguments follow)."""

    kind: ClassVar[str] = "turn.tool_call"
    call_id: str
    tool: str


@dataclass(frozen=True, kw_only=True)
class ToolArgsStreamed(TurnEvent):
    """A piece of a tool call's arguments as they stream."""

    kind: ClassVar[str] = "turn.tool_args"
    call_id: str
    arguments: str


@dataclass(frozen=True, kw_only=True)
class TurnReset(TurnEvent):
    """The model call is retried: what streamed since the last message is void."""

    kind: ClassVar[str] = "turn.reset"


@dataclass(frozen=True, kw_only=True)
class ModelReplied(TurnEvent):
    """One model call finished and its message was committed."""

    kind: ClassVar[str] = "turn.message"
    model: str
    usage: dict[str, int]
    stop_reason: str


@dataclass(frozen=True, kw_only=True)
class Compacted(TurnEvent):
    """Older messages of the session were folded into a summary."""

    kind: ClassVar[str] = "turn.compaction"
    tokens_before: int
    tokens_after: int
    dropped: int


# -- tool calls -----------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ToolStarted(EventPayload):
    kind: ClassVar[str] = "tool.start"
    call_id: str
    tool: str
    title: str
    input: dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class ToolEnded(EventPayload):
    kind: ClassVar[str] = "tool.end"
    call_id: str
    tool: str
    is_error: bool
    status: Outcome
    seconds: float | None  # None for a call that never ran
    preview: str


# -- approvals and questions ----------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ApprovalEvent(EventPayload):
    """Something about an approval (the set of waiting approvals may have changed)."""


@dataclass(frozen=True, kw_only=True)
class ApprovalAsked(ApprovalEvent):
    kind: ClassVar[str] = "approval.pending"
    id: str
    request: ApprovalRequest


@dataclass(frozen=True, kw_only=True)
class ApprovalAnswered(ApprovalEvent):
    kind: ClassVar[str] = "approval.answered"
    id: str


@dataclass(frozen=True, kw_only=True)
class ApprovalWithdrawn(ApprovalEvent):
    """Nobody answered: the request timed out or its call was stopped."""

    kind: ClassVar[str] = "approval.withdrawn"
    id: str


@dataclass(frozen=True, kw_only=True)
class ApprovalReviewed(ApprovalEvent):
    """The reviewer model decided a request."""

    kind: ClassVar[str] = "approval.review"
    agent: str
    turn: str
    tool: str
    summary: str
    decision: str
    reason: str
    model: str


@dataclass(frozen=True, kw_only=True)
class QuestionEvent(EventPayload):
    """Something about a clarify question put to the attached client."""

    id: str


@dataclass(frozen=True, kw_only=True)
class QuestionAsked(QuestionEvent):
    kind: ClassVar[str] = "question.pending"
    # A tools.clarify.ClarifyRequest; the engine does not import the tools layer.
    request: Any


@dataclass(frozen=True, kw_only=True)
class QuestionAnswered(QuestionEvent):
    kind: ClassVar[str] = "question.answered"


@dataclass(frozen=True, kw_only=True)
class QuestionWithdrawn(QuestionEvent):
    kind: ClassVar[str] = "question.withdrawn"


# -- jobs -----------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class JobFinished(EventPayload):
    """A pool settled a job (done, failed, cancelled) or put it back ("queued") to retry."""

    kind: ClassVar[str] = "job.finished"
    job: str
    job_kind: str
    status: str
    attempts: int


# -- sessions -------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class SessionRenamed(EventPayload):
    """The session's title changed: `source` "generated" (the background title after the
    first turn) or "user" (/title, a rename)."""

    kind: ClassVar[str] = "session.renamed"
    title: str
    source: str


# -- delegation and the board ---------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class DelegateStarted(EventPayload):
    """A delegate call of the parent `session`'s turn `turn` queued (or reattached to) its
    child: the terminal shows the child's own events (session `child_session`) under the
    call's card."""

    kind: ClassVar[str] = "delegate.start"
    turn: str
    call_id: str
    job: str  # the sub-turn job
    child_session: str
    agent: str
    task: str
    background: bool


@dataclass(frozen=True, kw_only=True)
class DelegateEnded(EventPayload):
    """A child of the parent `session` ended for good: done, failed, stopped, timed out."""

    kind: ClassVar[str] = "delegate.end"
    job: str
    child_session: str
    status: str
    seconds: float


@dataclass(frozen=True, kw_only=True)
class CardChanged(EventPayload):
    """A board card was created or changed (session "": the board is the home's)."""

    kind: ClassVar[str] = "board.card"
    card: str
    title: str
    status: str
    assignee: str
    revision: int


# -- the home ------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ConfigReloaded(EventPayload):
    """config.yaml changed on disk and was read again (session "": the home's).

    `applied`: the sections put to use at once (hooks); `restart`: every section that now
    differs from the one this process runs on, which takes effect at the next start;
    `invalid`: the loader's one-line error naming the file and line ("" when the file is
    valid), the file then ignored and the running config kept.
    """

    kind: ClassVar[str] = "config.reload"
    applied: list[str] = field(default_factory=list)
    restart: list[str] = field(default_factory=list)
    invalid: str = ""


# -- goals ----------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class GoalChanged(EventPayload):
    """The session's standing goal (/goal) was set, counted a turn, or ended (`status`
    done, blocked, spent, cleared or stopped); `notice` is what the chat is told of it
    ("" while it runs): the terminal shows it, `habakkuk run` prints it."""

    kind: ClassVar[str] = "goal.change"
    goal: str
    status: str
    counted: int
    budget: int
    notice: str = ""


# -- device nodes ---------------------------------------------------------------------------


NodeChange = Literal["paired", "connected", "disconnected", "revoked"]


@dataclass(frozen=True, kw_only=True)
class NodeChanged(EventPayload):
    """A device node (protocols/nodes) was paired, connected, disconnected or revoked
    (`change`), in the process that saw it (session "": the home's). `platform` and
    `caps` are what it offers as it pairs or connects (empty otherwise)."""

    kind: ClassVar[str] = "node.change"
    node: str
    change: NodeChange
    platform: str = ""
    caps: list[str] = field(default_factory=list)


CATALOGUE: tuple[type[EventPayload], ...] = (
    TurnStarted,
    TurnEnded,
    TurnText,
    TurnThinking,
    ToolCallStreamed,
    ToolArgsStreamed,
    TurnReset,
    ModelReplied,
    Compacted,
    ToolStarted,
    ToolEnded,
    ApprovalAsked,
    ApprovalAnswered,
    ApprovalWithdrawn,
    ApprovalReviewed,
    QuestionAsked,
    QuestionAnswered,
    QuestionWithdrawn,
    JobFinished,
    DelegateStarted,
    DelegateEnded,
    CardChanged,
    ConfigReloaded,
    SessionRenamed,
    GoalChanged,
    NodeChanged,
)
BY_KIND: dict[str, type[EventPayload]] = {cls.kind: cls for cls in CATALOGUE}


def event_from_json(obj: dict[str, Any]) -> EventPayload:
    """The event `to_json` made (objects such as a request stay dicts)."""
    cls = BY_KIND.get(str(obj.get("kind")))
    if cls is None:
        raise ValueError(f"unknown event kind {obj.get('kind')!r}")
    data = obj.get("data") or {}
    return cls(session=str(obj.get("session", "")), at=float(obj.get("at", 0.0)), **data)


# -- the bus --------------------------------------------------------------------------------

EventFilter = Callable[[EventPayload], bool]


class SubscriptionClosed(Exception):
    """`get()` on a subscription that is (or became, while waiting) closed."""


class _Closed(EventPayload):
    """The marker close() queues, so a reader waiting on the queue wakes."""


_CLOSED = _Closed()


class Subscription:
    """A subscriber's bounded queue; iterate it or `await get()`."""

    def __init__(self, bus: EventBus, maxsize: int, accept: EventFilter | None):
        self._bus = bus
        self._queue: asyncio.Queue[EventPayload] = asyncio.Queue(maxsize)
        self._accept = accept
        self.dropped = 0
        self.closed = False

    def offer(self, event: EventPayload) -> None:
        """Called by the bus: enqueue, dropping the oldest event when full."""
        if self._accept is not None and not self._accept(event):
            return
        self._put(event)

    def _put(self, event: EventPayload) -> None:
        while True:
            try:
                self._queue.put_nowait(event)
                return
            except asyncio.QueueFull:
                try:
                    self._queue.get_nowait()
                    self.dropped += 1
                except asyncio.QueueEmpty:  # pragma: no cover - racing consumer
                    pass

    async def get(self) -> EventPayload:
        """The next event; raises SubscriptionClosed once closed (at once when waiting)."""
        event = await self._queue.get()
        if event is _CLOSED:
            self._queue.put_nowait(_CLOSED)  # for the next reader, and the next get()
            raise SubscriptionClosed()
        return event

    def get_nowait(self) -> EventPayload | None:
        """The next event already queued; None when there is none (or it is closed)."""
        try:
            event = self._queue.get_nowait()
        except asyncio.QueueEmpty:
            return None
        if event is _CLOSED:
            self._queue.put_nowait(_CLOSED)
            return None
        return event

    def close(self) -> None:
        """Stop receiving; a reader waiting in `get()` or iterating is woken and ends."""
        if not self.closed:
            self.closed = True
            self._bus.unsubscribe(self)
            self._put(_CLOSED)

    def __aiter__(self) -> AsyncIterator[EventPayload]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[EventPayload]:
        while not self.closed:
            try:
                yield await self.get()
            except SubscriptionClosed:
                return

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class EventBus:
    """Fan-out of events to subscribers in this process."""

    def __init__(self) -> None:
        self._subscribers: list[Subscription] = []

    def subscribe(self, accept: EventFilter | None = None, maxsize: int = 1024) -> Subscription:
        """A new subscription receiving events `accept` lets through (all by default)."""
        subscription = Subscription(self, maxsize, accept)
        self._subscribers.append(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        if subscription in self._subscribers:
            self._subscribers.remove(subscription)

    def publish(self, event: EventPayload) -> EventPayload:
        """Deliver an event to every subscriber without waiting on any of them."""
        if not isinstance(event, EventPayload):
            raise TypeError(f"publish takes an event of the catalogue, not {type(event).__name__}")
        for subscription in list(self._subscribers):
            subscription.offer(event)
        return event

    @property
    def subscriber_count(self) -> int:
        return len(self._subscribers)
