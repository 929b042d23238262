"""The pool's dispatcher and heartbeat: many jobs per trip, every guarantee kept."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from habakkuk.engine.jobs import MIGRATIONS, JobQueue, Lease
from habakkuk.engine.pools import PermanentJobError, Pool
from habakkuk.engine.store import SqliteDatabase
from tests.helpers import eventually, sqlite_db


@pytest.fixture
async def queue(tmp_path: Path) -> AsyncIterator[JobQueue]:
    q = JobQueue(await SqliteDatabase.open(tmp_path / "control.db", MIGRATIONS))
    yield q
    await q.db.close()


def count_writes(monkeypatch: pytest.MonkeyPatch, db: SqliteDatabase) -> list[str]:
    """The name of each function `db` runs as a write (one trip each)."""
    names: list[str] = []
    write, write_now = SqliteDatabase.write, SqliteDatabase.write_now
    write_if_free = SqliteDatabase.write_if_free

    async def counted(
        self: SqliteDatabase,
        fn: Callable[[sqlite3.Connection], Any],
        *,
        inline: bool = False,
        shared: bool = False,
        one_statement: bool = False,
        keys: Sequence[str] = (),
    ) -> Any:
        if self is db:
            names.append(fn.__qualname__)
        return await write(self, fn, inline=inline, one_statement=one_statement)

    def counted_now(
        self: SqliteDatabase,
        fn: Callable[[sqlite3.Connection], Any],
        *,
        inline: bool = False,
        shared: bool = False,
        keys: Sequence[str] = (),
    ) -> Any:
        if self is db:
            names.append(fn.__qualname__)
        return write_now(self, fn, inline=inline)

    def counted_if_free(
        self: SqliteDatabase,
        fn: Callable[[sqlite3.Connection], Any],
        loop: asyncio.AbstractEventLoop | None = None,
        *,
        once: object = None,
        one_statement: bool = False,
    ) -> Any:
        outcome = write_if_free(self, fn, loop, once=once, one_statement=one_statement)
        if self is db and outcome is not None:  # else it is written later, counted then
            names.append(fn.__qualname__)
        return outcome

    monkeypatch.setattr(SqliteDatabase, "write", counted)
    monkeypatch.setattr(SqliteDatabase, "write_now", counted_now)
    monkeypatch.setattr(SqliteDatabase, "write_if_free", counted_if_free)
    return names


async def statuses(queue: JobQueue) -> dict[str, tuple[str, int]]:
    rows = await queue.db.fetchall("SELECT id, status, attempts FROM jobs ORDER BY seq")
    return {r[0]: (r[1], r[2]) for r in rows}


async def test_claim_many_takes_only_the_oldest_queued_job_of_each_serial_key(
    queue: JobQueue,
) -> None:
    for name, key in (("a1", "a"), ("b1", "b"), ("a2", "a"), ("free", ""), ("b2", "b")):
        await queue.enqueue(name, "k", serial_key=key)
    leases = await queue.claim_many(["k"], 10)
    assert [lease.job.id for lease in leases] == ["a1", "b1", "free"]
    # With a1 running, a2 still waits; completing a1 in the same trip admits it.
    (done,), more = await queue.settle_and_claim([(leases[0], {"ok": 1})], ["k"], 10)
    assert done is True and [lease.job.id for lease in more] == ["a2"]


async def test_a_pool_claims_its_free_slots_and_settles_finished_jobs_in_shared_trips(
    queue: JobQueue, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = asyncio.Event()
    started: list[str] = []

    async def handler(lease: Lease) -> dict[str, Any]:
        started.append(lease.job.id)
        await gate.wait()
        return {"id": lease.job.id}

    names = [f"j{i}" for i in range(8)]
    for name in names:
        await queue.enqueue(name, "k")
    writes = count_writes(monkeypatch, sqlite_db(queue.db))
    finished: list[str] = []
    pool = Pool(
        queue,
        ["k"],
        handler,
        concurrency=4,
        poll_interval=30,
        on_finished=lambda j: finished.append(j.id),
    )
    pool.start()
    try:
        await eventually(lambda: len(started) == 4, what="four jobs started")
        assert started == names[:4]
        gate.set()  # the four finish together
        await eventually(lambda: len(finished) == 8, what="every job finished")
    finally:
        await pool.stop()
    assert started == names and sorted(finished) == names
    assert await statuses(queue) == {name: ("done", 1) for name in names}
    trips = [name for name in writes if "settle_and_claim" in name]
    # A claim of four; four completions with the next four claims; four completions.
    # (A trip per claim and per completion would be sixteen.)
    assert len(trips) <= 4, writes
    assert pool.running_jobs == []


async def test_stop_writes_completions_the_dispatcher_had_not_written_yet(
    queue: JobQueue,
) -> None:
    returned = asyncio.Event()

    async def handler(lease: Lease) -> dict[str, Any]:
        returned.set()
        return {"id": lease.job.id}

    finished: list[str] = []
    pool = Pool(
        queue,
        ["k"],
        handler,
        concurrency=2,
        poll_interval=30,
        on_finished=lambda j: finished.append(j.id),
    )
    await queue.enqueue("a", "k")
    pool.start()
    # This task wakes before the dispatcher hears the job returned: the stop lands
    # while the completion waits for the dispatcher's next trip.
    await returned.wait()
    await pool.stop()
    job = await queue.get("a")
    assert job is not None
    assert (job.status, job.result, job.lease_owner) == ("done", {"id": "a"}, None)
    assert finished == ["a"]


async def test_one_heartbeat_trip_extends_every_running_lease(tmp_path: Path) -> None:
    db = await SqliteDatabase.open(tmp_path / "control.db", MIGRATIONS)
    queue = JobQueue(db, lease_seconds=0.3)
    rival = JobQueue(db, lease_seconds=0.3)  # another owner: takes any lease that expires
    gate = asyncio.Event()
    running: list[str] = []

    async def handler(lease: Lease) -> dict[str, Any]:
        running.append(lease.job.id)
        await gate.wait()
        return {}

    for name in ("a", "b", "c"):
        await queue.enqueue(name, "k")
    pool = Pool(queue, ["k"], handler, concurrency=3, poll_interval=30)
    pool.start()
    try:
        await eventually(lambda: len(running) == 3, what="three jobs running")
        (claimed,) = {r[0] for r in await db.fetchall("SELECT lease_until FROM jobs")}

        async def extended_together() -> bool:
            until = {r[0] for r in await db.fetchall("SELECT lease_until FROM jobs")}
            # Two lease lengths after the claim: each would have expired without beats,
            # and one trip beat all three (one value for all).
            return len(until) == 1 and until.pop() > claimed + 0.6

        await eventually(extended_together, what="leases extended together")
        assert await rival.claim(["k"]) is None
        gate.set()
        await eventually(lambda: not pool.running_jobs, what="every job finished")
        assert await statuses(queue) == {name: ("done", 1) for name in ("a", "b", "c")}
    finally:
        await pool.stop()
        await db.close()


async def test_a_job_stopped_before_its_task_began_is_cancelled_without_running(
    queue: JobQueue,
) -> None:
    ran: list[str] = []

    async def handler(lease: Lease) -> dict[str, Any]:
        ran.append(lease.job.id)
        return {}

    pool = Pool(queue, ["k"], handler, concurrency=1, poll_interval=30)
    await queue.enqueue("a", "k")
    pool.start()
    try:
        # One loop pass at a time: the job shows as running in the pass that claims it,
        # before its task takes its first step.
        for _ in range(10_000):
            if any(job.id == "a" for job in pool.running_jobs):
                break
            await asyncio.sleep(0)
        assert pool.stop_job("a") is True
        await eventually(lambda: not pool.running_jobs, what="the job settled")
    finally:
        await pool.stop()
    job = await queue.get("a")
    assert job is not None and (job.status, job.lease_owner) == ("cancelled", None)
    assert ran == []


async def test_enqueues_made_together_after_the_first_of_a_pass_share_one_write(
    queue: JobQueue, monkeypatch: pytest.MonkeyPatch
) -> None:
    await queue.enqueue("old", "k")
    await asyncio.sleep(0)  # a pass of its own: the next enqueue is the first of a pass
    writes = count_writes(monkeypatch, sqlite_db(queue.db))
    outcomes = await asyncio.gather(
        queue.enqueue("a", "k"),
        queue.enqueue("old", "k"),  # exists: not new
        queue.enqueue("b", "k", serial_key="s"),
        queue.enqueue("a", "k"),  # the same id twice in one pass: the second is not new
        return_exceptions=True,
    )
    assert list(outcomes) == [True, False, True, False]
    # The first of the pass is written at once (inline), the three after it together.
    assert len(writes) == 2, writes
    assert list(await statuses(queue)) == ["old", "a", "b"]  # in the order of the calls


async def test_a_row_that_fails_to_insert_fails_only_its_own_enqueue(queue: JobQueue) -> None:
    outcomes = await asyncio.gather(
        queue.enqueue("a", "k"),
        queue.enqueue("bad", None),  # type: ignore[arg-type]  # jobs.kind is NOT NULL
        queue.enqueue("b", "k"),
        return_exceptions=True,
    )
    assert outcomes[0] is True and outcomes[2] is True
    assert isinstance(outcomes[1], sqlite3.IntegrityError)
    assert list(await statuses(queue)) == ["a", "b"]


async def test_a_payload_json_cannot_hold_fails_at_the_call_and_queues_nothing(
    queue: JobQueue,
) -> None:
    with pytest.raises(TypeError):
        await queue.enqueue("x", "k", {"when": object()})
    assert await queue.enqueue("y", "k") is True
    assert list(await statuses(queue)) == ["y"]


async def test_a_job_stopped_while_its_outcome_is_written_still_settles(queue: JobQueue) -> None:
    raised = asyncio.Event()

    async def handler(lease: Lease) -> dict[str, Any]:
        raised.set()
        raise PermanentJobError("cannot")

    pool = Pool(queue, ["k"], handler, concurrency=1, poll_interval=30)
    await queue.enqueue("a", "k")
    pool.start()
    try:
        # This task wakes while the job's task waits for its failure to be written.
        await raised.wait()
        pool.stop_job("a")
        await eventually(lambda: not pool.running_jobs, what="the job settled")
    finally:
        await pool.stop()
    job = await queue.get("a")
    assert job is not None and (job.status, job.error, job.lease_owner) == (
        "failed",
        "cannot",
        None,
    )
