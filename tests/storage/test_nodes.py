"""The nodes table: every process serving the home, its heartbeat and the leases it
holds, the same on SQLite and PostgreSQL; the clock check on PostgreSQL."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from habakkuk.engine.jobs import SCHEMA as CONTROL
from habakkuk.engine.leases import NamedLeases
from habakkuk.engine.nodes import (
    MAX_SKEW_SECONDS,
    PRUNE_SECONDS,
    ClockSkew,
    NodeRegistry,
    check_clock,
)
from habakkuk.engine.sql import Conn, Database
from habakkuk.engine.storage import PostgresStorage, Storage
from tests.helpers import eventually


@pytest.fixture
async def control(storage: Storage) -> AsyncIterator[Database]:
    db = await storage.open(CONTROL)
    try:
        yield db
    finally:
        await db.close()


async def _age(db: Database, node: NodeRegistry, seconds: float) -> None:
    """Make `node`'s last heartbeat `seconds` old, as if it had stopped beating then."""

    def _set(conn: Conn) -> None:
        conn.execute(
            "UPDATE nodes SET beat = beat - ?, server_at = server_at - ? WHERE id = ?",
            (seconds, seconds, node.id),
        )

    await db.write(_set)


async def test_a_node_that_joins_is_listed_and_gone_once_it_leaves(control: Database) -> None:
    node = NodeRegistry(control, agents=["main", "ops"], host="alpha", pid=4242)
    assert await node.nodes() == []  # no table yet: nobody has joined
    await node.join()

    [listed] = await node.nodes()
    assert (listed.host, listed.pid, listed.agents) == ("alpha", 4242, ("main", "ops"))
    assert listed.id == node.id and listed.here and not listed.stale
    assert listed.hosts("ops") and not listed.hosts("other")
    assert abs(listed.skew) < MAX_SKEW_SECONDS

    await node.leave()
    assert await node.nodes() == []


async def test_every_node_sees_every_node_with_the_same_answer(control: Database) -> None:
    first = NodeRegistry(control, host="alpha", pid=1)
    second = NodeRegistry(control, agents=["main"], host="beta", pid=2)
    await first.join()
    await second.join()

    from_first = await first.nodes()
    from_second = await second.nodes()
    assert [(n.host, n.agents) for n in from_first] == [("alpha", ("*",)), ("beta", ("main",))]
    assert [n.id for n in from_first] == [n.id for n in from_second]
    assert [n.here for n in from_first] == [True, False]
    assert [n.here for n in from_second] == [False, True]
    assert from_first[0].hosts("anything")


async def test_the_leases_a_node_holds_are_read_from_the_lease_tables(control: Database) -> None:
    node = NodeRegistry(control)
    other = NodeRegistry(control, host="elsewhere", pid=7)
    await node.join()
    await other.join()
    leases = NamedLeases(control)
    channel_leases = NamedLeases(control, "channel_leases")
    await leases.ensure()
    await channel_leases.ensure()
    assert await leases.acquire("schedules:tick", "me:schedules", 30, pid=node.pid) is None
    assert await channel_leases.acquire("channel:tg", "me", 30, pid=node.pid) is None
    # Run out: held by nobody now.
    await leases.acquire("board-dispatcher", "me:board", 30, now=time.time() - 60, pid=node.pid)

    mine, theirs = await node.nodes()
    assert set(mine.leases) == {"schedules:tick", "channel:tg"}
    assert theirs.leases == ()

    await leases.release("schedules:tick", "me:schedules")
    [mine, _] = await other.nodes()
    assert mine.leases == ("channel:tg",)


async def test_a_node_that_stops_beating_is_stale_and_a_beat_makes_it_fresh(
    control: Database,
) -> None:
    node = NodeRegistry(control)
    await node.join()
    await _age(control, node, 60)
    [listed] = await node.nodes()
    assert listed.stale

    await node.beat()
    [listed] = await node.nodes()
    assert not listed.stale


async def test_a_node_dead_for_a_day_is_pruned_when_another_joins(control: Database) -> None:
    dead = NodeRegistry(control, host="gone", pid=1)
    recent = NodeRegistry(control, host="killed", pid=2)
    await dead.join()
    await recent.join()
    await _age(control, dead, PRUNE_SECONDS + 60)
    await _age(control, recent, 120)

    fresh = NodeRegistry(control, host="new", pid=3)
    await fresh.join()
    assert [(n.host, n.stale) for n in await fresh.nodes()] == [("killed", True), ("new", False)]


async def test_a_beat_puts_back_a_row_someone_removed(control: Database) -> None:
    node = NodeRegistry(control)
    await node.join()
    await control.write(lambda conn: conn.execute("DELETE FROM nodes"))
    await node.beat()
    assert [n.id for n in await node.nodes()] == [node.id]


async def test_a_running_node_beats_and_removes_its_row_when_stopped(control: Database) -> None:
    node = NodeRegistry(control, beat_seconds=0.01)
    task = asyncio.create_task(node.run())
    await eventually(lambda: node.joined, what="the node to join")
    first = (await node.nodes())[0].beat
    await eventually(lambda: _beat_after(node, first), what="a heartbeat after the first")
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert await node.nodes() == []


async def _beat_after(node: NodeRegistry, then: float) -> bool:
    nodes = await node.nodes()
    return bool(nodes) and nodes[0].beat > then


# -- PostgreSQL: one server's clock against several machines' --


async def test_a_clock_off_the_servers_is_refused_with_one_line(pg_url: str) -> None:
    db = await PostgresStorage(pg_url).open(CONTROL)
    try:
        ahead = NodeRegistry(db, clock=lambda: time.time() + 60)
        with pytest.raises(ClockSkew, match=r"60\.\d s ahead of the database server's"):
            await ahead.join()
        with pytest.raises(ClockSkew, match="behind"):
            await check_clock(db, clock=lambda: time.time() - 30)
        reading = await check_clock(db)
        assert abs(reading.skew) < MAX_SKEW_SECONDS
        on_time = NodeRegistry(db)
        await on_time.join()
        # The refused node left no row; the one on time did.
        assert [n.id for n in await on_time.nodes()] == [on_time.id]
    finally:
        await db.close()


async def test_a_node_records_its_clock_beside_the_servers(pg_url: str) -> None:
    db = await PostgresStorage(pg_url).open(CONTROL)
    try:
        slightly_ahead = NodeRegistry(db, clock=lambda: time.time() + 2)
        await slightly_ahead.join()
        [listed] = await slightly_ahead.nodes()
        assert 1.0 < listed.skew < 3.0
    finally:
        await db.close()


async def test_two_nodes_on_two_connections_see_each_other(pg_url: str) -> None:
    storage = PostgresStorage(pg_url)
    one, two = await storage.open(CONTROL), await storage.open(CONTROL)
    try:
        first = NodeRegistry(one, host="alpha")
        second = NodeRegistry(two, host="beta")
        await asyncio.gather(first.join(), second.join())
        assert {n.host for n in await first.nodes()} == {"alpha", "beta"}
        await second.leave()
        assert [n.host for n in await first.nodes()] == ["alpha"]
    finally:
        await one.close()
        await two.close()
