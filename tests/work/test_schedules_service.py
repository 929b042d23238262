"""The Schedules service on a real control.db with the real JobQueue: add, list, get,
runs, run_now, pause/resume, delete, preview, counts; corrupt rows skipped."""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import AsyncIterator
from typing import Any

import pytest

from habakkuk.engine.errors import HabakkukError, NotFound
from habakkuk.engine.home import Home
from habakkuk.engine.storage import Storage
from habakkuk.work.schedule_types import NewSchedule, ScheduleRefused, WhenError
from habakkuk.work.service import PROMPT_KIND, SCRIPT_KIND, serial_key
from tests.work.schedules_env import Control, FakeClock, config_in, open_node

START = dt.datetime(2026, 6, 1, 10, 0, tzinfo=dt.UTC).timestamp()


@pytest.fixture
async def control(home: Home, storage: Storage) -> AsyncIterator[Control]:
    opened = await open_node(storage, config_in(home), FakeClock(START))
    yield opened
    await opened.close()


def prompt(**changes: Any) -> NewSchedule:
    fields: dict[str, Any] = {
        "agent": "main",
        "name": "inbox",
        "when": "0 8 * * 1-5",
        "prompt": "summarise my inbox",
    }
    fields.update(changes)
    return NewSchedule(**fields)


async def test_add_stores_a_schedule_with_its_next_run_in_the_config_timezone(
    control: Control,
) -> None:
    added = await control.schedules.add(prompt(deliver_to="telegram:123"), by="agent")
    assert added.id.startswith("sch_") and added.kind == "prompt" and added.enabled
    # 2026-06-01 is a Monday; 10:00 UTC is past 08:00 Paris, so Tuesday 08:00 CEST.
    assert added.next_run == dt.datetime(2026, 6, 2, 6, 0, tzinfo=dt.UTC).timestamp()
    assert await control.schedules.get(added.id) == added
    assert await control.schedules.list_schedules() == [added]
    assert await control.schedules.list_schedules("other") == []
    assert await control.schedules.counts() == (1, 1)


async def test_a_command_is_refused_unless_the_owner_adds_it(control: Control) -> None:
    for by in ("agent", "api"):
        with pytest.raises(ScheduleRefused, match="only be added by the owner"):
            await control.schedules.add(prompt(command="echo hi"), by=by)
    script = await control.schedules.add(prompt(command="echo hi"), by="owner")
    assert script.kind == "script" and script.command == "echo hi"


@pytest.mark.parametrize(
    ("changes", "error", "says"),
    [
        ({"agent": "ghost"}, NotFound, "no agent 'ghost'"),
        ({"name": "  "}, HabakkukError, "name is empty"),
        ({"prompt": ""}, HabakkukError, "prompt is empty"),
        ({"deliver_to": "telegram"}, HabakkukError, "not CHANNEL:CHAT[:THREAD]"),
        ({"deliver_to": "telegram:1:2:3"}, HabakkukError, "not CHANNEL:CHAT[:THREAD]"),
        ({"when": "30m"}, WhenError, "@every 30m"),
        ({"when": "at 2026-05-01 09:00"}, WhenError, "in the past"),
    ],
)
async def test_bad_input_is_refused_in_one_line(
    control: Control, changes: dict[str, object], error: type[Exception], says: str
) -> None:
    with pytest.raises(error, match=says.replace("[", r"\[").replace("]", r"\]")):
        await control.schedules.add(prompt(**changes), by="agent")
    assert await control.schedules.counts() == (0, 0)


async def test_a_web_conversation_with_colons_is_a_valid_deliver_to(control: Control) -> None:
    added = await control.schedules.add(prompt(deliver_to="web:w1:a:b"), by="api")
    assert added.deliver_to == "web:w1:a:b"


async def test_run_now_queues_an_extra_run_under_its_own_id(control: Control) -> None:
    added = await control.schedules.add(prompt(), by="agent")
    job_id = await control.schedules.run_now(added.id)
    assert job_id.startswith(f"{added.id}_run_")
    job = await control.queue.get(job_id)
    assert job is not None and job.kind == PROMPT_KIND
    assert job.payload == {"schedule": added.id, "slot": START, "extra": True}
    assert job.serial_key == serial_key(added.id)
    [run] = await control.schedules.runs(added.id)
    assert (run.status, run.job, run.extra) == ("queued", job_id, True)
    assert await control.schedules.run_now(added.id) != job_id


async def test_a_script_runs_as_a_script_job_with_one_attempt(control: Control) -> None:
    script = await control.schedules.add(prompt(command="true"), by="owner")
    job = await control.queue.get(await control.schedules.run_now(script.id))
    assert job is not None and (job.kind, job.max_attempts) == (SCRIPT_KIND, 1)


async def test_resume_records_the_slots_missed_while_paused_and_starts_from_now(
    home: Home,
    storage: Storage,
) -> None:
    clock = FakeClock(START)
    control = await open_node(storage, config_in(home), clock)
    try:
        added = await control.schedules.add(prompt(when="@every 1h"), by="agent")
        paused = await control.schedules.pause(added.id)
        assert not paused.enabled and await control.schedules.counts() == (1, 0)
        clock.advance(3 * 3600 + 60)
        resumed = await control.schedules.resume(added.id)
        assert resumed.enabled
        assert resumed.next_run == START + 4 * 3600
        runs = await control.schedules.runs(added.id)
        assert [(r.slot, r.status, r.reason) for r in runs] == [
            (START + h * 3600, "skipped", "paused") for h in (3, 2, 1)
        ]
    finally:
        await control.close()


async def test_delete_removes_the_schedule_its_runs_and_its_queued_jobs(
    control: Control,
) -> None:
    added = await control.schedules.add(prompt(), by="agent")
    job_id = await control.schedules.run_now(added.id)
    await control.schedules.delete(added.id)
    with pytest.raises(NotFound, match="no such schedule"):
        await control.schedules.get(added.id)
    job = await control.queue.get(job_id)
    assert job is not None and job.status == "cancelled"
    with pytest.raises(NotFound):
        await control.schedules.runs(added.id)
    assert await control.schedules.counts() == (0, 0)


async def test_every_action_on_an_unknown_id_is_not_found(control: Control) -> None:
    for action in (
        control.schedules.get,
        control.schedules.run_now,
        control.schedules.pause,
        control.schedules.resume,
        control.schedules.delete,
    ):
        with pytest.raises(NotFound, match="sch_nope"):
            await action("sch_nope")


async def test_preview_gives_the_next_fire_times_and_refuses_ambiguity(
    control: Control,
) -> None:
    times = control.schedules.preview("@daily")
    assert [t.strftime("%m-%d %H:%M%z") for t in times] == [
        "06-02 00:00+0200",
        "06-03 00:00+0200",
        "06-04 00:00+0200",
    ]
    with pytest.raises(WhenError, match="six fields"):
        control.schedules.preview("0 0 8 * * *")


async def test_upcoming_counts_every_from_the_schedules_creation_not_from_now(
    control: Control,
) -> None:
    every = await control.schedules.add(prompt(when="@every 2h"), by="owner")  # at 10:00
    clock = control.schedules.clock
    assert isinstance(clock, FakeClock)
    clock.advance(90 * 60)  # 11:30
    times = control.schedules.upcoming(every)
    assert [t.astimezone(dt.UTC).strftime("%H:%M") for t in times] == ["12:00", "14:00", "16:00"]
    paused = await control.schedules.pause(every.id)
    assert control.schedules.upcoming(paused) == []


async def test_a_corrupt_row_is_skipped_and_the_others_are_listed(
    control: Control, caplog: pytest.LogCaptureFixture
) -> None:
    good = await control.schedules.add(prompt(name="good"), by="agent")
    bad = await control.schedules.add(prompt(name="bad"), by="agent")
    await control.db.write(
        lambda conn: conn.execute("UPDATE schedules SET body = '{oops' WHERE id = ?", (bad.id,))
    )
    assert [s.id for s in await control.schedules.list_schedules()] == [good.id]
    assert f"schedule {bad.id}: unreadable row" in caplog.text


async def test_resume_records_a_slot_queued_before_the_pause_as_queued(
    home: Home, storage: Storage
) -> None:
    clock = FakeClock(START)
    control = await open_node(storage, config_in(home), clock)
    try:
        added = await control.schedules.add(prompt(when="@every 1h"), by="agent")
        await control.schedules.pause(added.id)
        # A tick queued the first slot and died before its swap.
        first = f"{added.id}_{int(START + 3600)}"
        await control.queue.enqueue(first, PROMPT_KIND, {"schedule": added.id})
        clock.advance(2 * 3600 + 60)
        await control.schedules.resume(added.id)
        runs = await control.schedules.runs(added.id)
        assert [(r.status, r.job, r.reason) for r in runs] == [
            ("skipped", "", "paused"),
            ("queued", first, ""),
        ]
    finally:
        await control.close()


async def test_upcoming_of_an_every_schedule_made_at_a_fractional_second_moves_on(
    control: Control,
) -> None:
    # A creation time with sub-microsecond digits (time.time() has them) once gave the
    # same fire time three times over, through the microseconds a datetime keeps.
    clock = control.schedules.clock
    assert isinstance(clock, FakeClock)
    clock.advance(0.6002045)
    every = await control.schedules.add(prompt(when="@every 1m"), by="owner")
    times = control.schedules.upcoming(every)
    assert len(set(times)) == 3
    assert [(b - a).total_seconds() for a, b in itertools.pairwise(times)] == [60, 60]


# -- names: unique per agent, and a way to find a schedule ----------------------------


async def test_a_name_its_agent_already_uses_is_refused(control: Control) -> None:
    first = await control.schedules.add(prompt(name="Inbox digest"), by="agent")
    for clash in ("Inbox digest", "inbox  DIGEST", " inbox digest "):
        with pytest.raises(HabakkukError, match=f"already has a schedule named .*{first.id}"):
            await control.schedules.add(prompt(name=clash), by="owner")
    other = await control.schedules.add(prompt(name="Inbox digest", agent="other"), by="agent")
    assert other.id != first.id
    assert await control.schedules.counts() == (2, 2)


async def test_two_adds_of_one_name_at_once_store_one(control: Control) -> None:
    import asyncio

    results = await asyncio.gather(
        *(control.schedules.add(prompt(name="race"), by="agent") for _ in range(5)),
        return_exceptions=True,
    )
    assert sum(not isinstance(r, BaseException) for r in results) == 1
    assert await control.schedules.counts() == (1, 1)


async def test_find_takes_an_id_or_a_name_and_names_each_of_a_shared_name(
    control: Control,
) -> None:
    added = await control.schedules.add(prompt(name="Morning news"), by="agent")
    assert await control.schedules.find(added.id) == added
    assert await control.schedules.find("morning NEWS") == added
    with pytest.raises(NotFound, match="no schedule has the id or name 'evening'"):
        await control.schedules.find("evening")
    # An older home may hold the same name twice (for one agent, or two agents).
    twin = await control.schedules.add(prompt(name="Morning news", agent="other"), by="agent")
    with pytest.raises(HabakkukError) as caught:
        await control.schedules.find("Morning news")
    message = str(caught.value)
    assert "'Morning news' names 2 schedules" in message and "give the id" in message
    assert f"{added.id} (agent main" in message and f"{twin.id} (agent other" in message
    assert await control.schedules.find(twin.id) == twin


async def test_ticker_names_the_live_holder_of_the_tick_lease(control: Control) -> None:
    import os

    from habakkuk.engine.leases import NamedLeases
    from habakkuk.work.schedule_types import TICK_LEASE

    assert await control.schedules.ticker() is None
    leases = NamedLeases(control.db)
    # A holder that died (kill -9) on this host serves nothing, lease or not.
    await leases.acquire(TICK_LEASE, "serve:1", 60, now=START, pid=dead_pid())
    assert await control.schedules.ticker() is None
    await leases.acquire(TICK_LEASE, "serve:2", 60, now=START, pid=os.getpid())
    assert await control.schedules.ticker() == "serve:2"
    await leases.release(TICK_LEASE, "serve:2")  # a clean stop lets it go
    assert await control.schedules.ticker() is None


def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    import subprocess
    import sys

    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], check=True,
                           capture_output=True, text=True)  # fmt: skip
    return int(child.stdout)
