"""The tick on a real control.db: slot jobs, compare-and-swap, skipped rows with their
reason, the named lease, a crash between enqueue and the swap."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from habakkuk.engine.home import Home
from habakkuk.engine.storage import Storage
from habakkuk.work.schedule_types import NewSchedule, SlotRun
from habakkuk.work.scheduler import Scheduler
from habakkuk.work.service import SCRIPT_KIND
from tests.conftest import mock_config
from tests.helpers import eventually
from tests.work.schedules_env import Control, FakeClock, config_in, open_node

START = dt.datetime(2026, 6, 1, 10, 0, tzinfo=dt.UTC).timestamp()


class Crash(Exception):
    """The ticking process dies here."""


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START)


@pytest.fixture
async def control(home: Home, storage: Storage, clock: FakeClock) -> AsyncIterator[Control]:
    opened = await open_node(storage, config_in(home), clock)
    yield opened
    await opened.close()


def every(when: str, **changes: Any) -> NewSchedule:
    fields: dict[str, Any] = {"agent": "main", "name": when, "when": when, "prompt": "go"}
    fields.update(changes)
    return NewSchedule(**fields)


async def test_a_due_slot_becomes_one_job_and_next_run_moves_on(
    control: Control, clock: FakeClock
) -> None:
    added = await control.schedules.add(every("@every 1h"), by="agent")
    ticker = Scheduler(control.schedules, clock=clock)
    assert (await ticker.tick()).queued == 0
    clock.advance(3600 + 5)
    report = await ticker.tick()
    assert (report.due, report.queued, report.skipped) == (1, 1, 0)
    job_id = f"{added.id}_{int(START + 3600)}"
    job = await control.queue.get(job_id)
    assert job is not None and job.payload == {
        "schedule": added.id,
        "slot": START + 3600,
        "extra": False,
    }
    [run] = await control.schedules.runs(added.id)
    assert (run.status, run.job, run.slot) == ("queued", job_id, START + 3600)
    assert (await control.schedules.get(added.id)).next_run == START + 7200
    assert (await ticker.tick()).due == 0


async def test_slots_missed_while_down_are_recorded_and_only_the_newest_in_time_runs(
    control: Control, clock: FakeClock
) -> None:
    added = await control.schedules.add(every("@every 30m"), by="agent")
    await Scheduler(control.schedules, clock=clock).tick()
    clock.advance(5 * 3600 + 60)  # nobody ticked for five hours
    await Scheduler(control.schedules, clock=clock).tick()
    runs = {r.slot: (r.status, r.reason) for r in await control.schedules.runs(added.id)}
    half = 1800
    assert runs == {
        **{START + k * half: ("skipped", "down") for k in range(1, 9)},  # > 1 h late
        START + 9 * half: ("skipped", "late"),  # in time, but a newer slot runs
        START + 10 * half: ("queued", ""),
    }


async def test_missed_once_runs_one_catch_up_after_downtime_never_a_burst(
    control: Control, clock: FakeClock
) -> None:
    added = await control.schedules.add(every("0 8 * * *", missed="once"), by="agent")
    await Scheduler(control.schedules, clock=clock).tick()
    clock.advance(3 * 86400)  # a long weekend off, back at 12:00 Paris
    report = await Scheduler(control.schedules, clock=clock).tick()
    assert (report.queued, report.skipped) == (1, 2)
    runs = await control.schedules.runs(added.id)
    assert [(r.status, r.reason) for r in runs] == [
        ("queued", "catch-up"),
        ("skipped", "down (one catch-up run done)"),
        ("skipped", "down (one catch-up run done)"),
    ]


async def test_a_script_slot_is_skipped_while_its_previous_run_is_running(
    control: Control, clock: FakeClock
) -> None:
    script = await control.schedules.add(every("@every 15m", command="sleep 1"), by="owner")
    ticker = Scheduler(control.schedules, clock=clock)
    clock.advance(900)
    await ticker.tick()
    lease = await control.queue.claim([SCRIPT_KIND])
    assert lease is not None
    clock.advance(900)
    await ticker.tick()
    await control.queue.complete(lease)
    clock.advance(900)
    await ticker.tick()
    runs = await control.schedules.runs(script.id)
    assert [(r.status, r.reason) for r in runs] == [
        ("queued", ""),
        ("skipped", "still running"),
        ("queued", ""),
    ]


async def test_one_ticker_per_home_holds_the_lease(
    home: Home, storage: Storage, control: Control, clock: FakeClock
) -> None:
    other = await open_node(storage, config_in(home), clock)
    try:
        first = Scheduler(control.schedules, clock=clock)
        second = Scheduler(other.schedules, clock=clock)
        assert (await first.tick()).held_by is None
        assert (await second.tick()).held_by == first.owner
        clock.advance(first.lease_seconds + 1)  # the first stopped ticking: its lease runs out
        assert (await second.tick()).held_by is None
        assert (await first.tick()).held_by == second.owner
    finally:
        await other.close()


async def test_a_crash_between_enqueue_and_the_swap_never_doubles_the_slot(
    control: Control, clock: FakeClock
) -> None:
    added = await control.schedules.add(every("@every 1h"), by="agent")

    async def die(job_id: str) -> None:
        raise Crash(job_id)

    clock.advance(3600)
    with pytest.raises(Crash):
        await Scheduler(control.schedules, clock=clock, on_enqueued=die).tick()
    assert (await control.schedules.get(added.id)).next_run == START + 3600  # not swapped
    clock.advance(120)  # the dead ticker's lease ran out; a new process ticks
    await Scheduler(control.schedules, clock=clock, interval=15).tick()
    job_ids = [r["id"] for r in await control.db.fetchall("SELECT id FROM jobs")]
    assert job_ids == [f"{added.id}_{int(START + 3600)}"]
    assert [(r.status, r.job) for r in await control.schedules.runs(added.id)] == [
        ("queued", job_ids[0])
    ]


async def test_a_schedule_whose_when_no_longer_parses_never_stops_the_others(
    control: Control, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    broken = await control.schedules.add(every("@every 1h", name="broken"), by="agent")
    fine = await control.schedules.add(every("@every 1h", name="fine"), by="agent")
    await control.db.write(
        lambda conn: conn.execute("UPDATE schedules SET spec = '30m' WHERE id = ?", (broken.id,))
    )
    clock.advance(3601)
    assert (await Scheduler(control.schedules, clock=clock).tick()).queued == 1
    assert [r.status for r in await control.schedules.runs(fine.id)] == ["queued"]
    assert f"schedule {broken.id}:" in caplog.text and "not ticked" in caplog.text


async def test_a_one_off_fires_once_and_is_spent(control: Control, clock: FakeClock) -> None:
    added = await control.schedules.add(every("at 2026-06-01 13:00"), by="agent")  # 11:00 UTC
    ticker = Scheduler(control.schedules, clock=clock)
    clock.advance(3600)
    assert (await ticker.tick()).queued == 1
    spent = await control.schedules.get(added.id)
    assert spent.next_run is None and spent.enabled
    clock.advance(86400)
    assert (await ticker.tick()).due == 0


async def test_the_runtime_ticks_schedules_with_its_maintenance_workers(
    runtime_factory: Any,
) -> None:
    runtime = await runtime_factory(mock_config())
    added = await runtime.schedules.add(every("@every 1h"), by="agent")
    # Due a minute ago, as after a short restart: the first tick queues it.
    await runtime.queue.db.write(
        lambda conn: conn.execute(
            "UPDATE schedules SET next_run = ? WHERE id = ?", (time.time() - 60, added.id)
        )
    )
    runtime.start_workers(channels=False, maintenance=True)

    # The slot was queued once it has a run that was not skipped: the schedule pools run
    # too, so "queued" may already have moved on to "running" or "ran" when it is read.
    async def queued() -> bool:
        return any(r.status != "skipped" for r in await runtime.schedules.runs(added.id))

    await eventually(queued, what="the runtime's ticker to queue the due slot")


async def test_a_stale_compare_and_swap_writes_nothing(control: Control, clock: FakeClock) -> None:
    added = await control.schedules.add(every("@every 1h"), by="agent")
    assert added.next_run is not None
    row = SlotRun(added.id, added.next_run, "skipped", reason="late")
    # Another process advanced next_run first: this one's view is stale.
    assert await control.schedules.store.advance(added.id, added.next_run, added.next_run + 3600)
    assert not await control.schedules.store.advance(
        added.id, added.next_run, added.next_run + 7200, rows=[row]
    )
    assert (await control.schedules.get(added.id)).next_run == added.next_run + 3600
    assert await control.schedules.runs(added.id) == []
