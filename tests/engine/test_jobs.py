"""The durable job queue: idempotency, leases, serial keys, takeover, retries."""

from __future__ import annotations

import asyncio
import os
import random
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from habakkuk.engine.errors import LeaseLost
from habakkuk.engine.jobs import MIGRATIONS, Job, JobQueue, Lease, Owner, backoff_delay
from habakkuk.engine.pools import PermanentJobError, Pool
from habakkuk.engine.store import Migration, SqliteDatabase
from tests.helpers import eventually


async def open_queue(path: Path, *, owner: Owner | None = None, lease: float = 30.0) -> JobQueue:
    return JobQueue(await SqliteDatabase.open(path, MIGRATIONS), owner=owner, lease_seconds=lease)


@pytest.fixture
async def queue(tmp_path: Path) -> AsyncIterator[JobQueue]:
    q = await open_queue(tmp_path / "control.db")
    yield q
    await q.db.close()


async def test_an_enqueue_on_a_free_database_is_committed_when_it_returns(
    tmp_path: Path,
) -> None:
    queue = JobQueue(await SqliteDatabase.open(tmp_path / "control.db", MIGRATIONS, inline=True))
    try:
        queued = queue.enqueue("job-1", "turn", {"n": 1})
        assert queued.done() and queued.result() is True  # written inline, no pass waited
        conn = sqlite3.connect(tmp_path / "control.db")  # another reader sees it committed
        try:
            assert conn.execute("SELECT status FROM jobs WHERE id = 'job-1'").fetchone() == (
                "queued",
            )
        finally:
            conn.close()
        assert await queued is True
    finally:
        await queue.db.close()


async def test_expired_lease_is_taken_over(tmp_path: Path) -> None:
    path = tmp_path / "control.db"
    a = await open_queue(path, owner=Owner("host", os.getpid(), "a"), lease=0.05)
    b = await open_queue(path, owner=Owner("host", os.getpid(), "b"), lease=30)
    try:
        await a.enqueue("j", "turn")
        mine = await a.claim(["turn"])
        assert mine is not None
        assert mine.job.lease_until is not None
        if time.time() < mine.job.lease_until:
            assert await b.claim(["turn"]) is None  # still leased
        theirs = await _claim_eventually(b)  # the 50 ms lease runs out with no heartbeat
        assert theirs.job.id == "j" and theirs.job.attempts == 2
        assert await a.heartbeat(mine) is False
    finally:
        await a.db.close()
        await b.db.close()


async def test_dead_owner_on_this_host_is_taken_over_at_once(tmp_path: Path) -> None:
    path = tmp_path / "control.db"
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    dead_pid = int(dead.stdout)
    host = Owner.current().host
    ghost = await open_queue(path, owner=Owner(host, dead_pid, "ghost"), lease=3600)
    live = await open_queue(path, lease=3600)
    try:
        await ghost.enqueue("j", "turn")
        assert await ghost.claim(["turn"]) is not None
        taken = await live.claim(["turn"])
        assert taken is not None and taken.job.id == "j"
    finally:
        await ghost.db.close()
        await live.db.close()


async def test_live_owner_on_this_host_keeps_its_lease(tmp_path: Path) -> None:
    path = tmp_path / "control.db"
    host = Owner.current().host
    other = await open_queue(path, owner=Owner(host, os.getppid(), "parent"), lease=3600)
    me = await open_queue(path, lease=3600)
    try:
        await other.enqueue("j", "turn")
        assert await other.claim(["turn"]) is not None
        assert await me.claim(["turn"]) is None
    finally:
        await other.db.close()
        await me.db.close()


async def test_lost_lease_blocks_guarded_writes(tmp_path: Path) -> None:
    control = tmp_path / "control.db"
    a = await open_queue(control, owner=Owner("h", os.getpid(), "a"), lease=0.05)
    b = await open_queue(control, owner=Owner("h", os.getpid(), "b"), lease=60)
    other = await SqliteDatabase.open(
        tmp_path / "other.db",
        [Migration(1, "CREATE TABLE notes(text TEXT)")],
        attach={"control": control},
    )
    try:
        await a.enqueue("j", "turn")
        lease_a = await a.claim(["turn"])
        assert lease_a is not None

        def guarded_insert(
            text: str, lease: Lease = lease_a
        ) -> Callable[[sqlite3.Connection], None]:
            def _write(conn: sqlite3.Connection) -> None:
                lease.check(conn, "control")
                conn.execute("INSERT INTO notes VALUES (?)", (text,))

            return _write

        await other.write(guarded_insert("while owned"))
        await _claim_eventually(b)  # the 50 ms lease expires: nobody heartbeats it
        with pytest.raises(LeaseLost):
            await other.write(guarded_insert("after takeover"))
        with pytest.raises(LeaseLost):
            await a.complete(lease_a, {})
        rows = await other.fetchall("SELECT text FROM notes")
        assert [r[0] for r in rows] == ["while owned"]
    finally:
        await a.db.close()
        await b.db.close()
        await other.close()


async def test_upcoming_lists_timed_jobs_and_retries_soonest_first(queue: JobQueue) -> None:
    await queue.enqueue("flaky", "turn", max_attempts=3)
    await queue.enqueue("ready", "report")
    await queue.enqueue("later", "report", delay=3600)
    await queue.enqueue("soon", "report", delay=60)
    lease = await queue.claim(["turn"])
    assert lease is not None and lease.job.id == "flaky"
    assert await queue.fail(lease, "boom") == "queued"
    upcoming = [job.id for job in await queue.upcoming()]
    # The retry waits for its backoff (under a minute); a job that may run now is not listed.
    assert upcoming == ["flaky", "soon", "later"]
    assert [job.id for job in await queue.upcoming(1, now=time.time() + 7200)] == []


def test_backoff_grows_is_capped_and_jittered() -> None:
    rng = random.Random(1)
    delays = [backoff_delay(n, base=2, cap=60, rng=rng) for n in range(1, 10)]
    assert 1 <= delays[0] <= 2
    assert 8 <= delays[3] <= 16
    assert all(d <= 60 for d in delays)
    assert len({round(backoff_delay(3, rng=rng), 6) for _ in range(20)}) > 1


async def test_cancel_stops_queued_job_and_flags_running_one(queue: JobQueue) -> None:
    await queue.enqueue("queued", "turn")
    await queue.enqueue("running", "other")
    lease = await queue.claim(["other"])
    assert lease is not None
    assert await queue.cancel("queued") == "cancelled"
    assert await queue.cancel("running") == "running"
    assert await queue.heartbeat(lease) is True
    assert lease.job.cancel_requested is True
    assert await queue.cancel("missing") is None


async def test_pool_runs_jobs_and_records_results(queue: JobQueue) -> None:
    seen: list[str] = []

    async def handler(lease: Lease) -> dict[str, Any] | None:
        seen.append(lease.job.id)
        return {"ok": lease.job.payload["n"]}

    done = asyncio.Event()
    finished: list[str] = []

    def on_finished(job: Job) -> None:
        finished.append(job.id)
        if len(finished) == 3:
            done.set()

    pool = Pool(queue, ["turn"], handler, concurrency=2, on_finished=on_finished)
    pool.start()
    for n in range(3):
        await queue.enqueue(f"j{n}", "turn", {"n": n})
    await asyncio.wait_for(done.wait(), 10)
    await pool.stop()
    for n in range(3):
        job = await queue.get(f"j{n}")
        assert job is not None and job.status == "done" and job.result == {"ok": n}
    assert sorted(seen) == sorted(finished) == ["j0", "j1", "j2"]


async def test_pool_fails_permanent_errors_without_retry(queue: JobQueue) -> None:
    finished = asyncio.Event()

    async def handler(lease: Lease) -> dict[str, Any] | None:
        raise PermanentJobError("cannot ever work")

    pool = Pool(queue, ["turn"], handler, on_finished=lambda job: finished.set())
    pool.start()
    await queue.enqueue("j", "turn")
    await asyncio.wait_for(finished.wait(), 10)
    await pool.stop()
    job = await queue.get("j")
    assert job is not None and job.status == "failed" and job.error == "cannot ever work"
    assert job.attempts == 1


async def test_pool_stop_job_cancels_handler_and_marks_cancelled(queue: JobQueue) -> None:
    started = asyncio.Event()
    finished = asyncio.Event()
    cleaned = []

    async def handler(lease: Lease) -> dict[str, Any] | None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cleaned.append(lease.stop_reason)
            raise
        return {}

    pool = Pool(queue, ["turn"], handler, on_finished=lambda job: finished.set())
    pool.start()
    await queue.enqueue("j", "turn")
    await asyncio.wait_for(started.wait(), 10)
    assert pool.stop_job("j") is True
    await asyncio.wait_for(finished.wait(), 10)
    await pool.stop()
    job = await queue.get("j")
    assert job is not None and job.status == "cancelled"
    assert cleaned == ["user"]


async def test_pool_shutdown_releases_running_job_for_immediate_resume(queue: JobQueue) -> None:
    started = asyncio.Event()

    async def handler(lease: Lease) -> dict[str, Any] | None:
        started.set()
        await asyncio.Event().wait()
        return {}

    pool = Pool(queue, ["turn"], handler)
    pool.start()
    await queue.enqueue("j", "turn")
    await asyncio.wait_for(started.wait(), 10)
    await pool.stop()
    job = await queue.get("j")
    assert job is not None and job.status == "queued" and job.attempts == 0
    assert (await queue.claim(["turn"])) is not None


async def _claim_eventually(queue: JobQueue, timeout: float = 5.0) -> Lease:
    """Claim until a lease is free (bounded): expiry is the only way time enters."""
    claimed: list[Lease] = []

    async def claim() -> bool:
        lease = await queue.claim(["turn"])
        if lease is not None:
            claimed.append(lease)
        return lease is not None

    await eventually(claim, what="the lease to expire", timeout=timeout)
    return claimed[0]
