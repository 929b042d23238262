"""Sub-agents (spec 000 "Delegation"): `Delegation` implements DelegationAccess.

A delegate call becomes a sub-turn job (kind SUBTURN_KIND, its own pool) whose id derives
from the parent session, the parent turn and the call (agent + task), plus each option
only when given: a parent that crashed and repeats the call reattaches to its child. The
child runs in a session derived from the job (origin "delegate", never the chat welcome);
the job's payload is a DelegateRun: the SubturnSpec and the TurnRequest a TurnRunner runs.

Foreground calls wait for the child's terminal status, bounded by delegation.timeout_seconds
(then the child is stopped and reported "timed out"). Background children (and children
stopped with /subagents stop) tell the parent in a turn of the parent session whose id
derives from the child's (NOTICE_PREFIX + job): the child's result is stored before the
notice is queued, and `sweep` queues the notices a crash left unqueued, so each is queued
exactly once.

Its SQL (why a child was stopped, the children read off the jobs) is
work/delegation_store.py's, on either engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from habakkuk.engine.agent.requests import SubturnOptions, TurnRequest, turn_request
from habakkuk.engine.agent.turn_access import TurnsAccess
from habakkuk.engine.config import Config, ModelRef
from habakkuk.engine.errors import HabakkukError, NotFound
from habakkuk.engine.events import DelegateEnded, DelegateStarted, EventBus, JobFinished
from habakkuk.engine.jobs import Job, JobQueue, payload_of
from habakkuk.engine.session_access import SessionsAccess
from habakkuk.engine.sessions import DELEGATE_ORIGIN, TranscriptStore
from habakkuk.engine.timeouts import wait_within
from habakkuk.work.delegation_store import DelegationStore
from habakkuk.work.delegation_types import (
    SUBTURN_KIND,
    SUBTURNS,
    ChildReport,
    ChildStatus,
    DelegateRun,
    SubturnSpec,
)

log = logging.getLogger(__name__)

NOTICE_PREFIX = "turn_"  # the parent's notice turn: turn_<job>
SUBTURN_MAX_ATTEMPTS = 3
STOP_GRACE = 15.0  # seconds a stopped child gets to settle before the report is read


def subturn_id(spec: SubturnSpec) -> str:
    """sub_<hash> of the parent session, the parent turn, the call, and the options given."""
    call: dict[str, Any] = {
        "parent": spec.parent_session,
        "turn": spec.parent_turn,
        "agent": spec.agent,
        "task": spec.task,
    }
    if spec.model is not None:
        call["model"] = spec.model
    if spec.toolsets is not None:
        call["toolsets"] = list(spec.toolsets)
    if spec.output_schema is not None:
        call["output_schema"] = spec.output_schema
    if spec.worktree:
        call["worktree"] = True
    if spec.background:
        call["background"] = True
    body = json.dumps(call, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return "sub_" + hashlib.sha256(body.encode()).hexdigest()[:20]


def child_session_id(job: str) -> str:
    return f"ses_{job}"


def format_report(report: ChildReport) -> str:
    """The report as the parent reads it (the delegate result, the notice turn)."""
    if report.status == "done" and report.output is not None and not report.branch:
        return report.reply  # output_schema: the parent gets just the JSON
    lines = [f"Sub-agent {report.agent} ({report.job}): {report.status}"]
    if report.error:
        lines.append(f"error: {report.error}")
    if report.reply:
        label = "reply" if report.status == "done" else "partial output (its last text)"
        lines.append(f"{label}:\n{report.reply}")
    elif report.status != "done" and report.finished:
        lines.append("partial output: none (it wrote no text)")
    if report.branch:
        lines.append(f"branch: {report.branch}")
        lines.append(f"base commit: {report.base_commit}")
        lines.append("git diff --stat:\n" + (report.diff_stat or "(no changes)"))
    return "\n".join(lines)


class Delegation:
    """DelegationAccess on one home's job queue; the sub-turn pool runs the children."""

    def __init__(
        self,
        config: Config,
        queue: JobQueue,
        bus: EventBus,
        sessions: SessionsAccess,
        transcripts: TranscriptStore,
        turns: TurnsAccess,
    ):
        self.config = config
        self.queue = queue
        self.bus = bus
        self.sessions = sessions
        self.transcripts = transcripts
        self.turns = turns
        self.stop_local: Any = None  # (job id) -> bool: the sub-turn pool's stop_job
        self.store = DelegationStore(queue.db)

    # -- delegate ---------------------------------------------------------------------

    async def delegate(
        self, spec: SubturnSpec, *, stopped_by_user: Callable[[], bool] | None = None
    ) -> ChildReport:
        """Queue (or reattach to) the child; see DelegationAccess.delegate."""
        parent = await self.sessions.session(spec.parent_session)
        parent_agent = self.config.agent(parent.agent)
        agent = self.config.agent(spec.agent or parent_agent.name)
        spec = _with(spec, agent=agent.name)
        if spec.toolsets is not None:
            outside = [t for t in spec.toolsets if t not in parent_agent.toolsets]
            if outside:
                raise HabakkukError(
                    f"toolsets {', '.join(outside)} are not a subset of the parent's "
                    f"({', '.join(parent_agent.toolsets) or 'none'})"
                )
        if spec.model is not None:
            _check_model(self.config, spec.model)
        text = spec.task
        if spec.output_schema is not None:
            from habakkuk.work.output_schema import check_schema, instructions

            check_schema(spec.output_schema)
            text += instructions(spec.output_schema)
        job = subturn_id(spec)
        tree: Path | None = None
        if spec.worktree:
            from habakkuk.work.worktrees import repository_of, worktree_path

            await repository_of(parent_agent.workspace_path)
            tree = worktree_path(parent_agent.workspace_path, job)
            text += (
                f"\n\nWork in the git worktree {tree} (your workspace, on branch "
                f"habakkuk/{job}); your changes there are committed to that branch when you end."
            )
        if spec.reply_to is None:
            turn = await self.queue.get(spec.parent_turn)
            asked = turn_request(turn) if turn is not None else None
            if asked is not None and asked.reply_to is not None:
                spec = _with(spec, reply_to=asked.reply_to)
        child = await self.sessions.new_session(
            agent.name, origin=DELEGATE_ORIGIN, session_id=child_session_id(job), workspace=tree
        )
        options = SubturnOptions(
            toolsets=spec.toolsets,
            model=spec.model,
            output_schema=spec.output_schema,
            workspace=str(tree) if tree is not None else None,
        )
        run = DelegateRun(
            TurnRequest(child.id, text, subturn=options),
            spec,
            worktree_of=str(parent_agent.workspace_path) if tree is not None else None,
        )
        await self.queue.enqueue(
            job,
            SUBTURN_KIND,
            run,
            serial_key=child.id,
            max_attempts=SUBTURN_MAX_ATTEMPTS,
            agent=child.agent,  # claimed only by a process hosting the child's agent
        )
        self.bus.publish(
            DelegateStarted(
                session=spec.parent_session,
                turn=spec.parent_turn,
                call_id=spec.call_id,
                job=job,
                child_session=child.id,
                agent=agent.name,
                task=spec.task,
                background=spec.background,
            )
        )
        if spec.background:
            return await self.report(job)
        try:
            return await self.wait(job, self.config.delegation.timeout_seconds)
        except asyncio.CancelledError:
            if stopped_by_user is not None and stopped_by_user():
                # The user stopped the parent: its child stops with it, and says so.
                await asyncio.shield(self._stop(job, "stopped", "the parent turn was stopped"))
            raise

    async def wait(self, job: str, timeout: float) -> ChildReport:
        """Wait for the child's terminal status; after `timeout` seconds stop it: timed out."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        with self.bus.subscribe(
            lambda e: isinstance(e, JobFinished) and e.job == job, maxsize=4
        ) as finished:
            while True:
                report = await self.report(job)
                if report.finished:
                    return report
                left = deadline - loop.time()
                if left <= 0:
                    break
                with contextlib.suppress(asyncio.TimeoutError):
                    await wait_within(finished.get(), min(0.5, left))
        seconds = f"{timeout:g}"
        await self._stop(
            job, "timed out", f"timed out after {seconds}s (delegation.timeout_seconds)"
        )
        return await self._settled(job)

    async def _settled(self, job: str) -> ChildReport:
        """The report once a stopped child has settled (its partial output stored)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + STOP_GRACE
        report = await self.report(job)
        while not report.finished and loop.time() < deadline:
            await asyncio.sleep(0.05)
            report = await self.report(job)
        return report

    async def record_stop(self, job: str, status: ChildStatus, error: str) -> None:
        """Record why the child stops (stopped, timed out), before it does."""
        await self.store.record_stop(job, status, error, time.time())

    async def _stop(self, job: str, status: ChildStatus, error: str) -> None:
        """Record why the child stops, then stop it here or in whichever process runs it."""
        await self.record_stop(job, status, error)
        if self.stop_local is None or not self.stop_local(job):
            await self.queue.cancel(job)

    # -- reports ----------------------------------------------------------------------

    async def report(self, job_id: str) -> ChildReport:
        """The child's report now; NotFound when there is no such sub-turn."""
        job = await self.queue.get(job_id)
        if job is None or job.kind != SUBTURN_KIND:
            raise NotFound(f"no sub-agent {job_id!r}")
        return await self._report_of(job)

    async def _report_of(self, job: Job) -> ChildReport:
        run = payload_of(job, SUBTURNS)
        spec, session = run.spec, run.session
        result = job.result or {}
        status: ChildStatus
        error = job.error or ""
        if job.status in ("queued", "running"):
            status = "queued" if job.status == "queued" else "running"
        elif job.status == "done":
            status = "done"
        else:
            stop = await self._stop_of(job.id)
            if stop is not None:
                status, error = stop
            else:
                status = "failed" if job.status == "failed" else "stopped"
        reply = str(result.get("reply", "")) if status == "done" else ""
        if not reply and status != "done":
            reply = await self._last_text(session)
        return ChildReport(
            job=job.id,
            agent=spec.agent,
            session=session,
            parent_session=spec.parent_session,
            task=spec.task,
            status=status,
            reply=reply,
            error=error,
            output=result.get("output") if status == "done" else None,
            branch=str(result.get("branch", "")),
            base_commit=str(result.get("base_commit", "")),
            diff_stat=str(result.get("diff_stat", "")),
            started_at=job.created_at,
            ended_at=job.updated_at if job.finished else None,
            background=spec.background,
        )

    async def _stop_of(self, job: str) -> tuple[ChildStatus, str] | None:
        stop = await self.store.stop_of(job)
        if stop is None:
            return None
        status: ChildStatus = "timed out" if stop[0] == "timed out" else "stopped"
        return status, stop[1]

    async def _last_text(self, session: str) -> str:
        """The child's last assistant text (its partial output)."""
        try:
            messages = await self.transcripts.messages(session)
        except Exception:
            return ""
        for stored in reversed(messages):
            if stored.message.role == "assistant" and stored.message.text.strip():
                return stored.message.text
        return ""

    async def children(self, parent_session: str, *, active_only: bool = True) -> list[ChildReport]:
        """The session's children (queued or running only, by default), oldest first."""
        rows = await self.store.children(SUBTURN_KIND, parent_session, active_only=active_only)
        return [await self._report_of(Job.from_row(r)) for r in rows]

    async def stop(self, parent_session: str, job_prefix: str) -> ChildReport:
        """Cancel one of the session's children (a prefix is enough) and tell the parent."""
        prefix = job_prefix.strip()
        if not prefix:
            raise HabakkukError.said("errors.subagents.stop_usage")
        matches = [c for c in await self.children(parent_session) if c.job.startswith(prefix)]
        if not matches:
            raise NotFound.said("errors.subagents.none_running", prefix=repr(prefix))
        if len(matches) > 1:
            names = ", ".join(c.job for c in matches)
            raise HabakkukError.said("errors.subagents.several", prefix=repr(prefix), names=names)
        job = matches[0].job
        await self._stop(job, "stopped", "stopped with /subagents stop")
        report = await self._settled(job)
        if report.finished:
            await self.notify(job)
        return report

    # -- endings and notices -----------------------------------------------------------

    async def ended(self, job_id: str) -> None:
        """A sub-turn job this process ran settled: if it ended for good, publish
        DelegateEnded and queue the parent's notice when it is owed."""
        job = await self.queue.get(job_id)
        if job is None or not job.finished:
            return  # a retry is coming
        report = await self._report_of(job)
        self.bus.publish(
            DelegateEnded(
                session=report.parent_session,
                job=job.id,
                child_session=report.session,
                status=report.status,
                seconds=max(0.0, job.updated_at - job.created_at),
            )
        )
        await self._notice_if_owed(job, report)

    async def _notice_if_owed(self, job: Job, report: ChildReport) -> None:
        if report.background or report.status == "stopped":
            await self._queue_notice(job, report)

    async def notify(self, job_id: str) -> None:
        """Queue the parent's notice of a finished child (idempotent)."""
        job = await self.queue.get(job_id)
        if job is not None and job.finished:
            await self._queue_notice(job, await self._report_of(job))

    async def _queue_notice(self, job: Job, report: ChildReport) -> None:
        spec = payload_of(job, SUBTURNS).spec
        text = (
            f"[The sub-agent you delegated to ended: {report.status}. Task: {spec.task[:300]}]\n"
            + format_report(report)
        )
        await self.turns.submit(
            spec.parent_session, text, turn_id=NOTICE_PREFIX + job.id, reply_to=spec.reply_to
        )

    async def sweep(self) -> int:
        """Queue the notices owed for children that ended while no process could (a kill
        between the child's result and its notice); the number queued."""
        rows = await self.store.notices_owed(SUBTURN_KIND, NOTICE_PREFIX)
        queued = 0
        for row in rows:
            job = Job.from_row(row)
            try:
                await self._queue_notice(job, await self._report_of(job))
                queued += 1
            except Exception as exc:  # the parent session may be gone
                log.warning("cannot queue the notice of %s: %s", job.id, exc)
        return queued


def _with(spec: SubturnSpec, **changes: Any) -> SubturnSpec:
    from dataclasses import replace

    return replace(spec, **changes)


def _check_model(config: Config, model: str) -> None:
    """model is PROVIDER/MODEL of a configured provider (as /model checks it)."""
    try:
        ref = ModelRef.parse(model.strip())
    except ValueError as exc:
        raise HabakkukError(f"model: {exc}") from None
    if ref.provider not in config.providers:
        known = ", ".join(sorted(config.providers)) or "none"
        raise HabakkukError(
            f"model: provider {ref.provider!r} is not configured (providers: {known})"
        )
