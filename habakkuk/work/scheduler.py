"""The scheduler's tick: due slots become jobs, each slot at most once, none in silence.

One ticker per home at a time: each tick takes (or renews) the named lease
TICK_LEASE in control.db (engine/leases.py), so a terminal beside a `--serve` never
ticks twice; a dead holder on this host is replaced at once, any other when its lease
runs out. For each enabled schedule whose next_run has come, the slots from next_run
up to now are read off its timetable:

- a slot more than LATE_SECONDS late is skipped "down" when no ticker ran since that
  slot (the lease's last beat is older than the slot: Habakkuk was not running), else
  "late" (a ticker ran but did not get to it);
- of the slots still in time, the newest runs and the older ones are skipped "late"
  (a burst of stale runs helps nobody);
- with `missed: once` and no slot in time, the newest missed slot runs once as a
  catch-up (reason "catch-up"); the other missed slots say "(one catch-up run done)";
- a script whose previous run is still queued or running is skipped "still running";
- the slot to run is enqueued with job id "<schedule>_<int slot>" (idempotent), then
  its SlotRun rows are written and next_run advanced by compare-and-swap in one
  transaction (`ScheduleStore.advance`). A crash between the two, or another process
  ticking, can only repeat an idempotent enqueue: a slot whose job already exists is
  recorded "queued", never skipped, never enqueued twice.

A `when` that no longer parses is logged and left alone; the other schedules tick.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from habakkuk.engine.jobs import NewJob
from habakkuk.engine.leases import NamedLeases
from habakkuk.work.run_book import ScheduleSlot
from habakkuk.work.schedule_types import (
    FAILOVER_SECONDS,
    LATE_SECONDS,
    POLL_SECONDS,
    TICK_LEASE,
    Schedule,
    SlotRun,
    WhenError,
)
from habakkuk.work.service import (
    SKIP_ROWS,
    Schedules,
    job_attempts,
    job_kind,
    serial_key,
    slot_job_id,
)
from habakkuk.work.when import When

log = logging.getLogger(__name__)

DUE_BATCH = 1000
# Slots read one by one per schedule and tick; past that (a minute cron after a year
# down) the timetable jumps to the last hour and one row says how far the gap went.
MAX_SLOTS = 20_000


@dataclass
class TickReport:
    """What one tick did (`held_by`: another ticker holds the lease, nothing done)."""

    held_by: str | None = None
    due: int = 0
    queued: int = 0
    skipped: int = 0


class Scheduler:
    """Ticks one home's schedules. `clock`, `interval`, `pid` and `on_enqueued` (called
    with each new job id before its slot is recorded: a test's crash point) are
    injectable. The lease lasts FAILOVER_SECONDS (at least two intervals): a holder
    that dies is replaced by another node within that and one interval."""

    def __init__(
        self,
        schedules: Schedules,
        *,
        clock: Callable[[], float] = time.time,
        interval: float = POLL_SECONDS,
        lease_seconds: float | None = None,
        pid: int | None = None,
        on_enqueued: Callable[[str], Awaitable[None]] | None = None,
        lease_name: str = TICK_LEASE,
    ):
        self.schedules = schedules
        self.store = schedules.store
        self.queue = schedules.queue
        self.leases = NamedLeases(schedules.queue.db)
        self.clock = clock
        self.interval = interval
        self.lease_seconds = lease_seconds or max(FAILOVER_SECONDS, 2 * interval)
        self.pid = pid
        self.owner = f"{schedules.queue.owner}:schedules"
        self.on_enqueued = on_enqueued
        self.lease_name = lease_name  # another name: a ticker that ignores the others (tests)
        self._ready = False
        self._whens: dict[tuple[str, float], When] = {}  # parsed timetables, by spec

    async def run(self) -> None:
        """Tick every `interval` until cancelled; the lease is let go on the way out."""
        try:
            while True:
                try:
                    await self.tick()
                except Exception as exc:  # a failed tick must not stop the ticker
                    log.warning("schedules: tick failed: %s", exc)
                await asyncio.sleep(self.interval)
        finally:
            if self._ready:
                await self.leases.release(self.lease_name, self.owner)

    async def tick(self) -> TickReport:
        """One pass: take the lease, then queue or skip every due slot."""
        if not self._ready:
            await self.store.ensure()
            await self.leases.ensure()
            self._ready = True
        now = self.clock()
        previous_beat = await self.leases.last_beat(self.lease_name)
        holder = await self.leases.acquire(
            self.lease_name, self.owner, self.lease_seconds, now=now, pid=self.pid
        )
        if holder is not None:
            return TickReport(held_by=holder)
        report = TickReport()
        seen: set[str] = set()
        while True:
            batch = [s for s in await self.store.due(now, DUE_BATCH) if s.id not in seen]
            seen.update(s.id for s in batch)
            report.due += len(batch)
            await self._batch(batch, now, previous_beat, report)
            if len(batch) < DUE_BATCH:
                return report

    async def _batch(
        self, batch: list[Schedule], now: float, previous_beat: float | None, report: TickReport
    ) -> None:
        """Plan every due schedule, then three round trips for the whole batch: what
        jobs exist, the enqueue, and the swaps with their rows."""
        plans: list[tuple[Schedule, _Plan, set[str]]] = []
        for schedule in batch:
            when = self._when(schedule)
            if when is None:
                continue
            plan = _plan(when, schedule, now, previous_beat)
            slots = [r.slot for r in plan.rows] + ([plan.run] if plan.run is not None else [])
            plans.append((schedule, plan, {slot_job_id(schedule.id, x) for x in slots}))
        if not plans:
            return
        scripts = [serial_key(s.id) for s, _, _ in plans if s.kind == "script"]
        existing, active = await self.store.job_facts(
            [i for _, _, ids in plans for i in ids], scripts
        )
        to_queue: list[NewJob] = []
        swaps: list[tuple[str, float | None, float | None, list[SlotRun]]] = []
        for schedule, plan, ids in plans:
            rows = [
                # Enqueued before a crash: that slot ran, whatever this later look says.
                _queued(r.slot, schedule, slot_job_id(schedule.id, r.slot), now, "")
                if slot_job_id(schedule.id, r.slot) in existing
                else r
                for r in plan.rows
            ]
            if plan.run is not None:
                job_id = slot_job_id(schedule.id, plan.run)
                others = active.get(serial_key(schedule.id), set()) - ids
                if schedule.kind == "script" and others and job_id not in existing:
                    rows.append(
                        SlotRun(schedule.id, plan.run, "skipped", reason="still running", at=now)
                    )
                else:
                    to_queue.append(
                        NewJob(
                            job_id,
                            job_kind(schedule),
                            ScheduleSlot(schedule.id, plan.run),
                            serial_key=serial_key(schedule.id),
                            max_attempts=job_attempts(schedule),
                        )
                    )
                    rows.append(_queued(plan.run, schedule, job_id, now, plan.run_reason))
            swaps.append((schedule.id, schedule.next_run, plan.next_run, rows))
        for job_id in await self.queue.enqueue_many(to_queue):
            if self.on_enqueued is not None:
                await self.on_enqueued(job_id)
        for done, (_, _, _, rows) in zip(await self.store.advance_many(swaps), swaps, strict=True):
            if done:
                report.queued += sum(1 for r in rows if r.status == "queued")
                report.skipped += sum(1 for r in rows if r.status == "skipped")

    def _when(self, schedule: Schedule) -> When | None:
        key = (schedule.spec, schedule.created_at)
        when = self._whens.get(key)
        if when is None:
            try:
                when = self.schedules.when_of(schedule)
            except WhenError as exc:
                log.warning("schedule %s: %s; not ticked", schedule.id, exc)
                return None
            if len(self._whens) > 50_000:
                self._whens.clear()
            self._whens[key] = when
        return when


@dataclass
class _Plan:
    rows: list[SlotRun]  # the slots skipped, with why
    run: float | None  # the slot to run, if any
    run_reason: str
    next_run: float | None


def _queued(slot: float, schedule: Schedule, job_id: str, now: float, reason: str) -> SlotRun:
    return SlotRun(schedule.id, slot, "queued", reason=reason, job=job_id, at=now)


def _plan(when: When, schedule: Schedule, now: float, previous_beat: float | None) -> _Plan:
    """Which of the slots from next_run up to `now` runs, which are skipped and why."""
    cutoff = now - LATE_SECONDS
    late: list[float] = []
    first_unlisted: float | None = None  # late slots past SKIP_ROWS: one row stands for them
    newest_late: float | None = None
    slot = schedule.next_run
    steps = 0
    while slot is not None and slot < cutoff:
        newest_late = slot
        if len(late) < SKIP_ROWS:
            late.append(slot)
        elif first_unlisted is None:
            first_unlisted = slot
        steps += 1
        if steps >= MAX_SLOTS:
            # Jump to the last hour; the slots jumped over are in the unlisted row.
            first_unlisted = first_unlisted if first_unlisted is not None else slot
            slot = when.next_epoch(cutoff - 0.001)
            break
        slot = when.next_epoch(slot)
    in_time: list[float] = []
    while slot is not None and slot <= now:
        in_time.append(slot)
        slot = when.next_epoch(slot)
    run: float | None = None
    reason = ""
    if in_time:
        run = in_time[-1]
    elif newest_late is not None and schedule.missed == "once":
        run, reason = newest_late, "catch-up"
    suffix = " (one catch-up run done)" if reason else ""

    def cause(s: float) -> str:
        return ("down" if previous_beat is None or previous_beat < s else "late") + suffix

    rows = [SlotRun(schedule.id, s, "skipped", reason=cause(s), at=now) for s in late if s != run]
    if first_unlisted is not None and first_unlisted != run:
        end = dt.datetime.fromtimestamp(cutoff, dt.UTC).isoformat(timespec="minutes")
        rows.append(
            SlotRun(
                schedule.id,
                first_unlisted,
                "skipped",
                reason=f"{cause(first_unlisted)} (and every slot to {end})",
                at=now,
            )
        )
    rows += [SlotRun(schedule.id, s, "skipped", reason="late", at=now) for s in in_time[:-1]]
    return _Plan(rows, run, reason, slot)
