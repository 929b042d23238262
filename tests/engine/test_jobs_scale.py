"""Reads of finished jobs by time go through an index, so their cost follows the slice
they read, not the job history (a busy home keeps weeks of finished jobs)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from habakkuk.channels.deliveries import reply_id
from habakkuk.channels.sweep import SWEEP_WINDOW_SECONDS, sweep_replies
from habakkuk.engine import retention
from habakkuk.engine.jobs import MIGRATIONS, JobQueue, claim_sql
from habakkuk.engine.retention import prune_jobs
from habakkuk.engine.store import SqliteDatabase
from tests.helpers import sqlite_conn


async def _finish_turns(queue: JobQueue, count: int, prefix: str) -> None:
    for number in range(count):
        payload = {"session": f"s{number}", "reply_to": {"to": f"tg:{number}"}}
        await queue.enqueue(f"{prefix}{number}", "turn", payload)
        lease = await queue.claim(["turn"])
        assert lease is not None
        await queue.complete(lease, {"reply": "hi"})


async def test_the_reply_sweep_and_retention_read_finished_jobs_by_time(tmp_path: Path) -> None:
    db = await SqliteDatabase.open(tmp_path / "control.db", MIGRATIONS)
    queue = JobQueue(db)
    try:
        await _finish_turns(queue, 3, "turn:old:")
        old = time.time() - 3 * SWEEP_WINDOW_SECONDS
        await db.write(lambda conn: conn.execute("UPDATE jobs SET updated_at = ?", (old,)))
        await _finish_turns(queue, 2, "turn:new:")
        statements: list[str] = []
        await db.run(lambda conn: sqlite_conn(conn).set_trace_callback(statements.append))
        # Only the finished turns inside the sweep's window get their reply queued.
        assert await sweep_replies(queue, "turn") == 2
        assert await queue.get(reply_id("turn:new:0")) is not None
        assert await queue.get(reply_id("turn:old:0")) is None
        assert await prune_jobs(queue, older_than_days=2) == 3
        await db.run(lambda conn: sqlite_conn(conn).set_trace_callback(None))
        # The sweep reads each finished status after its place, retention the old ones.
        reads = [s for s in statements if "updated_at" in s and "status" in s and "SELECT" in s]
        assert len(reads) == 4, statements
        for sql in reads:
            rows = await db.fetchall(f"EXPLAIN QUERY PLAN {sql}")
            plan = " | ".join(str(row["detail"]) for row in rows)
            assert "jobs_state (status=? AND <expr>" in plan, (sql, plan)
    finally:
        await db.close()


async def test_a_claim_reads_only_a_sessions_live_jobs_not_its_history(tmp_path: Path) -> None:
    """The serial-key check looks up the key's running jobs and its older queued ones
    through jobs_serial, never every job the session ever had."""
    db = await SqliteDatabase.open(tmp_path / "control.db", MIGRATIONS)
    queue = JobQueue(db)
    try:
        for number in range(50):  # a session's history of finished turns
            await queue.enqueue(f"old{number}", "turn", {}, serial_key="ses_a")
            lease = await queue.claim(["turn"])
            assert lease is not None
            await queue.complete(lease, {})
        await queue.enqueue("next", "turn", {}, serial_key="ses_a")
        await queue.enqueue("after", "turn", {}, serial_key="ses_a")

        def plan(conn: Any) -> list[str]:
            sql = claim_sql(1)
            rows = conn.execute("EXPLAIN QUERY PLAN " + sql, ("o", 0, "h", 1, 0, "turn", 0, "o", 1))
            return [str(row[3]) for row in rows.fetchall()]

        steps = await db.run(plan)
        serial = [s for s in steps if "jobs_serial" in s]
        assert len(serial) == 2 and all("status=?" in s for s in serial), steps
        first = await queue.claim(["turn"])
        assert first is not None and first.job.id == "next"
        assert await queue.claim(["turn"]) is None  # "after" waits for "next": one at a time
    finally:
        await db.close()


async def test_retention_deletes_a_long_backlog_in_short_transactions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(retention, "PRUNE_BATCH", 4)
    db = await SqliteDatabase.open(tmp_path / "control.db", MIGRATIONS)
    queue = JobQueue(db)
    try:
        await _finish_turns(queue, 10, "turn:old:")
        await queue.enqueue("turn:waiting", "turn", {})  # not finished: kept
        old = time.time() - 30 * 86400
        await db.write(lambda conn: conn.execute("UPDATE jobs SET updated_at = ?", (old,)))
        writes = 0
        write = db.write

        async def counted(fn: Any) -> Any:
            nonlocal writes
            writes += 1
            return await write(fn)

        monkeypatch.setattr(db, "write", counted)
        assert await prune_jobs(queue, older_than_days=7) == 10
        assert writes == 3  # 4 + 4 + 2: each a transaction of its own
        left = await db.fetchall("SELECT id FROM jobs")
        assert [row[0] for row in left] == ["turn:waiting"]
    finally:
        await db.close()
