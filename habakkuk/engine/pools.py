"""Worker pools: one per job kind (or group of kinds), so no kind starves another.

A pool claims jobs up to its concurrency and runs each as a task of its own. One
dispatcher per pool does the pool's trips to the database: each completes every job
that finished since the last one and claims as many jobs as there are free slots, in
one transaction (so a busy pool pays one trip for many jobs, not two per job). One
heartbeat per pool extends all its leases in one trip. A job settles from the
handler's outcome:

- the handler returns a dict: done, with that result;
- it raises `PermanentJobError`: failed for good;
- it raises `jobs.BadPayload` (the job's stored payload does not parse as its kind's
  type, read with `jobs.payload_of`): failed for good, with that one line logged;
- it raises anything else: retried with backoff until `max_attempts`;
- the job is stopped (`JobQueue.cancel` or `Pool.stop_job`): the handler sees
  CancelledError with `lease.stop_reason == "user"`, cleans up, and the job is
  cancelled;
- the lease is lost: the handler is cancelled with `stop_reason == "lease_lost"`
  and nothing more is written;
- the pool shuts down: `stop_reason == "shutdown"`, the lease is released so the
  next start resumes the job at once; a job of a kind declared at most once
  (`jobs.JobKind`) whose handler had started is never given back: it ends failed as
  interrupted (its kind records why), or done when its handler still returned.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

from habakkuk.engine.timeouts import wait_within

from .errors import LeaseLost
from .jobs import BadPayload, Job, JobQueue, Lease, at_most_once

log = logging.getLogger(__name__)

Handler = Callable[[Lease], Coroutine[Any, Any, dict[str, Any] | None]]
FinishedCallback = Callable[[Job], None]


class PermanentJobError(Exception):
    """A failure that retrying cannot fix; the job fails at once with this message."""


@dataclass(frozen=True)
class PoolState:
    """One pool's state, as readiness reports it."""

    name: str  # its kinds, joined by ","
    state: str  # not started | up | draining (claims nothing more) | stopped | down
    since: float  # epoch seconds it entered that state
    running: int  # jobs it holds now


class Pool:
    """Runs jobs of `kinds` with at most `concurrency` at once."""

    def __init__(
        self,
        queue: JobQueue,
        kinds: Sequence[str],
        handler: Handler,
        *,
        concurrency: int = 4,
        poll_interval: float = 0.5,
        on_finished: FinishedCallback | None = None,
    ):
        self.queue = queue
        self.kinds = list(kinds)
        self.handler = handler
        self.concurrency = concurrency
        self.poll_interval = poll_interval
        self.on_finished = on_finished
        # Set when the dispatcher has something to do: a job of ours was queued, a job
        # finished (a completion to write, a slot free).
        self._kick = asyncio.Event()
        # Jobs whose handler returned, with their results: the next trip completes them.
        self._settling: list[tuple[Lease, dict[str, Any] | None]] = []
        # Every job this pool holds a lease on, until it is settled.
        self._running: dict[str, tuple[asyncio.Task[None], Lease]] = {}
        # Jobs whose handler is running now: the only time their task is cancelled. A
        # task cancelled before its first step would end without running a line, and
        # one cancelled while it settles its job would leave the job unsettled; both are
        # told to stop (stop_reason) instead.
        self._in_handler: set[str] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False
        # Set by `drain`: nothing more is claimed; running jobs go on and settle.
        self._draining = False
        self._state, self._since = "not started", time.time()
        queue.add_listener(self._on_enqueue)

    def _enter(self, state: str) -> None:
        if state != self._state:
            self._state, self._since = state, time.time()

    def state(self) -> PoolState:
        """What the pool does now; "down" when its dispatcher or heartbeat ended while it
        should run (a bug: it claims or beats no more)."""
        name = ",".join(self.kinds)
        if self._state in ("up", "draining") and any(task.done() for task in self._tasks):
            self._enter("down")
        return PoolState(name, self._state, self._since, len(self._running))

    def drain(self) -> None:
        """Claim nothing more; the jobs running go on and settle as usual (`stop` then
        hands back whatever still runs)."""
        self._draining = True
        if self._state == "up":
            self._enter("draining")

    def _on_enqueue(self, kind: str) -> None:
        if kind in self.kinds:
            self._kick.set()

    @property
    def running_jobs(self) -> list[Job]:
        return [lease.job for _, lease in self._running.values()]

    def start(self) -> None:
        """Start claiming in the background (and hearing other nodes' enqueues: see
        `JobQueue.listen`)."""
        if not self._tasks and not self._stopping:
            self.queue.listen()
            self._enter("draining" if self._draining else "up")
            self._tasks = [
                asyncio.create_task(self._dispatch(), name=f"pool:{self.kinds}"),
                asyncio.create_task(self._beat(), name=f"beat:{self.kinds}"),
            ]

    # -- the dispatcher ----------------------------------------------------------------

    async def _dispatch(self) -> None:
        while not self._stopping:
            # Cleared before the trip, not after: a kick while it is in flight (an
            # enqueue, a job finishing) must still wake the next wait.
            self._kick.clear()
            settled, self._settling = self._settling, []
            # The jobs settled in this trip give their slots to the jobs it claims.
            free = max(0, self.concurrency - len(self._running) + len(settled))
            if self._draining:
                free = 0
            if not settled and free == 0:
                await self._kick.wait()
                continue
            try:
                finished, leases = await self._trip(settled, free)
            except Exception:
                log.exception("claim failed for %s", self.kinds)
                self._settling[:0] = settled  # completed by the next trip
                await self._idle()
                continue
            for (lease, _), ours in zip(settled, finished, strict=True):
                if not ours:
                    log.warning(
                        "job %s: lease lost before it finished; nothing written", lease.job.id
                    )
                self._finalize(lease, kick=False)
            for lease in leases:
                task = asyncio.create_task(self._run(lease), name=f"job:{lease.job.id}")
                self._running[lease.job.id] = (task, lease)
            if len(leases) < free:
                await self._idle()  # nothing more to run now

    async def _trip(
        self, settled: list[tuple[Lease, dict[str, Any] | None]], free: int
    ) -> tuple[list[bool], list[Lease]]:
        """Complete `settled` and claim up to `free` jobs, in one trip: on the loop's
        thread (inline) only when no other job of this pool runs, so the loop would
        only wait for it; beside running jobs it goes to the database thread, which
        runs it while the loop runs them."""
        alone = len(self._running) <= len(settled)
        trip = asyncio.ensure_future(
            self.queue.settle_and_claim(settled, self.kinds, free, inline=alone)
        )
        try:
            return await asyncio.shield(trip)
        except asyncio.CancelledError:
            # Shutdown while the trip was in flight: it ran whole or not at all. The
            # jobs it claimed go straight back, so the next start takes them at once;
            # completions it did not write are left for `stop` to write.
            try:
                _, claimed = await trip
            except BaseException:
                self._settling[:0] = settled
                raise
            for lease, _ in settled:  # written, or lost to another owner: settled either way
                self._finalize(lease)
            for lease in claimed:
                await self._safe(self.queue.release(lease))
            raise

    async def _idle(self) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await wait_within(self._kick.wait(), self.poll_interval)

    def _finalize(self, lease: Lease, *, kick: bool = True) -> None:
        """The job is settled: free its slot and tell `on_finished`.

        A job settled outside the dispatcher (failed, stopped) kicks it: a slot came
        free. One it settled itself does not: that trip's claim used the slot already.
        """
        self._running.pop(lease.job.id, None)
        if kick:
            self._kick.set()
        if self.on_finished is not None:
            try:
                self.on_finished(lease.job)
            except Exception:
                log.exception("on_finished callback failed for job %s", lease.job.id)

    # -- one job -----------------------------------------------------------------------

    async def _run(self, lease: Lease) -> None:
        """Run one job; a result is handed to the dispatcher, other outcomes settled here.

        Whoever stops a job (`stop_job`, the heartbeat, `stop`) sets `lease.stop_reason`
        before cancelling its task, so the reason is known however the handler ends:
        raising CancelledError, or cleaning up and returning.
        """
        job = lease.job
        handed_over = False
        try:
            if lease.stop_reason is not None:  # stopped before it began
                await self._settle_stopped(lease)
                return
            self._in_handler.add(job.id)
            try:
                result = await self.handler(lease)
            except asyncio.CancelledError:
                self._in_handler.discard(job.id)
                lease.stop_reason = lease.stop_reason or "shutdown"
                await self._settle_stopped(lease, started=True)
                return
            finally:
                self._in_handler.discard(job.id)
            if lease.stop_reason == "shutdown" and at_most_once(job.kind) and not job.finished:
                await self.queue.complete(lease, result)  # it ran to its end: done, once
            elif lease.stop_reason is not None:
                await self._settle_stopped(lease, started=True)
            elif lease.job.finished:
                pass  # the handler completed its job in its last write (a turn's reply)
            elif self._stopping:
                await self.queue.complete(lease, result)
            else:
                self._settling.append((lease, result))
                handed_over = True
                self._kick.set()
        except LeaseLost:
            log.warning("job %s: lease lost; stopping without writing", job.id)
        except PermanentJobError as exc:
            await self._safe(self.queue.fail(lease, str(exc), retry=False))
        except BadPayload as exc:  # retrying cannot fix stored data
            log.warning("%s", exc)
            await self._safe(self.queue.fail(lease, str(exc), retry=False))
        except Exception as exc:
            message = f"{type(exc).__name__}: {exc}"
            log.warning("job %s failed: %s", job.id, message)
            await self._safe(self.queue.fail(lease, message))
        finally:
            if not handed_over:
                self._finalize(lease)

    def _interrupt(self, task: asyncio.Task[None], lease: Lease, reason: str) -> None:
        """Stop a job for `reason` (the first reason given stands)."""
        lease.stop_reason = lease.stop_reason or reason
        if lease.job.id in self._in_handler:
            task.cancel()

    async def _settle_stopped(self, lease: Lease, *, started: bool = False) -> None:
        """Settle a stopped job; `started`: its handler ran (and was cut short)."""
        reason = lease.stop_reason
        if reason == "user":
            await self._safe(self.queue.cancelled(lease, {"stopped": True}))
        elif reason == "shutdown":
            if started and at_most_once(lease.job.kind):
                # It may have done part of its work: never started again.
                await self._safe(self.queue.interrupted(lease, "stopped"))
            else:
                await self._safe(self.queue.release(lease))
        # lease_lost: someone else owns the job now (and recorded what became of it).

    async def _safe(self, action: Awaitable[Any]) -> None:
        try:
            await action
        except LeaseLost:
            pass
        except Exception:
            log.exception("could not settle a job")

    # -- the heartbeat -----------------------------------------------------------------

    async def _beat(self) -> None:
        """Extend every running job's lease in one trip; stop a job lost or cancelled."""
        interval = max(0.05, self.queue.lease_seconds / 3)
        while True:
            await asyncio.sleep(interval)
            beating = [
                (lease, task)
                for task, lease in self._running.values()
                if not task.done() and lease.stop_reason is None
            ]
            if not beating:
                continue
            try:
                owned = await self.queue.heartbeat_many([lease for lease, _ in beating])
            except Exception:
                log.exception("heartbeat failed for %s", self.kinds)
                continue
            for (lease, task), ours in zip(beating, owned, strict=True):
                if task.done() or lease.stop_reason is not None:
                    continue
                if not ours:
                    self._interrupt(task, lease, "lease_lost")
                elif lease.job.cancel_requested:
                    self._interrupt(task, lease, "user")

    # -- control -----------------------------------------------------------------------

    def stop_job(self, job_id: str) -> bool:
        """Stop a job this pool is running now (at once, without waiting for a beat)."""
        entry = self._running.get(job_id)
        if entry is None or entry[0].done():
            return False
        task, lease = entry
        if lease.stop_reason is None:
            self._interrupt(task, lease, "user")
        return True

    async def stop(self) -> None:
        """Stop claiming, interrupt running jobs and release their leases."""
        self._stopping = True
        self._enter("stopped")
        started, self._tasks = self._tasks, []
        for task in started:
            task.cancel()
        for task in started:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if started:
            await self.queue.unlisten()
        # Jobs that finished before the dispatcher wrote them: written now, in one trip.
        settled, self._settling = self._settling, []
        if settled:
            try:
                finished, _ = await self.queue.settle_and_claim(settled, self.kinds, 0)
            except Exception:
                log.exception("could not settle %d finished jobs", len(settled))
            else:
                for (lease, _), ours in zip(settled, finished, strict=True):
                    if not ours:
                        log.warning("job %s: lease lost before it finished", lease.job.id)
            for lease, _ in settled:
                self._finalize(lease)
        running = [(task, lease) for task, lease in self._running.values() if not task.done()]
        for task, lease in running:
            self._interrupt(task, lease, "shutdown")
        for task, _ in running:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
