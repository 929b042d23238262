"""The job queue on PostgreSQL, where several nodes share it: each `PgDatabase` here is
a node of its own (its own connections, its own queue), as a `--serve` on another
machine would be."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator, Callable
from typing import Any

import psycopg
import pytest

from habakkuk.engine.jobs import SCHEMA, JobQueue, Lease, Owner, pg_claim_sql
from habakkuk.engine.pools import Pool
from habakkuk.engine.sql import Database
from habakkuk.engine.storage import PostgresStorage
from tests.helpers import eventually

Node = Callable[..., Any]


def connect_to_control(url: str) -> psycopg.Connection[Any]:
    """A plain connection to control's tables (another node's statements, by hand)."""
    return psycopg.connect(url, autocommit=True, options="-c search_path=control")


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


@pytest.fixture
async def nodes(pg_url: str) -> AsyncIterator[Callable[[], Any]]:
    """Opens nodes on one fresh database; closes them after the test."""
    opened: list[Database] = []

    async def node() -> Database:
        db = await PostgresStorage(pg_url).open(SCHEMA, inline=True)
        opened.append(db)
        return db

    yield node
    for db in opened:
        await db.close()


async def test_four_claimers_on_two_nodes_never_claim_one_job_twice(nodes: Node) -> None:
    first, second = await nodes(), await nodes()
    producer = JobQueue(first)
    for batch in range(10):
        await asyncio.gather(*(producer.enqueue(f"job-{batch}-{i}", "k") for i in range(50)))
    queues = [JobQueue(db) for db in (first, first, second, second)]
    taken: Counter[str] = Counter()
    by_claimer: Counter[int] = Counter()

    async def claimer(number: int, queue: JobQueue) -> None:
        leases: list[Lease] = []
        while True:
            finished, leases = await queue.settle_and_claim(
                [(lease, None) for lease in leases], ["k"], 8
            )
            assert all(finished)
            if not leases:
                return
            for lease in leases:
                taken[lease.job.id] += 1
            by_claimer[number] += len(leases)

    await asyncio.gather(*(claimer(n, q) for n, q in enumerate(queues)))
    assert len(taken) == 500
    assert set(taken.values()) == {1}
    assert await producer.depth() == {}
    assert len(by_claimer) > 1  # they did claim side by side


async def test_one_job_per_serial_key_runs_at_a_time_across_nodes(nodes: Node) -> None:
    dbs = [await nodes() for _ in range(3)]
    producer = JobQueue(dbs[0])
    keys = [f"session-{k}" for k in range(4)]
    for i in range(15):
        await asyncio.gather(*(producer.enqueue(f"{key}-{i:02}", "turn", serial_key=key)
                               for key in keys))  # fmt: skip
    running: dict[str, str] = {}
    order: dict[str, list[str]] = {key: [] for key in keys}

    async def worker(queue: JobQueue) -> None:
        while True:
            leases = await queue.claim_many(["turn"], 4)
            if not leases:
                if await queue.depth() == {}:
                    return
                await asyncio.sleep(0)  # another node holds the keys left: let it run
                continue
            for lease in leases:
                key = lease.job.serial_key
                assert key not in running, f"{lease.job.id} began while {running.get(key)} ran"
                running[key] = lease.job.id
                order[key].append(lease.job.id)
            await asyncio.sleep(0)  # the others claim meanwhile
            for lease in leases:
                del running[lease.job.serial_key]
                await queue.complete(lease)

    await asyncio.gather(*(worker(JobQueue(db)) for db in dbs for _ in range(2)))
    for key in keys:
        assert order[key] == [f"{key}-{i:02}" for i in range(15)]


async def test_a_claim_that_loses_a_serial_key_to_another_node_claims_again(
    nodes: Node, pg_url: str
) -> None:
    # The one case a claim's snapshot cannot see: another node starts a newer job of
    # the key while this claim picks the older one. jobs_serial_running refuses the
    # second start; the claim, told so, claims again and finds the key held.
    db = await nodes()
    queue = JobQueue(db)
    await queue.enqueue("older", "turn", serial_key="s")
    await queue.enqueue("newer", "turn", serial_key="s")
    await queue.enqueue("free", "turn")
    other = await asyncio.to_thread(connect_to_control, pg_url)
    try:
        other.execute("BEGIN")
        other.execute("UPDATE jobs SET status = 'running', lease_owner = 'x' WHERE id = 'newer'")
        claim = asyncio.ensure_future(queue.claim_many(["turn"], 5))

        async def waits_for_the_other() -> bool:
            row = await db.fetchone(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                " AND datname = current_database()"
            )
            return row is not None and int(row[0]) == 1

        await eventually(waits_for_the_other, what="the claim waiting on the other node")
        await asyncio.to_thread(other.execute, "COMMIT")
        leases = await claim
    finally:
        await asyncio.to_thread(other.close)
    assert [lease.job.id for lease in leases] == ["free"]
    older = await queue.get("older")
    assert older is not None and older.status == "queued"


async def test_an_enqueue_on_one_node_wakes_an_idle_pool_on_another(nodes: Node) -> None:
    here, there = await nodes(), await nodes()
    ran = asyncio.Event()

    async def handle(lease: Lease) -> dict[str, Any] | None:
        ran.set()
        return None

    listening = JobQueue(there)
    # Its poll would come in an hour: only the notification can wake it in time.
    pool = Pool(listening, ["k"], handle, poll_interval=3600)
    pool.start()
    try:
        await eventually(listening.hears_other_nodes, what="the other node listening")
        await asyncio.sleep(0)  # its dispatcher has gone idle
        await JobQueue(here).enqueue("wake", "k")
        await eventually(ran.is_set, what="the other node's pool running the job")
    finally:
        await pool.stop()
    assert not listening.hears_other_nodes()  # the last pool's stop closed the LISTEN


async def test_a_job_whose_notification_was_lost_is_found_by_the_poll(nodes: Node) -> None:
    db = await nodes()
    ran = asyncio.Event()

    async def handle(lease: Lease) -> dict[str, Any] | None:
        ran.set()
        return None

    queue = JobQueue(db)
    pool = Pool(queue, ["k"], handle, poll_interval=0.05)
    pool.start()
    try:
        await eventually(queue.hears_other_nodes, what="the pool listening")
        # Queued as a node whose notification never arrived would have left it.
        await db.write(
            lambda conn: conn.execute(
                "INSERT INTO jobs(id, kind, created_at, updated_at) VALUES ('quiet', 'k', 0, 0)"
            )
        )
        await eventually(ran.is_set, what="the polling pool running the job")
    finally:
        await pool.stop()


async def test_hosts_are_named_by_the_environment_and_judged_by_lease_time(
    nodes: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = await nodes()
    monkeypatch.setenv("HABAKKUK_HOSTNAME", "alpha")
    gone = dead_pid()
    alpha = JobQueue(db, owner=Owner(Owner.current().host, gone, "gone"), lease_seconds=60)
    await alpha.enqueue("a", "k")
    lease = await alpha.claim(["k"])
    assert lease is not None
    job = await alpha.get("a")
    assert job is not None and job.lease_owner == f"alpha:{gone}:gone"

    monkeypatch.setenv("HABAKKUK_HOSTNAME", "beta")
    beta = JobQueue(db)
    assert beta.owner.host == "beta"
    assert await beta.claim(["k"]) is None  # alpha's pid means nothing on beta

    monkeypatch.setenv("HABAKKUK_HOSTNAME", "alpha")
    back_on_alpha = JobQueue(db)
    taken = await back_on_alpha.claim(["k"])  # alpha sees its own process dead
    assert taken is not None and taken.job.id == "a"


async def test_the_claim_reads_the_queued_jobs_through_the_claim_index(nodes: Node) -> None:
    db = await nodes()
    queue = JobQueue(db)
    for batch in range(20):
        await asyncio.gather(*(queue.enqueue(f"j{batch}-{i}", "k") for i in range(100)))
    await db.run(lambda conn: conn.execute("ANALYZE jobs"))

    plan = await db.run(
        lambda conn: [
            row[0]
            for row in conn.execute(
                f"EXPLAIN {pg_claim_sql(True, False)}",
                ("k", 1e12, "o", 1, "o", 1.0, "h", 1, 1.0),
            )
        ]
    )
    text = "\n".join(plan)
    assert "jobs_claim" in text, text
    assert "Seq Scan" not in text, text
