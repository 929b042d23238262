"""A prompt schedule's slot: a fresh, unattended session of its agent (spec 000 "Schedules").

The slot job's handler starts a session (origin "schedule": never the chat welcome),
submits the prompt as an unattended turn and waits for it. Unattended turns have no
human approver, so anything needing approval is denied unless the agent's `approvals`
puts a reviewer first (the runtime's approver selection decides that, as for a webhook).
The reply goes to `deliver_to`, else the chat the schedule was created from, as the
turn's reply delivery (`reply:<turn>`, a turn id derived from the slot job), so a retry
never posts twice; a reply of exactly [SILENT] is never sent. Without either, the reply
stays in the session. The SlotRun row goes queued -> running -> ran/failed; whether the
reply was delivered is recorded when its delivery settles (run_deliveries).
"""

from __future__ import annotations

import logging
from typing import Any

from habakkuk.engine.agent.requests import ReplyTo
from habakkuk.engine.agent.turn_access import TurnsAccess
from habakkuk.engine.errors import NotFound
from habakkuk.engine.hook_events import HookFirer
from habakkuk.engine.jobs import Lease, payload_of
from habakkuk.engine.llm.budget import BudgetGate
from habakkuk.engine.pools import PermanentJobError
from habakkuk.engine.session_access import SessionsAccess
from habakkuk.engine.silent import SILENT
from habakkuk.work.run_book import (
    SCHEDULE_ORIGIN,
    SILENT_NOTE,
    RunBook,
    Settled,
    delivery_note,
    session_id_for,
    target_of,
    turn_id_for,
)
from habakkuk.work.schedule_types import KEPT_OUTPUT, Schedule
from habakkuk.work.service import PROMPT_SLOTS

log = logging.getLogger(__name__)


async def start_turn(
    sessions: SessionsAccess, turns: TurnsAccess, schedule: Schedule, job: str, text: str
) -> tuple[str, str]:
    """The run's session and its unattended turn (both derived from `job`): (session, turn)."""
    session = await sessions.new_session(
        schedule.agent, origin=SCHEDULE_ORIGIN, session_id=session_id_for(job)
    )
    target = target_of(schedule)
    # The turn's reply is its delivery job `reply:<turn>`, as for a webhook's turn.
    reply_to = ReplyTo(target, sender=f"schedule:{schedule.id}") if target is not None else None
    turn = await turns.submit(
        session.id, text, turn_id=turn_id_for(job), attended=False, reply_to=reply_to
    )
    return session.id, turn


def fire_hook(hooks: HookFirer | None, schedule: Schedule, job: str) -> None:
    """The schedule_run hook of one run, subject the schedule's name (in the background)."""
    if hooks is not None:
        hooks.fire(
            "schedule_run",
            schedule.name,
            {
                "schedule": schedule.id,
                "name": schedule.name,
                "agent": schedule.agent,
                "kind": schedule.kind,
                "job": job,
            },
        )


class PromptRuns:
    """The handler of prompt slot jobs: `run(lease)` for a Pool."""

    def __init__(
        self,
        book: RunBook,
        sessions: SessionsAccess,
        turns: TurnsAccess,
        hooks: HookFirer | None = None,
        budget: BudgetGate | None = None,
    ):
        self.book = book
        self.sessions = sessions
        self.turns = turns
        self.hooks = hooks
        self.budget = budget  # a slot waits (skipped, with why) while a limit is used up

    async def run(self, lease: Lease) -> dict[str, Any]:
        job = lease.job
        try:
            schedule = await self.book.get(payload_of(job, PROMPT_SLOTS).schedule)
        except NotFound:
            # Deleted after the slot was queued: nothing to run.
            return {"skipped": "schedule deleted"}
        if schedule.kind != "prompt":
            raise PermanentJobError(f"{job.id}: schedule {schedule.id} is not a prompt schedule")
        paused = await self.budget.check_paused(schedule.agent) if self.budget else None
        if paused:
            await self.book.run_settled(job.id, _skipped(paused))
            return {"skipped": paused}
        fire_hook(self.hooks, schedule, job.id)
        session, turn = await start_turn(
            self.sessions, self.turns, schedule, job.id, schedule.prompt
        )
        await self.book.run_started(job.id, session=session)
        outcome = await self.turns.wait_turn(turn)
        reply = str(outcome.reply or "").strip()
        if outcome.status == "done":
            # Where the reply went; whether it arrived is recorded when its delivery settles.
            note = delivery_note(schedule, "the reply is in its session")
            settled = Settled(
                "ran",
                reason=SILENT_NOTE if reply == SILENT else note,
                session=session,
                last_status="ok",
                last_output=reply[-KEPT_OUTPUT:],
                fail_streak=0,
            )
        elif paused := await self._paused(schedule.agent, outcome.error):
            settled = _skipped(paused, session)  # a limit was used up during its turn
        else:
            error = outcome.error or outcome.status
            settled = Settled(
                "failed",
                reason=error,
                session=session,
                last_status=f"error: {error}",
                last_output=reply[-KEPT_OUTPUT:],
                fail_streak=schedule.fail_streak + 1,
            )
        await self.book.run_settled(job.id, settled)
        return {"session": session, "turn": turn, "status": settled.status}

    async def _paused(self, agent: str, error: str | None) -> str | None:
        """The pause a failed turn ended with, if a limit is used up now."""
        if self.budget is None or not error:
            return None
        return await self.budget.check_paused(agent)


def _skipped(reason: str, session: str = "") -> Settled:
    """A slot a spending limit held back: skipped, with the pause's message."""
    return Settled("skipped", reason=reason, session=session, last_status=f"skipped: {reason}")
