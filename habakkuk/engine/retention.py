"""Retention: nothing grows without limit.

A daily maintenance job (id `retention_<date>`, so several processes sharing
a home run it once a day) deletes finished jobs, old sessions with their
messages and search index, and blobs nobody has touched for as long.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from habakkuk.engine.sql import Conn

from .config import RetentionConfig
from .jobs import FINISHED_SQL, JobKind, JobQueue, declare_kind, finished_time
from .payloads import JsonObject
from .sessions import TranscriptStore
from .state import StateStore

RETENTION_KIND = "maintenance.retention"
DAY = 86_400.0


@dataclass(frozen=True)
class RetentionSweep:
    """The retention job's payload: nothing (the limits are the config's when it runs)."""

    def to_json(self) -> JsonObject:
        return {}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RetentionSweep:
        return cls()


RETENTION: JobKind[RetentionSweep] = declare_kind(
    JobKind(RETENTION_KIND, payload=RetentionSweep, noun="retention sweep")
)


@dataclass
class RetentionReport:
    jobs: int = 0
    sessions: int = 0
    blobs: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"jobs": self.jobs, "sessions": self.sessions, "blobs": self.blobs}


def retention_job_id(now: float | None = None) -> str:
    """The day's job id: one sweep per day per home, whoever enqueues it."""
    day = datetime.fromtimestamp(now or time.time(), UTC).strftime("%Y-%m-%d")
    return f"retention_{day}"


# Rows deleted per transaction: a home catching up on months of finished jobs deletes
# them in short transactions, so turns and claims get control.db between them (one
# DELETE of 400,000 jobs held it for 10.8 s).
PRUNE_BATCH = 5000


async def prune_jobs(queue: JobQueue, older_than_days: float) -> int:
    """Delete finished jobs last updated more than `older_than_days` ago, PRUNE_BATCH at
    a time (through the engine's index of finished jobs by time: `finished_time`)."""
    cutoff = time.time() - older_than_days * DAY
    at, _ = finished_time(queue.db.dialect)

    def _prune(conn: Conn) -> int:
        cursor = conn.execute(
            "DELETE FROM jobs WHERE seq IN (SELECT seq FROM jobs"
            f" WHERE status IN ('done', 'failed', 'cancelled') AND {FINISHED_SQL}"
            f" AND {at} < ? LIMIT ?)",
            (cutoff, PRUNE_BATCH),
        )
        return int(cursor.rowcount)

    removed = 0
    while True:
        batch = await queue.db.write(_prune)
        removed += batch
        if batch < PRUNE_BATCH:
            return removed


# Sessions deleted per transaction: each takes its messages, their search rows and its
# compactions with it, and the transaction holds transcripts.db (and, attached, control.db).
SESSION_PRUNE_BATCH = 500

# The idle sessions through sessions_listed (archived, updated_at): one
# range per value of `archived` (0 or 1, set_archived writes nothing else), so the
# daily sweep reads the sessions it deletes, not the table (updated_at alone has no
# index, and a scan of 100,000 sessions reads every frozen system prompt).
_IDLE_SESSIONS = (
    # No ORDER BY: a sort would read every idle session for each batch of them.
    "SELECT id FROM sessions WHERE archived IN (0, 1) AND updated_at < ? LIMIT ?"
)


async def prune_idle_sessions(transcripts: TranscriptStore, older_than_days: float) -> list[str]:
    """Delete sessions (and, by foreign key, their messages) idle that long,
    SESSION_PRUNE_BATCH per transaction; returns their ids."""
    cutoff = time.time() - older_than_days * DAY

    def _prune(conn: Conn) -> list[str]:
        rows = conn.execute(
            f"DELETE FROM sessions WHERE id IN ({_IDLE_SESSIONS}) RETURNING id",
            (cutoff, SESSION_PRUNE_BATCH),
        ).fetchall()
        return [str(row[0]) for row in rows]

    pruned: list[str] = []
    while True:
        batch = await transcripts.db.write(_prune)
        pruned.extend(batch)
        if len(batch) < SESSION_PRUNE_BATCH:
            return pruned


def prune_blobs(root: Path, older_than_days: float) -> int:
    """Delete blob files not modified for that long (blocking: run in a thread)."""
    cutoff = time.time() - older_than_days * DAY
    removed = 0
    if not root.is_dir():
        return 0
    for folder in root.iterdir():
        if not folder.is_dir():
            continue
        for entry in os.scandir(folder):
            try:
                if entry.is_file() and entry.stat().st_mtime < cutoff:
                    os.unlink(entry.path)
                    removed += 1
            except FileNotFoundError:
                continue
    return removed


async def sweep(
    queue: JobQueue,
    transcripts: TranscriptStore,
    blobs_root: Path,
    *,
    jobs_days: float,
    sessions_days: float,
    state: StateStore | None = None,
) -> RetentionReport:
    """One retention pass; a limit of 0 or less keeps that kind forever.

    A pruned session's own state (todo list, /think and /model choices) goes with it.
    """
    report = RetentionReport()
    if jobs_days > 0:
        report.jobs = await prune_jobs(queue, jobs_days)
    if sessions_days > 0:
        pruned = await prune_idle_sessions(transcripts, sessions_days)
        report.sessions = len(pruned)
        if state is not None and pruned:
            await state.forget_sessions(pruned)
        report.blobs = await asyncio.to_thread(prune_blobs, blobs_root, sessions_days)
    return report


class UsagePruner(Protocol):
    """The usage store, as retention prunes it."""

    async def prune(self, older_than_days: float) -> int: ...


class SharedBlobPruner(Protocol):
    """The blob store, as retention prunes the rows it shares (engine/blobs.py)."""

    async def prune_shared(self, older_than_days: float) -> int | None: ...


async def sweep_with(
    queue: JobQueue,
    transcripts: TranscriptStore,
    blobs_root: Path,
    limits: RetentionConfig,
    *,
    state: StateStore | None = None,
    usage: UsagePruner | None = None,
    blobs: SharedBlobPruner | None = None,
) -> dict[str, Any]:
    """The retention job's work under the configured `limits`: one sweep, then the usage
    rows; what it pruned, as the job's result (and logged)."""
    report = await sweep(
        queue,
        transcripts,
        blobs_root,
        jobs_days=limits.jobs_days,
        sessions_days=limits.sessions_days,
        state=state,
    )
    result: dict[str, Any] = report.as_dict()
    if usage is not None and limits.usage_days > 0:
        result["usage"] = await usage.prune(limits.usage_days)
    if blobs is not None and limits.sessions_days > 0:
        # A PostgreSQL home's shared copies go as the files do (None: nothing shared).
        shared = await blobs.prune_shared(limits.sessions_days)
        if shared is not None:
            result["shared_blobs"] = shared
    logging.getLogger(__name__).info("retention: %s", result)
    return result


async def queue_sweeps(queue: JobQueue) -> None:
    """Queue today's retention sweep now and every hour (one job per day per home)."""
    while True:
        await queue.enqueue(retention_job_id(), RETENTION_KIND, RetentionSweep(), max_attempts=3)
        await asyncio.sleep(3600)
