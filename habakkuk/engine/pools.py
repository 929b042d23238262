"""Worker pools: one per job kind (or group of kinds), so no kind starves another.

A pool claims jobs up to its concurrency, runs each under a heartbeat, and
settles the job from the handler's outcome:

- the handler returns a dict: done, with that result;
- it raises `PermanentJobError`: failed for good;
- it raises anything else: retried with backoff until `max_attempts`;
- the job is stopped (`JobQueue.cancel` or `Pool.stop_job`): the handler sees
  CancelledError with `lease.stop_reason == "user"`, cleans up, and the job is
  cancelled;
- the lease is lost: the handler is cancelled with `stop_reason == "lease_lost"`
  and nothing more is written;
- the pool shuts down: `stop_reason == "shutdown"`, the lease is released so the
  next start resumes the job at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

from habakkuk.engine.timeouts import wait_within

from .errors import LeaseLost
from .jobs import Job, JobQueue, Lease

log = logging.getLogger(__name__)

Handler = Callable[[Lease], Coroutine[Any, Any, dict[str, Any] | None]]
FinishedCallback = Callable[[Job], None]


class PermanentJobError(Exception):
    """A failure that retrying cannot fix; the job fails at once with this message."""


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
        self._wake = asyncio.Event()
        self._running: dict[str, tuple[asyncio.Task[None], Lease]] = {}
        self._handlers: dict[str, asyncio.Task[dict[str, Any] | None]] = {}
        self._loop_task: asyncio.Task[None] | None = None
        self._slots = asyncio.Semaphore(concurrency)
        self._stopping = False
        queue.add_listener(self._on_enqueue)

    def _on_enqueue(self, kind: str) -> None:
        if kind in self.kinds:
            self._wake.set()

    @property
    def running_jobs(self) -> list[Job]:
        return [lease.job for _, lease in self._running.values()]

    def start(self) -> None:
        """Start claiming in the background."""
        if self._loop_task is None:
            self._loop_task = asyncio.create_task(self._claim_loop(), name=f"pool:{self.kinds}")

    async def _claim_loop(self) -> None:
        while not self._stopping:
            await self._slots.acquire()
            # Cleared before the claim, not after: an enqueue that lands while the
            # claim is in flight must still wake the next idle wait.
            self._wake.clear()
            try:
                lease = await self.queue.claim(self.kinds)
            except Exception:
                self._slots.release()
                log.exception("claim failed for %s", self.kinds)
                await self._idle()
                continue
            if lease is None:
                self._slots.release()
                await self._idle()
                continue
            task = asyncio.create_task(self._run(lease), name=f"job:{lease.job.id}")
            self._running[lease.job.id] = (task, lease)

    async def _idle(self) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await wait_within(self._wake.wait(), self.poll_interval)

    async def _run(self, lease: Lease) -> None:
        """Run `lease`'s job, then each job claimed in the same trip as its completion."""
        following: Lease | None = lease
        try:
            while following is not None:
                following = await self._run_job(following)
        finally:
            self._slots.release()

    async def _run_job(self, lease: Lease) -> Lease | None:
        """Run one job and settle it; returns the next job's lease when it claimed one."""
        job = lease.job
        work = asyncio.create_task(self.handler(lease), name=f"handler:{job.id}")
        self._handlers[job.id] = work
        beat = asyncio.create_task(self._heartbeat(lease, work), name=f"beat:{job.id}")
        following: Lease | None = None
        try:
            try:
                result = await asyncio.shield(work)
            except asyncio.CancelledError:
                if not work.done():
                    # The pool task itself was cancelled (shutdown): stop the handler too.
                    lease.stop_reason = lease.stop_reason or "shutdown"
                    work.cancel()
                    with contextlib.suppress(BaseException):
                        await work
                if work.cancelled() or lease.stop_reason is not None:
                    await self._settle_stopped(lease)
                    return None
                result = work.result()
            if lease.job.finished:
                pass  # the handler completed its job in its last write (a turn's reply)
            elif self._stopping:
                await self.queue.complete(lease, result)
            else:
                following = await self._complete_and_claim(lease, result)
        except LeaseLost:
            log.warning("job %s: lease lost; stopping without writing", job.id)
        except PermanentJobError as exc:
            await self._safe(self.queue.fail(lease, str(exc), retry=False))
        except Exception as exc:
            message = f"{type(exc).__name__}: {exc}"
            log.warning("job %s failed: %s", job.id, message)
            await self._safe(self.queue.fail(lease, message))
        finally:
            beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beat
            self._running.pop(job.id, None)
            self._handlers.pop(job.id, None)
            if self.on_finished is not None:
                try:
                    self.on_finished(job)
                except Exception:
                    log.exception("on_finished callback failed for job %s", job.id)
        if following is not None and self._stopping:
            # The pool began stopping while the trip was in flight: hand the job back.
            await self._safe(self.queue.release(following))
            return None
        if following is not None:
            task = asyncio.current_task()
            assert task is not None
            self._running[following.job.id] = (task, following)  # type: ignore[assignment]
        return following

    async def _complete_and_claim(
        self, lease: Lease, result: dict[str, Any] | None
    ) -> Lease | None:
        """Complete `lease` and claim the next job in one trip; returns the new lease.

        A lease lost on the finished job is logged (nothing was written to it) and the
        claim still stands, so the next job runs.
        """
        trip = asyncio.ensure_future(self.queue.complete_and_claim(lease, result, self.kinds))
        try:
            finished, following = await asyncio.shield(trip)
        except asyncio.CancelledError:
            # Shutdown while the trip was in flight: it ran whole or not at all; a job
            # it claimed goes straight back so the next start takes it at once.
            with contextlib.suppress(BaseException):
                _, claimed = await trip
                if claimed is not None:
                    await self.queue.release(claimed)
            raise
        if not finished:
            log.warning("job %s: lease lost before it finished; nothing written", lease.job.id)
        return following

    async def _settle_stopped(self, lease: Lease) -> None:
        reason = lease.stop_reason
        if reason == "user":
            await self._safe(self.queue.cancelled(lease, {"stopped": True}))
        elif reason == "shutdown":
            await self._safe(self.queue.release(lease))
        # lease_lost: someone else owns the job now; write nothing.

    async def _safe(self, action: Awaitable[Any]) -> None:
        try:
            await action
        except LeaseLost:
            pass
        except Exception:
            log.exception("could not settle a job")

    async def _heartbeat(self, lease: Lease, work: asyncio.Task[Any]) -> None:
        interval = max(0.05, lease.lease_seconds / 3)
        while not work.done():
            await asyncio.sleep(interval)
            try:
                owned = await self.queue.heartbeat(lease)
            except Exception:
                log.exception("heartbeat failed for job %s", lease.job.id)
                continue
            if not owned:
                lease.stop_reason = "lease_lost"
                work.cancel()
                return
            if lease.job.cancel_requested:
                lease.stop_reason = "user"
                work.cancel()
                return

    def stop_job(self, job_id: str) -> bool:
        """Stop a job this pool is running now (at once, without waiting for a beat)."""
        entry = self._running.get(job_id)
        work = self._handlers.get(job_id)
        if entry is None or work is None:
            return False
        entry[1].stop_reason = "user"
        work.cancel()
        return True

    async def stop(self) -> None:
        """Stop claiming, interrupt running jobs and release their leases."""
        self._stopping = True
        if self._loop_task is not None:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task
        tasks = [task for task, _ in self._running.values()]
        for task, lease in self._running.values():
            lease.stop_reason = lease.stop_reason or "shutdown"
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
