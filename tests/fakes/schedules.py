"""An in-memory SchedulesAccess on a fixed clock, for the surfaces' tests (the HTTP API,
the MCP tool, the Schedules screen and its benchmark) while they are built beside the
real service: it keeps the contract's rules the surfaces depend on (NotFound, WhenError
for a bare `30m`, ScheduleRefused for a command not added by the owner)."""

from __future__ import annotations

import datetime as dt
import itertools
from dataclasses import replace
from zoneinfo import ZoneInfo

from croniter import croniter

from habakkuk.engine.errors import HabakkukError, NotFound
from habakkuk.work.schedule_types import (
    AddedBy,
    NewSchedule,
    Schedule,
    ScheduleRefused,
    SlotRun,
    WhenError,
)

# Tue 2026-12-01 07:00 in UTC: every fire time the tests see derives from it.
NOW = dt.datetime(2026, 12, 1, 7, 0, tzinfo=dt.UTC).timestamp()
ALIASES = {"@hourly": "0 * * * *", "@daily": "0 0 * * *", "@weekly": "0 0 * * 0"}


class FakeSchedules:
    """Schedules in a dict; `preview` reads cron, the aliases and `@every Nh|Nm`."""

    def __init__(self, timezone: str = "UTC", now: float = NOW) -> None:
        self.zone = ZoneInfo(timezone)
        self.now = now
        self.items: dict[str, Schedule] = {}
        self.slots: dict[str, list[SlotRun]] = {}
        self.queued: list[str] = []
        # The process a test says runs the timetable (None: nothing serves).
        self.ticking: str | None = None
        self._ids = itertools.count(1)

    def upcoming(self, schedule: Schedule, *, count: int = 3) -> list[dt.datetime]:
        if not schedule.enabled or schedule.next_run is None:
            return []
        first = dt.datetime.fromtimestamp(schedule.next_run, self.zone)
        later = [t for t in self.preview(schedule.spec, count=count) if t > first]
        return [first, *later][:count]

    def preview(self, when: str, *, count: int = 3) -> list[dt.datetime]:
        start = dt.datetime.fromtimestamp(self.now, self.zone)
        text = " ".join(when.split())
        if text.startswith("@every "):
            amount = text[7:]
            units = {"h": 3600, "m": 60}
            if amount[:-1].isdigit() and amount[-1:] in units:
                step = int(amount[:-1]) * units[amount[-1]]
                return [start + dt.timedelta(seconds=step * (n + 1)) for n in range(count)]
            raise WhenError(f"when: {when!r}: @every takes a duration such as 2h or 30m")
        text = ALIASES.get(text, text)
        if len(text.split()) != 5 or not croniter.is_valid(text):
            if text[:-1].isdigit() and text[-1:] in "hm":
                raise WhenError(f"when: {when!r} could mean '@every {text}' or 'in {text}'")
            raise WhenError(f"when: {when!r} is not a cron expression, @every, @daily or at")
        it = croniter(text, start)
        return [it.get_next(dt.datetime) for _ in range(count)]

    async def add(self, new: NewSchedule, *, by: AddedBy) -> Schedule:
        if new.command is not None and by != "owner":
            raise ScheduleRefused("only the owner adds script schedules (habakkuk schedules add)")
        first = self.preview(new.when, count=1)
        schedule = Schedule(
            id=f"sch_{next(self._ids):04x}",
            agent=new.agent,
            name=new.name,
            spec=" ".join(new.when.split()),
            prompt=new.prompt,
            command=new.command,
            on_output=new.on_output,
            deliver_to=new.deliver_to,
            workdir=new.workdir,
            timeout_seconds=new.timeout_seconds,
            missed=new.missed,
            enabled=True,
            next_run=first[0].timestamp() if first else None,
            last_run=None,
            last_status="",
            last_output="",
            fail_streak=0,
            created_at=self.now,
            origin=new.origin,
        )
        self.items[schedule.id] = schedule
        self.slots[schedule.id] = []
        return schedule

    def put(self, schedule: Schedule, slots: list[SlotRun] | None = None) -> None:
        """Store a schedule as a test built it (a last status, a streak, its slots)."""
        self.items[schedule.id] = schedule
        self.slots[schedule.id] = list(slots or [])

    async def list_schedules(self, agent: str | None = None) -> list[Schedule]:
        found = [s for s in self.items.values() if agent is None or s.agent == agent]
        return sorted(found, key=lambda s: (not s.enabled, s.next_run or float("inf"), s.id))

    async def get(self, schedule_id: str) -> Schedule:
        if schedule_id not in self.items:
            raise NotFound(f"schedule {schedule_id!r} does not exist")
        return self.items[schedule_id]

    async def find(self, ref: str) -> Schedule:
        ref = ref.strip()
        if ref in self.items:
            return self.items[ref]
        named = [s for s in self.items.values() if s.name == ref]
        if not named:
            raise NotFound(f"no schedule has the id or name {ref!r}")
        if len(named) > 1:
            listed = "; ".join(f"{s.id} (agent {s.agent})" for s in named)
            raise HabakkukError(f"{ref!r} names {len(named)} schedules: {listed}; give the id")
        return named[0]

    async def ticker(self) -> str | None:
        return self.ticking

    def reading(self, schedule: Schedule) -> str:
        """The spec as written: the fake does not put `when` into words."""
        return schedule.spec

    async def runs(self, schedule_id: str, *, limit: int = 50) -> list[SlotRun]:
        await self.get(schedule_id)
        return sorted(self.slots[schedule_id], key=lambda r: -r.slot)[:limit]

    async def run_now(self, schedule_id: str) -> str:
        await self.get(schedule_id)
        job = f"{schedule_id}_run_{len(self.queued):04x}"
        self.queued.append(job)
        self.slots[schedule_id].append(
            SlotRun(schedule_id, self.now, "queued", job=job, extra=True, at=self.now)
        )
        return job

    async def pause(self, schedule_id: str) -> Schedule:
        schedule = replace(await self.get(schedule_id), enabled=False)
        self.items[schedule_id] = schedule
        return schedule

    async def resume(self, schedule_id: str) -> Schedule:
        schedule = await self.get(schedule_id)
        times = self.preview(schedule.spec, count=1)
        schedule = replace(schedule, enabled=True, next_run=times[0].timestamp())
        self.items[schedule_id] = schedule
        return schedule

    async def delete(self, schedule_id: str) -> None:
        await self.get(schedule_id)
        del self.items[schedule_id]
        del self.slots[schedule_id]

    async def counts(self) -> tuple[int, int]:
        return len(self.items), sum(s.enabled for s in self.items.values())
