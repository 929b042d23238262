"""Delegation's stops table on both engines: one contract, run on SQLite and PostgreSQL.

Why a child was stopped is written before it stops, from whichever process stopped
it, and read by whichever process reports on it: two opens of one storage are two
processes (SQLite) or two nodes (PostgreSQL).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from habakkuk.engine.jobs import SCHEMA as CONTROL
from habakkuk.engine.storage import Storage
from habakkuk.work.delegation_store import DelegationStore


@pytest.fixture
async def nodes(storage: Storage) -> AsyncIterator[tuple[DelegationStore, DelegationStore]]:
    first = await storage.open(CONTROL, inline=True)
    second = await storage.open(CONTROL, inline=True)
    try:
        yield DelegationStore(first), DelegationStore(second)
    finally:
        await first.close()
        await second.close()


async def test_a_stop_recorded_on_one_node_is_read_on_the_other(
    nodes: tuple[DelegationStore, DelegationStore],
) -> None:
    first, second = nodes
    assert await second.stop_of("sub_1") is None
    await first.record_stop("sub_1", "timed out", "no answer within 30 s", 1.5)
    assert await second.stop_of("sub_1") == ("timed out", "no answer within 30 s")
    assert await second.stop_of("sub_2") is None


async def test_the_first_reason_recorded_for_a_child_stays(
    nodes: tuple[DelegationStore, DelegationStore],
) -> None:
    first, second = nodes
    await asyncio.gather(
        first.record_stop("sub_1", "stopped", "stopped with /subagents stop", 1.0),
        second.record_stop("sub_1", "timed out", "no answer", 2.0),
    )
    raced = await first.stop_of("sub_1")
    assert raced in (("stopped", "stopped with /subagents stop"), ("timed out", "no answer"))
    await second.record_stop("sub_1", "stopped", "again", 3.0)
    assert await second.stop_of("sub_1") == raced


async def test_stores_of_two_nodes_opening_together_create_the_table_once(
    nodes: tuple[DelegationStore, DelegationStore],
) -> None:
    first, second = nodes
    await asyncio.gather(first.ensure(), second.ensure(), first.ensure())
    await first.record_stop("sub_1", "stopped", "", 1.0)
    assert await second.stop_of("sub_1") == ("stopped", "")
