"""Never paid twice: each generation call's provider job, recorded in state.db.

A call is keyed by (session, turn, tool_use_id) (StateStore.provider_jobs). Before the
request that costs money goes out, the call's record is committed as "sending"; a job's
id (fal's request id, Gemini's operation name, OpenAI's video id) is committed, as
"running", before the first poll; the files saved and the text the model read are
committed when it ends. The tools are `resumable`, so a turn resumed after a crash runs
an unfinished call again with the same tool_use_id, and the call then:

- finds "running": polls the same job (no second submit) and fetches its result;
- finds "done" or "failed": answers what it answered before, sending nothing;
- finds "sending": the request went out (or was about to) and nobody knows whether the
  provider took it: a synchronous image request cannot be asked about, and a submit
  whose answer was lost named no job. It is not sent again: the result says the
  earlier attempt may have been charged, and the model decides whether to call again
  (a new call, a new tool_use_id, a new generation).

A retried job (the queue's next attempt) and a redelivered message (the same turn id)
reach the same record the same way.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from habakkuk.engine.state import ProviderJob, StateStore
from habakkuk.engine.toolkit.registry import ToolContext, ToolError

from .types import (
    GenerationError,
    ImageMaker,
    JobProvider,
    Made,
    Output,
    Progress,
    Spend,
    Submitted,
    TransientError,
)

FETCH_TRIES = 4


@dataclass(frozen=True)
class Backoff:
    """The waits between polls: `first`, then times `factor`, at most `cap` seconds."""

    first: float = 5.0
    factor: float = 1.5
    cap: float = 30.0

    def waits(self) -> Any:
        wait = self.first
        while True:
            yield wait
            wait = min(wait * self.factor, max(self.cap, self.first))


@dataclass(frozen=True)
class Outcome:
    """How a call ended: the files saved, what it cost, and whether this run generated
    them (False: an earlier run of the same call did; its spend is already recorded)."""

    saved: list[Path]
    spend: Spend
    fresh: bool
    note: str = ""  # what the model must know besides the files (a partial result)


# What a SaveAll does with a finished job's files: save each, return the paths.
SaveAll = Callable[[list[Output]], Awaitable[list[Path]]]
SaveOne = Callable[[Output], Awaitable[Path]]


def cut_off(tool: str, saved: list[Path]) -> str:
    """The answer to a call whose request went out before a crash with no job to ask about."""
    kept = f" ({len(saved)} file(s) saved before it: {', '.join(map(str, saved))})" if saved else ""
    return (
        f"{tool}: an earlier run of this call was cut off after its request went to the "
        f"provider{kept}, so it may have been charged; it was not sent again. Call "
        f"{tool} again if you still want it (that is a new, paid request)."
    )


class Journal:
    """One call's record (see the module docstring)."""

    def __init__(self, store: StateStore | None, ctx: ToolContext, tool: str, provider: str):
        if store is None:
            raise ToolError(f"{tool}: the state store is not available in this run")
        self.store = store
        self.tool = tool
        self.provider = provider
        self.key = (ctx.session, ctx.turn, ctx.call_id)

    async def earlier(self) -> ProviderJob | None:
        return await self.store.provider_job(*self.key)

    async def begin(self) -> ProviderJob | None:
        """Record "sending" before the paid request; the earlier record when there is one."""
        session, turn, call_id = self.key
        fresh = ProviderJob(session, turn, call_id, self.tool, self.provider, "sending")
        if await self.store.begin_provider_job(fresh):
            return None
        return await self.earlier()

    async def running(self, job: Submitted) -> None:
        await self.store.update_provider_job(
            *self.key, status="running", job=job.job, detail=job.detail
        )

    async def progress(self, status: Any, detail: dict[str, Any]) -> None:
        await self.store.update_provider_job(*self.key, status=status, detail=detail)

    async def done(self, detail: dict[str, Any], result: str) -> None:
        await self.store.update_provider_job(*self.key, status="done", detail=detail, result=result)

    async def failed(self, why: str) -> ToolError:
        """Record the failure; the error to raise."""
        await self.store.update_provider_job(*self.key, status="failed", result=why)
        return ToolError(why)


def saved_of(record: ProviderJob) -> list[Path]:
    return [Path(p) for p in record.detail.get("saved", []) if isinstance(p, str)]


async def run_sync(
    journal: Journal,
    maker: ImageMaker,
    request: Any,
    *,
    key: str,
    save: SaveOne,
) -> Outcome:
    """A synchronous generation, recorded "sending" before its request."""
    earlier = await journal.begin()
    if earlier is not None:
        return await settled(journal, earlier)
    saved: list[Path] = []

    async def each(output: Output) -> None:
        saved.append(await save(output))
        await journal.progress("sending", {"saved": [str(p) for p in saved]})

    try:
        spend = await maker.make(request, key=key, each=each)
    except GenerationError as exc:
        if not saved:
            raise await journal.failed(f"{journal.tool}: {exc}") from None
        return Outcome(saved, Spend(), True, note=f"the rest failed: {exc}")
    return Outcome(saved, spend, True)


async def run_job(
    journal: Journal,
    provider: JobProvider,
    request: Any,
    *,
    key: str,
    save: SaveAll,
    backoff: Backoff,
    timeout: float,
    clock: Callable[[], float] = time.time,
) -> Outcome:
    """A job: submitted once (its id recorded before the first poll), polled with
    backoff until done, failed or `timeout` after it was submitted, then fetched."""
    earlier = await journal.begin()
    if earlier is None:
        try:
            job = await provider.submit(request, key=key)
        except GenerationError as exc:
            raise await journal.failed(f"{journal.tool}: {exc}") from None
        await journal.running(job)
        started, first_wait = clock(), True
    elif earlier.status == "running" and earlier.job:
        job, started, first_wait = Submitted(earlier.job, earlier.detail), earlier.created_at, False
    else:
        return await settled(journal, earlier)
    done = await _poll(journal, provider, job, key, backoff, started + timeout, first_wait, clock)
    made = await _fetch(journal, provider, job, done, key)
    return Outcome(await save(made.outputs), made.spend, True)


async def _poll(
    journal: Journal,
    provider: JobProvider,
    job: Submitted,
    key: str,
    backoff: Backoff,
    deadline: float,
    wait_first: bool,
    clock: Callable[[], float],
) -> Progress:
    last = "no answer yet"
    for wait in backoff.waits():
        if wait_first:
            await asyncio.sleep(wait)
        wait_first = True
        try:
            progress = await provider.poll(job, key=key)
        except TransientError as exc:
            last = str(exc)
        except GenerationError as exc:
            raise await journal.failed(f"{journal.tool}: {exc}") from None
        else:
            if progress.state == "done":
                return progress
            if progress.state == "failed":
                raise await journal.failed(f"{journal.tool}: the job failed: {progress.message}")
            last = progress.message
        if clock() + wait > deadline:
            raise await journal.failed(
                f"{journal.tool}: the {journal.provider} job {job.job} did not finish in time "
                f"(last: {last}); it may still finish and be charged, but it is no longer "
                "waited for"
            )
    raise AssertionError("unreachable: the waits never end")


async def _fetch(
    journal: Journal, provider: JobProvider, job: Submitted, done: Progress, key: str
) -> Made:
    for attempt in range(FETCH_TRIES):
        try:
            return await provider.fetch(job, done, key=key)
        except TransientError as exc:
            if attempt == FETCH_TRIES - 1:
                raise ToolError(
                    f"{journal.tool}: the job {job.job} finished but its result cannot be "
                    f"downloaded now ({exc}); call again later"
                ) from None
            await asyncio.sleep(2.0 * (attempt + 1))
        except GenerationError as exc:
            raise await journal.failed(f"{journal.tool}: {exc}") from None
    raise AssertionError("unreachable")


def is_settled(earlier: ProviderJob | None) -> bool:
    """Whether a call's earlier run decided its answer (nothing to send, poll or read)."""
    return earlier is not None and not (earlier.status == "running" and earlier.job)


async def settled(journal: Journal, earlier: ProviderJob) -> Outcome:
    """The answer of a call that ran before: what it answered, or that it was cut off."""
    saved = saved_of(earlier)
    if earlier.status == "done":
        return Outcome(saved, Spend(), False)
    if earlier.status == "failed":
        raise ToolError(earlier.result or f"{journal.tool}: this call failed earlier")
    raise await journal.failed(cut_off(journal.tool, saved))
