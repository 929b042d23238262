"""The schedule toolset: schedule_create, schedule_list, schedule_pause, schedule_resume
and schedule_delete (spec 000 "Schedules").

Every tool works on the calling agent's own schedules (`ctx.agent`): another agent's id
reads as "no such schedule", so an agent can neither see nor change it. The tools hold the
schedules (a `SchedulesAccess`) the runtime built them with, and schedule_create the
turn's chats (engine/toolkit/service_tool.py). schedule_create takes a
prompt, never a command: script schedules run shell commands unattended, so only the
owner adds them (`habakkuk schedules add --run`), and a body that names one is refused
with that reason. A schedule created in a chat keeps that chat as its origin, so its
results go back there. A refused or failed call (a `when` not understood, no such
schedule) is an error result, never a failed turn.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar

from habakkuk.engine.errors import NotFound
from habakkuk.engine.outbox_access import TurnChats
from habakkuk.engine.toolkit.permissions import Risk
from habakkuk.engine.toolkit.registry import Tool, ToolContext
from habakkuk.engine.toolkit.service_tool import ServiceTool

from .schedule_types import NewSchedule, Schedule, SchedulesAccess
from .schedule_views import fire_times, local_time, state_word

# Keys a model might use to smuggle a script into schedule_create.
COMMAND_KEYS = ("command", "cmd", "run", "script", "shell", "exec")
SCRIPTS_BY_OWNER = (
    "schedule_create takes a prompt, never a command: script schedules are added by the "
    "owner with `habakkuk schedules add --run`"
)
_ID = {"type": "string", "minLength": 1, "maxLength": 128}


# The running channels' outbox, or None while no channel runs in this process (the
# runtime makes them after its tools, and only where it serves chats).
ChatsOf = Callable[[], TurnChats | None]


class ScheduleTool(ServiceTool[SchedulesAccess]):
    """What the schedule tools share: the schedules, the agent's own schedules, errors
    (WhenError, ScheduleRefused, NotFound, bad input) as results."""

    unavailable: ClassVar[str] = "schedules are not available in this run"

    async def own(self, schedules: SchedulesAccess, schedule_id: str, agent: str) -> Schedule:
        """The agent's schedule `schedule_id`; another agent's reads as missing."""
        missing = NotFound(f"no such schedule {schedule_id!r}")
        try:
            schedule = await schedules.get(schedule_id)
        except NotFound:
            raise missing from None
        if schedule.agent != agent:
            raise missing
        return schedule

    def title(self, args: dict[str, Any]) -> str:
        return str(args.get("name") or args.get("id") or "")[:64]

    @abstractmethod
    async def act(self, schedules: SchedulesAccess, args: dict[str, Any], ctx: ToolContext) -> str:
        """Do the work; the text the model reads."""


class ScheduleChange(ScheduleTool):
    """A tool that changes the agent's own schedules: own state, like memory_save, so
    workspace mode runs it without asking, read-only denies it and ask mode asks."""

    risk: ClassVar[Risk] = Risk.WRITE
    own_state: ClassVar[bool] = True


def _line(schedule: Schedule, zone: str) -> str:
    """One schedule as schedule_list shows it."""
    parts = [
        f"- {schedule.id} {schedule.name!r} ({schedule.kind}, {state_word(schedule)})",
        f"when: {schedule.spec}",
        f"next: {local_time(schedule.next_run, zone)}",
    ]
    if schedule.last_run is not None:
        parts.append(
            f"last: {local_time(schedule.last_run, zone)} {schedule.last_status or ''}".strip()
        )
    if schedule.fail_streak:
        parts.append(f"failures in a row: {schedule.fail_streak}")
    if schedule.deliver_to:
        parts.append(f"delivers to {schedule.deliver_to}")
    return "; ".join(parts)


async def origin_of(chats: ChatsOf, ctx: ToolContext) -> str:
    """The conversation this turn answers to (its reply address, else the chat its
    session is bound to); "" outside a chat (the terminal, an unattended run)."""
    found = chats()
    if found is None:
        return ""
    return await found.chat_of(ctx.turn, ctx.session) or ""


class ScheduleCreate(ScheduleChange):
    name = "schedule_create"
    description = (
        "Schedule a prompt you will run on a timetable, each run in a fresh session. `when` "
        "is a 5-field cron expression ('0 8 * * 1-5': weekdays at 8:00), '@every 2h', "
        "'@hourly', '@daily', '@weekly', or a one-off 'at YYYY-MM-DD HH:MM', in the "
        "configured timezone. The results go to this chat, or to deliver_to "
        "(CHANNEL:CHAT[:THREAD]). The reply gives the next three fire times: check them. "
        "Runs are unattended: anything that needs approval is denied."
    )
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 100},
            "when": {"type": "string", "minLength": 1, "maxLength": 200},
            "prompt": {"type": "string", "minLength": 1, "maxLength": 20_000},
            "deliver_to": {"type": "string", "minLength": 3, "maxLength": 300},
        },
        "required": ["name", "when", "prompt"],
        "additionalProperties": False,
    }

    def __init__(self, schedules: SchedulesAccess | None, chats: ChatsOf) -> None:
        super().__init__(schedules)
        self.chats = chats

    def refuse_input(self, args: dict[str, Any]) -> str | None:
        if any(key in args for key in COMMAND_KEYS):
            return SCRIPTS_BY_OWNER
        return None

    async def act(self, schedules: SchedulesAccess, args: dict[str, Any], ctx: ToolContext) -> str:
        deliver_to = str(args.get("deliver_to") or "").strip() or None
        new = NewSchedule(
            agent=ctx.agent,
            name=str(args["name"]).strip(),
            when=str(args["when"]).strip(),
            prompt=str(args["prompt"]).strip(),
            deliver_to=deliver_to,
            origin=await origin_of(self.chats, ctx),
        )
        schedule = await schedules.add(new, by="agent")
        upcoming = schedules.preview(schedule.spec, count=3)
        where = schedule.deliver_to or schedule.origin or "the run's own session"
        return (
            f"Scheduled {schedule.id} {schedule.name!r} ({schedule.spec}).\n"
            f"Next runs: {fire_times(upcoming, ctx.timezone)}.\n"
            f"Results go to {where}."
        )


class ScheduleList(ScheduleTool):
    name = "schedule_list"
    description = (
        "List your schedules: id, name, when, whether paused, the next and last run and "
        "the last status."
    )
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {},
        "additionalProperties": False,
    }

    async def act(self, schedules: SchedulesAccess, args: dict[str, Any], ctx: ToolContext) -> str:
        found = await schedules.list_schedules(ctx.agent)
        if not found:
            return "You have no schedules."
        return "\n".join(_line(s, ctx.timezone) for s in found)


class SchedulePause(ScheduleChange):
    name = "schedule_pause"
    description = "Pause one of your schedules by id: its slots are skipped until resumed."
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"id": _ID},
        "required": ["id"],
        "additionalProperties": False,
    }

    async def act(self, schedules: SchedulesAccess, args: dict[str, Any], ctx: ToolContext) -> str:
        schedule = await self.own(schedules, str(args["id"]).strip(), ctx.agent)
        paused = await schedules.pause(schedule.id)
        return f"Paused {paused.id} {paused.name!r}."


class ScheduleResume(ScheduleChange):
    name = "schedule_resume"
    description = (
        "Resume one of your paused schedules by id, from now: slots missed while it was "
        "paused are not replayed."
    )
    input_schema: ClassVar[dict[str, Any]] = SchedulePause.input_schema

    async def act(self, schedules: SchedulesAccess, args: dict[str, Any], ctx: ToolContext) -> str:
        schedule = await self.own(schedules, str(args["id"]).strip(), ctx.agent)
        resumed = await schedules.resume(schedule.id)
        upcoming = local_time(resumed.next_run, ctx.timezone)
        return f"Resumed {resumed.id} {resumed.name!r}; next run {upcoming}."


class ScheduleDelete(ScheduleChange):
    name = "schedule_delete"
    description = "Delete one of your schedules by id."
    input_schema: ClassVar[dict[str, Any]] = SchedulePause.input_schema

    async def act(self, schedules: SchedulesAccess, args: dict[str, Any], ctx: ToolContext) -> str:
        schedule = await self.own(schedules, str(args["id"]).strip(), ctx.agent)
        await schedules.delete(schedule.id)
        return f"Deleted {schedule.id} {schedule.name!r}."


def schedule_tools(schedules: SchedulesAccess | None, chats: ChatsOf) -> list[Tool]:
    """The schedule toolset, on `schedules` (schedule_create keeps the turn's chat, from
    `chats`, as the schedule's origin)."""
    return [
        ScheduleCreate(schedules, chats),
        ScheduleList(schedules),
        SchedulePause(schedules),
        ScheduleResume(schedules),
        ScheduleDelete(schedules),
    ]
