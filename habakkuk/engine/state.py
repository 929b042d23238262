"""state.db: small per-session state that is not part of the transcript.

It holds each session's todo list (the `todo` tool), the session's own
settings (/think's effort, /model's choice, /personality's persona) and the paid
provider jobs tool calls started (image and video generation): what each call sent and
the provider's job id, keyed by (session, turn, tool_use_id), so a call run again after
a crash resumes the same job instead of paying for a second one. It also holds /steer's
guidance for a running turn (engine/agent/guidance.py). Todo items keep their number for
the life of the list, so the model can refer to them across turns; `clear`
starts the numbering again.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from habakkuk.engine.sql import Conn, Schema
from habakkuk.engine.store import SqliteDatabase

from .errors import HabakkukError
from .goals import GOALS_DDL
from .store import Database, Migration

TodoStatus = Literal["pending", "in_progress", "done"]
TODO_STATUSES: tuple[TodoStatus, ...] = ("pending", "in_progress", "done")
MAX_TODO_ITEMS = 50
MAX_TODO_TEXT = 500

MIGRATIONS = [
    Migration(
        1,
        """
        CREATE TABLE todos (
            session TEXT NOT NULL,
            number INTEGER NOT NULL,
            text TEXT NOT NULL,
            status TEXT NOT NULL DEFAULT 'pending',
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            PRIMARY KEY (session, number)
        );
        """,
    ),
    Migration(
        2,
        """
        CREATE TABLE session_settings (
            session TEXT NOT NULL,
            name TEXT NOT NULL,
            value TEXT NOT NULL,
            updated_at REAL NOT NULL,
            PRIMARY KEY (session, name)
        );
        """,
    ),
    Migration(
        3,
        """
        CREATE TABLE provider_jobs (
            session TEXT NOT NULL,
            turn TEXT NOT NULL,
            call_id TEXT NOT NULL,
            tool TEXT NOT NULL,
            provider TEXT NOT NULL,
            status TEXT NOT NULL,
            job TEXT NOT NULL DEFAULT '',
            detail TEXT NOT NULL DEFAULT '{}',
            result TEXT NOT NULL DEFAULT '',
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            PRIMARY KEY (session, turn, call_id)
        );
        """,
    ),
    Migration(4, GOALS_DDL.format(real="REAL")),  # /goal: engine/goals.py
    # /steer's guidance (engine/agent/guidance.py): pending while `taken_by` is '', then the
    # turn (or follow-up turn) that took it.
    Migration(
        5,
        """
        CREATE TABLE guidance (
            id TEXT PRIMARY KEY,
            session TEXT NOT NULL,
            text TEXT NOT NULL,
            taken_by TEXT NOT NULL DEFAULT '',
            created_at REAL NOT NULL
        );
        CREATE INDEX guidance_pending ON guidance(session, taken_by);
        """,
    ),
]

# PostgreSQL's own steps (engine/pg.py): numbered from 1, starting at the tables SQLite
# had reached when the port was made.
PG_MIGRATIONS: list[Migration] = [
    Migration(
        1,
        """
        CREATE TABLE todos (
            session TEXT NOT NULL,
            number BIGINT NOT NULL,
            text TEXT NOT NULL,
            status TEXT NOT NULL DEFAULT 'pending',
            created_at DOUBLE PRECISION NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (session, number)
        );
        CREATE TABLE session_settings (
            session TEXT NOT NULL,
            name TEXT NOT NULL,
            value TEXT NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (session, name)
        );
        CREATE TABLE provider_jobs (
            session TEXT NOT NULL,
            turn TEXT NOT NULL,
            call_id TEXT NOT NULL,
            tool TEXT NOT NULL,
            provider TEXT NOT NULL,
            status TEXT NOT NULL,
            job TEXT NOT NULL DEFAULT '',
            detail TEXT NOT NULL DEFAULT '{}',
            result TEXT NOT NULL DEFAULT '',
            created_at DOUBLE PRECISION NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (session, turn, call_id)
        );
        """,
    ),
    Migration(2, GOALS_DDL.format(real="DOUBLE PRECISION")),  # /goal: engine/goals.py
    Migration(
        3,
        """
        CREATE TABLE guidance (
            id TEXT PRIMARY KEY,
            session TEXT NOT NULL,
            text TEXT NOT NULL,
            taken_by TEXT NOT NULL DEFAULT '',
            created_at DOUBLE PRECISION NOT NULL
        );
        CREATE INDEX guidance_pending ON guidance(session, taken_by);
        """,
    ),
]

SCHEMA = Schema("state", MIGRATIONS, PG_MIGRATIONS)

# A setting written again replaces the old value (an upsert both engines read alike).
_REPLACE_SETTING = (
    "ON CONFLICT(session, name) DO UPDATE SET value = excluded.value,"
    " updated_at = excluded.updated_at"
)

# A paid provider job's life: "sending" is written before the request that may charge
# (its outcome is unknown after a crash), "running" once the provider named its job,
# then "done" or "failed" with the text the model read.
ProviderJobStatus = Literal["sending", "running", "done", "failed"]


@dataclass(frozen=True)
class ProviderJob:
    """One tool call's paid provider job (see the module docstring)."""

    session: str
    turn: str
    call_id: str
    tool: str
    provider: str
    status: ProviderJobStatus
    job: str = ""  # the provider's job id: request id, operation name, video id
    # What resuming needs besides the id (status and response URLs, files saved so far).
    detail: dict[str, Any] = field(default_factory=dict)
    result: str = ""  # the text the model read when it ended
    created_at: float = 0.0


class TodoError(HabakkukError):
    """A todo request that cannot be carried out; the message is one line for the model."""


@dataclass(frozen=True)
class TodoItem:
    """One item of a session's list."""

    number: int
    text: str
    status: TodoStatus

    @property
    def open(self) -> bool:
        return self.status != "done"


def render_todos(items: list[TodoItem]) -> str:
    """The list as the model reads it: one `[x] 3. text` line per item."""
    marks = {"pending": "[ ]", "in_progress": "[~]", "done": "[x]"}
    return "\n".join(f"{marks[i.status]} {i.number}. {i.text}" for i in items)


def _clean(text: str) -> str:
    cleaned = " ".join(text.split())
    if not cleaned:
        raise TodoError("a todo item's text is empty")
    if len(cleaned) > MAX_TODO_TEXT:
        raise TodoError(f"a todo item is at most {MAX_TODO_TEXT} characters")
    return cleaned


def _items(conn: Conn, session: str, schema: str = "main") -> list[TodoItem]:
    rows = conn.execute(
        f"SELECT number, text, status FROM {_schema(schema)}todos WHERE session = ?"
        " ORDER BY number",
        (session,),
    ).fetchall()
    return [TodoItem(r["number"], r["text"], r["status"]) for r in rows]


class StateStore:
    """state.db: opened once per runtime."""

    def __init__(self, db: Database):
        self.db = db

    @classmethod
    async def open(cls, path: Path) -> StateStore:
        return cls(await SqliteDatabase.open(path, MIGRATIONS))

    async def close(self) -> None:
        await self.db.close()

    async def setting(self, session: str, name: str) -> str | None:
        """One of the session's own settings (None: not set, the agent's default applies)."""
        row = await self.db.fetchone(
            "SELECT value FROM session_settings WHERE session = ? AND name = ?", (session, name)
        )
        return str(row["value"]) if row else None

    async def set_setting(self, session: str, name: str, value: str | None) -> None:
        """Set a session setting; None removes it."""

        def _set(conn: Conn) -> None:
            if value is None:
                conn.execute(
                    "DELETE FROM session_settings WHERE session = ? AND name = ?", (session, name)
                )
            else:
                conn.execute(
                    "INSERT INTO session_settings(session, name, value, updated_at)"
                    f" VALUES (?, ?, ?, ?) {_REPLACE_SETTING}",
                    (session, name, value, time.time()),
                )

        await self.db.write(_set, keys=_keys(session))

    async def copy_settings(self, source: str, target: str) -> None:
        """Give `target` the settings of `source` (a fork keeps its /model and /think)."""

        def _copy(conn: Conn) -> None:
            # The WHERE keeps SQLite from reading ON CONFLICT as a join's ON.
            conn.execute(
                "INSERT INTO session_settings(session, name, value, updated_at)"
                " SELECT ?, name, value, ? FROM session_settings WHERE session = ?"
                f" {_REPLACE_SETTING}",
                (target, time.time(), source),
            )

        await self.db.write(_copy, keys=_keys(source, target))

    async def adopt_settings(self, name: str, values: dict[str, str]) -> None:
        """Store setting `name` for sessions that have none yet (values: session -> value)."""

        def _adopt(conn: Conn) -> None:
            conn.executemany(
                "INSERT OR IGNORE INTO session_settings(session, name, value, updated_at)"
                " VALUES (?, ?, ?, ?)",
                [(session, name, value, time.time()) for session, value in values.items()],
            )

        await self.db.write(_adopt)

    async def forget_sessions(self, sessions: list[str]) -> None:
        """Drop everything kept for these sessions (retention pruned them)."""

        def _forget(conn: Conn) -> None:
            for table in ("todos", "session_settings", "provider_jobs", "guidance"):
                conn.executemany(f"DELETE FROM {table} WHERE session = ?", [(s,) for s in sessions])
            conn.executemany(  # their goals' counted turns, then the goals
                "DELETE FROM goal_turns WHERE goal IN (SELECT id FROM goals WHERE session = ?)",
                [(s,) for s in sessions],
            )
            conn.executemany("DELETE FROM goals WHERE session = ?", [(s,) for s in sessions])

        await self.db.write(_forget)

    async def todos(self, session: str) -> list[TodoItem]:
        """The session's list, in order."""
        return await self.db.run(lambda conn: _items(conn, session))

    async def add_todos(self, session: str, texts: list[str]) -> list[TodoItem]:
        """Append items (pending); TodoError past MAX_TODO_ITEMS. Returns the whole list."""
        cleaned = [_clean(t) for t in texts]
        if not cleaned:
            raise TodoError("add needs at least one item")

        def add(conn: Conn) -> list[TodoItem]:
            current = _items(conn, session)
            if len(current) + len(cleaned) > MAX_TODO_ITEMS:
                raise TodoError(
                    f"the list holds at most {MAX_TODO_ITEMS} items ({len(current)} now); "
                    "complete and clear items first"
                )
            number = max((i.number for i in current), default=0)
            now = time.time()
            for text in cleaned:
                number += 1
                conn.execute(
                    "INSERT INTO todos(session, number, text, status, created_at, updated_at)"
                    " VALUES (?, ?, ?, 'pending', ?, ?)",
                    (session, number, text, now, now),
                )
            return _items(conn, session)

        return await self.db.write(add, keys=_keys(session))

    async def update_todo(
        self,
        session: str,
        number: int,
        *,
        text: str | None = None,
        status: TodoStatus | None = None,
    ) -> list[TodoItem]:
        """Change one item's text and/or status; TodoError when it does not exist."""
        if status is not None and status not in TODO_STATUSES:
            raise TodoError(f"status must be one of {', '.join(TODO_STATUSES)}")
        cleaned = _clean(text) if text is not None else None
        if cleaned is None and status is None:
            raise TodoError("update needs text or status")

        def update(conn: Conn) -> list[TodoItem]:
            cursor = conn.execute(
                "UPDATE todos SET text = coalesce(?, text), status = coalesce(?, status),"
                " updated_at = ? WHERE session = ? AND number = ?",
                (cleaned, status, time.time(), session, number),
            )
            if cursor.rowcount == 0:
                raise TodoError(f"there is no todo item {number}")
            return _items(conn, session)

        return await self.db.write(update, keys=_keys(session))

    async def clear_todos(self, session: str, *, done_only: bool = False) -> list[TodoItem]:
        """Remove every item (or only finished ones); returns what is left."""

        def clear(conn: Conn) -> list[TodoItem]:
            if done_only:
                conn.execute("DELETE FROM todos WHERE session = ? AND status = 'done'", (session,))
            else:
                conn.execute("DELETE FROM todos WHERE session = ?", (session,))
            return _items(conn, session)

        return await self.db.write(clear, keys=_keys(session))

    async def todo_note(self, session: str) -> str | None:
        """The text appended to a turn's user message while any item is open, else None."""
        return _todo_note(await self.todos(session))

    async def provider_job(self, session: str, turn: str, call_id: str) -> ProviderJob | None:
        """The paid job this call started, or None when it started none."""
        row = await self.db.fetchone(
            "SELECT * FROM provider_jobs WHERE session = ? AND turn = ? AND call_id = ?",
            (session, turn, call_id),
        )
        if row is None:
            return None
        status = row["status"]
        return ProviderJob(
            session=row["session"],
            turn=row["turn"],
            call_id=row["call_id"],
            tool=row["tool"],
            provider=row["provider"],
            status=status if status in ("sending", "running", "done", "failed") else "failed",
            job=row["job"],
            detail=json.loads(row["detail"] or "{}"),
            result=row["result"],
            created_at=float(row["created_at"]),
        )

    async def begin_provider_job(self, job: ProviderJob) -> bool:
        """Record a call's job as `sending`, committed before the request goes out; False
        when the call already has one (it was run before: the caller reads that one)."""
        now = time.time()

        def _begin(conn: Conn) -> bool:
            cursor = conn.execute(
                "INSERT OR IGNORE INTO provider_jobs(session, turn, call_id, tool, provider,"
                " status, job, detail, result, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    job.session,
                    job.turn,
                    job.call_id,
                    job.tool,
                    job.provider,
                    job.status,
                    job.job,
                    json.dumps(job.detail),
                    job.result,
                    now,
                    now,
                ),
            )
            return cursor.rowcount == 1

        return await self.db.write(_begin, keys=_keys(job.session))

    async def update_provider_job(
        self,
        session: str,
        turn: str,
        call_id: str,
        *,
        status: ProviderJobStatus,
        job: str | None = None,
        detail: dict[str, Any] | None = None,
        result: str | None = None,
    ) -> None:
        """Move a call's job on (its id once the provider named it, what it saved, how it
        ended); each update is committed before the caller goes on."""
        encoded = json.dumps(detail) if detail is not None else None

        def _update(conn: Conn) -> None:
            conn.execute(
                "UPDATE provider_jobs SET status = ?, job = coalesce(?, job),"
                " detail = coalesce(?, detail), result = coalesce(?, result), updated_at = ?"
                " WHERE session = ? AND turn = ? AND call_id = ?",
                (status, job, encoded, result, time.time(), session, turn, call_id),
            )

        await self.db.write(_update, keys=_keys(session))

    async def turn_state(self, session: str) -> TurnState:
        """What a starting turn reads from state.db, in one trip to its thread."""

        return await self.db.run(lambda conn: read_turn_state(conn, session))


@dataclass(frozen=True)
class TurnState:
    """A session's state as a turn starts: the todo note for its message, the /think,
    /model and /personality choices."""

    todo_note: str | None
    thinking: str | None
    model: str | None = None
    personality: str | None = None


def _todo_note(items: list[TodoItem]) -> str | None:
    if not any(i.open for i in items):
        return None
    return "[your todo list for this session]\n" + render_todos(items)


def read_turn_state(conn: Conn, session: str, schema: str = "main") -> TurnState:
    """What a starting turn reads from state.db, on `conn` where state.db is `schema`
    (its own connection, or attached to the one of the turn's opening transaction)."""
    rows = conn.execute(
        f"SELECT name, value FROM {_schema(schema)}session_settings"
        " WHERE session = ? AND name IN ('thinking', 'model', 'personality')",
        (session,),
    )
    settings = {str(name): str(value) for name, value in rows}
    return TurnState(
        _todo_note(_items(conn, session, schema)),
        settings.get("thinking"),
        settings.get("model"),
        settings.get("personality"),
    )


def _keys(*sessions: str) -> tuple[str, ...]:
    """What a write of these sessions' rows is keyed by (`Database.write`'s `keys`): on
    PostgreSQL, writes of different sessions run side by side (a todo's number is the
    session's max + 1: one writer per session). Writes of many sessions (adopting a
    setting, forgetting pruned sessions) are taken whole."""
    return tuple(f"session:{session}" for session in sessions)


def _schema(name: str) -> str:
    """The prefix naming a table of state.db on a connection where it is `name`: none for
    its own connection ("main": a PostgreSQL connection's own schema is its search path,
    and it has no `main`), `name.` for an attached database or another schema."""
    if not name.isidentifier():
        raise ValueError(f"bad schema name {name!r}")
    return "" if name == "main" else f"{name}."
