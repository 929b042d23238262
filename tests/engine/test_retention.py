"""Retention prunes finished jobs, idle sessions and old blobs, and nothing else."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from habakkuk.engine import retention
from habakkuk.engine.jobs import MIGRATIONS, JobQueue
from habakkuk.engine.llm.types import Message
from habakkuk.engine.retention import prune_idle_sessions, retention_job_id, sweep
from habakkuk.engine.sessions import TranscriptStore
from habakkuk.engine.state import StateStore
from habakkuk.engine.store import BlobStore, SqliteDatabase
from tests.conftest import OpenRuntime

OLD = time.time() - 40 * 86_400


async def test_sweep_removes_only_what_is_old_and_finished(tmp_path: Path) -> None:
    control = tmp_path / "control.db"
    queue = JobQueue(await SqliteDatabase.open(control, MIGRATIONS))
    transcripts = await TranscriptStore.open(tmp_path / "transcripts.db", control)
    blobs = BlobStore(tmp_path / "blobs")
    try:
        await queue.enqueue("old-done", "turn")
        await queue.enqueue("new-done", "turn")
        await queue.enqueue("old-queued", "other")
        for _ in range(2):
            lease = await queue.claim(["turn"])
            assert lease is not None
            await queue.complete(lease, {})
        await queue.db.write(
            lambda c: c.execute(
                "UPDATE jobs SET updated_at = ? WHERE id IN ('old-done', 'old-queued')", (OLD,)
            )
        )
        await transcripts.create_session("old", "main", "")
        await transcripts.create_session("new", "main", "")
        await transcripts.append("old", Message.user_text("ancient words"))
        await transcripts.db.write(
            lambda c: c.execute("UPDATE sessions SET updated_at = ? WHERE id = 'old'", (OLD,))
        )
        stale = blobs.put_bytes(b"stale")
        fresh = blobs.put_bytes(b"fresh")
        reused = blobs.put_bytes(b"old but stored again")
        for path in (stale, reused):
            os.utime(path, (OLD, OLD))
        assert blobs.put_bytes(b"old but stored again") == reused  # used again today

        report = await sweep(queue, transcripts, blobs.root, jobs_days=14, sessions_days=30)

        assert report.as_dict() == {"jobs": 1, "sessions": 1, "blobs": 1}
        assert await queue.get("old-done") is None
        assert await queue.get("old-queued") is not None  # unfinished work is never pruned
        assert await transcripts.get_session("old") is None
        assert await transcripts.search("ancient") == []  # the index went with it
        assert await transcripts.get_session("new") is not None
        assert not stale.exists() and fresh.exists() and reused.exists()
    finally:
        await queue.db.close()
        await transcripts.close()


async def test_a_pruned_sessions_own_state_goes_with_it(tmp_path: Path) -> None:
    control = tmp_path / "control.db"
    queue = JobQueue(await SqliteDatabase.open(control, MIGRATIONS))
    transcripts = await TranscriptStore.open(tmp_path / "transcripts.db", control)
    state = await StateStore.open(tmp_path / "state.db")
    try:
        for session in ("old", "new"):
            await transcripts.create_session(session, "main", "")
            await state.add_todos(session, ["write the report"])
            await state.set_setting(session, "thinking", "high")
        await transcripts.db.write(
            lambda c: c.execute("UPDATE sessions SET updated_at = ? WHERE id = 'old'", (OLD,))
        )
        report = await sweep(
            queue, transcripts, tmp_path / "blobs", jobs_days=14, sessions_days=30, state=state
        )
        assert report.sessions == 1
        assert await state.todos("old") == [] and await state.setting("old", "thinking") is None
        assert len(await state.todos("new")) == 1
        assert await state.setting("new", "thinking") == "high"
    finally:
        await queue.db.close()
        await transcripts.close()
        await state.close()


def test_one_retention_job_per_day() -> None:
    day = 1_780_000_000.0
    assert retention_job_id(day) == retention_job_id(day + 3600)
    assert retention_job_id(day) != retention_job_id(day + 86_400)


async def test_long_lived_runtime_runs_the_days_sweep_once(runtime_factory: OpenRuntime) -> None:
    import asyncio

    from habakkuk.engine.retention import RETENTION_KIND
    from tests.conftest import mock_config

    runtime = await runtime_factory(mock_config())
    with runtime.bus.subscribe(
        lambda e: e.kind == "job.finished" and e.data.get("job_kind") == RETENTION_KIND
    ) as finished:
        runtime.start_workers(maintenance=True)
        await asyncio.wait_for(finished.get(), 30)
    job = await runtime.queue.get(retention_job_id())
    assert job is not None and job.status == "done"
    assert set(job.result or {}) == {"jobs", "sessions", "blobs", "usage"}
    assert await runtime.queue.enqueue(retention_job_id(), RETENTION_KIND) is False


async def test_idle_sessions_are_pruned_in_batches_through_the_listed_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Archived or not, every idle session goes, a batch per transaction, and the sweep
    finds them through sessions_listed instead of reading the whole sessions table."""
    monkeypatch.setattr(retention, "SESSION_PRUNE_BATCH", 2)
    transcripts = await TranscriptStore.open(tmp_path / "transcripts.db", tmp_path / "control.db")
    try:
        for name in ("a", "b", "c", "d", "e", "kept"):
            await transcripts.create_session(name, "main", "")
            await transcripts.append(name, Message.user_text(f"words of {name}"))
        await transcripts.set_archived("b", True)
        await transcripts.db.write(
            lambda c: c.execute("UPDATE sessions SET updated_at = ? WHERE id != 'kept'", (OLD,))
        )
        writes = 0
        write = transcripts.db.write

        async def counted(fn: Any) -> Any:
            nonlocal writes
            writes += 1
            return await write(fn)

        monkeypatch.setattr(transcripts.db, "write", counted)
        pruned = await prune_idle_sessions(transcripts, 30)
        monkeypatch.undo()
        assert sorted(pruned) == ["a", "b", "c", "d", "e"]
        assert writes == 3  # 2 + 2 + 1: a short batch ends the sweep
        assert [s.id for s in await transcripts.list_sessions()] == ["kept"]
        assert await transcripts.search("words") != []
        assert {h.session for h in await transcripts.search("words")} == {"kept"}
        plan = await transcripts.db.fetchall(
            "EXPLAIN QUERY PLAN " + retention._IDLE_SESSIONS, (OLD + 1, 10)
        )
        details = " | ".join(str(row["detail"]) for row in plan)
        assert "sessions_listed" in details, details
        assert "SCAN" not in details and "TEMP B-TREE" not in details, details
    finally:
        await transcripts.close()
