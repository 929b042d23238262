"""`RunBook` on the schedules' tables (work/store.py): what a run writes, where.

A slot job finds its row by its job id (the tick wrote it, queued, with the job).
The schedule's last_run/last_status/last_output/fail_streak follow each outcome; a
delivery that failed turns a ran row into delivery_failed and says so in last_status,
and a run that settles after its delivery keeps what the delivery recorded.
"""

from __future__ import annotations

import logging
import time

from habakkuk.engine.errors import NotFound
from habakkuk.work.run_book import Settled
from habakkuk.work.schedule_types import Schedule, SlotRun, SlotStatus
from habakkuk.work.store import ScheduleStore

log = logging.getLogger(__name__)


class StoreRunBook:
    """The RunBook of one home's control.db."""

    def __init__(self, store: ScheduleStore):
        self.store = store

    async def get(self, schedule_id: str) -> Schedule:
        schedule = await self.store.get(schedule_id)
        if schedule is None:
            raise NotFound(f"no schedule {schedule_id!r}")
        return schedule

    async def _row(self, job: str) -> SlotRun | None:
        row = await self.store.run_for_job(job)
        if row is None:
            log.warning("schedule run %s has no slot row; its outcome is not recorded", job)
        return row

    async def run_started(self, job: str, *, session: str = "") -> None:
        row = await self._row(job)
        if row is not None:
            await self.store.set_run(
                row.schedule, row.slot, "running", extra=row.extra, session=session or None
            )

    async def run_settled(self, job: str, settled: Settled) -> None:
        row = await self._row(job)
        if row is None:
            return
        status = settled.status
        last_status = settled.last_status
        reason = settled.reason or None
        if row.status == "delivery_failed" and status == "ran":
            # Its delivery settled first: the run ran, its message did not arrive (the
            # row keeps the delivery's reason).
            status, last_status = "delivery_failed", f"delivery failed: {row.reason}"
            reason = None
        await self.store.set_run(
            row.schedule,
            row.slot,
            status,
            extra=row.extra,
            reason=reason,
            session=settled.session or None,
            delivered=settled.delivered,
        )
        await self.store.record_result(
            row.schedule,
            last_run=time.time(),
            last_status=last_status,
            last_output=settled.last_output,
            fail_streak=settled.fail_streak,
        )

    async def delivery_settled(self, job: str, *, delivered: bool, reason: str = "") -> None:
        row = await self._row(job)
        if row is None:
            return
        if delivered:
            await self.store.set_run(
                row.schedule, row.slot, row.status, extra=row.extra, delivered=True
            )
            return
        # A failed run stays failed (its failure message did not arrive either).
        status: SlotStatus = "failed" if row.status == "failed" else "delivery_failed"
        await self.store.set_run(
            row.schedule,
            row.slot,
            status,
            extra=row.extra,
            reason=None if status == "failed" else reason,  # a failure keeps its own why
            delivered=False,
        )
        schedule = await self.store.get(row.schedule)
        if schedule is not None:
            await self.store.record_result(
                row.schedule,
                last_run=schedule.last_run or time.time(),
                last_status=f"delivery failed: {reason}",
            )
