"""The schedules service as the runtime builds it: on control.db, in the config timezone,
and its ticker (one per home at a time, through the named lease)."""

from __future__ import annotations

import asyncio

from habakkuk.engine.config import Config
from habakkuk.engine.jobs import JobQueue
from habakkuk.work.service import Schedules


def build_schedules(queue: JobQueue, config: Config) -> Schedules:
    """A `Schedules` (SchedulesAccess) on the queue's control.db."""
    return Schedules(queue.db, queue, config)


def start_ticker(schedules: Schedules) -> asyncio.Task[None]:
    """Tick `schedules` every 15 s until the task is cancelled (serve and the terminal
    app: the processes that run the maintenance workers)."""
    from habakkuk.work.scheduler import Scheduler  # only processes that tick need it

    return asyncio.create_task(Scheduler(schedules).run(), name="schedules")
