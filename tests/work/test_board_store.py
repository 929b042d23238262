"""BoardStore on a real control.db: the dispatcher's compare-and-swaps (claim and
settle_attempt, raced from two connections as two processes would), ready, in_progress,
the notice bookkeeping, lists in two queries, and a corrupt row skipped."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from habakkuk.engine.errors import HabakkukError
from habakkuk.engine.home import Home
from habakkuk.engine.sql import Conn
from habakkuk.work.board_types import USER, Card, NewCard
from tests.helpers import sqlite_conn
from tests.work.board_env import Control, board_config, open_control


@pytest.fixture
async def pair(home: Home) -> AsyncIterator[tuple[Control, Control]]:
    """Two connections to one control.db (two processes of one home)."""
    config = board_config(home)
    first = await open_control(home, config)
    second = await open_control(home, config)
    yield first, second
    await first.close()
    await second.close()


async def add(control: Control, title: str = "a card", **fields: Any) -> Card:
    return await control.board.create(NewCard(title=title, **fields))


async def test_ready_lists_highest_priority_first_then_oldest(
    pair: tuple[Control, Control],
) -> None:
    control, _ = pair
    old = await add(control, "old", assignee="main")
    urgent = await add(control, "urgent", assignee="other", priority=50)
    new = await add(control, "new", assignee="main")
    await add(control, "cancelled", assignee="main", priority=99)
    await control.board.cancel((await control.board.list_cards(status="all"))[0].id)
    assert [c.id for c in await control.store.ready()] == [urgent.id, old.id, new.id]
    assert [c.id for c in await control.store.ready(limit=1)] == [urgent.id]


async def test_unnotified_returns_a_card_that_became_done_or_blocked_until_marked(
    pair: tuple[Control, Control],
) -> None:
    control, _ = pair
    card = await add(control, assignee="main")
    await control.board.comment(card.id, "a note")
    assert await control.store.unnotified() == []  # todo: nothing to tell
    done = await control.board.complete(card.id, "done: out.csv", by="main")
    assert [(c.id, c.revision) for c in await control.store.unnotified()] == [
        (card.id, done.revision)
    ]
    assert await control.store.mark_notified(card.id, done.revision)
    assert not await control.store.mark_notified(card.id, done.revision)  # once
    assert await control.store.unnotified() == []
    # A comment or a priority on a notified card is no new notice...
    await control.board.comment(card.id, "thanks")
    await control.board.set_priority(card.id, 3)
    assert await control.store.unnotified() == []
    # ...but becoming done again is.
    await control.board.reopen(card.id)
    again = await control.board.complete(card.id, "done again: out2.csv", by="main")
    assert [(c.id, c.revision) for c in await control.store.unnotified()] == [
        (card.id, again.revision)
    ]
    marked = await control.board.get(card.id)
    assert marked.events[-1].kind == "completed"
    assert [e.text for e in marked.events if e.kind == "notified"] == [f"r{done.revision}"]


async def test_a_list_reads_cards_and_dependencies_in_two_queries(
    pair: tuple[Control, Control],
) -> None:
    control, _ = pair
    first = await add(control, "first")
    for n in range(30):
        await add(control, f"card {n}", depends_on=(first.id,))
    statements: list[str] = []

    def trace(conn: Conn) -> None:
        sqlite_conn(conn).set_trace_callback(statements.append)

    await control.db.run(trace)
    cards = await control.board.list_cards(limit=1000)
    await control.db.run(lambda conn: sqlite_conn(conn).set_trace_callback(None))
    assert len(cards) == 31
    assert all(c.waiting_on == ((first.id, "todo"),) for c in cards if c.id != first.id)
    selects = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
    assert len(selects) == 2, selects


async def test_a_card_cannot_depend_on_itself(pair: tuple[Control, Control]) -> None:
    control, _ = pair
    with pytest.raises(HabakkukError, match="card_0123456789 cannot depend on itself"):
        await control.store.insert(
            card_id="card_0123456789",
            title="loop",
            body="",
            assignee="",
            created_by=USER,
            priority=0,
            parent=None,
            depends_on=("card_0123456789",),
        )
    assert await control.board.list_cards(status="all") == []
