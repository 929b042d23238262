"""A session's state on PostgreSQL with several nodes: their writes of one session take
turns (a todo's number is the session's max + 1), those of others go side by side."""

from __future__ import annotations

import asyncio

from habakkuk.engine.state import SCHEMA as STATE
from habakkuk.engine.state import StateStore
from habakkuk.engine.storage import PostgresStorage


async def test_two_nodes_adding_todos_to_one_session_never_take_the_same_number(
    pg_url: str,
) -> None:
    storage = PostgresStorage(pg_url)
    first, second = StateStore(await storage.open(STATE)), StateStore(await storage.open(STATE))
    try:
        await asyncio.gather(
            *(
                (first if n % 2 else second).add_todos(session, [f"item {n}"])
                for n in range(12)
                for session in ("s1", "s2")
            )
        )
        lists = [await first.todos(session) for session in ("s1", "s2")]
    finally:
        await first.close()
        await second.close()
    for items in lists:
        assert sorted(item.number for item in items) == list(range(1, 13))
