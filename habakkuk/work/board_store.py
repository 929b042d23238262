"""SQL on the board's tables of control.db (work/board_schema.py), for the Board service
(work/board.py) and the dispatcher (work/board_dispatch.py).

Every change is ONE short transaction (BEGIN IMMEDIATE, so writers of several processes
queue on the busy timeout; on PostgreSQL the control schema's writer lock, so writers
of several nodes queue the same way) that updates the card's row, bumps its `revision` and
`updated_at`, and appends its board_log entries. Changes are compare-and-swaps on what
the caller read (`expect`): a change that lost a race writes nothing and says so.

`notified_revision` follows the revision through changes that are not a notice's cause
(a comment, a priority) when the card was already notified, so only a card that
*becomes* done or blocked is returned by `unnotified()` again.

A row that cannot be read (bad JSON in reply_to, an unknown status) is logged in one
line and skipped by every list: one bad card never hides the others.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from habakkuk.engine.agent.requests import ReplyTo, reply_to_from
from habakkuk.engine.errors import HabakkukError, NotFound
from habakkuk.engine.sql import Conn, Row
from habakkuk.engine.store import Database
from habakkuk.work.board_schema import ensure_board_tables
from habakkuk.work.board_types import (
    STATUSES,
    WAKE_CHANNEL,
    BlockKind,
    Card,
    CardComment,
    CardEvent,
    CardStatus,
    EventKind,
    attempt_session,
    card_job_id,
)

log = logging.getLogger(__name__)

COMMENT_KIND = "comment"  # board_log entries of this kind are comments, the rest events
DISPATCHER = "board"  # the author of the dispatcher's entries
# The columns a change may set (anything else is a programming error, never SQL text).
CHANGEABLE = frozenset(
    {
        "title",
        "body",
        "assignee",
        "status",
        "priority",
        "result",
        "attempt",
        "session",
        "blocked_kind",
        "blocked_reason",
    }
)
_BLOCK_KINDS = ("", "question", "failed")
# The event a settled attempt logs for an end other than blocked.
_END_EVENTS: dict[str, EventKind] = {"done": "completed", "cancelled": "cancelled"}
_NOT_DONE_DEP = (
    "EXISTS (SELECT 1 FROM board_deps d JOIN board_cards c ON c.id = d.depends_on"
    " WHERE d.card = board_cards.id AND c.status != 'done')"
)


def _prefix_sql(db: Database) -> str:
    """Ids in [prefix, prefix + U+FFFF), in code point order as SQLite compares text: on
    PostgreSQL in the "C" collation, since a database's own (en_US, ...) may order and
    compare them otherwise."""
    if db.dialect == "postgres":
        return (
            'SELECT id FROM board_cards WHERE id COLLATE "C" >= ? AND id COLLATE "C" < ?'
            ' ORDER BY id COLLATE "C" LIMIT ?'
        )
    return "SELECT id FROM board_cards WHERE id >= ? AND id < ? ORDER BY id LIMIT ?"


class CorruptCard(HabakkukError):
    """A stored card that cannot be read back (reported and skipped by every list)."""


@dataclass(frozen=True)
class LogEntry:
    """One board_log entry a change appends: a comment (kind "comment") or an event."""

    author: str
    kind: EventKind | str
    text: str = ""


def _card_from_row(
    row: Row,
    deps: Sequence[tuple[str, str]],
    entries: Sequence[Row] = (),
) -> Card:
    """A Card from its row, its (dependency, status) pairs and its log rows."""
    try:
        raw = row["reply_to"]
        reply_to = reply_to_from({"reply_to": json.loads(raw)}) if raw is not None else None
        status = row["status"]
        if status not in STATUSES:
            raise ValueError(f"unknown status {status!r}")
        blocked_kind = row["blocked_kind"]
        if blocked_kind not in _BLOCK_KINDS:
            raise ValueError(f"unknown blocked_kind {blocked_kind!r}")
    except (ValueError, TypeError) as exc:
        raise CorruptCard(f"board: card {row['id']}: unreadable row ({exc})") from None
    comments = tuple(
        CardComment(author=e["author"], text=e["text"], at=e["at"])
        for e in entries
        if e["kind"] == COMMENT_KIND
    )
    events = tuple(
        CardEvent(author=e["author"], kind=e["kind"], text=e["text"], at=e["at"])
        for e in entries
        if e["kind"] != COMMENT_KIND
    )
    return Card(
        id=row["id"],
        title=row["title"],
        body=row["body"],
        assignee=row["assignee"],
        created_by=row["created_by"],
        status=cast(CardStatus, status),
        priority=int(row["priority"]),
        result=row["result"],
        parent=row["parent"],
        depends_on=tuple(dep for dep, _ in deps),
        attempt=int(row["attempt"]),
        session=row["session"],
        created_at=float(row["created_at"]),
        updated_at=float(row["updated_at"]),
        revision=int(row["revision"]),
        blocked_kind=cast(BlockKind, blocked_kind),
        blocked_reason=row["blocked_reason"],
        creator_session=row["creator_session"],
        reply_to=reply_to,
        deliver_to=row["deliver_to"],
        waiting_on=tuple(
            (dep, cast(CardStatus, status)) for dep, status in deps if status != "done"
        ),
        comments=comments,
        events=events,
    )


def _deps_of(conn: Conn, ids: Sequence[str]) -> dict[str, list[tuple[str, str]]]:
    """(dependency, its status) per card, in one query for all of `ids` (no N+1)."""
    found: dict[str, list[tuple[str, str]]] = {}
    # SQLite's default limit on host parameters is 999 on old builds: chunk below it.
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        marks = ",".join("?" * len(chunk))
        rows = conn.execute(
            "SELECT d.card, d.depends_on, COALESCE(c.status, 'cancelled') AS status"
            " FROM board_deps d LEFT JOIN board_cards c ON c.id = d.depends_on"
            f" WHERE d.card IN ({marks}) ORDER BY d.card, d.rowid",
            chunk,
        ).fetchall()
        for row in rows:
            found.setdefault(row["card"], []).append((row["depends_on"], row["status"]))
    return found


def _cards(conn: Conn, rows: Iterable[Row]) -> list[Card]:
    """Cards (no comments, no events) from rows, one more query for all their deps;
    unreadable rows are logged and skipped."""
    rows = list(rows)
    deps = _deps_of(conn, [row["id"] for row in rows])
    cards = []
    for row in rows:
        try:
            cards.append(_card_from_row(row, deps.get(row["id"], ())))
        except CorruptCard as exc:
            log.warning("%s; skipped", exc)
    return cards


def _append(conn: Conn, card_id: str, entries: Iterable[LogEntry], at: float) -> None:
    conn.executemany(
        "INSERT INTO board_log(card, author, kind, text, at) VALUES (?, ?, ?, ?, ?)",
        [(card_id, e.author, e.kind, e.text, at) for e in entries],
    )


class BoardStore:
    """Typed access to the board's tables of one control.db."""

    def __init__(self, db: Database, *, clock: Callable[[], float] = time.time):
        self.db = db
        self._clock = clock
        self._ensured = False

    async def ensure(self) -> None:
        """Create the board's tables if needed (once per store; idempotent)."""
        if not self._ensured:
            await ensure_board_tables(self.db)
            self._ensured = True

    # -- writes ------------------------------------------------------------------------

    async def insert(
        self,
        *,
        card_id: str,
        title: str,
        body: str,
        assignee: str,
        created_by: str,
        priority: int,
        parent: str | None,
        depends_on: Sequence[str],
        creator_session: str = "",
        reply_to: ReplyTo | None = None,
        deliver_to: str | None = None,
        event_text: str = "",
    ) -> Card:
        """Store a new todo card with its dependencies and its "created" event, in one
        transaction; returns it read back. A dependency or parent that vanished in the
        meantime fails the whole insert (NotFound); the card itself, HabakkukError."""
        await self.ensure()
        now = self._clock()
        reply = (
            json.dumps(reply_to.to_json(), separators=(",", ":")) if reply_to is not None else None
        )

        def _insert(conn: Conn) -> None:
            wanted = [*depends_on, *([parent] if parent else [])]
            if card_id in wanted:
                raise HabakkukError(f"board: card {card_id} cannot depend on itself")
            if wanted:
                marks = ",".join("?" * len(wanted))
                present = {
                    r["id"]
                    for r in conn.execute(
                        f"SELECT id FROM board_cards WHERE id IN ({marks})", wanted
                    )
                }
                for missing in wanted:
                    if missing not in present:
                        raise NotFound(f"board: no card {missing!r}")
            conn.execute(
                "INSERT INTO board_cards(id, title, body, assignee, created_by, status, priority,"
                " parent, created_at, updated_at, creator_session, reply_to, deliver_to)"
                " VALUES (?, ?, ?, ?, ?, 'todo', ?, ?, ?, ?, ?, ?, ?)",
                (
                    card_id,
                    title,
                    body,
                    assignee,
                    created_by,
                    priority,
                    parent,
                    now,
                    now,
                    creator_session,
                    reply,
                    deliver_to,
                ),
            )
            conn.executemany(
                "INSERT INTO board_deps(card, depends_on) VALUES (?, ?)",
                [(card_id, dep) for dep in depends_on],
            )
            _append(conn, card_id, [LogEntry(created_by, "created", event_text)], now)
            self._heard(conn)

        await self.db.write(_insert)
        card = await self.fetch(card_id)
        assert card is not None  # just written in this process's connection
        return card

    async def update(
        self,
        card_id: str,
        changes: dict[str, Any],
        entries: Sequence[LogEntry],
        *,
        expect: dict[str, Any] | None = None,
        notify: bool = False,
    ) -> bool:
        """One change as a compare-and-swap: set `changes` (columns of CHANGEABLE), bump
        revision and updated_at and append `entries`, only while every column of
        `expect` still holds its value. True when it was written.

        `notify`: the change makes the card done or blocked, so its creator must hear of
        it (`unnotified` returns it). Otherwise a card already notified stays notified."""
        await self.ensure()
        bad = set(changes) - CHANGEABLE
        if bad or set(expect or {}) - CHANGEABLE - {"revision"}:
            raise ValueError(f"board: columns that cannot be changed: {sorted(bad)}")
        now = self._clock()
        sets = "".join(f"{column} = ?, " for column in changes)
        carry = (
            ""
            if notify
            else ", notified_revision = CASE WHEN notified_revision = revision"
            " THEN revision + 1 ELSE notified_revision END"
        )
        where = "".join(f" AND {column} = ?" for column in expect or {})
        sql = (
            f"UPDATE board_cards SET {sets}revision = revision + 1, updated_at = ?{carry}"
            f" WHERE id = ?{where}"
        )
        params = [*changes.values(), now, card_id, *(expect or {}).values()]

        def _update(conn: Conn) -> bool:
            if conn.execute(sql, params).rowcount != 1:
                return False
            _append(conn, card_id, entries, now)
            self._heard(conn)
            return True

        return await self.db.write(_update)

    def _heard(self, conn: Conn) -> None:
        """On PostgreSQL, wake every node's dispatcher when this transaction commits
        (WAKE_CHANNEL); a notification is a hint, the dispatchers still look on their
        interval. A claim does not notify: only the dispatcher claims."""
        if self.db.dialect == "postgres":
            conn.execute("SELECT pg_notify(?, '')", (WAKE_CHANNEL,))

    async def claim(self, card_id: str, attempt: int) -> Card | None:
        """The dispatcher's compare-and-swap: a card that is todo, assigned, with every
        dependency done and `attempt` attempts so far becomes doing with attempt + 1 and
        that attempt's session (attempt_session), logging "claimed" with the attempt's
        job id (card_job_id). Returns the card read back, or None when another process
        (or a change) got there first: only one claimant of an attempt wins."""
        await self.ensure()
        now = self._clock()
        nxt = attempt + 1

        def _claim(conn: Conn) -> bool:
            cursor = conn.execute(
                "UPDATE board_cards SET status = 'doing', attempt = ?, session = ?,"
                " blocked_kind = '', blocked_reason = '', revision = revision + 1,"
                " updated_at = ? WHERE id = ? AND status = 'todo' AND attempt = ?"
                f" AND assignee != '' AND NOT {_NOT_DONE_DEP}",
                (nxt, attempt_session(card_id, nxt), now, card_id, attempt),
            )
            if cursor.rowcount != 1:
                return False
            entry = LogEntry(DISPATCHER, "claimed", card_job_id(card_id, nxt))
            _append(conn, card_id, [entry], now)
            return True

        return await self.fetch(card_id) if await self.db.write(_claim) else None

    async def settle_attempt(
        self,
        card_id: str,
        attempt: int,
        *,
        status: CardStatus,
        kind: BlockKind = "failed",
        reason: str = "",
        comment: str = "",
        author: str = DISPATCHER,
        event: EventKind | None = None,
    ) -> Card | None:
        """End attempt `attempt` of a card that is still doing in that attempt (a
        compare-and-swap on status doing AND attempt): `status` blocked records
        blocked_kind `kind` and blocked_reason `reason`; another status (todo: try again,
        done, cancelled) clears them. `comment` (the agent's last reply) is appended as a
        comment by `author`; the event is `event`, by default "failed" for a block of kind
        failed, "blocked" for a question, else the status's ("completed", "cancelled",
        "reopened"). Returns the card read back, or None when the card was no longer doing
        in that attempt (completed, blocked, reassigned or cancelled meanwhile)."""
        blocked = status == "blocked"
        if event is None:
            if blocked:
                event = "failed" if kind == "failed" else "blocked"
            else:
                event = _END_EVENTS.get(status, "reopened")
        entries = [LogEntry(author, COMMENT_KIND, comment)] if comment else []
        entries.append(LogEntry(author, event, reason))
        changes: dict[str, Any] = {
            "status": status,
            "blocked_kind": kind if blocked else "",
            "blocked_reason": reason if blocked else "",
        }
        written = await self.update(
            card_id,
            changes,
            entries,
            expect={"status": "doing", "attempt": attempt},
            notify=status in ("done", "blocked"),
        )
        return await self.fetch(card_id) if written else None

    async def mark_notified(self, card_id: str, revision: int) -> bool:
        """Record that the notice of the card's change at `revision` was queued (its id,
        notice_id(card, revision), makes the queueing idempotent) and log "notified".
        It is bookkeeping, not a change of the card: the revision stays. False when a
        notice of this revision or a later one was already recorded."""
        await self.ensure()
        now = self._clock()

        def _mark(conn: Conn) -> bool:
            cursor = conn.execute(
                "UPDATE board_cards SET notified_revision = ?"
                " WHERE id = ? AND notified_revision < ?",
                (revision, card_id, revision),
            )
            if cursor.rowcount != 1:
                return False
            _append(conn, card_id, [LogEntry(DISPATCHER, "notified", f"r{revision}")], now)
            return True

        return await self.db.write(_mark)

    # -- reads -------------------------------------------------------------------------

    async def fetch(self, card_id: str) -> Card | None:
        """One card with its dependencies (and their status), comments and events in log
        order; None when there is none. CorruptCard when its row cannot be read."""
        await self.ensure()

        def _fetch(conn: Conn) -> Card | None:
            row = conn.execute("SELECT * FROM board_cards WHERE id = ?", (card_id,)).fetchone()
            if row is None:
                return None
            entries = conn.execute(
                "SELECT author, kind, text, at FROM board_log WHERE card = ? ORDER BY id",
                (card_id,),
            ).fetchall()
            return _card_from_row(row, _deps_of(conn, [card_id]).get(card_id, ()), entries)

        return await self.db.run(_fetch)

    async def list_cards(
        self,
        *,
        statuses: Sequence[str] | None = None,
        assignee: str | None = None,
        limit: int = 200,
    ) -> list[Card]:
        """Cards without comments and events, highest priority first then oldest: one
        query for the cards and one for all their dependencies. `statuses` None: all."""
        await self.ensure()
        where: list[str] = ["1 = 1"]
        params: list[Any] = []
        if statuses is not None:
            where.append(f"status IN ({','.join('?' * len(statuses))})")
            params.extend(statuses)
        if assignee is not None:
            where.append("assignee = ?")
            params.append(assignee)
        sql = (
            f"SELECT * FROM board_cards WHERE {' AND '.join(where)}"
            " ORDER BY priority DESC, created_at, id LIMIT ?"
        )

        def _list(conn: Conn) -> list[Card]:
            return _cards(conn, conn.execute(sql, [*params, limit]))

        return await self.db.run(_list)

    async def ready(self, limit: int = 50) -> list[Card]:
        """Cards the dispatcher may claim: todo, assigned, every dependency done; highest
        priority first, then oldest."""
        await self.ensure()

        def _ready(conn: Conn) -> list[Card]:
            rows = conn.execute(
                "SELECT * FROM board_cards WHERE status = 'todo' AND assignee != ''"
                f" AND NOT {_NOT_DONE_DEP} ORDER BY priority DESC, created_at, id LIMIT ?",
                (limit,),
            )
            return _cards(conn, rows)

        return await self.db.run(_ready)

    async def in_progress(self) -> list[Card]:
        """Every card that is doing (the dispatcher repairs a claim whose job is missing
        and settles one whose job ended), oldest claim first."""
        await self.ensure()

        def _doing(conn: Conn) -> list[Card]:
            rows = conn.execute(
                "SELECT * FROM board_cards WHERE status = 'doing' ORDER BY updated_at, id"
            )
            return _cards(conn, rows)

        return await self.db.run(_doing)

    async def unnotified(self, limit: int = 100) -> list[Card]:
        """Done or blocked cards whose latest change has no notice recorded yet
        (notified_revision < revision), oldest change first: the dispatcher queues each
        notice (id notice_id(card.id, card.revision)) then calls mark_notified."""
        await self.ensure()

        def _pending(conn: Conn) -> list[Card]:
            rows = conn.execute(
                "SELECT * FROM board_cards WHERE status IN ('done', 'blocked')"
                " AND notified_revision < revision ORDER BY updated_at, id LIMIT ?",
                (limit,),
            )
            return _cards(conn, rows)

        return await self.db.run(_pending)

    async def ids_with_prefix(self, prefix: str, limit: int = 6) -> list[str]:
        """Ids that start with `prefix` (a range on the primary key), at most `limit`."""
        await self.ensure()
        rows = await self.db.fetchall(_prefix_sql(self.db), (prefix, prefix + "\uffff", limit))
        return [row["id"] for row in rows]

    async def counts(self) -> dict[str, int]:
        """Cards per status, every status present (zeros included)."""
        await self.ensure()
        rows = await self.db.fetchall("SELECT status, COUNT(*) AS n FROM board_cards GROUP BY 1")
        found = {row["status"]: int(row["n"]) for row in rows}
        return {status: found.get(status, 0) for status in STATUSES}
