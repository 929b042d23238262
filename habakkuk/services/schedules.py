"""The schedules service as the runtime builds it: on control.db, in the config timezone."""

from __future__ import annotations

from habakkuk.engine.config import Config
from habakkuk.engine.jobs import JobQueue
from habakkuk.work.service import Schedules


def build_schedules(queue: JobQueue, config: Config) -> Schedules:
    """A `Schedules` (SchedulesAccess) on the queue's control.db."""
    return Schedules(queue.db, queue, config)
