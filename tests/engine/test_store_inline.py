"""Inline writes: short transactions on the event loop's thread when that costs no wait."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from habakkuk.engine import store
from habakkuk.engine.store import SqliteDatabase, connect
from tests.engine.store_table import TABLE, insert, names

LOOP_THREAD = threading.get_ident  # read on the loop's thread: the test's own


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[SqliteDatabase]:
    database = await SqliteDatabase.open(tmp_path / "t.db", TABLE)
    yield database
    await database.close()


async def warmed(db: SqliteDatabase) -> None:
    """Inline writes until one ran on the loop's thread (the database opens its inline
    connection after serving the first one on its own thread)."""
    threads: list[int] = []
    for attempt in range(50):
        await db.write(insert(f"warm-{attempt}", threads), inline=True)
        if threads[-1] == LOOP_THREAD():
            return
    raise AssertionError("no inline write ran on the loop's thread")


async def test_an_idle_database_runs_an_inline_write_on_the_loops_thread(
    db: SqliteDatabase,
) -> None:
    await warmed(db)
    threads: list[int] = []
    assert await db.write(insert("a", threads), inline=True) == "a"
    assert threads == [LOOP_THREAD()]
    assert "a" in names(db.path)  # committed before the caller heard back
    # A write without `inline` still goes to the database thread.
    await db.write(insert("b", threads))
    assert threads[-1] != LOOP_THREAD()


async def test_an_inline_write_waits_on_the_thread_while_another_process_holds_the_lock(
    db: SqliteDatabase,
) -> None:
    await warmed(db)
    loop = asyncio.get_running_loop()
    held, go = threading.Event(), threading.Event()
    answered: list[bool] = []

    def hold_the_lock() -> None:
        other = connect(db.path)  # another process's connection, as far as SQLite knows
        other.execute("BEGIN IMMEDIATE")
        other.execute("INSERT INTO t(name) VALUES ('theirs')")
        held.set()
        assert go.wait(10)
        # The loop answers while the write waits for this lock (a loop stuck in SQLite's
        # busy wait would not, for the 10 s of the busy timeout).
        ping = asyncio.run_coroutine_threadsafe(asyncio.sleep(0), loop)
        try:
            ping.result(timeout=5)
            answered.append(True)
        except TimeoutError:
            answered.append(False)
        other.execute("COMMIT")
        other.close()

    holder = asyncio.create_task(asyncio.to_thread(hold_the_lock))
    assert await asyncio.to_thread(held.wait, 10)
    threads: list[int] = []
    write = asyncio.create_task(db.write(insert("ours", threads), inline=True))
    go.set()
    await holder
    assert answered == [True]
    assert await asyncio.wait_for(write, 10) == "ours"
    assert threads and all(thread != LOOP_THREAD() for thread in threads)
    assert {"theirs", "ours"} <= names(db.path)


async def test_a_failing_inline_write_rolls_back_alone_and_its_caller_gets_the_error(
    db: SqliteDatabase,
) -> None:
    await warmed(db)
    threads: list[int] = []

    def fails(conn: sqlite3.Connection) -> None:
        threads.append(threading.get_ident())
        conn.execute("INSERT INTO t(name) VALUES ('half')")
        raise ValueError("not after all")

    with pytest.raises(ValueError, match="not after all"):
        await db.write(fails, inline=True)
    assert threads == [LOOP_THREAD()]
    assert await db.write(insert("next"), inline=True) == "next"  # no transaction left open
    assert "half" not in names(db.path) and "next" in names(db.path)


async def test_inline_writes_made_together_by_several_tasks_fail_alone(db: SqliteDatabase) -> None:
    await warmed(db)

    def fails(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO t(name) VALUES ('bad')")
        raise ValueError("bad")

    outcomes = await asyncio.gather(
        db.write(insert("x"), inline=True),
        db.write(fails, inline=True),
        db.write(insert("y"), inline=True),
        return_exceptions=True,
    )
    assert outcomes[0] == "x" and outcomes[2] == "y"
    assert isinstance(outcomes[1], ValueError)
    assert {"x", "y"} <= names(db.path) and "bad" not in names(db.path)


async def test_an_inline_write_never_overtakes_a_write_made_before_it(db: SqliteDatabase) -> None:
    await warmed(db)
    entered, opened = threading.Event(), threading.Event()

    def hold(conn: sqlite3.Connection) -> None:
        entered.set()
        assert opened.wait(10)

    held = asyncio.create_task(db.run(hold))
    assert await asyncio.to_thread(entered.wait, 10)
    first = asyncio.create_task(db.write(insert("first")))
    await asyncio.sleep(0)  # `first` is handed to the thread, queued behind `hold`
    await asyncio.sleep(0)

    def sees_first(conn: sqlite3.Connection) -> bool:
        return conn.execute("SELECT 1 FROM t WHERE name = 'first'").fetchone() is not None

    second = asyncio.create_task(db.write(sees_first, inline=True))
    await asyncio.sleep(0)
    assert not second.done()  # it waits its turn rather than running ahead
    opened.set()
    await held
    assert await first == "first"
    assert await asyncio.wait_for(second, 10) is True


async def test_inline_writes_run_on_beside_the_checkpoints_of_a_short_wal(
    db: SqliteDatabase,
) -> None:
    await warmed(db)
    threads: list[int] = []
    # Three checkpoints asked of the thread; the WAL (about 2 frames a write) stays
    # below its limit, so none holds the inline writes off.
    for index in range(3 * store.INLINE_CHECKPOINT_EVERY):
        await db.write(insert(f"n{index}", threads), inline=True)
    assert 2 * len(threads) < store.WAL_LIMIT_FRAMES
    assert set(threads) == {LOOP_THREAD()}


async def test_a_stream_of_inline_writes_keeps_the_wal_bounded(db: SqliteDatabase) -> None:
    await warmed(db)
    writes = 10_000
    for index in range(writes):
        await db.write(insert(f"n{index}"), inline=True)
    wal = db.path.with_name(db.path.name + "-wal")
    # About 2 pages (frames) a write: 20,000 frames (80 MB) had the WAL never started
    # over; it does once past its limit, give or take what is written meanwhile.
    frames = wal.stat().st_size // 4120
    assert frames < 2.5 * store.WAL_LIMIT_FRAMES < 2 * writes


async def test_a_callers_inline_writes_run_a_few_per_pass_then_let_other_tasks_run(
    db: SqliteDatabase,
) -> None:
    await warmed(db)
    passes = 0
    done = False

    async def ticker() -> None:  # counts the passes of the loop
        nonlocal passes
        while not done:
            passes += 1
            await asyncio.sleep(0)

    ticking = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    seen: list[int] = []  # the pass each write was made in
    for index in range(30):
        seen.append(passes)
        await db.write(insert(f"p{index}"), inline=True)
    done = True
    await ticking
    per_pass = [seen.count(number) for number in sorted(set(seen))]
    assert max(per_pass) <= store.INLINE_PER_PASS  # then the writer yields a pass
    assert min(per_pass[1:-1]) > 1  # not a pass per write


async def test_a_one_statement_inline_write_commits_on_the_loops_thread(
    db: SqliteDatabase,
) -> None:
    await warmed(db)
    threads: list[int] = []
    assert await db.write(insert("solo", threads), inline=True, one_statement=True) == "solo"
    assert threads == [LOOP_THREAD()]
    assert "solo" in names(db.path)  # committed before the caller heard back
    outcome = db.write_if_free(insert("free", threads), one_statement=True)
    assert outcome == (True, "free") and "free" in names(db.path)


async def test_a_one_statement_inline_write_meeting_another_writer_waits_on_the_thread(
    db: SqliteDatabase,
) -> None:
    # Without BEGIN IMMEDIATE to answer "busy", the statement itself does: it wrote
    # nothing, and the call waits for the lock (on the thread) rather than failing.
    await warmed(db)  # this task's writes may run inline
    other = connect(db.path)  # another process's connection, as far as SQLite knows
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO t(name) VALUES ('theirs')")
    threads: list[int] = []
    assert db.write_if_free(insert("not now", threads), one_statement=True) is None
    # The other writer commits once this write waits.
    asyncio.get_running_loop().call_soon(other.execute, "COMMIT")
    assert await db.write(insert("ours", threads), inline=True, one_statement=True) == "ours"
    other.close()
    assert {"theirs", "ours"} <= names(db.path) and "not now" not in names(db.path)


async def test_a_failing_one_statement_inline_write_leaves_nothing_and_tells_its_caller(
    db: SqliteDatabase,
) -> None:
    await warmed(db)
    await db.write(insert("taken"), inline=True, one_statement=True)
    with pytest.raises(sqlite3.IntegrityError):
        await db.write(insert("taken"), inline=True, one_statement=True)
    assert await db.write(insert("after"), inline=True, one_statement=True) == "after"
    assert {"taken", "after"} <= names(db.path)
