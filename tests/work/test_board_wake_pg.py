"""The board's dispatcher on PostgreSQL hears a card written on another node at once.

Nodes on different machines share no home folder, so the wake file cannot reach them;
a card written on any node notifies the board's channel at commit, and every node's
dispatcher LISTENs on it. Here the dispatcher's interval is an hour: only the
notification can make it look within the bound.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import cast

from habakkuk.engine.agent.turn_access import TurnsAccess
from habakkuk.engine.home import Home
from habakkuk.engine.jobs import SCHEMA as CONTROL
from habakkuk.engine.jobs import JobQueue, Owner
from habakkuk.engine.outbox_access import TextOutbox
from habakkuk.engine.storage import PostgresStorage
from habakkuk.work.board_dispatch import Dispatcher
from habakkuk.work.board_store import BoardStore
from habakkuk.work.board_types import CARD_KIND, card_job_id
from tests.helpers import eventually


def no_outbox() -> TextOutbox:
    raise AssertionError("no notice is sent in this test")


async def test_a_card_written_on_another_node_wakes_the_dispatcher_at_once(
    pg_url: str, home: Home
) -> None:
    storage = PostgresStorage(pg_url)
    here = await storage.open(CONTROL, inline=True)
    there = await storage.open(CONTROL, inline=True)
    queue = JobQueue(here, owner=Owner.current())
    turns = cast(TurnsAccess, object())  # no card becomes done or blocked: no notice
    other_node = BoardStore(there)
    await other_node.ensure()  # the tables first: two nodes never race to create them
    dispatcher = Dispatcher(BoardStore(here), queue, turns, no_outbox, home.root, interval=3600)
    running = asyncio.create_task(dispatcher.run())
    try:
        await eventually(
            lambda: dispatcher.wakeups is not None and dispatcher.wakeups.ready.is_set(),
            what="the dispatcher to LISTEN",
        )
        await other_node.insert(
            card_id="card_0000000001",
            title="from the other node",
            body="",
            assignee="main",
            created_by="user",
            priority=1,
            parent=None,
            depends_on=(),
        )

        async def dispatched() -> bool:
            rows = await there.fetchall("SELECT id FROM jobs WHERE kind = ?", (CARD_KIND,))
            return [str(r["id"]) for r in rows] == [card_job_id("card_0000000001", 1)]

        await eventually(dispatched, what="the card's job, queued by the woken dispatcher")
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
        await here.close()
        await there.close()
