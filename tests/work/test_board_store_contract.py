"""The board on both engines: one contract, run on SQLite and PostgreSQL.

The Board service and its store on control opened through the `storage` fixture
(tests/pg_fixtures.py): cards, dependencies, the log, claims, settling, reopening and
attempts, the notice bookkeeping and id prefixes. Two opens of one storage are two
processes of one home (SQLite) or two nodes on one server (PostgreSQL); the claim
races below race them, which is what keeps a card from being dispatched twice.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from habakkuk.engine.agent.requests import ReplyTo
from habakkuk.engine.config import Config
from habakkuk.engine.errors import HabakkukError, NotFound
from habakkuk.engine.events import EventBus
from habakkuk.engine.home import Home
from habakkuk.engine.jobs import SCHEMA as CONTROL
from habakkuk.engine.jobs import JobQueue
from habakkuk.engine.sql import Conn, Database
from habakkuk.engine.storage import Storage
from habakkuk.services.board import build_board
from habakkuk.work.board import Board
from habakkuk.work.board_store import BoardStore, CorruptCard
from habakkuk.work.board_types import USER, BoardRefused, Card, NewCard, card_job_id
from tests.work.board_env import board_config


@dataclass
class Node:
    """One process (SQLite) or node (PostgreSQL) with the board on its own database."""

    db: Database
    board: Board
    stopped: list[str] = field(default_factory=list)

    @property
    def store(self) -> BoardStore:
        return self.board.store


async def open_node(storage: Storage, home: Home, config: Config) -> Node:
    db = await storage.open(CONTROL, inline=True)
    stopped: list[str] = []

    def stop_job(job_id: str) -> bool:
        stopped.append(job_id)  # its pool runs here: stopped without the queue
        return True

    board = build_board(JobQueue(db), config, EventBus(), home, stop_job)
    await board.store.ensure()
    return Node(db, board, stopped)


@pytest.fixture
async def nodes(storage: Storage, home: Home) -> AsyncIterator[tuple[Node, Node]]:
    config = board_config(home)
    first = await open_node(storage, home, config)
    second = await open_node(storage, home, config)
    try:
        yield first, second
    finally:
        await first.db.close()
        await second.db.close()


@pytest.fixture
def node(nodes: tuple[Node, Node]) -> Node:
    return nodes[0]


async def add(node: Node, title: str = "a card", **fields: Any) -> Card:
    by = fields.pop("by", USER)
    return await node.board.create(NewCard(title=title, **fields), by=by)


async def test_a_card_reads_back_with_its_fields_reply_address_and_created_event(
    node: Node,
) -> None:
    card = await add(
        node,
        "write the report",
        body="with sources",
        assignee="other",
        priority=5,
        by="main",
        creator_session="ses_parent",
        reply_to=ReplyTo("telegram:42", "7", "alice"),
        deliver_to="telegram:42",
    )
    assert (card.status, card.priority, card.attempt, card.revision) == ("todo", 5, 0, 1)
    assert card.reply_to == ReplyTo("telegram:42", "7", "alice")
    assert card.deliver_to == "telegram:42"
    assert [(e.author, e.kind, e.text) for e in card.events] == [("main", "created", "for other")]
    assert await node.board.get(card.id) == card


async def test_dependencies_keep_the_order_given_and_say_which_are_not_done(
    node: Node,
) -> None:
    first = await add(node, "first", assignee="main")
    second = await add(node, "second", assignee="main")
    card = await add(node, "third", depends_on=(second.id, first.id), parent=first.id)
    assert card.depends_on == (second.id, first.id)
    assert card.parent == first.id
    await node.board.complete(second.id, "done: b.txt", by="main")
    assert (await node.board.get(card.id)).waiting_on == ((first.id, "todo"),)
    with pytest.raises(NotFound, match="dependency 'card_0000000000' does not exist"):
        await add(node, depends_on=(first.id, "card_0000000000"))
    with pytest.raises(HabakkukError, match="card_0123456789 cannot depend on itself"):
        await node.store.insert(
            card_id="card_0123456789",
            title="loop",
            body="",
            assignee="",
            created_by=USER,
            priority=0,
            parent=None,
            depends_on=("card_0123456789",),
        )
    assert len(await node.board.list_cards(status="all")) == 3


async def test_an_id_prefix_finds_one_card_and_an_ambiguous_one_lists_them(node: Node) -> None:
    for card_id in ("card_3fa0000001", "card_3fa0000002", "card_4bc0000003"):
        await node.store.insert(
            card_id=card_id,
            title=card_id,
            body="",
            assignee="",
            created_by=USER,
            priority=0,
            parent=None,
            depends_on=(),
        )
    assert (await node.board.get("4b")).id == "card_4bc0000003"
    assert (await node.board.get("card_3fa0000002")).id == "card_3fa0000002"
    with pytest.raises(HabakkukError, match="names several cards: card_3fa0000001, card_3fa00"):
        await node.board.get("3fa")
    with pytest.raises(NotFound, match="no card '5'"):
        await node.board.get("5")
    assert await node.store.ids_with_prefix("card_3fa", limit=1) == ["card_3fa0000001"]


async def test_lists_filter_by_status_and_assignee_highest_priority_then_oldest(
    node: Node,
) -> None:
    low = await add(node, "low", assignee="main", priority=-1)
    first = await add(node, "first", assignee="main")
    top = await add(node, "top", assignee="other", priority=9)
    free = await add(node, "free")
    gone = await add(node, "gone", assignee="main")
    await node.board.cancel(gone.id)
    assert [c.id for c in await node.board.list_cards()] == [top.id, first.id, free.id, low.id]
    assert [c.id for c in await node.board.list_cards(assignee="main")] == [first.id, low.id]
    assert [c.id for c in await node.board.list_cards(status="cancelled")] == [gone.id]
    assert [c.id for c in await node.board.list_cards(limit=2)] == [top.id, first.id]
    assert await node.board.counts() == {
        "todo": 4,
        "doing": 0,
        "blocked": 0,
        "done": 0,
        "cancelled": 1,
    }


async def test_two_nodes_claiming_one_attempt_have_exactly_one_winner(
    nodes: tuple[Node, Node],
) -> None:
    first, second = nodes
    cards = [await add(first, f"card {n}", assignee="main") for n in range(10)]
    for card in cards:
        won = await asyncio.gather(first.store.claim(card.id, 0), second.store.claim(card.id, 0))
        winners = [c for c in won if c is not None]
        assert len(winners) == 1, card.id
        assert (winners[0].status, winners[0].attempt) == ("doing", 1)
        assert [e.kind for e in winners[0].events].count("claimed") == 1
    assert await second.store.claim(cards[0].id, 0) is None  # a stale attempt never again


async def test_two_dispatchers_looking_at_once_dispatch_each_ready_card_once(
    nodes: tuple[Node, Node],
) -> None:
    first, second = nodes
    cards = [await add(first, f"card {n}", assignee="main", priority=n % 3) for n in range(30)]

    async def dispatch(node: Node) -> list[str]:
        """What a dispatcher's look does: claim every ready card it sees, in turn."""
        claimed = []
        for card in await node.store.ready(100):
            taken = await node.store.claim(card.id, card.attempt)
            if taken is not None:
                claimed.append(card_job_id(taken.id, taken.attempt))
        return claimed

    one, two = await asyncio.gather(dispatch(first), dispatch(second))
    # Every card's first attempt was claimed, each by one dispatcher only.
    assert sorted(one + two) == sorted(card_job_id(c.id, 1) for c in cards)
    assert not set(one) & set(two)
    for card in cards:
        after = await second.board.get(card.id)
        assert (after.status, after.attempt) == ("doing", 1)
        assert [e.kind for e in after.events] == ["created", "claimed"]


async def test_claim_takes_only_an_assigned_todo_card_whose_dependencies_are_done(
    node: Node,
) -> None:
    free = await add(node, "unassigned")
    dep = await add(node, "dep", assignee="main")
    waiting = await add(node, "waiting", assignee="main", depends_on=(dep.id,))
    assert await node.store.claim(free.id, 0) is None
    assert await node.store.claim(waiting.id, 0) is None
    assert [c.id for c in await node.store.ready()] == [dep.id]
    await node.board.complete(dep.id, "done: dep.txt", by="main")
    assert [c.id for c in await node.store.ready()] == [waiting.id]
    assert await node.store.claim(waiting.id, 0) is not None
    assert await node.store.ready() == []
    assert [c.id for c in await node.store.in_progress()] == [waiting.id]


async def test_an_attempt_settles_once_and_a_stale_one_never(nodes: tuple[Node, Node]) -> None:
    first, second = nodes
    card = await add(first, assignee="main")
    await first.store.claim(card.id, 0)
    assert await second.store.settle_attempt(card.id, 2, status="blocked", reason="x") is None
    settled = await asyncio.gather(
        first.store.settle_attempt(
            card.id, 1, status="blocked", reason="turn ended", comment="no file"
        ),
        second.store.settle_attempt(card.id, 1, status="todo", reason="retry"),
    )
    (winner,) = [s for s in settled if s is not None]
    assert winner.status in ("blocked", "todo")
    after = await first.board.get(card.id)
    assert [e.kind for e in after.events].count("failed") + [e.kind for e in after.events].count(
        "reopened"
    ) == 1


async def test_reopen_and_attempts_an_agent_runs_out_of_but_the_user_does_not(
    node: Node,
) -> None:
    card = await add(node, assignee="main", by="main")
    with pytest.raises(BoardRefused, match="is todo: only a blocked, done or cancelled card"):
        await node.board.reopen(card.id)
    for attempt in range(2):  # board.max_attempts: 2 in this config
        assert await node.store.claim(card.id, attempt) is not None
        await node.board.block(card.id, "crashed", by="main", kind="failed")
        if attempt == 0:
            reopened = await node.board.reopen(card.id, by="main")
            assert (reopened.status, reopened.blocked_kind, reopened.attempt) == ("todo", "", 1)
    with pytest.raises(BoardRefused, match=r"has used 2 of 2 attempts \(board.max_attempts\)"):
        await node.board.reopen(card.id, by="main")
    assert (await node.board.reopen(card.id, by=USER)).status == "todo"


async def test_cancelling_a_card_in_progress_stops_its_attempt(node: Node) -> None:
    card = await add(node, assignee="main")
    claimed = await node.store.claim(card.id, 0)
    assert claimed is not None
    cancelled = await node.board.cancel(card.id)
    assert cancelled.status == "cancelled"
    assert node.stopped == [card_job_id(card.id, 1)]
    assert [(e.kind, e.text) for e in cancelled.events][-1] == ("stopped", card_job_id(card.id, 1))


async def test_a_change_of_a_notified_card_is_no_new_notice_until_it_is_done_again(
    node: Node,
) -> None:
    card = await add(node, assignee="main")
    await node.board.comment(card.id, "a note")
    assert await node.store.unnotified() == []
    done = await node.board.complete(card.id, "done: out.csv", by="main")
    assert [(c.id, c.revision) for c in await node.store.unnotified()] == [(card.id, done.revision)]
    assert await node.store.mark_notified(card.id, done.revision)
    assert not await node.store.mark_notified(card.id, done.revision)
    await node.board.comment(card.id, "thanks")
    await node.board.set_priority(card.id, 3)
    assert await node.store.unnotified() == []
    await node.board.reopen(card.id)
    again = await node.board.complete(card.id, "done again", by="main")
    assert [(c.id, c.revision) for c in await node.store.unnotified()] == [
        (card.id, again.revision)
    ]


async def test_two_nodes_marking_one_notice_record_it_once(nodes: tuple[Node, Node]) -> None:
    first, second = nodes
    card = await add(first, assignee="main")
    done = await first.board.complete(card.id, "done: x", by="main")
    marked = await asyncio.gather(
        first.store.mark_notified(card.id, done.revision),
        second.store.mark_notified(card.id, done.revision),
    )
    assert sorted(marked) == [False, True]
    after = await first.board.get(card.id)
    assert [e.text for e in after.events if e.kind == "notified"] == [f"r{done.revision}"]


async def test_changes_racing_from_two_nodes_both_land_or_the_rule_refuses_one(
    nodes: tuple[Node, Node],
) -> None:
    first, second = nodes
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
    assert len([o for o in outcomes if isinstance(o, HabakkukError)]) == 1
    kinds = [e.kind for e in (await first.board.get(card.id)).events]
    assert kinds.count("completed") + kinds.count("cancelled") == 1


async def test_a_corrupt_card_is_logged_in_one_line_and_skipped_never_hiding_the_others(
    node: Node, caplog: pytest.LogCaptureFixture
) -> None:
    good = await add(node, "good", assignee="main")
    bad = await add(node, "bad", assignee="main", priority=5)

    def corrupt(conn: Conn) -> None:
        conn.execute("UPDATE board_cards SET reply_to = '{not json' WHERE id = ?", (bad.id,))

    await node.db.write(corrupt)
    with caplog.at_level(logging.WARNING, logger="habakkuk.work.board_store"):
        assert [c.id for c in await node.board.list_cards()] == [good.id]
        assert [c.id for c in await node.store.ready()] == [good.id]
    with pytest.raises(CorruptCard, match=f"card {bad.id}: unreadable row"):
        await node.board.get(bad.id)
