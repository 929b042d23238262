"""A worker's completion and its next claim in one trip (`complete_and_claim`)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from habakkuk.engine.jobs import MIGRATIONS, JobQueue, Lease
from habakkuk.engine.pools import Pool
from habakkuk.engine.store import SqliteDatabase, connect
from tests.helpers import eventually


@pytest.fixture
async def queue(tmp_path: Path) -> AsyncIterator[JobQueue]:
    q = JobQueue(await SqliteDatabase.open(tmp_path / "control.db", MIGRATIONS))
    yield q
    await q.db.close()


async def test_complete_and_claim_finishes_the_previous_job_exactly_once(
    queue: JobQueue,
) -> None:
    for name in ("a", "b", "c"):
        await queue.enqueue(name, "k")
    first = await queue.claim(["k"])
    assert first is not None and first.job.id == "a"
    finished, second = await queue.complete_and_claim(first, {"n": 1}, ["k"])
    assert finished is True and second is not None and second.job.id == "b"
    # The same lease again: the job is done already, nothing is written twice.
    again, third = await queue.complete_and_claim(first, {"n": 2}, ["k"])
    assert again is False and third is not None and third.job.id == "c"
    a, b = await queue.get("a"), await queue.get("b")
    assert a is not None and (a.status, a.result, a.attempts) == ("done", {"n": 1}, 1)
    assert b is not None and (b.status, b.lease_owner) == ("running", str(queue.owner))
    last, none = await queue.complete_and_claim(third, None, ["k"])
    assert last is True and none is None


async def test_lost_lease_on_the_previous_job_still_claims_correctly(
    tmp_path: Path, queue: JobQueue
) -> None:
    await queue.enqueue("a", "k")
    await queue.enqueue("b", "k", serial_key="s")
    await queue.enqueue("c", "k", serial_key="s")
    lease = await queue.claim(["k"])
    assert lease is not None and lease.job.id == "a"
    other = connect(tmp_path / "control.db")
    other.execute("UPDATE jobs SET lease_owner = 'elsewhere' WHERE id = 'a'")
    other.close()
    finished, following = await queue.complete_and_claim(lease, {"mine": True}, ["k"])
    assert finished is False
    a = await queue.get("a")
    assert a is not None and (a.status, a.lease_owner, a.result) == ("running", "elsewhere", None)
    assert following is not None and following.job.id == "b"
    # The serial key still admits one running job: c waits for b.
    assert await queue.claim(["k"]) is None
    assert (await queue.complete_and_claim(following, None, ["k"]))[1] is not None


async def test_pool_chains_jobs_in_one_slot_running_each_once(queue: JobQueue) -> None:
    seen: list[str] = []

    async def handler(lease: Lease) -> dict[str, Any]:
        seen.append(lease.job.id)
        return {"id": lease.job.id}

    pool = Pool(queue, ["k"], handler, concurrency=1, poll_interval=0.05)
    names = [f"j{i}" for i in range(6)]
    for name in names:
        await queue.enqueue(name, "k")
    pool.start()
    try:

        async def all_done() -> bool:
            jobs = [await queue.get(name) for name in names]
            return all(job is not None and job.status == "done" for job in jobs)

        await eventually(all_done, what="every job done")
    finally:
        await pool.stop()
    assert seen == names
    for name in names:
        job = await queue.get(name)
        assert job is not None and (job.attempts, job.result) == (1, {"id": name})
    assert pool.running_jobs == []


async def test_pool_stopping_mid_chain_leaves_no_job_leased(queue: JobQueue) -> None:
    started = asyncio.Event()
    release = asyncio.Event()

    async def handler(lease: Lease) -> dict[str, Any]:
        started.set()
        await release.wait()
        return {}

    pool = Pool(queue, ["k"], handler, concurrency=1, poll_interval=0.05)
    for name in ("a", "b", "c"):
        await queue.enqueue(name, "k")
    pool.start()
    await started.wait()
    await pool.stop()
    rows = await queue.db.fetchall("SELECT id, status, lease_owner FROM jobs ORDER BY seq")
    assert [(r[0], r[1], r[2]) for r in rows] == [
        ("a", "queued", None),
        ("b", "queued", None),
        ("c", "queued", None),
    ]
