"""The sub-turn pool of one runtime (spec 000 "Delegation"): children run here, in a pool
of their own (workers.subturns wide), so parents waiting on children never take every
turn worker.

The sub-turn job IS the child's turn: a TurnRunner without delegation (sub-agents cannot
delegate further) runs it, in the child's git worktree when it has one. When a job settles
the Delegation publishes its end and queues the parent's notice when one is owed; a sweep
at start queues the notices a killed process left owed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

from habakkuk.engine.agent.turn import TurnDeps, TurnRunner
from habakkuk.engine.jobs import Job, JobQueue, Lease, payload_of
from habakkuk.engine.pools import FinishedCallback, PermanentJobError, Pool
from habakkuk.engine.timeouts import wait_within
from habakkuk.work.delegation import Delegation
from habakkuk.work.delegation_types import SUBTURN_KIND, SUBTURNS
from habakkuk.work.output_schema import SchemaCheck

log = logging.getLogger(__name__)


class SubturnRuns:
    """The sub-turn pool and its start-up sweep (start the pool, then `start_sweep`)."""

    def __init__(
        self,
        queue: JobQueue,
        deps: TurnDeps,
        delegation: Delegation,
        *,
        on_finished: FinishedCallback | None = None,
    ):
        self.delegation = delegation
        # Its turns never offer the delegate toolset (turn_toolsets): no further delegation.
        self.runner = TurnRunner(replace(deps, output_check=SchemaCheck()))
        self._on_finished = on_finished
        self._tasks: set[asyncio.Task[None]] = set()
        self.pool = Pool(
            queue,
            [SUBTURN_KIND],
            self.run,
            concurrency=max(1, deps.config.workers.subturns),
            on_finished=self._finished,
        )
        delegation.stop_local = self.pool.stop_job

    async def run(self, lease: Lease) -> dict[str, Any]:
        """Run one child's turn (in its worktree), bounded by delegation.timeout_seconds."""
        job = lease.job
        run = payload_of(job, SUBTURNS)
        repo_workspace = Path(run.worktree_of) if run.worktree_of else None
        tree = None
        if repo_workspace is not None:
            from habakkuk.work.worktrees import ensure_worktree

            try:
                tree = await ensure_worktree(repo_workspace, job.id)
            except Exception as exc:
                raise PermanentJobError(f"cannot add the worktree: {exc}") from None
        timeout = self.delegation.config.delegation.timeout_seconds
        try:
            result = await wait_within(self.runner.run(lease, run.turn), timeout)
        except TimeoutError:
            await self.delegation.record_stop(
                job.id, "timed out", f"timed out after {timeout:g}s (delegation.timeout_seconds)"
            )
            await self._commit(tree, job)
            raise PermanentJobError(f"timed out after {timeout:g}s") from None
        except BaseException:
            await self._commit(tree, job)
            raise
        if tree is not None:
            from habakkuk.work.worktrees import commit_worktree

            done = await commit_worktree(tree, _message(job))
            result = {
                **result,
                "branch": done.branch,
                "base_commit": done.base_commit,
                "diff_stat": done.diff_stat,
            }
        return result

    async def _commit(self, tree: Any, job: Job) -> None:
        """A child that did not finish still leaves its changes on its branch."""
        if tree is None:
            return
        from habakkuk.work.worktrees import commit_worktree

        with contextlib.suppress(Exception):
            await asyncio.shield(commit_worktree(tree, _message(job)))

    def _finished(self, job: Job) -> None:
        if self._on_finished is not None:
            self._on_finished(job)
        task = asyncio.create_task(self._ended(job.id), name=f"subturn-end:{job.id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _ended(self, job_id: str) -> None:
        try:
            await self.delegation.ended(job_id)
        except Exception as exc:  # the sweep at the next start queues what this missed
            log.warning("sub-turn %s: cannot report its end: %s", job_id, exc)

    def start_sweep(self) -> asyncio.Task[None]:
        """Queue the notices owed from before this start; the task to cancel at close."""

        async def sweep() -> None:
            try:
                queued = await self.delegation.sweep()
                if queued:
                    log.info("queued %d owed sub-agent notices", queued)
            except Exception as exc:
                log.warning("the sub-agent notice sweep failed: %s", exc)

        return asyncio.create_task(sweep(), name="subturn-sweep")


def _message(job: Job) -> str:
    task = payload_of(job, SUBTURNS).spec.task
    first = task.strip().splitlines()[0][:60] if task.strip() else job.id
    return f"Sub-agent {job.id}: {first}"
