"""The board's dispatcher: ready cards become their assignee's turns, once each attempt.

One dispatcher per home looks at a time, through the named lease DISPATCHER_LEASE in
control.db (engine/leases.py, as the schedules' ticker): a terminal beside a `--serve`
never dispatches twice, and a dead holder on this host is replaced at once. It looks
every `board.dispatch_seconds`, at once when this process's board changes (`wake`, which
the Board calls through `on_wake`), and when the home's WAKE_FILE changes (another
process's change: the CLI touches it; its mtime is read every WAKE_POLL seconds), and on
PostgreSQL when any node writes a card (it LISTENs on the board's WAKE_CHANNEL).

A look does three things, each safe to repeat after a crash (every id is derived):

- dispatch: each ready card (todo, assigned, every dependency done) is claimed by
  compare-and-swap (todo -> doing, attempt + 1), then its job card_job_id(card, attempt)
  is enqueued. A crash between the two leaves a doing card without a job: repaired below.
- repair: a doing card whose attempt's job does not exist gets it enqueued under the
  same id; one whose job finished (failed, cancelled, done) while the card stayed doing
  is settled blocked ("failed", with why), so no card is doing without a live job.
- notices: each done or blocked card not yet notified at its revision tells whoever
  asked: a turn in the creator's session (turn id notice_id(card, revision), replying to
  the chat that turn answers to), else a message to `deliver_to` through the outbox
  (a durable delivery whose id derives from the same notice id); then it is marked
  notified at that revision.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from habakkuk.engine.agent.turn_access import TurnsAccess
from habakkuk.engine.errors import HabakkukError
from habakkuk.engine.i18n import t
from habakkuk.engine.jobs import JobQueue, NewJob
from habakkuk.engine.leases import NamedLeases
from habakkuk.engine.llm.budget import BudgetGate
from habakkuk.engine.outbox_access import TextOutbox
from habakkuk.engine.timeouts import wait_within
from habakkuk.work.board_store import BoardStore
from habakkuk.work.board_types import (
    CARD_KIND,
    DISPATCHER_LEASE,
    WAKE_CHANNEL,
    WAKE_FILE,
    Card,
    CardRun,
    attempt_session,
    card_job_id,
    notice_id,
)

if TYPE_CHECKING:
    from habakkuk.engine.pg_wakeups import Wakeups  # imported only on PostgreSQL

log = logging.getLogger(__name__)

WAKE_POLL = 0.25  # seconds between two looks at the wake file's mtime (one stat)
READY_BATCH = 100
CARD_JOB_ATTEMPTS = 3  # a card's turn is retried like a chat turn, then the card is blocked
BOARD_AUTHOR = "board"  # who the dispatcher's log entries name


def card_job(card: Card) -> NewJob:
    """The job of the card's current attempt (the card as claimed: status doing)."""
    return NewJob(
        card_job_id(card.id, card.attempt),
        CARD_KIND,
        CardRun(card.id, card.attempt, attempt_session(card.id, card.attempt), card.assignee),
        # Nothing else runs in the attempt's session beside its turn.
        serial_key=attempt_session(card.id, card.attempt),
        max_attempts=CARD_JOB_ATTEMPTS,
    )


def delivery_id(card_id: str, revision: int) -> str:
    """The outbox job of a notice sent to `deliver_to` (derived: sent once)."""
    return "deliver_" + notice_id(card_id, revision)


def notice_text(card: Card, language: str = "en") -> str:
    """What the creator is told: the result, or why the card is blocked and who must act.
    English for the creator's session (a turn the model reads), the chat's `language`
    when it goes straight to a chat (deliver_to)."""
    assignee = card.assignee or t("work.board.nobody", language=language)
    head = t("work.board.head", card=card.id, title=repr(card.title), assignee=assignee,
             language=language)  # fmt: skip
    if card.status == "done":
        return t("work.board.done", head=head, result=card.result, language=language)
    kind = "question" if card.blocked_kind == "question" else "failed"
    return t(f"work.board.{kind}", head=head, reason=card.blocked_reason, language=language)


@dataclass
class LookReport:
    """What one look did (`held_by`: another dispatcher holds the lease, nothing done)."""

    held_by: str | None = None
    dispatched: int = 0  # jobs this look queued for the cards it claimed
    repaired: int = 0
    settled: int = 0
    notified: int = 0


class Dispatcher:
    """Dispatches one home's board. `interval` (config.board.dispatch_seconds), `pid`
    and `lease_name` are injectable (tests); `lease_seconds` defaults to four intervals."""

    def __init__(
        self,
        store: BoardStore,
        queue: JobQueue,
        turns: TurnsAccess,
        outbox: Callable[[], TextOutbox],
        home_root: Path,
        *,
        language_of: Callable[[str], str] = lambda channel: "",
        interval: float = 5.0,
        lease_seconds: float | None = None,
        pid: int | None = None,
        lease_name: str = DISPATCHER_LEASE,
        budget: BudgetGate | None = None,
    ):
        self.store = store
        self.queue = queue
        self.turns = turns
        self.outbox = outbox
        self.language_of = language_of  # a channel's language (Config.language_of)
        self.wake_file = home_root / WAKE_FILE
        self.interval = interval
        self.lease_seconds = lease_seconds or max(4 * interval, 2.0)
        self.pid = pid
        self.lease_name = lease_name
        self.budget = budget  # a card whose assignee a spending limit pauses waits
        self.leases = NamedLeases(queue.db)
        self.owner = f"{queue.owner}:board"
        self._woken = asyncio.Event()
        self._ready = False
        self._mtime = self._wake_mtime()
        self.wakeups: Wakeups | None = None  # PostgreSQL: listening while it runs

    def wake(self) -> None:
        """Look now (a change in this process: register with `board.on_wake`)."""
        self._woken.set()

    async def run(self) -> None:
        """Look, then wait for a wake or the interval, until cancelled; the lease is let
        go on the way out. On PostgreSQL every node's card changes wake it too."""
        wakeups = self._listen()
        try:
            while True:
                self._woken.clear()  # a wake during the look below brings another look
                try:
                    await self.look()
                except Exception as exc:  # a failed look must not stop the dispatcher
                    log.warning("board: dispatch failed: %s", exc)
                await self._wait()
        finally:
            if wakeups is not None:
                await wakeups.stop()
            if self._ready:
                with contextlib.suppress(Exception):
                    await self.leases.release(self.lease_name, self.owner)

    def _listen(self) -> Wakeups | None:
        """On PostgreSQL, LISTEN for the board's WAKE_CHANNEL (any node's change)."""
        db = self.store.db
        if db.dialect != "postgres":
            return None
        from habakkuk.engine.pg import PgDatabase
        from habakkuk.engine.pg_wakeups import Wakeups

        assert isinstance(db, PgDatabase)  # the only Database of dialect postgres
        wakeups = Wakeups(db.url, WAKE_CHANNEL, lambda _: self.wake(), asyncio.get_running_loop())
        wakeups.start()
        self.wakeups = wakeups
        return wakeups

    async def _wait(self) -> None:
        deadline = time.monotonic() + self.interval
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            with contextlib.suppress(TimeoutError):
                await wait_within(self._woken.wait(), min(WAKE_POLL, left))
                return
            mtime = self._wake_mtime()
            if mtime != self._mtime:
                self._mtime = mtime
                return

    def _wake_mtime(self) -> int:
        try:
            return self.wake_file.stat().st_mtime_ns
        except OSError:
            return 0

    async def look(self) -> LookReport:
        """One pass: take the lease, then dispatch, repair and notify."""
        if not self._ready:
            await self.store.ensure()
            await self.leases.ensure()
            self._ready = True
        holder = await self.leases.acquire(
            self.lease_name, self.owner, self.lease_seconds, pid=self.pid
        )
        if holder is not None:
            return LookReport(held_by=holder)
        report = LookReport()
        await self._dispatch(report)
        await self._repair(report)
        await self._notify(report)
        return report

    async def _dispatch(self, report: LookReport) -> None:
        seen: set[str] = set()
        while True:
            batch = [c for c in await self.store.ready(READY_BATCH) if c.id not in seen]
            seen.update(c.id for c in batch)
            claimed = []
            for card in batch:
                if self.budget is not None and await self.budget.check_paused(card.assignee):
                    continue  # it waits, todo, until the limit lifts
                taken = await self.store.claim(card.id, card.attempt)
                if taken is not None:  # None: another look or a change got there first
                    claimed.append(taken)
            if claimed:
                # Counted as queued by this look: another node's repair may have queued
                # one already, under the same id (a look that raced ours, or a restart).
                queued = await self.queue.enqueue_many([card_job(c) for c in claimed])
                report.dispatched += len(queued)
            if len(batch) < READY_BATCH:
                return

    async def _repair(self, report: LookReport) -> None:
        for card in await self.store.in_progress():
            job_id = card_job_id(card.id, card.attempt)
            job = await self.queue.get(job_id)
            if job is None:
                # Claimed, then a crash before the enqueue: the same id, so at most once.
                if await self.queue.enqueue_many([card_job(card)]):
                    log.info("board: card %s attempt %d re-queued", card.id, card.attempt)
                    report.repaired += 1
                continue
            if not job.finished:
                continue
            if job.status == "failed":
                reason = f"its turn failed: {job.error or 'no error recorded'}"
            elif job.status == "cancelled":
                reason = "its turn was stopped before the card was completed or blocked"
            else:
                reason = "its turn ended without board_complete or board_block"
            settled = await self.store.settle_attempt(
                card.id,
                card.attempt,
                status="blocked",
                kind="failed",
                reason=reason,
                author=BOARD_AUTHOR,
            )
            if settled is not None:
                report.settled += 1

    async def _notify(self, report: LookReport) -> None:
        for card in await self.store.unnotified():
            try:
                await self._send_notice(card)
            except Exception as exc:  # the next look tries again (same ids: sent once)
                log.warning("board: notice of card %s not sent: %s", card.id, exc)
                continue
            await self.store.mark_notified(card.id, card.revision)
            report.notified += 1

    async def _send_notice(self, card: Card) -> None:
        text = notice_text(card)
        if card.creator_session:
            try:
                await self.turns.submit(
                    card.creator_session,
                    text,
                    turn_id=notice_id(card.id, card.revision),
                    reply_to=card.reply_to,
                )
                return
            except HabakkukError as exc:  # the session was deleted: try deliver_to
                log.info("board: card %s: creator session gone (%s)", card.id, exc)
        if card.deliver_to:
            # Straight to a chat: in that chat's language, not the model's English.
            chat = notice_text(card, self.language_of(card.deliver_to.partition(":")[0]) or "en")
            try:
                await self.outbox().send_text(
                    delivery_id(card.id, card.revision), card.deliver_to, chat
                )
            except ValueError as exc:  # a bad address never blocks the other notices
                log.warning(
                    "board: card %s: cannot deliver to %r: %s", card.id, card.deliver_to, exc
                )
