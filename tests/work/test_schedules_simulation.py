"""Days of a fake clock on real control and the real JobQueue, on both engines: schedules
of every kind (cron, shorthands, @every, a one-off, scripts), two processes (or nodes)
ticking the same home plus one that ignores the lease, random kill -9 of a ticker
between enqueue and the compare-and-swap, two days of downtime and a DST change. At the
end: 0 slots doubled (each job id once, each slot one row, each job run once) and 0
slots without a job or a recorded reason.

SQLite lives thirty days. PostgreSQL lives six around the same DST change (every tick
is a few round trips to the server, and thirty days of them would take minutes): the
same guards, the same checks."""

from __future__ import annotations

import asyncio
import datetime as dt
import random
from zoneinfo import ZoneInfo

import pytest

from habakkuk.engine.home import Home
from habakkuk.engine.jobs import JobQueue, Lease
from habakkuk.engine.storage import Storage
from habakkuk.work.schedule_types import Missed, NewSchedule
from habakkuk.work.scheduler import Scheduler
from habakkuk.work.service import KINDS, slot_job_id
from habakkuk.work.store import ScheduleStore
from habakkuk.work.when import parse_when
from tests.work.schedules_env import Control, FakeClock, config_in, open_node

DAY = 86400.0


class Killed(Exception):
    """kill -9 of the ticking process, between an enqueue and its compare-and-swap."""


class Worker:
    """Runs the schedule jobs the way the run handlers do: claim, record the slot's
    outcome under the lease, complete. Scripts sometimes outlive a tick."""

    def __init__(self, queue: JobQueue, store: ScheduleStore, rng: random.Random):
        self.queue, self.store, self.rng = queue, store, rng
        self.runs: dict[str, int] = {}
        self.held: list[Lease] = []

    async def step(self, *, drain: bool = False) -> None:
        for held in self.held:
            await self.queue.complete(held)
        self.held = []
        while (lease := await self.queue.claim(KINDS)) is not None:
            job = lease.job
            self.runs[job.id] = self.runs.get(job.id, 0) + 1
            payload = job.payload
            await self.store.set_run(
                payload["schedule"],
                payload["slot"],
                "ran",
                extra=payload["extra"],
                job=job.id,
                lease=lease,
            )
            if job.kind == "schedule.script" and not drain and self.rng.random() < 0.3:
                self.held.append(lease)  # still running at the next tick
                continue
            await self.queue.complete(lease)


def schedules_for(start: dt.datetime) -> list[NewSchedule]:
    one_off = (start + dt.timedelta(days=5, hours=3)).strftime("at %Y-%m-%d %H:%M")
    made: list[tuple[str, str, str | None, Missed]] = [
        ("half-hourly", "*/30 * * * *", None, "skip"),
        ("gap", "30 2 * * *", None, "skip"),
        ("fold", "30 1 * * *", None, "once"),
        ("weekdays", "0 8 * * 1-5", None, "once"),
        ("two-hourly", "@every 2h", None, "skip"),
        ("hourly", "@hourly", None, "once"),
        ("once", one_off, None, "skip"),
        ("sync", "@every 45m", "true", "skip"),
        ("inbox", "*/20 * * * *", "true", "once"),
    ]
    return [
        NewSchedule(agent="main", name=name, when=when, prompt="go", command=command, missed=missed)
        for name, when, command, missed in made
    ]


@pytest.mark.parametrize(
    ("zone", "start"),
    [
        ("Europe/Paris", dt.datetime(2026, 3, 15, 9, 7)),  # spring forward on 29 March
        ("America/New_York", dt.datetime(2026, 10, 15, 9, 7)),  # fall back on 1 November
    ],
)
async def test_thirty_days_never_double_a_slot_or_miss_one_in_silence(
    home: Home, storage: Storage, zone: str, start: dt.datetime
) -> None:
    tz = ZoneInfo(zone)
    rng = random.Random(f"{zone}-16")
    days = 30 if storage.dialect == "sqlite" else 6
    if days < 30:
        start += dt.timedelta(days=13)  # the DST change stays in the window
    clock = FakeClock(start.replace(tzinfo=tz).timestamp())
    end = clock.now + days * DAY
    config = config_in(home, zone)
    processes: list[Control] = [await open_node(storage, config, clock) for _ in range(3)]
    admin = processes[0]
    worker = Worker(admin.queue, admin.schedules.store, rng)
    kills = 0

    async def maybe_die(job_id: str) -> None:
        if rng.random() < 0.08:
            raise Killed(job_id)

    def ticker(i: int) -> Scheduler:
        # The third process ignores the lease (a clock-skewed or misconfigured peer): only
        # the compare-and-swap and the job ids keep it from doubling a slot.
        name = "schedules:rogue" if i == 2 else "schedules:tick"
        return Scheduler(
            processes[i].schedules, clock=clock, on_enqueued=maybe_die, lease_name=name
        )

    tickers = [ticker(i) for i in range(3)]
    try:
        added = [await admin.schedules.add(new, by="owner") for new in schedules_for(start)]
        downtime_at = clock.now + min(10, days // 3) * DAY
        while clock.now < end:
            clock.advance(rng.uniform(120, 40 * 60))
            if downtime_at <= clock.now:
                clock.advance(2 * DAY + 3 * 3600)  # the machine was off
                downtime_at = float("inf")
            order = rng.sample(range(3), rng.choice((1, 2, 3)))
            results = await asyncio.gather(
                *(tickers[i].tick() for i in order), return_exceptions=True
            )
            for i, result in zip(order, results, strict=True):
                if isinstance(result, Killed):
                    kills += 1
                    tickers[i] = ticker(i)  # the dead process is gone; a new one starts
                elif isinstance(result, BaseException):
                    raise result
            if rng.random() < 0.6:  # else the workers are busy: jobs wait past the next tick
                await worker.step()
        for t in tickers:
            t.on_enqueued = None
        # A last tick by the process holding the lease (whichever of the two that is),
        # so a slot a killed ticker enqueued without its swap is recorded before the count.
        finals = [await t.tick() for t in tickers[:2]]
        assert [r.held_by is None for r in finals].count(True) == 1
        await worker.step(drain=True)

        doubled: list[str] = []
        silent: list[str] = []
        reasons: set[str] = set()
        jobs = {r["id"] for r in await admin.db.fetchall("SELECT id FROM jobs")}
        for original in added:
            schedule = await admin.schedules.get(original.id)
            when = parse_when(schedule.spec, tz, anchor=schedule.created_at)
            horizon = schedule.next_run if schedule.next_run is not None else clock.now
            expected: list[float] = []
            slot = when.next_epoch(schedule.created_at)
            while slot is not None and slot < horizon:
                expected.append(slot)
                slot = when.next_epoch(slot)
            rows = [
                r for r in await admin.schedules.runs(schedule.id, limit=100_000) if not r.extra
            ]
            by_slot = {r.slot: r for r in rows}
            if len(by_slot) != len(rows):
                doubled.append(f"{schedule.name}: a slot with two rows")
            for slot in expected:
                row = by_slot.get(slot)
                if row is None:
                    silent.append(f"{schedule.name}: slot {slot} has no row")
                elif row.status == "skipped":
                    reasons.add(row.reason)
                    if not row.reason:
                        silent.append(f"{schedule.name}: slot {slot} skipped without a reason")
                    if slot_job_id(schedule.id, slot) in jobs:
                        doubled.append(f"{schedule.name}: slot {slot} skipped but has a job")
                elif row.job != slot_job_id(schedule.id, slot) or row.job not in jobs:
                    silent.append(f"{schedule.name}: slot {slot} {row.status} without its job")
            unexpected = set(by_slot) - set(expected)
            if unexpected:
                doubled.append(f"{schedule.name}: rows for slots off the timetable {unexpected}")
            mine = {j for j in jobs if j.startswith(schedule.id + "_")}
            ran = {r.job for r in rows if r.status != "skipped"}
            if mine != ran:
                doubled.append(f"{schedule.name}: jobs {sorted(mine ^ ran)} without their row")
        twice = {job: n for job, n in worker.runs.items() if n != 1}
        assert doubled == [] and silent == [] and twice == {}
        assert set(worker.runs) == jobs  # every job ran, once
        assert kills >= 3
        assert {"down", "still running"} <= reasons
        gap_rows = [r for r in await admin.schedules.runs(added[1].id, limit=1000)]
        assert days - 1 <= len(gap_rows) <= days + 1  # once a day, the DST day included
    finally:
        for process in processes:
            await process.close()
