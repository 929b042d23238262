"""Spending limits held before each model call (spec 001 "Budget"): the pure part.

Before a call is made its worst case is *reserved*: the request's input tokens
(estimated as its bytes / 4: no tokenizer runs on the hot path) priced now, plus its
max output tokens at the output price. The reservation is held against every limit the
call counts toward (the install's and its agent's day and month, and its turn) and
settled with the cost the provider reported once the call ends, or released when it
fails. A call whose reservation does not fit in what is left is not made. Because a
check and its hold happen with no await between them, parallel turns, sub-agents,
schedules and cards of one process can never overshoot a limit by more than what one
call's real cost exceeds its reservation.

`Ledger` keeps the sums: what usage.db held for each period at its last read, plus
the calls settled since (dropped at the next read that already saw their rows), plus
what is held now. `BudgetGate` is what the layers below the services (the turn loop,
the schedules' and cards' runs) ask of the budget service (services/budget.py).
"""

from __future__ import annotations

import json
from collections import OrderedDict, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo
from typing import Literal, Protocol

from ..silent import SILENT
from .pricing import MILLION, Price
from .provider import ProviderError
from .types import (
    ContextBlock,
    DocumentBlock,
    ImageBlock,
    Message,
    ModelRequest,
    OpaqueBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
)

# The tokens an image or a document is reserved at (the APIs bill them by size: a
# generous ceiling rather than a read of the blob on every call).
MEDIA_TOKENS = 3_000
# Output tokens a thinking level may add on top of max_tokens (the Anthropic adapter's
# budgets; the other APIs count reasoning inside max_tokens).
THINKING_TOKENS = {"off": 0, "low": 2048, "medium": 8192, "high": 24576}
# The turns whose spend is remembered for per_turn (the oldest forgotten first).
TURNS_KEPT = 4096

INSTALL = ""  # the scope of the whole install; an agent's scope is its name
PERIOD_KINDS: tuple[Literal["daily", "monthly"], ...] = ("daily", "monthly")


@dataclass(frozen=True)
class Limits:
    """Dollar limits of one scope (0: none)."""

    daily: float = 0.0
    monthly: float = 0.0
    per_turn: float = 0.0

    @property
    def any(self) -> bool:
        return self.daily > 0 or self.monthly > 0 or self.per_turn > 0


@dataclass(frozen=True)
class Periods:
    """The day and the month `now` falls in, in the config timezone."""

    day: str  # 2026-11-09
    month: str  # 2026-11
    day_start: datetime
    day_end: datetime
    month_start: datetime
    month_end: datetime


def periods_at(now: float, zone: tzinfo) -> Periods:
    """The periods of epoch second `now` in `zone` (ends are the next period's start)."""
    local = datetime.fromtimestamp(now, zone)
    day_start = datetime(local.year, local.month, local.day, tzinfo=zone)
    nxt = local.date() + timedelta(days=1)  # the wall-clock date: a DST day is 23 or 25 h
    day_end = datetime(nxt.year, nxt.month, nxt.day, tzinfo=zone)
    month_start = datetime(local.year, local.month, 1, tzinfo=zone)
    year, month = (local.year + 1, 1) if local.month == 12 else (local.year, local.month + 1)
    month_end = datetime(year, month, 1, tzinfo=zone)
    return Periods(
        day=day_start.strftime("%Y-%m-%d"),
        month=day_start.strftime("%Y-%m"),
        day_start=day_start,
        day_end=day_end,
        month_start=month_start,
        month_end=month_end,
    )


# -- the worst case of a call ------------------------------------------------------------

# (name, description) -> (the schema object measured, its bytes): specs are rebuilt every
# turn around the same schema objects; serialising them was most of an estimate's cost.
_SPEC_BYTES: dict[tuple[str, str], tuple[object, int]] = {}


def _spec_bytes(spec: ToolSpec) -> int:
    key = (spec.name, spec.description)
    found = _SPEC_BYTES.get(key)
    if found is not None and found[0] is spec.input_schema:
        return found[1]
    size = len(spec.name) + len(spec.description.encode()) + len(json.dumps(spec.input_schema))
    if len(_SPEC_BYTES) >= TURNS_KEPT:
        _SPEC_BYTES.clear()
    _SPEC_BYTES[key] = (spec.input_schema, size)
    return size


def _text_bytes(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode())


def _message_tokens(message: Message) -> int:
    size, media = 16, 0  # the envelope
    for block in message.blocks:
        if isinstance(block, TextBlock | ContextBlock | ToolResultBlock):
            size += _text_bytes(block.text)
        elif isinstance(block, ThinkingBlock):
            size += _text_bytes(block.text) + len(block.signature) + len(block.encrypted)
        elif isinstance(block, ToolUseBlock):
            size += len(block.tool) + len(json.dumps(block.input))
        elif isinstance(block, OpaqueBlock):
            size += len(json.dumps(block.data))
        elif isinstance(block, ImageBlock | DocumentBlock):
            media += MEDIA_TOKENS
    return size // 4 + media


def input_tokens(request: ModelRequest) -> int:
    """The request's input tokens, estimated as its bytes / 4 (media at MEDIA_TOKENS)."""
    size = _text_bytes(request.system_text) + sum(_spec_bytes(t) for t in request.tools)
    return size // 4 + sum(_message_tokens(m) for m in request.messages)


def output_tokens(request: ModelRequest) -> int:
    """The most output tokens the call may bill: max_tokens plus a thinking budget."""
    return request.max_tokens + THINKING_TOKENS.get(request.thinking, 0)


def worst_case(price: Price, request: ModelRequest) -> float:
    """The dollars a call may cost at most: its input priced now plus its max output."""
    tokens = input_tokens(request)
    if price.long_prompt is not None and tokens > price.long_prompt[0]:
        price = price.long_prompt[1]
    return (tokens * price.input + output_tokens(request) * price.output) / MILLION


# -- refusals ----------------------------------------------------------------------------


class BudgetPaused(ProviderError):
    """A model call the budget did not let through; its text is what the turn ends with.

    A billing-class ProviderError, so every caller that already survives a failed call
    (titles, the reviewer, the memory review) survives this one; the turn loop tells it
    apart and ends with its message."""

    def __init__(self, message: str, *, scope: str = INSTALL, kind: str = "daily"):
        super().__init__("billing", message)
        self.message = message
        self.scope = scope  # INSTALL or the agent's name
        self.kind = kind  # daily | monthly | per_turn | unknown_price

    def __str__(self) -> str:
        return self.message


class BudgetGate(Protocol):
    """What the work layer's runs (schedules, cards) ask of the budget
    (services.budget.Budget) before they start a turn."""

    async def check_paused(self, agent: str) -> str | None:
        """The message `agent`'s turns end with while a limit is used up, else None."""
        ...


class Addressed(Protocol):
    """Where a turn's reply goes (engine.agent.requests.ReplyTo)."""

    @property
    def to(self) -> str: ...


def turn_error(error: ProviderError, reply_to: Addressed | None) -> str:
    """What a turn whose model call failed fails with. A spending limit's refusal
    (BudgetPaused) says its message; for a chat's turn paused by a period's limit, after
    SILENT: the chat is told once per period by the budget (services/budget.py), not by
    every turn's failure notice."""
    if not isinstance(error, BudgetPaused):
        return f"model call failed: {error}"
    if reply_to is not None and reply_to.to and error.kind in PERIOD_KINDS:
        return f"{SILENT} {error.message}"
    return error.message


# -- the ledger --------------------------------------------------------------------------

Key = tuple[str, str]  # (scope, period id: "2026-11-09" or "2026-11")


@dataclass
class Hold:
    """One call's reservation: `amount` held on every key and on its turn."""

    id: int
    amount: float
    keys: tuple[Key, ...]
    turn: str
    open: bool = True


class Ledger:
    """Spend by (scope, period): stored (usage.db at the last read) + settled since +
    held. Pure and synchronous: a check and its hold are one step of the event loop."""

    def __init__(self) -> None:
        self.stored: dict[Key, float] = {}
        self.held: defaultdict[Key, float] = defaultdict(float)
        # Settled since the read of `stored`: seq -> (cost, keys); dropped by a read
        # begun after it settled (its row was written first, so that read counted it).
        self.recent: dict[int, tuple[float, tuple[Key, ...]]] = {}
        self.extra: defaultdict[Key, float] = defaultdict(float)
        self.seq = 0
        self.turns: OrderedDict[str, float] = OrderedDict()
        self._ids = 0

    # -- reads -------------------------------------------------------------------------

    def settled(self, key: Key) -> float:
        """Dollars spent (reported) in `key`."""
        return self.stored.get(key, 0.0) + self.extra.get(key, 0.0)

    def committed(self, key: Key) -> float:
        """Spent plus held: what a new reservation is checked against."""
        return self.settled(key) + self.held.get(key, 0.0)

    def turn_spent(self, turn: str) -> float:
        return self.turns.get(turn, 0.0)

    def begin_read(self) -> int:
        """The mark a read of usage.db starts at (hand it to `load`)."""
        return self.seq

    def load(self, mark: int, stored: dict[Key, float]) -> None:
        """Take what usage.db held (read after `mark`): calls settled before the mark
        are in it now."""
        for seq in [s for s in self.recent if s <= mark]:
            del self.recent[seq]
        self.stored = dict(stored)
        self.extra = defaultdict(float)
        for cost, keys in self.recent.values():
            for key in keys:
                self.extra[key] += cost
        live = {period for _, period in stored}
        for key in [k for k, v in self.held.items() if v <= 1e-12 and k[1] not in live]:
            del self.held[key]

    # -- holds -------------------------------------------------------------------------

    def hold(self, amount: float, keys: Iterable[Key], turn: str) -> Hold:
        """Hold `amount` on every key and on the turn (the caller checked it fits)."""
        self._ids += 1
        held = Hold(self._ids, amount, tuple(keys), turn)
        for key in held.keys:
            self.held[key] += amount
        if turn:
            self.turns[turn] = self.turns.get(turn, 0.0) + amount
            self.turns.move_to_end(turn)
            while len(self.turns) > TURNS_KEPT:
                self.turns.popitem(last=False)
        return held

    def settle(self, hold: Hold, cost: float) -> None:
        """The call ended: `cost` replaces the hold (once)."""
        if not hold.open:
            return
        self._close(hold)
        self.seq += 1
        self.recent[self.seq] = (cost, hold.keys)
        for key in hold.keys:
            self.extra[key] += cost
        if hold.turn and hold.turn in self.turns:
            self.turns[hold.turn] += cost

    def release(self, hold: Hold) -> None:
        """The call failed: nothing was spent (once)."""
        if hold.open:
            self._close(hold)

    def _close(self, hold: Hold) -> None:
        hold.open = False
        for key in hold.keys:
            self.held[key] = max(0.0, self.held[key] - hold.amount)
        if hold.turn and hold.turn in self.turns:
            self.turns[hold.turn] = max(0.0, self.turns[hold.turn] - hold.amount)
