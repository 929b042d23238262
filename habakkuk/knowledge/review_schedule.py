"""Queueing the review and nightly jobs, and starting their one-worker pool.

Once a minute (in long-lived processes) each agent's sessions that are quiet for
`review_idle`, changed in the last three days and longer than their reviewed position
get a `memrev_<session>_<length>` job; once a day, after `memory.nightly` local time,
each agent gets `memnight_<agent>_<date>`. Job ids make queueing idempotent, so two
processes doing it at once is harmless. All run on serial key `memory:<agent>`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from habakkuk.engine.jobs import JobQueue, Lease
from habakkuk.engine.pools import FinishedCallback, Pool

from .review import (
    ReviewDeps,
    ReviewJobs,
    day_start,
    next_nightly,
    nightly_job_id,
    review_job_id,
    serial_key,
)
from .review_kinds import NIGHTLY_KIND, REVIEW_KIND, MemoryReview, NightlyReview

log = logging.getLogger(__name__)

SCAN_SECONDS = 60.0
RECENT_SECONDS = 3 * 86_400
SESSIONS_SCANNED = 200


async def queue_due(
    queue: JobQueue, deps: ReviewDeps, agents: Iterable[str], *, now: float | None = None
) -> list[str]:
    """Queue the review and nightly jobs due now; the ids newly queued."""
    settings = deps.settings()
    now = time.time() if now is None else now
    queued: list[str] = []
    if not settings.review and settings.nightly is None:
        return queued  # both off: not even memory.db is opened
    for agent in agents:
        store = await deps.store_for(agent)
        if await store.tokens_since(day_start(settings)) >= settings.budget:
            continue  # past the day's budget: no more jobs today
        if settings.review:
            for session in await deps.transcripts.list_sessions(agent, limit=SESSIONS_SCANNED):
                if session.agent != agent:
                    continue
                if now - session.updated_at < settings.idle_seconds:
                    continue
                if now - session.updated_at > RECENT_SECONDS:
                    break  # newest first: the rest are older still
                row = await deps.transcripts.db.fetchone(
                    "SELECT coalesce(max(seq) + 1, 0) FROM messages WHERE session_id = ?",
                    (session.id,),
                )
                length = int(row[0]) if row else 0
                if length <= await store.position(session.id):
                    continue
                job_id = review_job_id(session.id, length)
                payload = MemoryReview(agent, session.id, length)
                if await queue.enqueue(
                    job_id, REVIEW_KIND, payload, serial_key=serial_key(agent), max_attempts=3
                ):
                    queued.append(job_id)
        slot = next_nightly(settings, datetime.fromtimestamp(now, ZoneInfo(settings.timezone)))
        if slot is not None:
            job_id = nightly_job_id(agent, slot.date().isoformat())
            if await queue.enqueue(
                job_id,
                NIGHTLY_KIND,
                NightlyReview(agent),
                serial_key=serial_key(agent),
                max_attempts=3,
            ):
                queued.append(job_id)
    return queued


async def scan_forever(
    queue: JobQueue, deps: ReviewDeps, agents: Callable[[], Iterable[str]]
) -> None:
    """`queue_due` now and once a minute until cancelled (errors logged, never fatal)."""
    while True:
        try:
            await queue_due(queue, deps, agents())
        except Exception:
            log.exception("memory review: queueing failed")
        await asyncio.sleep(SCAN_SECONDS)


class ReviewPool(Pool):
    """The one-worker pool of both kinds, which also runs the once-a-minute scan while it
    runs (so a runtime starts and stops the review like any other pool)."""

    def __init__(
        self,
        queue: JobQueue,
        deps: ReviewDeps,
        agents: Callable[[], Iterable[str]],
        *,
        on_finished: FinishedCallback | None = None,
    ):
        jobs = ReviewJobs(deps)

        async def handle(lease: Lease) -> dict[str, Any]:
            if lease.job.kind == NIGHTLY_KIND:
                return await jobs.nightly(lease)
            return await jobs.review(lease)

        super().__init__(
            queue, [REVIEW_KIND, NIGHTLY_KIND], handle, concurrency=1, on_finished=on_finished
        )
        self._deps = deps
        self._agents = agents
        self._scan: asyncio.Task[None] | None = None

    def start(self) -> None:
        super().start()
        if self._scan is None:
            self._scan = asyncio.create_task(
                scan_forever(self.queue, self._deps, self._agents), name="memory-review-scan"
            )

    async def stop(self) -> None:
        if self._scan is not None:
            self._scan.cancel()
            await asyncio.gather(self._scan, return_exceptions=True)
            self._scan = None
        await super().stop()
