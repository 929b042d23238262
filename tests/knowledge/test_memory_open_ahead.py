"""The runtime opens each agent's memory databases when its workers start, not on the first
turn's way: a user's first message does not wait for them."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.conftest import mock_config

TWO_AGENTS = mock_config() + "  ops:\n    model: mock/scripted\n    mode: read-only\n"


async def test_starting_the_workers_opens_every_agents_memory_before_any_turn(
    runtime_factory: Any,
) -> None:
    runtime = await runtime_factory(TWO_AGENTS)
    assert await runtime.memory.opened_ahead() == frozenset()  # not before the workers
    runtime.start_workers(channels=False)
    opened = await asyncio.wait_for(runtime.memory.opened_ahead(), 30)
    assert opened == {"main", "ops"}
    assert await runtime.queue.db.fetchone("SELECT 1 FROM jobs") is None  # no turn ran
    # The databases opened ahead are the ones the memory then uses.
    assert (await runtime.memory.database("ops")).path.name == "memory.db"
    assert (await runtime.memory.snapshot("main")).notes == ()


async def test_closing_right_after_the_start_waits_for_the_opening_and_closes_it(
    runtime_factory: Any,
) -> None:
    runtime = await runtime_factory(TWO_AGENTS)
    runtime.start_workers(channels=False)
    await runtime.memory.close()  # while it may still be opening: nothing is left open
    assert await runtime.memory.opened_ahead() == frozenset()
