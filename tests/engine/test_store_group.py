"""The database thread: group commit of waiting writes, savepoints, cancellation."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from habakkuk.engine import store
from habakkuk.engine.errors import LeaseLost
from habakkuk.engine.jobs import MIGRATIONS, JobQueue
from habakkuk.engine.store import SqliteDatabase, StoreError, connect
from tests.engine.store_table import TABLE, insert, names


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[SqliteDatabase]:
    database = await SqliteDatabase.open(tmp_path / "t.db", TABLE)
    yield database
    await database.close()


class Gate:
    """Holds the database thread inside a call, so the next calls queue up behind it."""

    def __init__(self, db: SqliteDatabase):
        self.db = db
        self.entered = threading.Event()
        self.opened = threading.Event()
        self.task: asyncio.Task[Any] | None = None

    async def close(self) -> None:
        def _hold(conn: sqlite3.Connection) -> None:
            self.entered.set()
            assert self.opened.wait(10)

        self.task = asyncio.create_task(self.db.run(_hold))
        assert await asyncio.to_thread(self.entered.wait, 10)

    async def open(self) -> None:
        self.opened.set()
        assert self.task is not None
        await self.task


async def queued(*calls: Callable[[], Any]) -> list[asyncio.Task[Any]]:
    """Start each call as a task and let each reach the database queue."""
    tasks = [asyncio.ensure_future(call()) for call in calls]
    # One pass of the loop runs every task up to its first await: the put on the queue.
    await asyncio.sleep(0)
    return tasks


async def test_failing_write_in_a_group_rolls_back_alone(db: SqliteDatabase) -> None:
    def fails(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO t(name) VALUES ('b')")
        raise ValueError("no b after all")

    shared: list[bool] = []

    def third(conn: sqlite3.Connection) -> str:
        # Same transaction as the first: its uncommitted row is visible here.
        shared.append(conn.in_transaction)
        shared.append(conn.execute("SELECT 1 FROM t WHERE name = 'a'").fetchone() is not None)
        return insert("c")(conn)

    gate = Gate(db)
    await gate.close()
    tasks = await queued(
        lambda: db.write(insert("a")), lambda: db.write(fails), lambda: db.write(third)
    )
    await gate.open()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert results[0] == "a" and results[2] == "c"
    assert isinstance(results[1], ValueError)
    assert shared == [True, True]
    assert names(db.path) == {"a", "c"}


async def test_group_results_are_visible_elsewhere_only_once_the_caller_hears(
    db: SqliteDatabase,
) -> None:
    seen_inside: list[set[str]] = []
    seen_at_resolve: list[set[str]] = []

    def second(conn: sqlite3.Connection) -> str:
        # "a" ran earlier in this group but is not committed: nobody else sees it.
        seen_inside.append(names(db.path))
        return insert("b")(conn)

    gate = Gate(db)
    await gate.close()
    tasks = await queued(lambda: db.write(insert("a")), lambda: db.write(second))
    tasks[0].add_done_callback(lambda _task: seen_at_resolve.append(names(db.path)))
    await gate.open()
    assert await asyncio.gather(*tasks) == ["a", "b"]
    assert seen_inside == [set()]
    assert seen_at_resolve == [{"a", "b"}]


async def test_lease_checked_write_whose_lease_was_lost_fails_alone(tmp_path: Path) -> None:
    queue = JobQueue(await SqliteDatabase.open(tmp_path / "control.db", MIGRATIONS))
    try:
        await queue.enqueue("lost", "k")
        await queue.enqueue("kept", "k")
        lost, kept = await queue.claim(["k"]), await queue.claim(["k"])
        assert lost is not None and kept is not None
        await queue.db.write(lambda conn: conn.execute("CREATE TABLE notes (job TEXT)") and None)
        # Another process took the first job over.
        other = connect(tmp_path / "control.db")
        other.execute("UPDATE jobs SET lease_owner = 'elsewhere' WHERE id = 'lost'")
        other.close()

        def guarded(lease: Any) -> Callable[[sqlite3.Connection], str]:
            def _write(conn: sqlite3.Connection) -> str:
                lease.check(conn, schema="main")
                conn.execute("INSERT INTO notes(job) VALUES (?)", (lease.job.id,))
                return str(lease.job.id)

            return _write

        db = queue.db
        assert isinstance(db, SqliteDatabase)
        gate = Gate(db)
        await gate.close()
        tasks = await queued(lambda: db.write(guarded(lost)), lambda: db.write(guarded(kept)))
        await gate.open()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        assert isinstance(results[0], LeaseLost) and results[1] == "kept"
        rows = await queue.db.fetchall("SELECT job FROM notes")
        assert [r[0] for r in rows] == ["kept"]
        stolen = await queue.get("lost")
        assert stolen is not None and stolen.lease_owner == "elsewhere"
    finally:
        await queue.db.close()


async def test_call_cancelled_while_waiting_does_not_run(db: SqliteDatabase) -> None:
    gate = Gate(db)
    await gate.close()
    (task,) = await queued(lambda: db.write(insert("never")))
    task.cancel()
    await gate.open()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await db.write(insert("after")) == "after"
    assert names(db.path) == {"after"}


async def test_call_cancelled_while_running_commits_whole(db: SqliteDatabase) -> None:
    entered, release = threading.Event(), threading.Event()

    def two_rows(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO t(name) VALUES ('x')")
        entered.set()
        assert release.wait(10)
        conn.execute("INSERT INTO t(name) VALUES ('y')")

    task = asyncio.ensure_future(db.write(two_rows))
    assert await asyncio.to_thread(entered.wait, 10)
    task.cancel()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    # The next call runs after it on the same thread: by then it committed whole.
    assert await db.run(lambda conn: conn.in_transaction) is False
    assert names(db.path) == {"x", "y"}


async def test_run_sync_and_close_finish_pending_calls(tmp_path: Path) -> None:
    database = SqliteDatabase.open_sync(tmp_path / "t.db", TABLE)
    assert database.run_sync(insert("a")) == "a"
    pending = asyncio.ensure_future(database.write(insert("b")))
    await asyncio.sleep(0)  # let it reach the queue before close
    await database.close()
    assert await pending == "b"
    assert names(tmp_path / "t.db") == {"a", "b"}
    with pytest.raises(StoreError, match="closed"):
        await database.run(lambda conn: None)


async def test_writes_made_in_one_loop_pass_commit_together_even_on_an_idle_thread(
    db: SqliteDatabase,
) -> None:
    seen_committed: list[bool] = []

    def second(conn: sqlite3.Connection) -> str:
        # From another connection: is the first write committed already?
        other = connect(db.path)
        try:
            seen_committed.append(
                other.execute("SELECT 1 FROM t WHERE name = 'a'").fetchone() is not None
            )
        finally:
            other.close()
        return insert("b")(conn)

    async def first() -> str:
        return await db.write(insert("a"))

    async def then_second() -> str:
        # The loop pauses here with the first call already made: a thread handed each
        # call as it came would run (and commit) the first alone meanwhile.
        time.sleep(0.05)
        return await db.write(second)

    assert list(await asyncio.gather(first(), then_second())) == ["a", "b"]
    assert seen_committed == [False]
    assert names(db.path) == {"a", "b"}


async def test_a_writer_waits_for_a_transaction_holding_its_file_attached_without_busy_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A busy timeout far shorter than the hold: SQLite's own wait would give up with
    # "database is locked"; this process's write lock waits until the holder commits.
    monkeypatch.setattr(store, "BUSY_TIMEOUT_MS", 50)
    control = await SqliteDatabase.open(tmp_path / "control.db", TABLE)
    transcripts = await SqliteDatabase.open(
        tmp_path / "transcripts.db", [], attach={"control": tmp_path / "control.db"}
    )
    holding = threading.Event()
    release = threading.Event()

    def hold(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO control.t(name) VALUES ('held')")
        holding.set()
        release.wait(0.5)  # held ten busy timeouts long

    try:
        held = asyncio.ensure_future(transcripts.write(hold))
        assert await asyncio.to_thread(holding.wait, 10)
        waiting = asyncio.ensure_future(control.write(insert("after")))
        await held
        assert await waiting == "after"
        # And many writes on both, interleaved, all land (no lock order can deadlock).
        await asyncio.gather(
            *[control.write(insert(f"c{i}")) for i in range(20)],
            *[transcripts.write(insert(f"t{i}")) for i in range(20)],
        )
    finally:
        await transcripts.close()
        await control.close()
    # (transcripts.db has no table t: its writes land in the attached control.db's)
    expected = {"held", "after"} | {f"{side}{i}" for side in "ct" for i in range(20)}
    assert names(tmp_path / "control.db") == expected


def test_openers_of_one_new_database_at_the_same_moment_all_open_it(tmp_path: Path) -> None:
    # Two `--serve` on a fresh home open each agent's databases at once; the one whose
    # switch to WAL lost the race got "database is locked" (about one round in 20 here).
    # Threads stand in for the processes: each has its own connection and locks.
    failed: list[str] = []
    for attempt in range(100):
        path = tmp_path / f"new-{attempt}.db"
        start = threading.Barrier(4)

        def open_it(path: Path = path, start: threading.Barrier = start) -> None:
            start.wait()
            try:
                connect(path).close()
            except StoreError as exc:
                failed.append(str(exc))

        openers = [threading.Thread(target=open_it) for _ in range(4)]
        for opener in openers:
            opener.start()
        for opener in openers:
            opener.join()
    assert failed == []
