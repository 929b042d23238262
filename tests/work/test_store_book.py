"""A run's outcome on the schedules store, whichever of the run and its delivery settles first."""

from __future__ import annotations

from habakkuk.runtime import Runtime
from habakkuk.work.run_book import Settled
from habakkuk.work.schedule_types import NewSchedule, SlotRun
from habakkuk.work.store import ScheduleStore
from habakkuk.work.store_book import StoreRunBook
from tests.conftest import OpenRuntime, mock_config


async def queued_run(runtime_factory: OpenRuntime) -> tuple[Runtime, StoreRunBook, str]:
    runtime = await runtime_factory(mock_config())
    schedule = await runtime.schedules.add(
        NewSchedule(agent="main", name="n", when="@daily", command="true", deliver_to="web:w"),
        by="owner",
    )
    job = await runtime.schedules.run_now(schedule.id)
    return runtime, StoreRunBook(ScheduleStore(runtime.queue.db)), job


async def row(runtime: Runtime, job: str) -> SlotRun:
    rows = [r for r in await runtime.schedules.runs(job.split("_run_")[0]) if r.job == job]
    return rows[0]


async def test_a_delivery_that_failed_before_the_run_settled_stays_delivery_failed(
    runtime_factory: OpenRuntime,
) -> None:
    runtime, book, job = await queued_run(runtime_factory)
    await book.run_started(job)
    assert (await row(runtime, job)).status == "running"
    await book.delivery_settled(job, delivered=False, reason="undeliverable: chat gone")
    await book.run_settled(job, Settled("ran", last_status="ok", last_output="out"))
    settled = await row(runtime, job)
    assert settled.status == "delivery_failed" and settled.delivered is False
    assert settled.reason == "undeliverable: chat gone"
    schedule = await runtime.schedules.get(settled.schedule)
    assert schedule.last_status == "delivery failed: undeliverable: chat gone"
    assert schedule.last_output == "out"


async def test_a_failed_run_stays_failed_when_its_message_is_not_delivered_either(
    runtime_factory: OpenRuntime,
) -> None:
    runtime, book, job = await queued_run(runtime_factory)
    await book.run_settled(
        job, Settled("failed", reason="error: exit code 1", last_status="error: exit code 1")
    )
    await book.delivery_settled(job, delivered=False, reason="undeliverable: chat gone")
    settled = await row(runtime, job)
    assert settled.status == "failed" and settled.delivered is False
    assert settled.reason == "error: exit code 1"


async def test_a_delivered_message_marks_the_row_without_changing_its_status(
    runtime_factory: OpenRuntime,
) -> None:
    runtime, book, job = await queued_run(runtime_factory)
    await book.run_settled(job, Settled("ran", last_status="ok"))
    await book.delivery_settled(job, delivered=True)
    settled = await row(runtime, job)
    assert settled.status == "ran" and settled.delivered is True
