"""The board service (spec 000 "Board"): `Board` implements BoardAccess on control.db.

It validates input, applies the rules of who may change which card, resolves id
prefixes, stops the run of a card that is reassigned or cancelled while in progress,
and after every change publishes CardChanged and wakes the dispatcher (this process's,
through `on_wake` callbacks, and another process's, through the mtime of WAKE_FILE).

A change reads the card, decides against what it read, and writes with a
compare-and-swap on the card's revision; a change that lost a race to another writer
reads again and decides again, so a rule is never applied to a stale card.
"""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from habakkuk.engine.config import Config
from habakkuk.engine.control_chars import refuse_controls
from habakkuk.engine.errors import HabakkukError, NotFound
from habakkuk.engine.events import CardChanged, EventBus
from habakkuk.engine.home import Home
from habakkuk.engine.jobs import JobQueue
from habakkuk.work.board_store import COMMENT_KIND, DISPATCHER, BoardStore, LogEntry
from habakkuk.work.board_types import (
    CARD_ID_PREFIX,
    OPEN_STATUSES,
    PRIORITY_RANGE,
    STATUSES,
    TEXT_MAX,
    TITLE_MAX,
    USER,
    WAKE_FILE,
    BlockKind,
    BoardRefused,
    Card,
    NewCard,
    attempt_session,
    card_job_id,
)

log = logging.getLogger(__name__)

FINISHED = ("done", "cancelled")
REOPENABLE = ("blocked", "done", "cancelled")
LIST_MAX = 10_000
_RETRIES = 8  # compare-and-swap attempts before a change gives up (a very busy card)


@dataclass
class Change:
    """What one action decided from the card it read: the columns to set, the log
    entries, whether the creator must hear of it, and the attempt whose run to stop."""

    changes: dict[str, Any] = field(default_factory=dict)
    entries: list[LogEntry] = field(default_factory=list)
    notify: bool = False
    stop_attempt: int | None = None


def _text(value: str, what: str, *, required: bool) -> str:
    """`value` stripped, checked against TEXT_MAX (and non-empty when `required`); a
    control character (NUL, an escape, a bidirectional override) is refused."""
    if not isinstance(value, str):
        raise HabakkukError(f"board: {what} must be text")
    refuse_controls(value, f"board: the {what}")
    value = value.strip()
    if required and not value:
        raise HabakkukError(f"board: {what} is empty")
    if len(value) > TEXT_MAX:
        raise HabakkukError(f"board: {what} is {len(value)} characters (at most {TEXT_MAX})")
    return value


def _actor(by: str) -> str:
    """Who acts: USER or an agent's name (never empty: "" would pass for the holder of an
    unassigned card)."""
    if not isinstance(by, str) or not by.strip():
        raise HabakkukError("board: who acts (by) is required: the user or an agent's name")
    return by.strip()


def _priority(value: int) -> int:
    low, high = PRIORITY_RANGE
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise HabakkukError(f"board: priority {value!r} is not a whole number in {low}..{high}")
    return value


class Board:
    """The home's board: every surface and tool goes through it (BoardAccess)."""

    def __init__(
        self,
        store: BoardStore,
        queue: JobQueue,
        config: Config,
        bus: EventBus,
        home: Home,
        *,
        stop_job: Callable[[str], bool] | None = None,
    ):
        self.store = store
        self.queue = queue
        self.config = config
        self.bus = bus
        self.home = home
        self._stop_job = stop_job  # stops a job this process's pools run now
        self._wake_callbacks: list[Callable[[], None]] = []

    # -- waking the dispatcher -----------------------------------------------------------

    def on_wake(self, callback: Callable[[], None]) -> None:
        """Call `callback()` on every change made in this process (the dispatcher's)."""
        self._wake_callbacks.append(callback)

    @property
    def wake_path(self) -> Path:
        """The file whose mtime wakes a dispatcher in another process."""
        return self.home.root / WAKE_FILE

    def wake(self) -> None:
        """Wake this process's dispatcher (its callbacks) and any other's (the file)."""
        for callback in list(self._wake_callbacks):
            try:
                callback()
            except Exception as exc:  # one bad listener never fails a change
                log.warning("board: a wake callback failed: %s", exc)
        try:
            fd = os.open(self.wake_path, os.O_WRONLY | os.O_CREAT, 0o600)
            try:
                os.utime(fd)
            finally:
                os.close(fd)
        except OSError as exc:  # the dispatcher still looks every board.dispatch_seconds
            log.warning("board: cannot touch %s: %s", self.wake_path, exc)

    # -- reads ---------------------------------------------------------------------------

    async def get(self, card_id: str) -> Card:
        """One card with comments and events, by id or unique prefix (with or without
        "card_"). NotFound; HabakkukError when the prefix names several cards."""
        return await self._read(await self.resolve(card_id))

    async def resolve(self, card_id: str) -> str:
        """The full id a card id or unique prefix names."""
        if not isinstance(card_id, str) or not card_id.strip():
            raise HabakkukError("board: a card id is required")
        wanted = card_id.strip()
        if not wanted.startswith(CARD_ID_PREFIX):
            wanted = CARD_ID_PREFIX + wanted
        found = await self.store.ids_with_prefix(wanted)
        if wanted in found:
            return wanted
        if not found:
            raise NotFound(f"board: no card {card_id.strip()!r}")
        if len(found) > 1:
            more = "…" if len(found) >= 6 else ""
            raise HabakkukError(
                f"board: {card_id.strip()!r} names several cards: {', '.join(found[:5])}{more}"
            )
        return found[0]

    async def list_cards(
        self, *, status: str = "open", assignee: str | None = None, limit: int = 200
    ) -> list[Card]:
        """Cards without comments and events, highest priority first then oldest.
        `status`: "open", "all" or one status; `assignee` "" lists unassigned cards."""
        if status == "open":
            statuses: Sequence[str] | None = OPEN_STATUSES
        elif status == "all":
            statuses = None
        elif status in STATUSES:
            statuses = (status,)
        else:
            words = ", ".join(("open", "all", *STATUSES))
            raise HabakkukError(f"board: unknown status {status!r} (one of: {words})")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= LIST_MAX:
            raise HabakkukError(f"board: limit {limit!r} is not in 1..{LIST_MAX}")
        return await self.store.list_cards(statuses=statuses, assignee=assignee, limit=limit)

    async def counts(self) -> dict[str, int]:
        """Cards per status, every status present (zeros included)."""
        return await self.store.counts()

    # -- changes -------------------------------------------------------------------------

    async def create(self, new: NewCard, *, by: str = USER) -> Card:
        """Store a todo card; HabakkukError for bad input, NotFound for a dependency or
        parent that does not exist."""
        by = _actor(by)
        title = _text(new.title, "title", required=True)
        if len(title) > TITLE_MAX:
            raise HabakkukError(f"board: title is {len(title)} characters (at most {TITLE_MAX})")
        body = _text(new.body, "body", required=False)
        priority = _priority(new.priority)
        assignee = self._assignee(new.assignee)
        parent = await self._existing(new.parent, "parent") if new.parent else None
        depends_on: list[str] = []
        for dep in new.depends_on:
            full = await self._existing(dep, "dependency")
            if full not in depends_on:
                depends_on.append(full)
        if new.deliver_to is not None:
            parts = new.deliver_to.split(":")
            if len(parts) not in (2, 3) or not all(parts[:2]):
                raise HabakkukError(
                    f"board: deliver_to {new.deliver_to!r} is not CHANNEL:CHAT[:THREAD]"
                )
        card = await self.store.insert(
            card_id=CARD_ID_PREFIX + secrets.token_hex(5),
            title=title,
            body=body,
            assignee=assignee,
            created_by=by,
            priority=priority,
            parent=parent,
            depends_on=depends_on,
            creator_session=new.creator_session,
            reply_to=new.reply_to,
            deliver_to=new.deliver_to,
            event_text=f"for {assignee}" if assignee else "",
        )
        self._changed(card)
        return card

    async def assign(self, card_id: str, assignee: str, *, by: str = USER) -> Card:
        """Reassign ("" unassigns). A card in progress has its run stopped and goes back
        to todo; a finished card (done, cancelled) is refused."""
        by = _actor(by)
        who = self._assignee(assignee)

        def decide(card: Card) -> Change | None:
            self._may_update(card, by, "reassign")
            if card.status in FINISHED:
                raise BoardRefused(
                    f"board: card {card.id} is {card.status}: a finished card cannot be "
                    "assigned (reopen it first)"
                )
            if card.assignee == who:
                return None
            change = Change({"assignee": who}, [LogEntry(by, "assigned", who)])
            if card.status == "doing":
                change.changes["status"] = "todo"
                change.stop_attempt = card.attempt
            return change

        return await self._change(card_id, decide)

    async def set_priority(self, card_id: str, priority: int, *, by: str = USER) -> Card:
        """Change the priority (PRIORITY_RANGE; higher runs first)."""
        by = _actor(by)
        value = _priority(priority)

        def decide(card: Card) -> Change | None:
            self._may_update(card, by, "reprioritise")
            if card.priority == value:
                return None
            return Change({"priority": value}, [LogEntry(by, "priority", str(value))])

        return await self._change(card_id, decide)

    async def comment(self, card_id: str, text: str, *, by: str = USER) -> Card:
        """Add a comment (anyone, on any card)."""
        by = _actor(by)
        body = _text(text, "comment", required=True)
        return await self._change(
            card_id, lambda card: Change({}, [LogEntry(by, COMMENT_KIND, body)])
        )

    async def cancel(self, card_id: str, *, by: str = USER) -> Card:
        """Cancel an open card; a running attempt is stopped."""
        by = _actor(by)

        def decide(card: Card) -> Change:
            self._may_update(card, by, "cancel")
            if card.status in FINISHED:
                raise BoardRefused(f"board: card {card.id} is already {card.status}")
            change = Change({"status": "cancelled"}, [LogEntry(by, "cancelled")])
            if card.status == "doing":
                change.stop_attempt = card.attempt
            return change

        return await self._change(card_id, decide)

    async def reopen(self, card_id: str, *, by: str = USER) -> Card:
        """A blocked, done or cancelled card goes back to todo (result and block cleared).
        An agent cannot reopen a card that has used board.max_attempts attempts."""
        by = _actor(by)

        def decide(card: Card) -> Change:
            self._may_update(card, by, "reopen")
            if card.status not in REOPENABLE:
                raise BoardRefused(
                    f"board: card {card.id} is {card.status}: only a blocked, done or "
                    "cancelled card can be reopened"
                )
            most = self.config.board.max_attempts
            if by != USER and card.attempt >= most:
                raise BoardRefused(
                    f"board: card {card.id} has used {card.attempt} of {most} attempts "
                    "(board.max_attempts): only the user can reopen it"
                )
            changes = {"status": "todo", "result": "", "blocked_kind": "", "blocked_reason": ""}
            return Change(changes, [LogEntry(by, "reopened", f"after {card.status}")])

        return await self._change(card_id, decide)

    async def complete(self, card_id: str, result: str, *, by: str, session: str = "") -> Card:
        """The assignee finishes its open card with a result (required, with its proof);
        `session` (the calling turn's) is recorded in the event log."""
        by = _actor(by)
        text = _text(result, "result", required=True)

        def decide(card: Card) -> Change:
            self._may_settle(card, by, "complete", session)
            changes = {"status": "done", "result": text, "blocked_kind": "", "blocked_reason": ""}
            entry = LogEntry(by, "completed", f"[{session}] {text}" if session else text)
            return Change(changes, [entry], notify=True)

        return await self._change(card_id, decide)

    async def block(
        self,
        card_id: str,
        reason: str,
        *,
        by: str,
        kind: BlockKind = "question",
        session: str = "",
    ) -> Card:
        """The assignee blocks its open card with the reason (kind "question": a human
        must answer; "failed": it could not be done)."""
        by = _actor(by)
        text = _text(reason, "reason", required=True)
        if kind not in ("question", "failed"):
            raise HabakkukError(f"board: block kind {kind!r} is not question or failed")

        def decide(card: Card) -> Change:
            self._may_settle(card, by, "block", session)
            changes = {"status": "blocked", "blocked_kind": kind, "blocked_reason": text}
            event = "blocked" if kind == "question" else "failed"
            entry = LogEntry(by, event, f"[{session}] {text}" if session else text)
            return Change(changes, [entry], notify=True)

        return await self._change(card_id, decide)

    # -- the rules -----------------------------------------------------------------------

    def _assignee(self, assignee: str) -> str:
        if not isinstance(assignee, str):
            raise HabakkukError("board: assignee must be an agent's name")
        name = assignee.strip()
        if name and name not in self.config.agents:
            known = ", ".join(sorted(self.config.agents)) or "none"
            raise HabakkukError(f"board: no agent {name!r} (agents: {known})")
        return name

    async def _existing(self, card_id: str, what: str) -> str:
        try:
            return await self.resolve(card_id)
        except NotFound:
            raise NotFound(f"board: {what} {card_id!r} does not exist") from None

    @staticmethod
    def _may_update(card: Card, by: str, action: str) -> None:
        """Agents update (reassign, reprioritise, cancel, reopen) only cards they created
        or hold; the user any card."""
        if by != USER and by not in (card.created_by, card.assignee):
            raise BoardRefused(
                f"board: {by} cannot {action} card {card.id}: an agent updates only cards "
                f"it created or holds (created by {card.created_by}, "
                f"held by {card.assignee or 'nobody'})"
            )

    @staticmethod
    def _may_settle(card: Card, by: str, action: str, session: str = "") -> None:
        """Agents complete or block only their own open cards; the user any open card.
        A turn of an attempt that was stopped (its session is one of the card's but not
        the latest) no longer speaks for the card."""
        if by != USER and by != card.assignee:
            raise BoardRefused(
                f"board: {by} cannot {action} card {card.id}: it is assigned to "
                f"{card.assignee or 'nobody'} (an agent completes or blocks only its own cards)"
            )
        if card.status in FINISHED:
            raise BoardRefused(
                f"board: card {card.id} is {card.status}: a finished card cannot be "
                f"{'completed' if action == 'complete' else 'blocked'}"
            )
        own = attempt_session(card.id, 0).removesuffix("0")  # "ses_<card>_a"
        if session.startswith(own) and session != card.session:
            raise BoardRefused(
                f"board: {session} is a stopped attempt of card {card.id}; its current "
                f"attempt is {card.session or 'none'}"
            )

    # -- the write path ------------------------------------------------------------------

    async def _read(self, card_id: str) -> Card:
        card = await self.store.fetch(card_id)
        if card is None:
            raise NotFound(f"board: no card {card_id!r}")
        return card

    async def _change(self, card_id: str, decide: Callable[[Card], Change | None]) -> Card:
        """Read, decide, write as a compare-and-swap on the revision (again on a lost
        race), stop a run the change ended, publish and wake; the card read back."""
        full = await self.resolve(card_id)
        for _ in range(_RETRIES):
            card = await self._read(full)
            change = decide(card)
            if change is None:  # nothing to change: the card as it is
                return card
            if change.stop_attempt is not None:
                job = card_job_id(card.id, change.stop_attempt)
                change.entries.append(LogEntry(DISPATCHER, "stopped", job))
            written = await self.store.update(
                card.id,
                change.changes,
                change.entries,
                expect={"revision": card.revision},
                notify=change.notify,
            )
            if written:
                if change.stop_attempt is not None:
                    await self._stop(card_job_id(card.id, change.stop_attempt))
                after = await self._read(full)
                self._changed(after)
                return after
        raise HabakkukError(f"board: card {full} keeps changing; try again")

    async def _stop(self, job_id: str) -> None:
        """Stop an attempt's job: at once when this process runs it, else through the
        queue (a queued job is cancelled, a running one elsewhere asked to stop)."""
        if self._stop_job is not None and self._stop_job(job_id):
            return
        await self.queue.cancel(job_id)

    def _changed(self, card: Card) -> None:
        self.bus.publish(
            CardChanged(
                card=card.id,
                title=card.title,
                status=card.status,
                assignee=card.assignee,
                revision=card.revision,
            )
        )
        self.wake()
