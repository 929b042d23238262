"""A run's delivery is its own status: "ran, delivery failed" is not "failed".

The process holding a chat's connection settles its delivery jobs and publishes
`job.finished` for each. `watch_deliveries` follows those of schedule runs (the reply
of a run's turn, `reply:turn_<slot job>`, and a script's output, `sched:<slot job>`)
and records on the slot's row whether its message arrived.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from habakkuk.engine.events import EventBus, EventPayload, JobFinished
from habakkuk.engine.jobs import Job
from habakkuk.work.run_book import RunBook, job_of_delivery

log = logging.getLogger(__name__)

JobReader = Callable[[str], Awaitable[Job | None]]


def _is_run_delivery(event: EventPayload) -> bool:
    return (
        isinstance(event, JobFinished)
        and event.job_kind.startswith("delivery:")
        and event.status in ("done", "failed")
        and job_of_delivery(event.job) is not None
    )


async def record_delivery(book: RunBook, job: str, status: str, error: str | None) -> None:
    """Record one settled delivery job of a run (its main message only)."""
    found = job_of_delivery(job)
    if found is None or not found[1]:
        return  # not a run's message, or a failure-streak notice
    slot_job = found[0]
    if status == "done":
        await book.delivery_settled(slot_job, delivered=True)
    else:
        await book.delivery_settled(slot_job, delivered=False, reason=error or "delivery failed")


async def watch_deliveries(bus: EventBus, book: RunBook, get_job: JobReader) -> None:
    """Follow settled deliveries of runs until cancelled."""
    with bus.subscribe(_is_run_delivery) as settled:
        async for event in settled:
            assert isinstance(event, JobFinished)
            try:
                job = await get_job(event.job)
                await record_delivery(
                    book, event.job, event.status, job.error if job is not None else None
                )
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the schedule may be gone; the record is best effort
                log.warning("cannot record the delivery %s: %s", event.job, exc)
