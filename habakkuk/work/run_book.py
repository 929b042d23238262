"""What a slot's run reads and writes, and the ids that derive from its job.

The run handlers (prompt_runs, script_runs) and the delivery watcher depend on this
narrow Protocol, not on the store: `RunBook` is the schedules store as a run sees it
(the schedule, its SlotRun row, its last_* fields). Every id a run makes (its session,
its turn, its deliveries) derives from the slot's job id, which is the schedule plus
the slot time, so a retried job finds what the first attempt made and never posts twice.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from habakkuk.engine import payloads
from habakkuk.engine.payloads import JsonObject
from habakkuk.work.schedule_types import Schedule, SlotStatus

SCHEDULE_ORIGIN = "schedule"
DELIVERY_PREFIX = "sched:"  # a script's output and notices: sched:<job>[:notice]
REPLY_PREFIX = "reply:turn_"  # channels.deliveries.reply_id of a run's turn
SLOT_JOB_PREFIX = "sch_"
WEB_ACCOUNT = "web"  # the web chat's account (work.service.parse_deliver_to reads it so)


@dataclass(frozen=True)
class Settled:
    """The end of one run: its SlotRun row and what the schedule keeps."""

    status: SlotStatus
    reason: str = ""
    session: str = ""
    delivered: bool | None = None  # None: not known here (its delivery settles it)
    last_status: str = ""  # "ok", "error: ...", ...
    last_output: str = ""
    fail_streak: int = 0


class RunBook(Protocol):
    """The schedules store as a slot's run uses it."""

    async def get(self, schedule_id: str) -> Schedule:
        """The schedule; NotFound once it is deleted."""
        ...

    async def run_started(self, job: str, *, session: str = "") -> None:
        """The slot's row: running (with its session once there is one)."""
        ...

    async def run_settled(self, job: str, settled: Settled) -> None:
        """The slot's row and the schedule's last_run/last_status/last_output/fail_streak.

        A delivery outcome already recorded (its delivery may settle first) is kept.
        """
        ...

    async def delivery_settled(self, job: str, *, delivered: bool, reason: str = "") -> None:
        """The slot's delivery ended: delivered, or delivery_failed with the reason."""
        ...


@dataclass(frozen=True)
class ScheduleSlot:
    """A slot job's payload (the kinds schedule.prompt and schedule.script, work/service.py):
    the schedule, the slot's fire time (an extra run's: when it was asked) and whether it
    is an extra run (`run_now`); with the schedule and `extra`, the slot names the SlotRun
    row the run updates. Stored as {"schedule", "slot", "extra"}; the oldest rows named
    the schedule "schedule_id"."""

    schedule: str
    slot: float = 0.0
    extra: bool = False

    def to_json(self) -> JsonObject:
        return {"schedule": self.schedule, "slot": self.slot, "extra": self.extra}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ScheduleSlot:
        key = "schedule" if data.get("schedule") is not None else "schedule_id"
        schedule = payloads.text(data, key, "")
        if not schedule:
            raise payloads.PayloadError("schedule", "missing")
        return cls(schedule, payloads.number(data, "slot", 0.0), payloads.flag(data, "extra"))


def session_id_for(job: str) -> str:
    """The run's session: one per slot job, the same on a retry."""
    return "ses_" + hashlib.sha256(f"schedule\0{job}".encode()).hexdigest()[:16]


def turn_id_for(job: str) -> str:
    """The run's turn (a prompt run, or an `agent` script's output)."""
    return f"turn_{job}"


def delivery_id_for(job: str, what: str = "") -> str:
    """A script run's delivery: its output (`what` empty) or a notice."""
    return f"{DELIVERY_PREFIX}{job}" + (f":{what}" if what else "")


def job_of_delivery(delivery_job: str) -> tuple[str, bool] | None:
    """(the slot job, is its main message) of a run's delivery job id, else None."""
    if delivery_job.startswith(REPLY_PREFIX):
        job, main = delivery_job.removeprefix(REPLY_PREFIX), True
    elif delivery_job.startswith(DELIVERY_PREFIX):
        job, _, what = delivery_job.removeprefix(DELIVERY_PREFIX).partition(":")
        main = not what
    else:
        return None
    # Slot jobs are "sch_<id>_<slot>" (or "..._run_<hex>"); other turns' replies are not ours.
    return (job, main) if job.startswith(SLOT_JOB_PREFIX) else None


# A ran slot's `reason` says where its message went: "to ADDRESS" while (and after) its
# delivery settles whether it arrived, else why it went nowhere, never nothing at all.
TO_PREFIX = "to "
SILENT_NOTE = "the reply was [SILENT]: nothing sent"


def delivery_note(schedule: Schedule, kept: str) -> str:
    """The reason a ran slot keeps about its message: "to ADDRESS", or, with no address
    to send it to, that it was not delivered, why, and where it is kept (`kept`)."""
    target = target_of(schedule)
    if target is not None:
        return f"{TO_PREFIX}{target}"
    return f"not delivered: no deliver_to, and not added from a chat; {kept}"


def target_of(schedule: Schedule) -> str | None:
    """Where a run's message goes (an address): deliver_to, else the chat it came from."""
    for candidate in (schedule.deliver_to, schedule.origin):
        channel, sep, rest = (candidate or "").partition(":")
        if not (channel and sep and rest):
            continue
        if channel == WEB_ACCOUNT:
            # Everything after `web:` is the conversation; as an address chat its `%` and
            # `:` are escaped (channels.web.chat_of), since `:` separates an address.
            return f"{channel}:" + rest.replace("%", "%25").replace(":", "%3A")
        return candidate
    return None
