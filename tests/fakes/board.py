"""An in-memory BoardAccess on a fixed clock, for the Board screen's tests and benchmark
while the real service (habakkuk/work/board.py) is built beside them. It keeps the rules
the screen depends on: NotFound for an unknown id or prefix, HabakkukError for an empty
title, a priority out of range, an unknown agent or an unknown status word, BoardRefused
for a finished card changed; every change bumps the revision, returns the card read back
and publishes CardChanged on the bus it is given."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from habakkuk.engine.errors import HabakkukError, NotFound
from habakkuk.engine.events import CardChanged, EventPayload
from habakkuk.work.board_types import (
    CARD_ID_PREFIX,
    OPEN_STATUSES,
    PRIORITY_RANGE,
    STATUSES,
    USER,
    BlockKind,
    BoardRefused,
    Card,
    CardComment,
    CardEvent,
    CardStatus,
    EventKind,
    NewCard,
    attempt_session,
)

NOW = 1_796_108_400.0  # Tue 2026-12-01 07:00 UTC: every time the tests see derives from it


class FakeBoard:
    """Cards in a dict; `calls` counts the board calls by name."""

    def __init__(
        self,
        agents: tuple[str, ...] = ("main", "ops"),
        publish: Callable[[EventPayload], Any] | None = None,
    ) -> None:
        self.agents = agents
        self.publish = publish
        self.items: dict[str, Card] = {}
        self.calls: dict[str, int] = {}
        self.woken = 0
        self._ids = itertools.count(1)
        self._tick = itertools.count(1)

    def _now(self) -> float:
        return NOW + next(self._tick)

    def _count(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    def _store(self, card: Card, author: str, kind: EventKind, text: str = "") -> Card:
        at = self._now()
        deps = tuple(
            (dep, self.items[dep].status)
            for dep in card.depends_on
            if dep in self.items and self.items[dep].status != "done"
        )
        stored = replace(
            card,
            updated_at=at,
            revision=card.revision + 1,
            waiting_on=deps,
            events=(*card.events, CardEvent(author, kind, text, at)),
        )
        self.items[stored.id] = stored
        if self.publish is not None:
            self.publish(
                CardChanged(
                    session="",
                    card=stored.id,
                    title=stored.title,
                    status=stored.status,
                    assignee=stored.assignee,
                    revision=stored.revision,
                )
            )
        return stored

    def _check_agent(self, agent: str) -> None:
        if agent and agent not in self.agents:
            raise HabakkukError(f"agent {agent!r} is not configured (agents: {self.agents})")

    def _open(self, card: Card) -> None:
        if not card.open:
            raise BoardRefused(f"card {card.id} is {card.status}: reopen it first")

    async def create(self, new: NewCard, *, by: str = USER) -> Card:
        self._count("create")
        if not new.title.strip():
            raise HabakkukError("title: required")
        self._check_priority(new.priority)
        self._check_agent(new.assignee)
        deps = tuple([(await self._find(d)).id for d in new.depends_on])
        number = next(self._ids)
        card = Card(
            id=f"{CARD_ID_PREFIX}{number:010x}",
            title=new.title,
            body=new.body,
            assignee=new.assignee,
            created_by=by,
            status="todo",
            priority=new.priority,
            result="",
            parent=new.parent,
            depends_on=deps,
            attempt=0,
            session="",
            created_at=NOW + number,
            updated_at=NOW + number,
            revision=0,
        )
        return self._store(card, by, "created")

    def _check_priority(self, priority: int) -> None:
        low, high = PRIORITY_RANGE
        if not low <= priority <= high:
            raise HabakkukError(f"priority: {priority} is out of range ({low} to {high})")

    async def list_cards(
        self, *, status: str = "open", assignee: str | None = None, limit: int = 200
    ) -> list[Card]:
        self._count("list_cards")
        if status not in ("open", "all", *STATUSES):
            raise HabakkukError(f"status: {status!r} is not open, all or a status")
        wanted = OPEN_STATUSES if status == "open" else STATUSES if status == "all" else (status,)
        cards = [
            replace(c, comments=(), events=())
            for c in self.items.values()
            if c.status in wanted and (assignee is None or c.assignee == assignee)
        ]
        cards.sort(key=lambda c: (-c.priority, c.created_at))
        return cards[:limit]

    async def _find(self, card_id: str) -> Card:
        key = card_id.removeprefix(CARD_ID_PREFIX)
        found = [c for i, c in self.items.items() if i.removeprefix(CARD_ID_PREFIX).startswith(key)]
        if not found or not key:
            raise NotFound(f"no card {card_id!r}")
        if len(found) > 1:
            raise HabakkukError(f"card id {card_id!r} names {len(found)} cards")
        return found[0]

    async def get(self, card_id: str) -> Card:
        self._count("get")
        return await self._find(card_id)

    async def assign(self, card_id: str, assignee: str, *, by: str = USER) -> Card:
        self._count("assign")
        card = await self._find(card_id)
        self._open(card)
        self._check_agent(assignee)
        status: CardStatus = "todo" if card.status == "doing" else card.status
        return self._store(
            replace(card, assignee=assignee, status=status), by, "assigned", assignee
        )

    async def set_priority(self, card_id: str, priority: int, *, by: str = USER) -> Card:
        self._count("set_priority")
        card = await self._find(card_id)
        self._open(card)
        self._check_priority(priority)
        return self._store(replace(card, priority=priority), by, "priority", str(priority))

    async def comment(self, card_id: str, text: str, *, by: str = USER) -> Card:
        self._count("comment")
        card = await self._find(card_id)
        if not text.strip():
            raise HabakkukError("comment: empty")
        at = self._now()
        return self._commented(replace(card, comments=(*card.comments, CardComment(by, text, at))))

    def _commented(self, card: Card) -> Card:
        # A comment is no event of the log (the comments hold it) but is a change.
        stored = replace(card, revision=card.revision + 1, updated_at=self._now())
        self.items[card.id] = stored
        if self.publish is not None:
            self.publish(
                CardChanged(
                    session="",
                    card=stored.id,
                    title=stored.title,
                    status=stored.status,
                    assignee=stored.assignee,
                    revision=stored.revision,
                )
            )
        return stored

    async def cancel(self, card_id: str, *, by: str = USER) -> Card:
        self._count("cancel")
        card = await self._find(card_id)
        self._open(card)
        return self._store(replace(card, status="cancelled"), by, "cancelled")

    async def reopen(self, card_id: str, *, by: str = USER) -> Card:
        self._count("reopen")
        card = await self._find(card_id)
        if card.status in ("todo", "doing"):
            raise BoardRefused(
                f"card {card.id} is {card.status}: only a finished or blocked card reopens"
            )
        return self._store(
            replace(card, status="todo", blocked_kind="", blocked_reason=""), by, "reopened"
        )

    async def complete(self, card_id: str, result: str, *, by: str, session: str = "") -> Card:
        self._count("complete")
        card = await self._find(card_id)
        self._open(card)
        return self._store(replace(card, status="done", result=result), by, "completed", session)

    async def block(
        self,
        card_id: str,
        reason: str,
        *,
        by: str,
        kind: BlockKind = "question",
        session: str = "",
    ) -> Card:
        self._count("block")
        card = await self._find(card_id)
        self._open(card)
        blocked = replace(card, status="blocked", blocked_kind=kind, blocked_reason=reason)
        return self._store(blocked, by, "blocked", reason)

    def claim(self, card_id: str) -> Card:
        """What the dispatcher does: todo -> doing, attempt + 1 (for the tests' "elsewhere")."""
        card = self.items[card_id]
        attempt = card.attempt + 1
        claimed = replace(
            card, status="doing", attempt=attempt, session=attempt_session(card_id, attempt)
        )
        return self._store(claimed, "board", "claimed")

    async def counts(self) -> dict[str, int]:
        self._count("counts")
        counts: dict[str, int] = dict.fromkeys(STATUSES, 0)
        for card in self.items.values():
            counts[card.status] += 1
        return counts

    def wake(self) -> None:
        self.woken += 1
