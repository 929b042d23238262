"""`Schedules`: the home's schedules as every surface and tool uses them
(SchedulesAccess, habakkuk/work/schedule_types.py).

Jobs (the contract with the run handlers, habakkuk/work/{prompt,script}_runs.py):

- kind PROMPT_KIND "schedule.prompt" for a prompt schedule, SCRIPT_KIND
  "schedule.script" for a script schedule;
- payload a ScheduleSlot (work/run_book.py), stored {"schedule": ID, "slot":
  EPOCH_SECONDS, "extra": BOOL}: the slot is the fire time (an extra run: the time it was
  asked), which with (schedule, extra) names the SlotRun row (`ScheduleStore.set_run`)
  the handler updates;
- job id "<schedule id>_<int slot>" for a timetable slot (so "sch_<hex>_<slot>"),
  "<schedule id>_run_<hex>" for `run_now`; enqueue is idempotent by id, so a slot is
  queued at most once;
- serial key "schedule:<id>" (`serial_key`): one run of a schedule at a time;
- script slots are declared at most once to the queue (`JobKind`): one attempt, and a
  run cut short by a stop, a crash or a lost lease is never started again (a script
  may have side effects); prompt slots get PROMPT_ATTEMPTS. Either way a slot whose
  job the queue ended that way is recorded interrupted, with why
  (`record_interrupted_in`, in the transaction that ends the job).

Decisions: `delete` removes the schedule with its slot rows and cancels its queued
jobs (a running one is asked to stop; its handler finds no schedule and records
nothing). `resume` enables from now: the slots between are recorded as skipped
"paused" (at most SKIP_ROWS rows, then one row that says how many more).
"""

from __future__ import annotations

import datetime as dt
import secrets
import time
from collections.abc import Callable
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from habakkuk.engine.config import Config
from habakkuk.engine.errors import HabakkukError, NotFound
from habakkuk.engine.jobs import JobKind, JobQueue, at_most_once, declare_kind
from habakkuk.engine.leases import NamedLeases
from habakkuk.engine.store import Database
from habakkuk.work.run_book import ScheduleSlot
from habakkuk.work.schedule_types import (
    SCRIPT_TIMEOUT,
    TICK_LEASE,
    AddedBy,
    NewSchedule,
    Schedule,
    ScheduleRefused,
    SlotRun,
    WhenError,
)
from habakkuk.work.store import ScheduleStore, record_interrupted_in
from habakkuk.work.when import When, parse_when

if TYPE_CHECKING:
    from habakkuk.work.schedule_types import SchedulesAccess

PROMPT_KIND = "schedule.prompt"
SCRIPT_KIND = "schedule.script"
KINDS = (PROMPT_KIND, SCRIPT_KIND)
PROMPT_SLOTS: JobKind[ScheduleSlot] = declare_kind(
    JobKind(PROMPT_KIND, on_interrupted=record_interrupted_in, payload=ScheduleSlot, noun="slot")
)
SCRIPT_SLOTS: JobKind[ScheduleSlot] = declare_kind(
    JobKind(
        SCRIPT_KIND,
        at_most_once=True,
        on_interrupted=record_interrupted_in,
        payload=ScheduleSlot,
        noun="slot",
    )
)
PROMPT_ATTEMPTS = 3
SKIP_ROWS = 1000  # slots recorded one by one per skip run; past that, one summary row
ON_OUTPUT = ("deliver", "agent", "silent")
MISSED = ("skip", "once")


def serial_key(schedule_id: str) -> str:
    """The serial key every run of one schedule shares."""
    return f"schedule:{schedule_id}"


def slot_job_id(schedule_id: str, slot: float) -> str:
    """The job id of one timetable slot."""
    return f"{schedule_id}_{int(slot)}"


def job_kind(schedule: Schedule) -> str:
    return SCRIPT_KIND if schedule.kind == "script" else PROMPT_KIND


def job_attempts(schedule: Schedule) -> int:
    return 1 if at_most_once(job_kind(schedule)) else PROMPT_ATTEMPTS


def parse_deliver_to(text: str) -> tuple[str, str, str]:
    """`CHANNEL:CHAT[:THREAD]` -> (channel, chat, thread); for the web account everything
    after the first colon is the conversation. HabakkukError (one line) when malformed."""
    channel, sep, rest = text.partition(":")
    if channel == "web" and sep and rest:
        return channel, rest, ""
    parts = text.split(":")
    if len(parts) not in (2, 3) or not all(p.strip() for p in parts):
        raise HabakkukError(f"deliver_to {text!r}: not CHANNEL:CHAT[:THREAD] (e.g. telegram:123)")
    return parts[0], parts[1], parts[2] if len(parts) == 3 else ""


PARSED_KEPT = 20_000  # parsed timetables kept for when_of (cleared past that)


class Schedules:
    """SchedulesAccess on control.db: `db` is control.db (the queue's database);
    `clock` gives the time (tests inject a fake one)."""

    def __init__(
        self,
        db: Database,
        queue: JobQueue,
        config: Config,
        *,
        clock: Callable[[], float] = time.time,
    ):
        self.queue = queue
        self.config = config
        self.store = ScheduleStore(db)
        self.clock = clock
        self._ready = False
        self._parsed: dict[tuple[str, float], When] = {}

    @property
    def tz(self) -> ZoneInfo:
        return ZoneInfo(self.config.timezone)

    async def _store(self) -> ScheduleStore:
        if not self._ready:
            await self.store.ensure()
            self._ready = True
        return self.store

    def when_of(self, schedule: Schedule) -> When:
        """The parsed timetable of a stored schedule (WhenError when it no longer parses);
        kept by (spec, creation), since the screen asks for every schedule's fire times."""
        key = (schedule.spec, schedule.created_at)
        when = self._parsed.get(key)
        if when is None:
            if len(self._parsed) >= PARSED_KEPT:
                self._parsed.clear()
            when = self._parsed[key] = parse_when(
                schedule.spec, self.tz, anchor=schedule.created_at
            )
        return when

    # -- SchedulesAccess ---------------------------------------------------------------

    async def add(self, new: NewSchedule, *, by: AddedBy) -> Schedule:
        """Store a schedule; WhenError, ScheduleRefused, NotFound, HabakkukError."""
        if new.command is not None and by != "owner":
            raise ScheduleRefused(
                "schedule: a command can only be added by the owner (habakkuk schedules add --run)"
            )
        # No agent named: the default agent, for every surface (the CLI, the API, the form).
        agent = new.agent or self.config.default_agent or ""
        if agent not in self.config.agents:
            known = ", ".join(sorted(self.config.agents)) or "none"
            raise NotFound(f"schedule: no agent {agent!r} (agents: {known})")
        name = new.name.strip()
        if not name:
            raise HabakkukError("schedule: name is empty")
        if new.command is not None and not new.command.strip():
            raise HabakkukError("schedule: command is empty")
        if new.command is None and not new.prompt.strip():
            raise HabakkukError("schedule: prompt is empty")
        if new.on_output not in ON_OUTPUT:
            raise HabakkukError(f"schedule: on_output {new.on_output!r}: use deliver|agent|silent")
        if new.missed not in MISSED:
            raise HabakkukError(f"schedule: missed {new.missed!r}: use skip|once")
        if not new.timeout_seconds > 0:
            raise HabakkukError("schedule: timeout must be more than 0 seconds")
        if new.deliver_to is not None:
            parse_deliver_to(new.deliver_to)
        now = self.clock()
        when = parse_when(new.when, self.tz, anchor=now, now=dt.datetime.fromtimestamp(now, dt.UTC))
        schedule = Schedule(
            id="sch_" + secrets.token_hex(6),
            agent=agent,
            name=name,
            spec=when.spec,
            prompt=new.prompt,
            command=new.command,
            on_output=new.on_output,
            deliver_to=new.deliver_to,
            workdir=new.workdir,
            timeout_seconds=new.timeout_seconds if new.command is not None else SCRIPT_TIMEOUT,
            missed=new.missed,
            enabled=True,
            next_run=when.next_epoch(now),
            last_run=None,
            last_status="",
            last_output="",
            fail_streak=0,
            created_at=now,
            origin=new.origin,
        )
        clash = await (await self._store()).insert(schedule)
        if clash is not None:
            raise HabakkukError(
                f"schedule: agent {agent} already has a schedule named {name!r} ({clash}); "
                "pick another name, or remove that one first"
            )
        return schedule

    async def list_schedules(self, agent: str | None = None) -> list[Schedule]:
        return await (await self._store()).all(agent)

    async def get(self, schedule_id: str) -> Schedule:
        found = await (await self._store()).get(schedule_id)
        if found is None:
            raise NotFound(f"no such schedule {schedule_id!r}")
        return found

    async def find(self, ref: str) -> Schedule:
        ref = ref.strip()
        store = await self._store()
        found = await store.get(ref)
        if found is not None:
            return found
        named = await store.named(ref)
        if len(named) == 1:
            return named[0]
        if not named:
            raise NotFound(f"no schedule has the id or name {ref!r}")

        def added(schedule: Schedule) -> str:
            return f"{dt.datetime.fromtimestamp(schedule.created_at, self.tz):%Y-%m-%d %H:%M}"

        listed = "; ".join(f"{s.id} (agent {s.agent}, added {added(s)})" for s in named)
        raise HabakkukError(f"{ref!r} names {len(named)} schedules: {listed}; give the id")

    async def ticker(self) -> str | None:
        leases = NamedLeases(self.queue.db)
        await leases.ensure()
        return await leases.live_holder(TICK_LEASE, now=self.clock())

    async def runs(self, schedule_id: str, *, limit: int = 50) -> list[SlotRun]:
        await self.get(schedule_id)
        return await self.store.runs(schedule_id, limit=limit)

    async def run_now(self, schedule_id: str) -> str:
        schedule = await self.get(schedule_id)
        slot = self.clock()
        job_id = f"{schedule.id}_run_{secrets.token_hex(4)}"
        await self.queue.enqueue(
            job_id,
            job_kind(schedule),
            ScheduleSlot(schedule.id, slot, extra=True),
            serial_key=serial_key(schedule.id),
            max_attempts=job_attempts(schedule),
        )
        await self.store.add_runs(
            [SlotRun(schedule.id, slot, "queued", job=job_id, extra=True, at=slot)]
        )
        return job_id

    async def pause(self, schedule_id: str) -> Schedule:
        await self.get(schedule_id)
        await self.store.set_enabled(schedule_id, False)
        return await self.get(schedule_id)

    async def resume(self, schedule_id: str) -> Schedule:
        """Enable from now: the slots missed while paused are recorded, not replayed."""
        for _ in range(5):  # the CAS loses only to a concurrent resume or tick
            schedule = await self.get(schedule_id)
            if schedule.enabled:
                return schedule
            now = self.clock()
            when = self.when_of(schedule)
            skipped, _ = skipped_slots(when, schedule, schedule.next_run, now, "paused")
            # A slot enqueued just before the pause (a tick that died before its swap)
            # ran: record it queued, not paused.
            ids = [slot_job_id(schedule.id, r.slot) for r in skipped]
            existing, _ = await self.store.job_facts(ids, [])
            skipped = [
                SlotRun(r.schedule, r.slot, "queued", job=job_id, at=now)
                if job_id in existing
                else r
                for r, job_id in zip(skipped, ids, strict=True)
            ]
            new_next = when.next_epoch(now) if schedule.next_run is not None else None
            if await self.store.advance(
                schedule.id, schedule.next_run, new_next, rows=skipped, enable=True
            ):
                return await self.get(schedule_id)
        raise HabakkukError(f"schedule {schedule_id}: changed while resuming; try again")

    async def delete(self, schedule_id: str) -> None:
        await self.get(schedule_id)
        for job in await self.queue.active_for(serial_key(schedule_id)):
            await self.queue.cancel(job.id)
        await self.store.delete(schedule_id)

    def preview(self, when: str, *, count: int = 3) -> list[dt.datetime]:
        now = dt.datetime.fromtimestamp(self.clock(), dt.UTC)
        parsed = parse_when(when, self.tz, anchor=now.timestamp(), now=now)
        return parsed.upcoming(now, count)

    def upcoming(self, schedule: Schedule, *, count: int = 3) -> list[dt.datetime]:
        if not schedule.enabled or schedule.next_run is None:
            return []
        try:
            when = self.when_of(schedule)
        except WhenError:
            return []
        first = dt.datetime.fromtimestamp(schedule.next_run, dt.UTC)
        # next_run itself, then the slots after it.
        return [first.astimezone(self.tz), *when.upcoming(first, count - 1)][:count]

    def reading(self, schedule: Schedule) -> str:
        try:
            return self.when_of(schedule).reading()
        except WhenError:
            return schedule.spec

    async def counts(self) -> tuple[int, int]:
        return await (await self._store()).counts()


def skipped_slots(
    when: When, schedule: Schedule, first: float | None, until: float, reason: str
) -> tuple[list[SlotRun], float | None]:
    """SlotRun rows "skipped: reason" for the slots from `first` up to `until`
    (inclusive), and the first slot after `until`. At most SKIP_ROWS rows: past that,
    one more row at the next slot says how far the skipped run went."""
    rows: list[SlotRun] = []
    slot = first
    while slot is not None and slot <= until:
        if len(rows) == SKIP_ROWS:
            end = dt.datetime.fromtimestamp(until, dt.UTC).isoformat(timespec="minutes")
            rows.append(
                SlotRun(
                    schedule.id,
                    slot,
                    "skipped",
                    reason=f"{reason} (and every slot to {end})",
                    at=until,
                )
            )
            return rows, when.next_epoch(until)
        rows.append(SlotRun(schedule.id, slot, "skipped", reason=reason, at=until))
        slot = when.next_epoch(slot)
    return rows, slot


def _implements_schedules_access(schedules: Schedules) -> SchedulesAccess:
    """mypy checks here that `Schedules` satisfies the Protocol every surface uses."""
    return schedules
