"""Goals: a session's standing goal (/goal), stepped after each of its turns.

The step after a turn (`turn_finished`, from the runtime's hook every pool's settled job
passes through, so the turns of every surface take it: the terminal's, every chat's, the
web chat's, `habakkuk run`'s):
1. Count the turn toward the session's running goal, once (engine/goals.py `count`: the
   turn's row in goal_turns and the goal's new status commit together), reading its
   reply for GOAL DONE or GOAL BLOCKED; a turn that failed or was stopped stops the goal.
2. Then act on the goal as the count left it, for the turn it counted last:
   - running: queue the follow-up turn, `follow_up_id(turn)`, on the session's serial
     key with the finished turn's reply address, approvals and process pin; unless
     another turn of the session is queued or running (its own end steps the goal).
   - ended: tell the chat (a delivery `goal:<turn>` after the turn's reply, for a chat's
     turn; a GoalChanged event with the notice for the terminal and `habakkuk run`),
     then note it told.
Each part is idempotent by the turn's id, so a crash anywhere is repaired by taking the
step again: `recover` (when a process starts its workers) counts the finished turns a
crash left uncounted and acts on each running goal's last counted turn; a goal that ended
untold is told. A follow-up is queued only after the turn before it finished and while no
other turn of the session waits, and its id is derived from that turn: so one session
never has two follow-ups at once, and a step taken twice queues one turn. Steps of one
session run one at a time in a process (two at once could each find nothing waiting),
and only the newest counted turn is ever followed up (a step a crash cut short, counted
late, does not become the last). A queued turn /stop cancels is settled by no pool:
Turns.stop_turn hands it to `turn_finished`, and the goal stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from habakkuk.engine.agent.requests import TURN_KIND, TurnRequest, turn_request
from habakkuk.engine.events import GoalChanged
from habakkuk.engine.goals import (
    DEFAULT_TURNS,
    MAX_TURNS,
    Goal,
    GoalError,
    GoalStatus,
    GoalStore,
    follow_up_id,
    follow_up_prompt,
    verdict,
)
from habakkuk.engine.i18n import t, use_language
from habakkuk.engine.jobs import Job
from habakkuk.engine.timeouts import wait_within

from .sessions import new_id

if TYPE_CHECKING:
    from habakkuk.engine.events import EventBus
    from habakkuk.engine.jobs import JobQueue
    from habakkuk.engine.store import Database

    from .turns import Turns

log = logging.getLogger(__name__)

GOAL_NOTICE_PREFIX = "goal:"  # the delivery job telling a chat how its goal ended


def notice(goal: Goal) -> str:
    """What the chat is told when the goal ends by itself (done, blocked, spent, stopped)."""
    return t(f"goal.ended.{goal.status}", counted=goal.counted, budget=goal.budget, text=goal.text)


class Goals:
    """The goals of the home's sessions (GoalsAccess) and the step after each turn."""

    def __init__(
        self,
        db: Database,
        queue: JobQueue,
        bus: EventBus,
        turns: Turns,
        language_of: Callable[[str], str] = lambda channel: "",
    ):
        self.store = GoalStore(db)  # state.db
        self.language_of = language_of  # a channel's language (Config.language_of)
        self.queue = queue
        self.bus = bus
        self.turns = turns
        turns.cancelled = self.turn_finished  # a queued follow-up /stop cancelled ends it
        self._pending: set[asyncio.Task[None]] = set()
        self._locks: dict[str, asyncio.Lock] = {}  # _one_step's, by session

    # -- what the commands use ------------------------------------------------------------

    async def current(self, session: str) -> Goal | None:
        """The session's running goal, else its latest one."""
        return await self.store.current(session)

    async def begin(self, session: str, text: str, budget: int = DEFAULT_TURNS) -> Goal:
        """Set the session's goal (clearing a running one); the caller queues its first
        turn (engine.goals.first_prompt) the way its surface queues a message."""
        if not 1 <= budget <= MAX_TURNS:
            raise GoalError(t("goal.bad_turns", most=MAX_TURNS, given=str(budget)))
        if not text.strip():
            raise GoalError(t("goal.usage"))
        goal = await self.store.begin(new_id("goal"), session, text.strip(), budget)
        self._publish(goal)
        return goal

    async def clear(self, session: str) -> Goal | None:
        """End the session's running goal (no follow-up is queued after it)."""
        goal = await self.store.clear(session)
        if goal is not None:
            self._publish(goal)
        return goal

    async def running(self) -> list[Goal]:
        """Every running goal of the home, oldest first."""
        return await self.store.running()

    # -- the step after a turn --------------------------------------------------------------

    def start(self) -> None:
        """The workers start: take again, in the background, the steps a crash cut short."""
        self._background(self._recover_logged())

    def turn_finished(self, job: Job) -> None:
        """A pool settled `job`: step its session's goal in the background (a turn queued
        while its session had no goal costs nothing: it says so itself)."""
        if job.kind != TURN_KIND or not job.finished:
            return
        request = turn_request(job)
        if request is None or not request.goal:
            return  # queued while its session had no goal: nothing to step, nothing read
        self._background(self._step_logged(job))

    def _background(self, step: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(step)
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _recover_logged(self) -> None:
        try:
            await self.recover()
        except Exception:  # the database is unreachable now: the next start tries again
            log.exception("goals: could not take the steps a crash cut short")

    async def settled(self) -> None:
        """Wait for the steps under way (the tests; a closing runtime)."""
        while self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)

    async def _step_logged(self, job: Job) -> None:
        try:
            await self.step(job)
        except Exception:  # the next start's recover takes the step again
            log.exception("goal step after turn %s failed", job.id)

    async def step(self, job: Job) -> None:
        """Count finished turn `job` toward its session's running goal and act on it."""
        fresh = await self.queue.get(job.id)  # the pool's copy carries no result
        request = turn_request(fresh) if fresh is not None else None
        if fresh is None or request is None or request.subturn is not None:
            return
        async with self._one_step(request.session):
            await self._step(fresh, request.session)

    async def _step(self, fresh: Job, session: str) -> None:
        goal = await self.store.current(session)
        if goal is None or not goal.running:
            return
        if _counted_request(fresh) is not None and fresh.created_at >= goal.since:
            counted = await self.store.count(
                goal.id, fresh.id, _outcome(fresh), queued_at=fresh.created_at
            )
            if counted.new:
                self._publish(counted.goal)
            goal = counted.goal
        # A turn the goal does not count (a /compact, one queued before it) may have been
        # what held the follow-up back: act on the turn counted last.
        last = fresh if goal.last_turn == fresh.id else await self._last(goal)
        if last is not None:
            await self._act(goal, last)

    async def wait_ended(self, goal_id: str) -> Goal:
        """Wait until the goal is no longer running (`habakkuk run` runs it to its end)."""
        with self.bus.subscribe(
            lambda e: isinstance(e, GoalChanged) and e.goal == goal_id, maxsize=64
        ) as changes:
            while True:
                goal = await self.store.get(goal_id)
                if goal is None or not goal.running:
                    if goal is None:
                        raise GoalError(f"goal {goal_id} not found")
                    return goal
                with contextlib.suppress(asyncio.TimeoutError):
                    await wait_within(changes.get(), 1.0)

    async def replies(self, goal_id: str) -> list[str]:
        """The replies of the turns counted toward the goal, in order."""
        said = []
        for turn in await self.store.counted_turns(goal_id):
            job = await self.queue.get(turn)
            if job is not None and job.result is not None:
                said.append(str(job.result.get("reply", "")))
        return said

    async def recover(self) -> None:
        """Take again every step a crash may have cut short (see the module docstring)."""
        for found in await self.store.running():
            try:
                async with self._one_step(found.session):
                    goal = await self.store.get(found.id)  # as the steps before left it
                    if goal is not None and goal.running:
                        await self._catch_up(goal)
            except Exception:
                log.exception("goal %s: could not catch up", found.id)
        for found in await self.store.untold():
            async with self._one_step(found.session):
                goal = await self.store.get(found.id)
                if goal is None or goal.told:
                    continue  # told meanwhile
                last = await self._last(goal)
                if last is None:
                    await self.store.mark_told(goal.id)  # its turn is gone: nobody to tell
                else:
                    await self._act(goal, last)

    @contextlib.asynccontextmanager
    async def _one_step(self, session: str) -> AsyncIterator[None]:
        """One step at a time per session in this process: two steps taken at once could
        each find nothing waiting and queue a follow-up each. (A session's turns run one
        at a time, so a step in another process overlaps only one that was slower than
        a whole turn.)"""
        # Kept: one small lock per session that had a goal while this process ran.
        async with self._locks.setdefault(session, asyncio.Lock()):
            yield

    async def _catch_up(self, goal: Goal) -> None:
        counted = set(await self.store.counted_turns(goal.id))
        for job in await self._finished_turns(goal):
            if job.id in counted or _counted_request(job) is None:
                continue
            done = await self.store.count(goal.id, job.id, _outcome(job), queued_at=job.created_at)
            goal = done.goal
            if done.new:
                self._publish(goal)
            if not goal.running:
                break
        last = await self._last(goal)
        if last is not None:
            await self._act(goal, last)

    async def _last(self, goal: Goal) -> Job | None:
        """The turn the goal counted last (None before the first)."""
        return await self.queue.get(goal.last_turn) if goal.last_turn else None

    async def _act(self, goal: Goal, turn: Job) -> None:
        """Queue the follow-up of `turn`, or tell the chat how the goal ended; only for the
        turn the goal counted last."""
        if goal.last_turn != turn.id:
            return
        request = turn_request(turn)
        if request is None:
            return
        if goal.running:
            await self._follow_up(goal, turn, request)
        elif not goal.told:
            await self._tell(goal, turn, request)

    async def _follow_up(self, goal: Goal, turn: Job, request: TurnRequest) -> None:
        waiting = [
            job
            for job in await self.queue.active_for(goal.session)
            if job.kind == TURN_KIND and job.id != turn.id
        ]
        if waiting:
            return  # another turn of the session is queued or running: its end steps the goal
        reply_to = request.reply_to
        await self.turns.submit(
            goal.session,
            follow_up_prompt(goal),
            turn_id=follow_up_id(turn.id),
            attended=request.attended,
            # The same chat; it answers no message of its own.
            reply_to=replace(reply_to, message="") if reply_to is not None else None,
            here=await self._pinned_here(turn.id),
        )

    async def _tell(self, goal: Goal, turn: Job, request: TurnRequest) -> None:
        # Imported here: a process whose turns have no goal to end (`habakkuk run`'s
        # one-shot turn) never loads the channels' delivery modules.
        from habakkuk.channels.adapter import Address
        from habakkuk.channels.deliveries import enqueue_delivery, enqueue_reply
        from habakkuk.channels.delivery_types import TextDelivery

        said = notice(goal)
        reply_to = request.reply_to
        if reply_to is not None and reply_to.to:
            try:
                to = Address.parse(reply_to.to)
            except ValueError:
                to = None
            if to is not None:
                await enqueue_reply(self.queue, turn)  # the turn's reply goes out first
                with use_language(self.language_of(to.channel)):  # the chat's, not ours
                    told = notice(goal)
                await enqueue_delivery(
                    self.queue, f"{GOAL_NOTICE_PREFIX}{turn.id}", TextDelivery(to, told)
                )
        self._publish(goal, said)
        await self.store.mark_told(goal.id)

    async def _finished_turns(self, goal: Goal) -> list[Job]:
        """The session's turns queued since the goal was set that finished, in order."""
        rows = await self.queue.db.fetchall(
            "SELECT * FROM jobs WHERE serial_key = ? AND kind = ? AND created_at >= ?"
            " AND status IN ('done', 'failed', 'cancelled') ORDER BY seq",
            (goal.session, TURN_KIND, goal.since),
        )
        return [Job.from_row(row) for row in rows]

    async def _pinned_here(self, turn: str) -> bool:
        """Whether `turn` was pinned to this process (the terminal's turns, `habakkuk
        run`'s): its follow-up is too, so the same client shows it."""
        row = await self.queue.db.fetchone("SELECT node FROM jobs WHERE id = ?", (turn,))
        return row is not None and bool(row["node"]) and row["node"] == self.queue.node

    def _publish(self, goal: Goal, said: str = "") -> None:
        self.bus.publish(
            GoalChanged(
                session=goal.session,
                goal=goal.id,
                status=goal.status,
                counted=goal.counted,
                budget=goal.budget,
                notice=said,
            )
        )


def _counted_request(job: Job) -> TurnRequest | None:
    """The request of a finished turn a goal counts (not a /compact, not a sub-turn)."""
    request = turn_request(job)
    if request is None or request.compact or request.subturn is not None or not job.finished:
        return None
    return request


def _outcome(job: Job) -> GoalStatus | None:
    """What the turn says of the goal: done or blocked by its reply, stopped when it did
    not finish (failed, or stopped by the user), None: go on."""
    if job.status != "done":
        return "stopped"
    return verdict(str((job.result or {}).get("reply", "")))
