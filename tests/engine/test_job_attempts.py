"""Attempts across crashes and stops: a crash uses one up, a clean stop gives it back,
and a kind declared at most once is never started twice."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

from habakkuk.engine.jobs import (
    MIGRATIONS,
    Interrupted,
    JobKind,
    JobQueue,
    Lease,
    NewJob,
    Owner,
    declare_kind,
)
from habakkuk.engine.pools import Pool
from habakkuk.engine.sql import Conn
from habakkuk.engine.store import SqliteDatabase
from tests.helpers import eventually

ONCE = "test.attempts.once"


def _hear(conn: Conn, interrupted: Interrupted) -> None:
    # In the transaction that ends the job: what a kind records (a slot row) goes with it.
    conn.execute(
        "CREATE TABLE IF NOT EXISTS heard (job TEXT, cause TEXT, reason TEXT, status TEXT)"
    )
    status = conn.execute("SELECT status FROM jobs WHERE id = ?", (interrupted.job.id,))
    conn.execute(
        "INSERT INTO heard VALUES (?, ?, ?, ?)",
        (interrupted.job.id, interrupted.cause, interrupted.reason, status.fetchone()[0]),
    )


def _broken(conn: Conn, interrupted: Interrupted) -> None:
    conn.execute("INSERT INTO broken VALUES (?)", (interrupted.job.id,))
    raise RuntimeError("the kind's bookkeeping is broken")


declare_kind(JobKind(ONCE, at_most_once=True, on_interrupted=_hear))
declare_kind(JobKind("test.attempts.told", on_interrupted=_hear))
declare_kind(JobKind("test.attempts.broken", at_most_once=True, on_interrupted=_broken))


async def open_queue(path: Path, *, owner: Owner | None = None, lease: float = 3600) -> JobQueue:
    return JobQueue(await SqliteDatabase.open(path, MIGRATIONS), owner=owner, lease_seconds=lease)


def dead_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(done.stdout)


async def ghost(path: Path) -> JobQueue:
    """A queue owned by a process on this host that is dead."""
    return await open_queue(path, owner=Owner(Owner.current().host, dead_pid(), "ghost"))


async def heard_rows(queue: JobQueue) -> list[tuple[str, str, str, str]]:
    rows = await queue.db.fetchall("SELECT job, cause, reason, status FROM heard")
    return [tuple(row) for row in rows]


async def test_a_crash_uses_up_an_attempt_and_the_last_one_fails_with_why(
    tmp_path: Path,
) -> None:
    path = tmp_path / "control.db"
    live = await open_queue(path)
    dead = [await ghost(path), await ghost(path)]
    try:
        await live.enqueue("j", "k", max_attempts=2)
        first = await dead[0].claim(["k"])
        assert first is not None and first.job.attempts == 1
        second = await dead[1].claim(["k"])  # the first owner is dead: taken back at once
        assert second is not None and second.job.attempts == 2
        assert await live.claim(["k"]) is None  # the second died too, on its last attempt
        job = await live.get("j")
        assert job is not None and job.status == "failed"
        assert job.error == "the process running it died mid-run (attempt 2 of 2, none left)"
    finally:
        for queue in (live, *dead):
            await queue.db.close()


async def test_an_expired_lease_on_the_last_attempt_fails_the_job(tmp_path: Path) -> None:
    path = tmp_path / "control.db"
    mine = await open_queue(path, lease=0.05)
    other = await open_queue(path)
    try:
        await mine.enqueue("j", "k", max_attempts=1)
        assert await mine.claim(["k"]) is not None

        async def failed() -> bool:
            assert await other.claim(["k"]) is None  # never run a second time
            job = await other.get("j")
            return job is not None and job.status == "failed"

        await eventually(failed, what="the lease to run out and the job to fail")
        job = await other.get("j")
        assert job is not None and job.attempts == 1
        assert job.error == (
            "the process running it stopped renewing its lease mid-run (attempt 1 of 1, none left)"
        )
    finally:
        await mine.db.close()
        await other.db.close()


async def test_a_crash_with_attempts_left_queues_the_job_again_and_says_why(
    tmp_path: Path,
) -> None:
    path = tmp_path / "control.db"
    live = await open_queue(path)
    dead = await ghost(path)
    try:
        await live.enqueue("j", "k", max_attempts=3)
        assert await dead.claim(["k"]) is not None
        again = await live.claim(["k"])
        assert again is not None and again.job.attempts == 2
        assert (
            again.job.error == "the process running it died mid-run (attempt 1 of 3); queued again"
        )
    finally:
        await live.db.close()
        await dead.db.close()


async def test_an_at_most_once_kind_gets_one_attempt_whatever_the_enqueue_asks(
    tmp_path: Path,
) -> None:
    queue = await open_queue(tmp_path / "control.db")
    try:
        await queue.enqueue("a", ONCE, max_attempts=5)
        await queue.enqueue_many([NewJob("b", ONCE, {}, max_attempts=3)])
        for job_id in ("a", "b"):
            job = await queue.get(job_id)
            assert job is not None and job.max_attempts == 1
    finally:
        await queue.db.close()


async def test_an_at_most_once_job_whose_worker_died_is_interrupted_never_run_again(
    tmp_path: Path,
) -> None:
    path = tmp_path / "control.db"
    live = await open_queue(path)
    dead = await ghost(path)
    try:
        await live.enqueue("j", ONCE)
        assert await dead.claim([ONCE]) is not None
        assert await live.claim([ONCE]) is None
        job = await live.get("j")
        why = "the process running it died mid-run; not started again: it runs at most once"
        assert job is not None and (job.status, job.attempts, job.error) == ("failed", 1, why)
        # The kind heard it in the transaction that failed the job.
        assert await heard_rows(live) == [("j", "died", why, "failed")]
    finally:
        await live.db.close()
        await dead.db.close()


async def test_a_kind_hears_of_a_job_the_queue_gave_up_on_not_of_one_it_queued_again(
    tmp_path: Path,
) -> None:
    path = tmp_path / "control.db"
    live = await open_queue(path)
    dead = [await ghost(path), await ghost(path)]
    try:
        await live.enqueue("j", "test.attempts.told", max_attempts=2)
        assert await dead[0].claim(["test.attempts.told"]) is not None
        assert await dead[1].claim(["test.attempts.told"]) is not None  # queued again
        assert await live.claim(["test.attempts.told"]) is None
        why = "the process running it died mid-run (attempt 2 of 2, none left)"
        assert await heard_rows(live) == [("j", "died", why, "failed")]
    finally:
        for queue in (live, *dead):
            await queue.db.close()


async def test_a_kind_whose_bookkeeping_fails_still_has_its_job_ended(tmp_path: Path) -> None:
    path = tmp_path / "control.db"
    live = await open_queue(path)
    dead = await ghost(path)
    try:
        await live.db.write(lambda conn: conn.execute("CREATE TABLE broken (job TEXT)"))
        await live.enqueue("j", "test.attempts.broken")
        assert await dead.claim(["test.attempts.broken"]) is not None
        assert await live.claim(["test.attempts.broken"]) is None
        job = await live.get("j")
        assert job is not None and job.status == "failed"
        # What the hook wrote before it raised was undone with it, and only that.
        assert await live.db.fetchall("SELECT * FROM broken") == []
    finally:
        await live.db.close()
        await dead.db.close()


async def test_a_clean_stop_interrupts_an_at_most_once_job_and_never_gives_it_back(
    tmp_path: Path,
) -> None:
    queue = await open_queue(tmp_path / "control.db")
    started = asyncio.Event()

    async def handler(lease: Lease) -> dict[str, Any]:
        started.set()
        await asyncio.Event().wait()
        return {}

    pool = Pool(queue, [ONCE], handler)
    try:
        pool.start()
        await queue.enqueue("j", ONCE)
        await asyncio.wait_for(started.wait(), 10)
        await pool.stop()
        job = await queue.get("j")
        why = "a shutdown stopped it mid-run; not started again: it runs at most once"
        assert job is not None and (job.status, job.attempts, job.error) == ("failed", 1, why)
        assert await heard_rows(queue) == [("j", "stopped", why, "failed")]
        assert await queue.claim([ONCE]) is None
    finally:
        await queue.db.close()


async def test_a_clean_stop_still_gives_an_ordinary_job_back_with_its_attempt(
    tmp_path: Path,
) -> None:
    queue = await open_queue(tmp_path / "control.db")
    started = asyncio.Event()

    async def handler(lease: Lease) -> dict[str, Any]:
        started.set()
        await asyncio.Event().wait()
        return {}

    pool = Pool(queue, ["k"], handler)
    try:
        pool.start()
        await queue.enqueue("j", "k", max_attempts=1)
        await asyncio.wait_for(started.wait(), 10)
        await pool.stop()
        job = await queue.get("j")
        assert job is not None and (job.status, job.attempts) == ("queued", 0)
        again = await queue.claim(["k"])
        assert again is not None and again.job.attempts == 1
    finally:
        await queue.db.close()


def test_opening_an_older_queue_fails_the_jobs_a_crash_queued_with_no_attempts_left(
    tmp_path: Path,
) -> None:
    path = tmp_path / "control.db"
    older = SqliteDatabase.open_sync(path, MIGRATIONS[:2])
    try:
        older.run_sync(
            lambda conn: conn.executemany(
                "INSERT INTO jobs(id, kind, status, attempts, max_attempts, created_at,"
                " updated_at) VALUES (?, 'k', 'queued', ?, ?, 0, 0)",
                [("spent", 1, 1), ("fresh", 0, 1), ("retry", 1, 3)],
            )
        )
    finally:
        older.close_sync()
    db = SqliteDatabase.open_sync(path, MIGRATIONS)
    try:
        rows = db.run_sync(
            lambda conn: conn.execute("SELECT id, status FROM jobs ORDER BY id").fetchall()
        )
    finally:
        db.close_sync()
    assert [tuple(r) for r in rows] == [
        ("fresh", "queued"),
        ("retry", "queued"),
        ("spent", "failed"),
    ]
