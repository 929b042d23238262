"""The jobs table's schema: a home written before migration 4 (the table rebuilt without
AUTOINCREMENT, partial indexes) keeps its jobs, their order and their leases."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from habakkuk.engine.jobs import (
    FINISHED_SQL,
    LEASE_SQL,
    MIGRATIONS,
    JobQueue,
    Lease,
    Owner,
    claim_sql,
    finished_time,
    pick_sql,
)
from habakkuk.engine.sql import Conn
from habakkuk.engine.store import SqliteDatabase


async def test_a_queue_from_before_the_rebuild_keeps_its_jobs_order_and_leases(
    tmp_path: Path,
) -> None:
    path = tmp_path / "control.db"
    # The rows as that version's queue wrote them (its statements, not today's: today's
    # name the agent column of migration 5).
    older = await SqliteDatabase.open(path, MIGRATIONS[:3])
    owner = Owner("host", 1, "cafe")
    now = time.time()

    def _write(conn: Conn) -> None:
        rows = [
            ("turn-0", "k", "session", "running", 1, str(owner), now + 60, None),
            ("turn-1", "k", "session", "queued", 0, None, None, None),
            ("turn-2", "k", "session", "queued", 0, None, None, None),
            ("plain", "k", "", "queued", 0, None, None, None),
            ("gone", "other", "", "failed", 1, None, None, "boom"),
        ]
        conn.executemany(
            "INSERT INTO jobs(id, kind, serial_key, status, attempts, lease_owner,"
            " lease_until, error, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(*row, now, now) for row in rows],
        )

    await older.write(_write)
    await older.close()
    queue = JobQueue(await SqliteDatabase.open(path, MIGRATIONS), owner=owner)
    try:
        # The serial key still holds its next turn back while turn-0 runs.
        first = await queue.claim(["k"])
        assert first is not None and first.job.id == "plain"
        assert await queue.claim(["k"]) is None
        # The lease taken before the upgrade still guards its job.
        running = await queue.get("turn-0")
        assert running is not None and running.agent == ""
        await queue.complete(Lease(running, str(owner), 30.0))
        await queue.enqueue("after", "k")
        claimed = []
        while (lease := await queue.claim(["k"])) is not None:
            claimed.append(lease.job.id)
            await queue.complete(lease)
        assert claimed == ["turn-1", "turn-2", "after"]
        assert [job.id for job in await queue.recent_failures()] == ["gone"]
    finally:
        await queue.db.close()


async def test_a_deleted_newest_job_leaves_later_jobs_in_enqueue_order(tmp_path: Path) -> None:
    queue = JobQueue(await SqliteDatabase.open(tmp_path / "control.db", MIGRATIONS))
    try:
        await queue.enqueue("a", "k", serial_key="s")
        await queue.enqueue("b", "k", serial_key="s")
        await queue.db.write(lambda conn: conn.execute("DELETE FROM jobs WHERE id = 'b'"))
        await queue.enqueue("c", "k", serial_key="s")
        assert [job.id for job in await queue.active_for("s")] == ["a", "c"]
    finally:
        await queue.db.close()


async def test_the_claim_and_finished_reads_go_through_indexes(tmp_path: Path) -> None:
    db = await SqliteDatabase.open(tmp_path / "control.db", MIGRATIONS)
    try:
        plans = await db.run(
            lambda conn: [
                " ; ".join(row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params))
                for sql, params in [
                    (claim_sql(1), ("o", 1.0, "h", 1, 1.0, "k", 1.0, "o", 1)),
                    (
                        f"SELECT * FROM jobs WHERE status = 'failed' AND {FINISHED_SQL}"
                        f" ORDER BY {finished_time('sqlite')[0]} DESC LIMIT 5",
                        (),
                    ),
                ]
            ]
        )
    finally:
        await db.close()
    claim, failures = plans
    assert "SCAN" not in claim and "jobs_serial" in claim, claim
    # The claim reads its kind's runnable jobs in order: no sort.
    assert "jobs_state (status=? AND <expr>=? AND <expr><?)" in claim, claim
    assert "TEMP B-TREE" not in claim, claim
    assert "jobs_state" in failures and "TEMP B-TREE" not in failures, failures


async def test_writing_a_job_builds_no_table_to_test_the_partial_indexes(tmp_path: Path) -> None:
    # Every write of a row evaluates each partial index's condition; an IN of three or
    # more values would build a table on each run (measured: up to 110 us a claim).
    db = await SqliteDatabase.open(tmp_path / "control.db", MIGRATIONS)
    try:
        built = await db.run(
            lambda conn: [
                sum(row[1] == "OpenEphemeral" for row in conn.execute(f"EXPLAIN {sql}", params))
                for sql, params in [
                    (
                        "INSERT INTO jobs(id, kind, serial_key, created_at, updated_at)"
                        " VALUES (?, 'k', ?, 1, 1)",
                        ("a", "s"),
                    ),
                    ("UPDATE jobs SET status = ?, updated_at = 2 WHERE id = ?", ("done", "a")),
                    ("DELETE FROM jobs WHERE id = ?", ("a",)),
                ]
            ]
        )
    finally:
        await db.close()
    assert built == [0, 0, 0], built


async def test_a_claim_of_one_job_builds_no_table_where_a_claim_of_several_builds_three(
    tmp_path: Path,
) -> None:
    # RETURNING's rows always go through a table, and `seq IN (...)` builds another of
    # the picked seqs (and one more): the claim of one picks its row with a plain SELECT
    # and leases it by seq, building none.
    db = await SqliteDatabase.open(tmp_path / "control.db", MIGRATIONS)
    try:
        built = await db.run(
            lambda conn: [
                sum(row[1] == "OpenEphemeral" for row in conn.execute(f"EXPLAIN {sql}", params))
                for sql, params in (
                    (pick_sql(1), ("k", 1.0, "owner")),
                    (LEASE_SQL, ("owner", 2.0, "host", 1, 1.0, 1)),
                    (claim_sql(1), ("owner", 2.0, "host", 1, 1.0, "k", 1.0, "owner", 1)),
                )
            ]
        )
    finally:
        await db.close()
    assert built == [0, 0, 3], built


async def test_a_claim_of_one_takes_the_oldest_runnable_job_and_leaves_a_held_key(
    tmp_path: Path,
) -> None:
    queue = JobQueue(await SqliteDatabase.open(tmp_path / "control.db", MIGRATIONS))
    try:
        await queue.enqueue("a1", "k", serial_key="s")
        await queue.enqueue("a2", "k", serial_key="s")
        await queue.enqueue("b1", "k")
        first = await queue.claim(["k"])
        second = await queue.claim(["k"])
        third = await queue.claim(["k"])
        assert first is not None and second is not None
        assert [first.job.id, second.job.id, third] == ["a1", "b1", None]
    finally:
        await queue.db.close()


async def test_a_complete_writes_the_jobs_row_and_one_index_page(tmp_path: Path) -> None:
    # Each page a commit writes is a WAL frame (two writes and a checksum): a complete
    # moves the job's entry within jobs_state, where it was also added to jobs_finished.
    path = tmp_path / "control.db"
    queue = JobQueue(await SqliteDatabase.open(path, MIGRATIONS))
    side = sqlite3.connect(path)
    try:
        for number in range(20):  # some history: finished jobs in the index
            await queue.enqueue(f"old{number}", "k")
            lease = await queue.claim(["k"])
            assert lease is not None
            await queue.complete(lease, {"ok": True})
        await queue.enqueue("job", "k")
        lease = await queue.claim(["k"])
        assert lease is not None
        busy, _, _ = side.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        assert busy == 0
        await queue.complete(lease, {"ok": True})
        wal = Path(f"{path}-wal").stat().st_size
        page = side.execute("PRAGMA page_size").fetchone()[0]
        assert (wal - 32) // (page + 24) == 2, wal  # the WAL's header, then the frames
    finally:
        side.close()
        await queue.db.close()
