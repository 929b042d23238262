"""BoardStore on a real control.db: the dispatcher's compare-and-swaps (claim and
settle_attempt, raced from two connections as two processes would), ready, in_progress,
the notice bookkeeping, lists in two queries, and a corrupt row skipped."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from habakkuk.engine.errors import HabakkukError
from habakkuk.engine.home import Home
from habakkuk.engine.sql import Conn
from habakkuk.work.board_store import CorruptCard
from habakkuk.work.board_types import USER, Card, NewCard, attempt_session, card_job_id
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


async def test_two_concurrent_claims_of_one_attempt_have_exactly_one_winner(
    pair: tuple[Control, Control],
) -> None:
    first, second = pair
    cards = [await add(first, f"card {n}", assignee="main") for n in range(10)]
    for card in cards:
        won = await asyncio.gather(first.store.claim(card.id, 0), second.store.claim(card.id, 0))
        winners = [c for c in won if c is not None]
        assert len(winners) == 1, card.id
        claimed = winners[0]
        assert (claimed.status, claimed.attempt) == ("doing", 1)
        assert claimed.session == attempt_session(card.id, 1)
        assert [(e.author, e.kind, e.text) for e in claimed.events][-1] == (
            "board",
            "claimed",
            card_job_id(card.id, 1),
        )
        assert [e.kind for e in claimed.events].count("claimed") == 1
    # A stale attempt number never claims again.
    assert await second.store.claim(cards[0].id, 0) is None


async def test_claim_takes_only_an_assigned_todo_card_whose_dependencies_are_done(
    pair: tuple[Control, Control],
) -> None:
    control, _ = pair
    free = await add(control, "unassigned")
    dep = await add(control, "dep", assignee="main")
    waiting = await add(control, "waiting", assignee="main", depends_on=(dep.id,))
    assert await control.store.claim(free.id, 0) is None
    assert await control.store.claim(waiting.id, 0) is None
    assert [c.id for c in await control.store.ready()] == [dep.id]
    await control.board.complete(dep.id, "done: dep.txt", by="main")
    assert [c.id for c in await control.store.ready()] == [waiting.id]
    claimed = await control.store.claim(waiting.id, 0)
    assert claimed is not None and claimed.waiting_on == ()
    assert await control.store.ready() == []
    assert [c.id for c in await control.store.in_progress()] == [waiting.id]


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


async def test_settle_attempt_ends_only_the_attempt_still_in_progress(
    pair: tuple[Control, Control],
) -> None:
    control, other = pair
    card = await add(control, assignee="main")
    await control.store.claim(card.id, 0)
    assert await other.store.settle_attempt(card.id, 2, status="blocked", reason="x") is None
    settled = await other.store.settle_attempt(
        card.id,
        1,
        status="blocked",
        kind="failed",
        reason="the turn ended with the card still in progress",
        comment="I could not find the file",
    )
    assert settled is not None
    assert (settled.status, settled.blocked_kind) == ("blocked", "failed")
    assert settled.blocked_reason == "the turn ended with the card still in progress"
    assert [(c.author, c.text) for c in settled.comments] == [
        ("board", "I could not find the file")
    ]
    assert settled.events[-1].kind == "failed"
    # Settled once: the same attempt cannot settle it again.
    assert await control.store.settle_attempt(card.id, 1, status="todo") is None
    # A question is told apart from a failure; another end clears the block.
    await control.board.reopen(card.id)
    await control.store.claim(card.id, 1)
    asked = await control.store.settle_attempt(
        card.id, 2, status="blocked", kind="question", reason="which one?"
    )
    assert asked is not None and asked.events[-1].kind == "blocked"
    await control.board.reopen(card.id)
    await control.store.claim(card.id, 2)
    again = await control.store.settle_attempt(card.id, 3, status="todo", reason="retry")
    assert again is not None
    assert (again.status, again.blocked_kind, again.events[-1].kind) == ("todo", "", "reopened")


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


async def test_a_corrupt_row_is_logged_in_one_line_and_skipped_never_hiding_the_others(
    pair: tuple[Control, Control], caplog: pytest.LogCaptureFixture
) -> None:
    control, _ = pair
    good = await add(control, "good", assignee="main")
    bad = await add(control, "bad", assignee="main", priority=5)

    def corrupt(conn: Conn) -> None:
        conn.execute("UPDATE board_cards SET reply_to = '{not json' WHERE id = ?", (bad.id,))

    await control.db.write(corrupt)
    with caplog.at_level(logging.WARNING, logger="habakkuk.work.board_store"):
        assert [c.id for c in await control.board.list_cards()] == [good.id]
        assert [c.id for c in await control.store.ready()] == [good.id]
    lines = [r.getMessage() for r in caplog.records if bad.id in r.getMessage()]
    assert lines and all("\n" not in line and "unreadable row" in line for line in lines)
    with pytest.raises(CorruptCard, match=f"card {bad.id}: unreadable row"):
        await control.board.get(bad.id)
    assert issubclass(CorruptCard, HabakkukError)


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


async def test_changes_racing_from_two_processes_both_land_or_the_rule_refuses_one(
    pair: tuple[Control, Control],
) -> None:
    first, second = pair
    card = await add(first, assignee="main")
    await asyncio.gather(
        first.board.comment(card.id, "from one"), second.board.comment(card.id, "from two")
    )
    both = await first.board.get(card.id)
    assert sorted(c.text for c in both.comments) == ["from one", "from two"]
    assert both.revision == 3
    outcomes = await asyncio.gather(
        first.board.complete(card.id, "done: a.txt", by="main"),
        second.board.cancel(card.id),
        return_exceptions=True,
    )
    refused = [o for o in outcomes if isinstance(o, HabakkukError)]
    assert len(refused) == 1
    assert "finished card" in str(refused[0]) or "is already done" in str(refused[0])
    final = await first.board.get(card.id)
    assert final.status in ("done", "cancelled")
    kinds = [e.kind for e in final.events]
    assert kinds.count("completed") + kinds.count("cancelled") == 1
