"""The shapes every surface prints for schedules (spec 001 "Schedules")."""

from __future__ import annotations

import datetime as dt
from typing import Any

from habakkuk.work.schedule_types import Schedule, SlotRun
from habakkuk.work.schedule_views import (
    fire_times,
    local_time,
    run_json,
    run_now_json,
    schedule_json,
    schedules_json,
    slot_outcome,
    state_word,
)

SPEC_FIELDS = {
    "id",
    "agent",
    "name",
    "spec",
    "prompt",
    "command",
    "on_output",
    "deliver_to",
    "enabled",
    "next_run",
    "last_run",
    "last_status",
    "last_output",
    "fail_streak",
    "created_at",
}


def _schedule(**changes: Any) -> Schedule:
    values: dict[str, Any] = {
        "id": "sch_1",
        "agent": "habakkuk",
        "name": "inbox",
        "spec": "0 8 * * 1-5",
        "prompt": "summarise my inbox",
        "command": None,
        "on_output": "deliver",
        "deliver_to": "tg:42",
        "workdir": None,
        "timeout_seconds": 120.0,
        "missed": "skip",
        "enabled": True,
        "next_run": 1_796_112_000.0,
        "last_run": None,
        "last_status": "",
        "last_output": "",
        "fail_streak": 0,
        "created_at": 1_796_000_000.0,
    }
    values.update(changes)
    return Schedule(**values)


def test_schedule_json_has_every_field_of_the_spec_with_utc_times() -> None:
    body = schedule_json(_schedule())
    assert body.keys() >= SPEC_FIELDS
    assert body["next_run"] == "2026-12-01T08:00:00Z"
    assert body["last_run"] is None
    assert body["kind"] == "prompt"
    assert "next_runs" not in body


def test_schedule_json_lists_next_fire_times_when_given() -> None:
    paris = dt.datetime(2026, 12, 1, 9, 0, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    body = schedule_json(_schedule(), next_runs=[paris])
    assert body["next_runs"] == ["2026-12-01T08:00:00Z"]


def test_script_schedule_is_of_kind_script() -> None:
    body = schedules_json([_schedule(command="./sync.sh")])["schedules"][0]
    assert (body["kind"], body["command"]) == ("script", "./sync.sh")


def test_run_now_json_carries_the_job_and_the_schedule() -> None:
    body = run_now_json("sch_1_run_ab", _schedule())
    assert body["job"] == "sch_1_run_ab" and body["schedule"]["id"] == "sch_1"


def test_local_time_reads_in_the_config_timezone() -> None:
    assert local_time(1_796_112_000.0, "Europe/Paris") == "2026-12-01 09:00 CET"
    assert local_time(None, "UTC") == "-"


def test_fire_times_says_when_a_one_off_has_fired() -> None:
    assert "fired" in fire_times([], "UTC")
    moment = dt.datetime(2026, 12, 1, 8, 0, tzinfo=dt.UTC)
    assert fire_times([moment, moment], "UTC") == "2026-12-01 08:00 UTC, 2026-12-01 08:00 UTC"


def test_state_word_tells_paused_and_done_apart() -> None:
    assert state_word(_schedule(enabled=False)) == "paused"
    assert state_word(_schedule(next_run=None)) == "done"
    assert state_word(_schedule()) == "enabled"


def test_slot_outcome_keeps_delivery_apart_from_failure() -> None:
    ran = SlotRun("sch_1", 1.0, "ran", delivered=True)
    assert slot_outcome(ran) == "ran, delivered"
    bad_delivery = SlotRun("sch_1", 1.0, "delivery_failed", reason="chat not found")
    assert slot_outcome(bad_delivery) == "ran, delivery failed: chat not found"
    assert slot_outcome(SlotRun("sch_1", 1.0, "failed", reason="exit 3")) == "failed: exit 3"
    assert slot_outcome(SlotRun("sch_1", 1.0, "skipped", reason="late")) == "skipped: late"
    assert run_json(SlotRun("sch_1", 1.0, "ran"))["outcome"] == "ran, nothing to deliver"
