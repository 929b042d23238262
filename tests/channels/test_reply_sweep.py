"""The reply sweep reads only the finished jobs it has not seen, a bounded number per trip,
and still queues each missing reply exactly once (a late commit, a restart, a race)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from habakkuk.channels.deliveries import reply_id
from habakkuk.channels.store import ChannelStore
from habakkuk.channels.sweep import SWEEP_SLACK_SECONDS, ReplySweep
from habakkuk.engine.jobs import MIGRATIONS, JobQueue
from habakkuk.engine.store import SqliteDatabase
from tests.helpers import sqlite_conn


@pytest.fixture
async def queue(tmp_path: Path) -> AsyncIterator[JobQueue]:
    db = await SqliteDatabase.open(tmp_path / "control.db", MIGRATIONS)
    await ChannelStore.open(db)
    yield JobQueue(db)
    await db.close()


async def _finish(queue: JobQueue, turn: str, *, chat: bool = True) -> None:
    payload: dict[str, object] = {"session": "s"}
    if chat:
        payload["reply_to"] = {"to": "tg:1"}
    await queue.enqueue(turn, "turn", payload)
    lease = await queue.claim(["turn"])
    assert lease is not None and lease.job.id == turn
    await queue.complete(lease, {"reply": "hi"})


async def _age(queue: JobQueue, seconds: float, prefix: str) -> None:
    """Move the finished jobs named `prefix...` `seconds` into the past."""
    at = time.time() - seconds
    await queue.db.write(
        lambda conn: conn.execute(
            "UPDATE jobs SET updated_at = ? WHERE id LIKE ?", (at, f"{prefix}%")
        )
    )


async def _replies(queue: JobQueue) -> list[str]:
    rows = await queue.db.fetchall("SELECT id FROM jobs WHERE id LIKE 'reply:%' ORDER BY id")
    return [str(row["id"]) for row in rows]


async def test_a_pass_reads_only_the_jobs_finished_since_the_last(queue: JobQueue) -> None:
    for number in range(30):  # a day of chat turns, their replies queued by the runtime
        await _finish(queue, f"turn:day:{number:02}")
    await _age(queue, 3600, "turn:day:")
    sweep = ReplySweep(queue, "turn", ChannelStore(queue.db), batch=4)
    first = await sweep.run()
    # 30 turns with no reply job yet (the test skipped the runtime's enqueue): all queued,
    # in trips of at most 4 rows per status.
    assert (first.queued, first.read) == (30, 30)
    assert first.trips == 8
    again = await sweep.run()
    assert (again.queued, again.read) == (0, 0)  # nothing new: the day is not read again
    await _finish(queue, "turn:new")
    await _finish(queue, "turn:cli", chat=False)
    later = await sweep.run()
    assert later.queued == 1 and later.read == 2  # the two new ones, not the day
    assert reply_id("turn:new") in await _replies(queue)
    assert reply_id("turn:cli") not in await _replies(queue)


async def test_a_restarted_sweep_starts_where_the_last_process_got_to(queue: JobQueue) -> None:
    for number in range(10):
        await _finish(queue, f"turn:old:{number}")
    await _age(queue, 3600, "turn:old:")
    assert (await ReplySweep(queue, "turn", ChannelStore(queue.db)).run()).queued == 10
    # The process dies between a turn's end and the enqueue of its reply.
    await _finish(queue, "turn:crashed")
    restarted = ReplySweep(queue, "turn", ChannelStore(queue.db))
    swept = await restarted.run()
    assert (swept.queued, swept.read) == (1, 1)
    assert len(await _replies(queue)) == 11


async def test_a_turn_committed_with_an_earlier_stamp_is_still_replied_to_once(
    queue: JobQueue,
) -> None:
    """A job stamped before the sweep's place but committed after it read past (a clock
    set back, a writer that stamps before taking the lock) is read by the next pass."""
    await _finish(queue, "turn:a")
    sweep = ReplySweep(queue, "turn", ChannelStore(queue.db))
    assert (await sweep.run()).queued == 1
    await _finish(queue, "turn:late")
    await _age(queue, SWEEP_SLACK_SECONDS / 2, "turn:late")
    assert (await sweep.run()).queued == 1
    assert (await sweep.run()).queued == 0
    assert await _replies(queue) == [reply_id("turn:a"), reply_id("turn:late")]


async def test_turns_finishing_while_the_sweep_runs_are_each_replied_to_once(
    queue: JobQueue,
) -> None:
    for number in range(20):
        await _finish(queue, f"turn:before:{number:02}")
    sweep = ReplySweep(queue, "turn", ChannelStore(queue.db), batch=2)

    async def finish_during() -> None:
        for number in range(10):
            await _finish(queue, f"turn:during:{number}")

    await asyncio.gather(sweep.run(), finish_during())
    await sweep.run()
    replies = await _replies(queue)
    assert len(replies) == len(set(replies)) == 30


async def test_the_sweeps_reads_go_through_the_index_bounded_by_its_place(
    queue: JobQueue,
) -> None:
    await _finish(queue, "turn:a")
    statements: list[str] = []
    await queue.db.run(lambda conn: sqlite_conn(conn).set_trace_callback(statements.append))
    await ReplySweep(queue, "turn", batch=7).run()
    await queue.db.run(lambda conn: sqlite_conn(conn).set_trace_callback(None))
    reads = [s for s in statements if "FROM jobs j WHERE" in s]
    assert len(reads) == 3, statements  # one per finished status
    for sql in reads:
        assert "LIMIT 7" in sql
        rows = await queue.db.fetchall(f"EXPLAIN QUERY PLAN {sql}")
        plan = " | ".join(str(row["detail"]) for row in rows)
        # A range of jobs_state from the place's time, in its order (no sort).
        assert "jobs_state (status=? AND <expr>>?)" in plan, plan
        assert "TEMP B-TREE" not in plan, plan
