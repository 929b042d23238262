"""A script schedule's slot (spec 000 "Schedules": script schedules).

The handler runs the command once (script slots are an at-most-once job kind with a
serial key per schedule, so a stop or a crash never reruns a script with side effects:
the queue records such a run interrupted, work/service.py; its process group is
recorded in run/scripts so the next start kills one a crash left running,
work/script_groups.py), then:
empty stdout or a line exactly [SILENT] says nothing; otherwise `deliver` queues stdout
to the chat through the outbox (no model call, ever), `agent` starts a turn with the
schedule's prompt and the output appended, `silent` sends nothing. A non-zero exit or a
timeout records "error: ..." with the end of stderr; the third failure in a row sends
one notice to the chat, the streak stays quiet after, and the first success after a
notice says the script works again. The last 4 KB of output and the status stay on the
schedule.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from habakkuk.engine.agent.turn_access import TurnsAccess
from habakkuk.engine.errors import HabakkukError, NotFound
from habakkuk.engine.hook_events import HookFirer
from habakkuk.engine.i18n import t
from habakkuk.engine.jobs import Lease, payload_of
from habakkuk.engine.outbox_access import TextOutbox
from habakkuk.engine.pools import PermanentJobError
from habakkuk.engine.session_access import SessionsAccess
from habakkuk.work.prompt_runs import fire_hook, start_turn
from habakkuk.work.run_book import (
    RunBook,
    Settled,
    delivery_id_for,
    delivery_note,
    target_of,
)
from habakkuk.work.schedule_types import FAILURE_NOTICE_AT, KEPT_OUTPUT, Schedule
from habakkuk.work.script_groups import ScriptGroups
from habakkuk.work.script_process import (
    ScriptResult,
    resolve_workdir,
    run_script,
    says_nothing,
    script_env,
)
from habakkuk.work.service import SCRIPT_SLOTS

log = logging.getLogger(__name__)


def streak_after(previous: int, ok: bool) -> tuple[int, str | None]:
    """The new failure streak and which notice is due: "failing", "works again" or None."""
    if ok:
        return 0, ("works again" if previous >= FAILURE_NOTICE_AT else None)
    streak = previous + 1
    return streak, ("failing" if streak == FAILURE_NOTICE_AT else None)


def notice_text(schedule: Schedule, notice: str, status: str, language: str = "en") -> str:
    """The chat message of a failure-streak notice, in the chat's `language`."""
    name = repr(schedule.name)
    if notice == "failing":
        return t("work.schedule.failing", count=FAILURE_NOTICE_AT, name=name, status=status,
                 language=language)  # fmt: skip
    return t("work.schedule.works_again", name=name, language=language)


def combined_output(result: ScriptResult) -> str:
    """What the schedule keeps: stdout, then stderr when there is any."""
    text = result.stdout
    if result.stderr.strip():
        text = f"{text}\n[stderr]\n{result.stderr}" if text else result.stderr
    return text[-KEPT_OUTPUT:]


class ScriptRuns:
    """The handler of script slot jobs: `run(lease)` for the scripts' own Pool."""

    def __init__(
        self,
        book: RunBook,
        *,
        workspace_of: Callable[[str], Path],
        env_file: Path,
        outbox: Callable[[], TextOutbox],
        sessions: SessionsAccess,
        turns: TurnsAccess,
        hooks: HookFirer | None = None,
        groups: ScriptGroups | None = None,
        language_of: Callable[[str], str] = lambda channel: "",
    ):
        self.book = book
        self.groups = groups
        self.workspace_of = workspace_of
        self.env_file = env_file
        self.outbox = outbox
        self.language_of = language_of  # a channel's language (Config.language_of)
        self.sessions = sessions
        self.turns = turns
        self.hooks = hooks

    async def run(self, lease: Lease) -> dict[str, Any]:
        job = lease.job
        try:
            schedule = await self.book.get(payload_of(job, SCRIPT_SLOTS).schedule)
        except NotFound:
            return {"skipped": "schedule deleted"}
        if schedule.command is None:
            raise PermanentJobError(f"{job.id}: schedule {schedule.id} has no command")
        await self.book.run_started(job.id)
        fire_hook(self.hooks, schedule, job.id)
        workspace = self.workspace_of(schedule.agent)
        try:
            workspace.mkdir(parents=True, exist_ok=True)  # a new agent's is made on first use
            cwd = resolve_workdir(workspace, schedule.workdir)
        except (HabakkukError, OSError) as exc:
            result = ScriptResult(None, "", "", start_error=str(exc))
        else:
            env = script_env(
                self.env_file, agent=schedule.agent, schedule_id=schedule.id, name=schedule.name
            )
            result = await self._run(job.id, schedule.command, cwd, env, schedule.timeout_seconds)
        streak, notice = streak_after(schedule.fail_streak, result.ok)
        output = combined_output(result)
        if not result.ok:
            status = result.error(schedule.timeout_seconds)
            await self.book.run_settled(
                job.id,
                Settled(
                    "failed", reason=status, last_status=status, last_output=output,
                    fail_streak=streak,
                ),
            )  # fmt: skip
            if notice is not None:
                await self._notice(schedule, job.id, notice, status)
            return {"status": "failed", "error": status}
        if notice is not None:
            await self._notice(schedule, job.id, notice, "ok")
        session, delivered, note = await self._say(schedule, job.id, result.stdout)
        await self.book.run_settled(
            job.id,
            Settled(
                "ran", reason=note, session=session, delivered=delivered, last_status="ok",
                last_output=output, fail_streak=0,
            ),
        )  # fmt: skip
        return {"status": "ran", "session": session}

    async def _run(
        self, job: str, command: str, cwd: Path, env: dict[str, str], timeout: float
    ) -> ScriptResult:
        """The command, its process group on record while it runs (`groups`)."""
        groups = self.groups
        if groups is None:
            return await run_script(command, cwd, env, timeout)
        try:
            return await run_script(
                command, cwd, env, timeout, on_start=lambda pgid: groups.started(job, pgid)
            )
        finally:
            groups.ended(job)  # the group is gone however run_script ended

    async def _say(self, schedule: Schedule, job: str, stdout: str) -> tuple[str, bool | None, str]:
        """Act on a successful run's stdout: (the agent turn's session, delivered, where
        the output went or why nowhere: the slot's reason)."""
        if schedule.on_output == "silent":
            return "", None, "on_output silent: the output is kept, not sent"
        if says_nothing(stdout):
            return "", None, "no output (or [SILENT]): nothing to send"
        if schedule.on_output == "agent":
            text = f"{schedule.prompt}\n\n{stdout.rstrip()}" if schedule.prompt else stdout
            session, _ = await start_turn(self.sessions, self.turns, schedule, job, text)
            # its reply's delivery settles `delivered`
            return session, None, delivery_note(schedule, "the agent's reply is in its session")
        note = delivery_note(schedule, "the output is kept (habakkuk schedules show)")
        target = target_of(schedule)
        if target is None:
            log.info("schedule %s: output with nowhere to deliver it", schedule.id)
            return "", None, note
        try:
            await self.outbox().send_text(delivery_id_for(job), target, stdout.rstrip())
        except ValueError as exc:  # a malformed address: recorded, not retried
            await self.book.delivery_settled(job, delivered=False, reason=str(exc))
            return "", False, ""
        return "", None, note  # queued; the delivery job settles `delivered`

    async def _notice(self, schedule: Schedule, job: str, notice: str, status: str) -> None:
        target = target_of(schedule)
        if target is None:
            log.warning("schedule %s: %s, and no chat to tell", schedule.id, notice)
            return
        language = self.language_of(target.partition(":")[0]) or "en"
        try:
            await self.outbox().send_text(
                delivery_id_for(job, "notice"),
                target,
                notice_text(schedule, notice, status, language),
            )
        except ValueError as exc:
            log.warning("schedule %s: cannot send its notice: %s", schedule.id, exc)
