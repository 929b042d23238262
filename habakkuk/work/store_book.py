"""`RunBook` on the schedules' tables (work/store.py): what a run writes, where.

A slot job finds its row by its job id (the tick wrote it, queued, with the job).
The schedule's last_run/last_status/last_output/fail_streak follow each outcome; a
delivery that failed turns a ran row into delivery_failed and says so in last_status,
and a run that settles after its delivery keeps what the delivery recorded. A run's
end and its delivery's are each one transaction (`ScheduleStore.settle_run`,
`settle_delivery`), so when both settle at once, on one node or two, one comes wholly
after the other and neither undoes what the other wrote.
"""

from __future__ import annotations

import logging

from habakkuk.engine.errors import NotFound
from habakkuk.work.run_book import Settled
from habakkuk.work.schedule_types import Schedule, SlotRun
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
            _no_row(job)
        return row

    async def run_started(self, job: str, *, session: str = "") -> None:
        row = await self._row(job)
        if row is not None:
            await self.store.set_run(
                row.schedule, row.slot, "running", extra=row.extra, session=session or None
            )

    async def run_settled(self, job: str, settled: Settled) -> None:
        found = await self.store.settle_run(
            job,
            settled.status,
            reason=settled.reason or None,
            session=settled.session or None,
            delivered=settled.delivered,
            last_status=settled.last_status,
            last_output=settled.last_output,
            fail_streak=settled.fail_streak,
        )
        if not found:
            _no_row(job)

    async def delivery_settled(self, job: str, *, delivered: bool, reason: str = "") -> None:
        if not await self.store.settle_delivery(job, delivered=delivered, reason=reason):
            _no_row(job)


def _no_row(job: str) -> None:
    log.warning("schedule run %s has no slot row; its outcome is not recorded", job)
