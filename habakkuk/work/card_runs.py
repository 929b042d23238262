"""A card's attempt: the card job is itself the assignee's turn (spec 000 "Board").

The job (queued by the dispatcher, work/board_dispatch.py) carries a CardRun: the card,
the attempt, its session attempt_session(card, attempt) and the assignee. The handler
makes that session if it is missing (origin "board", a fresh session of the assignee),
then runs the turn loop on this very lease with a TurnRequest of its own, whose first
message carries the card, the results of its dependencies and its comments. The
transcript appends that message once per turn id, so a crash resumes the same
transcript rather than starting over.

The turn is unattended (its request is never `attended`): nobody is asked, so a call
that needs approval is denied unless the agent's `approvals` puts a reviewer first, as
for a schedule's turn. The agent ends with board_complete (a result with its proof) or
board_block. Whatever else happens, the card never ends up done by itself:

- the turn ended with the card still doing this attempt: blocked "failed", with the
  last reply as a comment;
- the turn failed for good (a model error, out of steps, the last retry): blocked
  "failed" with the error;
- the turn was stopped: blocked "failed" unless the board already moved the card
  (reassigned or cancelled it: that is why it was stopped), which every settle's
  compare-and-swap on (doing, attempt) leaves alone.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

from habakkuk.engine.agent.requests import TurnRequest
from habakkuk.engine.errors import HabakkukError, LeaseLost, NotFound
from habakkuk.engine.jobs import Lease, payload_of
from habakkuk.engine.llm.budget import BudgetGate
from habakkuk.engine.pools import PermanentJobError
from habakkuk.engine.session_access import SessionsAccess
from habakkuk.engine.sessions import BOARD_ORIGIN
from habakkuk.work.board_dispatch import BOARD_AUTHOR
from habakkuk.work.board_store import BoardStore
from habakkuk.work.board_types import CARD_RUNS, BoardAccess, Card

log = logging.getLogger(__name__)

RESULT_SHOWN = 4000  # characters of each dependency's result in the first message


class TurnLoop(Protocol):
    async def run(self, lease: Lease, request: TurnRequest) -> dict[str, Any]: ...


def first_message(card: Card, dependencies: list[Card]) -> str:
    """The attempt's first message: the card, its dependencies' results, its comments, and
    how to end."""
    lines = [
        f"You have been assigned board card {card.id} (attempt {card.attempt}).",
        "",
        f"Title: {card.title}",
    ]
    if card.body:
        lines += ["", card.body]
    for dep in dependencies:
        result = dep.result
        if len(result) > RESULT_SHOWN:
            result = result[:RESULT_SHOWN] + " [...]"
        lines += ["", f"Result of {dep.id} ({dep.title!r}, done by {dep.assignee}):", result]
    if card.comments:
        lines += ["", "Comments:"]
        lines += [f"- {c.author}: {c.text}" for c in card.comments]
    lines += [
        "",
        f"When the work is done, call board_complete with card {card.id} and a result that"
        " says what you did and shows the proof (output, paths, checks run). If you cannot"
        f" finish it, or need a human's answer, call board_block with card {card.id} and"
        " the reason. Nobody is watching this turn: there is no one to ask for approval.",
    ]
    return "\n".join(lines)


class CardRuns:
    """The handler of card jobs: `run(lease)` for the card pool."""

    def __init__(
        self,
        board: BoardAccess,
        store: BoardStore,
        sessions: SessionsAccess,
        turn_loop: TurnLoop,
        budget: BudgetGate | None = None,
    ):
        self.board = board
        self.store = store
        self.sessions = sessions
        self.turn_loop = turn_loop
        self.budget = budget  # a card waits (todo again) while a limit is used up

    async def run(self, lease: Lease) -> dict[str, Any]:
        job = lease.job
        run = payload_of(job, CARD_RUNS)
        card_id, attempt = run.card, run.attempt
        try:
            card = await self.board.get(card_id)
        except NotFound:
            return {"card": card_id, "attempt": attempt, "skipped": "card deleted"}
        if card.status != "doing" or card.attempt != attempt:
            # Moved on before this job ran (reassigned, cancelled, a later attempt).
            return {"card": card_id, "attempt": attempt, "skipped": f"card is {card.status}"}
        if paused := await self._paused(run.agent):
            return await self._wait(card_id, attempt, paused)
        try:
            session = await self.sessions.new_session(
                run.agent, origin=BOARD_ORIGIN, session_id=run.session
            )
        except HabakkukError as exc:  # the assignee is no longer a configured agent
            await self._settle(card_id, attempt, f"its turn could not start: {exc}")
            raise PermanentJobError(str(exc)) from None
        # Unattended: nobody to ask.
        request = TurnRequest(session.id, first_message(card, await self._dependencies(card)))
        try:
            result = await self.turn_loop.run(lease, request)
        except asyncio.CancelledError:
            if lease.stop_reason == "user":
                await asyncio.shield(self._settle(card_id, attempt, "its turn was stopped"))
            raise
        except LeaseLost:
            raise  # another worker owns the job now
        except PermanentJobError as exc:
            if paused := await self._paused(run.agent):  # a limit was used up during it
                return await self._wait(card_id, attempt, paused)
            await self._settle(card_id, attempt, f"its turn failed: {exc}")
            raise
        except Exception as exc:
            if job.attempts >= job.max_attempts:  # the pool fails it for good
                await self._settle(card_id, attempt, f"its turn failed: {exc}")
            raise
        reply = str(result.get("reply", ""))
        after = await self.board.get(card_id)
        if after.status == "doing" and after.attempt == attempt:
            settled = await self._settle(
                card_id,
                attempt,
                "its turn ended without board_complete or board_block",
                comment=reply,
            )
            after = settled or after
        return {**result, "card": card_id, "attempt": attempt, "status": after.status}

    async def _paused(self, agent: str) -> str | None:
        return await self.budget.check_paused(agent) if self.budget is not None else None

    async def _wait(self, card_id: str, attempt: int, paused: str) -> dict[str, Any]:
        """A spending limit holds the card back: todo again (the dispatcher leaves it
        there until the limit lifts), the pause's message in its log."""
        await self.store.settle_attempt(
            card_id, attempt, status="todo", reason=paused, author=BOARD_AUTHOR
        )
        return {"card": card_id, "attempt": attempt, "skipped": paused}

    async def _dependencies(self, card: Card) -> list[Card]:
        found = []
        for dep in card.depends_on:
            try:
                found.append(await self.board.get(dep))
            except NotFound:  # never deleted today; a missing one is just left out
                log.warning("card %s: dependency %s not found", card.id, dep)
        return found

    async def _settle(
        self, card_id: str, attempt: int, reason: str, *, comment: str = ""
    ) -> Card | None:
        """Block the attempt "failed" if the card is still doing it (compare-and-swap)."""
        try:
            return await self.store.settle_attempt(
                card_id,
                attempt,
                status="blocked",
                kind="failed",
                reason=reason,
                comment=comment,
                author=BOARD_AUTHOR,
            )
        except Exception as exc:  # the dispatcher's repair settles it on its next look
            log.warning("card %s: could not settle attempt %d: %s", card_id, attempt, exc)
            return None
