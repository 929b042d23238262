"""Schedules as every surface shows them: JSON shapes and the few words surfaces share.

The HTTP API (spec 001 "Schedules"), `habakkuk schedules ... --json`, the dashboard and
the MCP server's habakkuk_schedules_list print the same shapes, so all call these
functions. Times in JSON are RFC 3339 in UTC (as every other API time); text for people
(the CLI, the terminal's screen) is in the config timezone, through `local_time`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any
from zoneinfo import ZoneInfo

from .run_book import TO_PREFIX
from .schedule_types import Schedule, SlotRun

# -- JSON shapes -----------------------------------------------------------------------------


def _when(timestamp: float | None) -> str | None:
    if timestamp is None:
        return None
    return dt.datetime.fromtimestamp(timestamp, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _moment(value: dt.datetime) -> str:
    return value.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def schedule_json(
    schedule: Schedule, *, next_runs: Sequence[dt.datetime] | None = None
) -> dict[str, Any]:
    """A schedule as spec 001 shows it: {"id", "agent", "name", "spec", "prompt",
    "command", "on_output", "deliver_to", "enabled", "next_run", "last_run",
    "last_status", "last_output", "fail_streak", "created_at"}, plus "kind", "missed",
    "origin", "workdir", "timeout_seconds" and, when given, "next_runs" (the next fire
    times, for the dashboard and the screen)."""
    body: dict[str, Any] = {
        "id": schedule.id,
        "agent": schedule.agent,
        "name": schedule.name,
        "spec": schedule.spec,
        "prompt": schedule.prompt,
        "command": schedule.command,
        "on_output": schedule.on_output,
        "deliver_to": schedule.deliver_to,
        "enabled": schedule.enabled,
        "next_run": _when(schedule.next_run),
        "last_run": _when(schedule.last_run),
        "last_status": schedule.last_status,
        "last_output": schedule.last_output,
        "fail_streak": schedule.fail_streak,
        "created_at": _when(schedule.created_at),
        "kind": schedule.kind,
        "missed": schedule.missed,
        "origin": schedule.origin,
        "workdir": schedule.workdir,
        "timeout_seconds": schedule.timeout_seconds,
    }
    if next_runs is not None:
        body["next_runs"] = [_moment(t) for t in next_runs]
    return body


def schedules_json(schedules: Iterable[Schedule]) -> dict[str, Any]:
    """GET /api/schedules: {"schedules": [...]}, in the order given (next run first)."""
    return {"schedules": [schedule_json(s) for s in schedules]}


def run_json(run: SlotRun) -> dict[str, Any]:
    """One slot: {"schedule", "slot", "status", "reason", "job", "session", "delivered",
    "extra", "at", "outcome"} (outcome: the words `slot_outcome` gives)."""
    return {
        "schedule": run.schedule,
        "slot": _when(run.slot),
        "status": run.status,
        "reason": run.reason,
        "job": run.job,
        "session": run.session,
        "delivered": run.delivered,
        "extra": run.extra,
        "at": _when(run.at) if run.at else None,
        "outcome": slot_outcome(run),
    }


def runs_json(runs: Iterable[SlotRun]) -> dict[str, Any]:
    """A schedule's slots, newest first: {"runs": [...]}."""
    return {"runs": [run_json(r) for r in runs]}


def run_now_json(job: str, schedule: Schedule) -> dict[str, Any]:
    """POST /api/schedules/{id}/run: {"job": "sch_...", "schedule": {...}}."""
    return {"job": job, "schedule": schedule_json(schedule)}


# -- Words for people ----------------------------------------------------------------------


def local_time(value: float | dt.datetime | None, timezone: str | None = None) -> str:
    """A time as people read it in the config timezone: "2026-12-01 09:00 CET" ("-" for
    none). Without `timezone` a datetime keeps its own zone (preview's are already in
    the config timezone) and epoch seconds read in UTC."""
    if value is None:
        return "-"
    zone = ZoneInfo(timezone) if timezone else None
    if isinstance(value, (int, float)):
        moment = dt.datetime.fromtimestamp(value, zone or dt.UTC)
    else:
        moment = value.astimezone(zone) if zone else value
    return moment.strftime("%Y-%m-%d %H:%M %Z").strip()


def fire_times(times: Sequence[dt.datetime], timezone: str | None = None) -> str:
    """The next fire times on one line ("none: a one-off that has fired" when empty)."""
    if not times:
        return "none (a one-off that has fired)"
    return ", ".join(local_time(t, timezone) for t in times)


def state_word(schedule: Schedule) -> str:
    """enabled, paused, or done (a one-off that has fired)."""
    if not schedule.enabled:
        return "paused"
    if schedule.next_run is None:
        return "done"
    return "enabled"


def slot_outcome(run: SlotRun) -> str:
    """What happened to a slot, in words: "ran, delivered to telegram:42", "ran,
    delivering to ..." (its delivery not settled yet), "ran, not delivered: no
    deliver_to, ...", "ran, delivery failed: ...", "failed: ...", "interrupted: ...",
    "skipped: late", "queued", "running". A ran slot always says where its message went,
    or why nowhere (its reason, work/run_book.delivery_note)."""
    if run.status == "skipped":
        return f"skipped: {run.reason}" if run.reason else "skipped"
    if run.status in ("failed", "interrupted"):
        return f"{run.status}: {run.reason}" if run.reason else run.status
    if run.status == "delivery_failed":
        return f"ran, delivery failed: {run.reason}" if run.reason else "ran, delivery failed"
    if run.status == "ran":
        to = run.reason if run.reason.startswith(TO_PREFIX) else ""
        if run.delivered is True:
            return f"ran, delivered {to}".rstrip()
        if run.delivered is False:
            return "ran, not delivered" + (f": {run.reason}" if run.reason else "")
        if to:
            return f"ran, delivering {to}"
        # Rows written before runs said where their message went have no reason.
        return f"ran, {run.reason}" if run.reason else "ran, nothing to deliver"
    return run.status
