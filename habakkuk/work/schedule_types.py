"""Schedules' values and the narrow Protocol every surface and tool uses (spec 000
"Schedules", spec 001 "Schedules").

A schedule is a prompt (or, added by the owner through the CLI only, a script) on a
timetable: `when` is a 5-field cron expression, `@every 2h`, `@hourly`, `@daily`,
`@weekly`, or `at YYYY-MM-DD HH:MM`, read in the config timezone. Each due slot becomes
one job whose id is the schedule plus the slot time, so a slot runs at most once; every
slot that does not run is a `SlotRun` row with its reason, never silence.

Errors are HabakkukError subclasses with one-line messages: NotFound (no such schedule
or agent), WhenError (a `when` that is not understood or could be read two ways: the
message gives the reading(s) it could mean), ScheduleRefused (a command from an agent or
the API, another agent's schedule), HabakkukError for other bad input.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Literal, Protocol

from habakkuk.engine.errors import HabakkukError

ScheduleKind = Literal["prompt", "script"]
OnOutput = Literal["deliver", "agent", "silent"]
Missed = Literal["skip", "once"]  # after downtime: skip every missed slot, or run one
# Who adds: the owner (CLI: may add scripts), an agent (schedule_create), the HTTP API.
AddedBy = Literal["owner", "agent", "api"]
# A slot's outcome. queued/running while its job lives; ran (a prompt's turn finished,
# a script exited 0); failed (non-zero exit, timeout, failed turn); delivery_failed (ran,
# but its message could not be delivered); skipped (not run: see `reason`: "late" (more
# than an hour late), "paused", "still running", "down" (Habakkuk was not running),
# "one catch-up run done"); interrupted (Habakkuk stopped or died while it ran: see
# `reason`; a script is never started again); missed is not used: every not-run slot
# is skipped with a reason.
SlotStatus = Literal[
    "queued", "running", "ran", "failed", "delivery_failed", "skipped", "interrupted"
]

# The named lease (control.db, engine/leases.py) of the one process per home that ticks
# the schedules: `habakkuk --serve` or the terminal app.
TICK_LEASE = "schedules:tick"
LATE_SECONDS = 3600.0  # a slot more than this late is skipped, not run late
TICK_SECONDS = 15.0  # the shortest @every: no schedule fires more often than this
# How often a ticker looks, and how long its lease lasts without a renewal. A kill -9
# of the holder (another machine's: no pid check there) is noticed when the lease runs
# out, by whichever ticker looks next: within FAILOVER_SECONDS + POLL_SECONDS (14 s).
POLL_SECONDS = 4.0
FAILOVER_SECONDS = 10.0
SCRIPT_TIMEOUT = 120.0
OUTPUT_CAP = 64 * 1024  # stdout and stderr each, per script run
KEPT_OUTPUT = 4096  # the end of the output kept on the schedule
FAILURE_NOTICE_AT = 3  # the third failure in a row sends one notice


class WhenError(HabakkukError):
    """`when` is not understood, or is ambiguous (the message says what it could mean)."""


class ScheduleRefused(HabakkukError):
    """The caller may not do this (a command from an agent or the API, another agent's
    schedule)."""


@dataclass(frozen=True)
class NewSchedule:
    """What `add` takes. `command` makes it a script schedule (owner only); `prompt` is
    then the prompt an `agent` on_output runs with the output appended."""

    agent: str  # "": the default agent
    name: str
    when: str
    prompt: str = ""
    command: str | None = None
    on_output: OnOutput = "deliver"
    deliver_to: str | None = None  # CHANNEL:CHAT[:THREAD]; None: stays in the run's session
    workdir: str | None = None  # scripts: default the agent's workspace; relative inside it
    timeout_seconds: float = SCRIPT_TIMEOUT
    missed: Missed = "skip"
    origin: str = ""  # the conversation it was created from ("telegram:123", "web:w1", "")


@dataclass(frozen=True)
class Schedule:
    """One stored schedule (spec 001's shape, plus what the screen and CLI show)."""

    id: str  # "sch_" + hex
    agent: str
    name: str
    spec: str  # the `when` as given, normalised
    prompt: str
    command: str | None
    on_output: OnOutput
    deliver_to: str | None
    workdir: str | None
    timeout_seconds: float
    missed: Missed
    enabled: bool
    next_run: float | None  # epoch seconds; None when a one-off has fired
    last_run: float | None
    last_status: str  # "", "ok", "error: ...", "skipped: ...", "delivery failed: ..."
    last_output: str  # the last KEPT_OUTPUT bytes of a script's output (or the reply)
    fail_streak: int
    created_at: float
    origin: str = ""

    @property
    def kind(self) -> ScheduleKind:
        return "script" if self.command is not None else "prompt"


@dataclass(frozen=True)
class SlotRun:
    """What happened to one slot of one schedule (`habakkuk schedules runs ID`)."""

    schedule: str
    slot: float  # the fire time, epoch seconds (an extra run: the time it was asked)
    status: SlotStatus
    reason: str = ""  # why it was skipped or failed, or what delivery said
    job: str = ""  # the job id ("sch_<id>_<slot>", or "sch_<id>_run_<hex>" for run now)
    session: str = ""  # the run's session (prompt runs, agent on_output)
    delivered: bool | None = None  # None: nothing to deliver
    extra: bool = False  # queued by `schedules run ID`, not by the timetable
    at: float = 0.0  # when this row last changed


class SchedulesAccess(Protocol):
    """The home's schedules as every surface and tool uses them."""

    async def add(self, new: NewSchedule, *, by: AddedBy) -> Schedule:
        """Store a schedule (WhenError, ScheduleRefused for a command unless by owner,
        HabakkukError for a name its agent already uses)."""
        ...

    async def list_schedules(self, agent: str | None = None) -> list[Schedule]:
        """Every schedule (of `agent`), the next to run first, paused and spent last."""
        ...

    async def get(self, schedule_id: str) -> Schedule:
        """One schedule; NotFound."""
        ...

    async def find(self, ref: str) -> Schedule:
        """A schedule by its id, else by its name (of any agent): NotFound when neither
        matches, HabakkukError naming each one when the name is shared (older homes may
        hold duplicates)."""
        ...

    async def ticker(self) -> str | None:
        """The live process that runs the timetable and queued runs' ticks (`--serve`
        or the terminal app, through TICK_LEASE), or None when nothing serves."""
        ...

    async def runs(self, schedule_id: str, *, limit: int = 50) -> list[SlotRun]:
        """Its slots, newest first: ran, failed, skipped and why, delivered or not."""
        ...

    async def run_now(self, schedule_id: str) -> str:
        """Queue one extra run under its own job id; the job id."""
        ...

    async def pause(self, schedule_id: str) -> Schedule: ...

    async def resume(self, schedule_id: str) -> Schedule:
        """Enable again from now: slots missed while paused are recorded, not replayed."""
        ...

    async def delete(self, schedule_id: str) -> None: ...

    def preview(self, when: str, *, count: int = 3) -> list[dt.datetime]:
        """The next `count` fire times of `when` from now, in the config timezone
        (WhenError when it is not understood or ambiguous). Pure: the form calls it
        as the user types."""
        ...

    def upcoming(self, schedule: Schedule, *, count: int = 3) -> list[dt.datetime]:
        """A stored schedule's next `count` fire times, from its next_run ([] when paused,
        spent or no longer understood): `@every` counts from its creation, so this is not
        `preview` of its spec from now."""
        ...

    def reading(self, schedule: Schedule) -> str:
        """How its `when` was understood, in words ("every 5 minutes"; the spec itself
        when it no longer parses)."""
        ...

    async def counts(self) -> tuple[int, int]:
        """(total, enabled), for the overview."""
        ...
