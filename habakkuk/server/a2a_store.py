"""web.db's A2A records: the sessions A2A started (its contexts) and the tasks it ran.

`a2a_contexts`: a session an A2A message started, and its agent: only these can be
continued by contextId, so a caller cannot continue a chat's session. `a2a_tasks`: each
task (a turn job) with its context and the user's messageId and text, keyed by the turn
id (derived from agent, context and messageId), so a resent message finds its first task
and a caller can only read tasks A2A started.
"""

from __future__ import annotations

from dataclasses import dataclass

from habakkuk.engine.sql import Conn, Database, Row

TABLES = """
CREATE TABLE a2a_contexts (
    context TEXT PRIMARY KEY,
    agent TEXT NOT NULL,
    created_at {real} NOT NULL
);
CREATE TABLE a2a_tasks (
    task TEXT PRIMARY KEY,
    context TEXT NOT NULL,
    agent TEXT NOT NULL,
    message_id TEXT NOT NULL,
    text TEXT NOT NULL,
    created_at {real} NOT NULL
);
CREATE INDEX a2a_tasks_created ON a2a_tasks(created_at);
CREATE INDEX a2a_contexts_created ON a2a_contexts(created_at);
"""
SQLITE_TABLES = TABLES.format(real="REAL")
PG_TABLES = TABLES.format(real="DOUBLE PRECISION")


@dataclass(frozen=True)
class A2ATask:
    """One task A2A started."""

    task: str
    context: str
    agent: str
    message_id: str
    text: str
    created_at: float


def _task(row: Row) -> A2ATask:
    return A2ATask(
        row["task"],
        row["context"],
        row["agent"],
        row["message_id"],
        row["text"],
        float(row["created_at"]),
    )


async def context_agent(db: Database, context: str) -> str | None:
    """The agent of a session A2A started, or None when A2A did not start it."""
    row = await db.fetchone("SELECT agent FROM a2a_contexts WHERE context = ?", (context,))
    return str(row[0]) if row else None


async def task(db: Database, task_id: str) -> A2ATask | None:
    """A task A2A started, or None."""
    row = await db.fetchone("SELECT * FROM a2a_tasks WHERE task = ?", (task_id,))
    return _task(row) if row else None


async def remember_task(db: Database, record: A2ATask, *, new_context: bool = False) -> A2ATask:
    """Record the task unless a request with the same id did first; returns the winner.
    `new_context`: its context is a session A2A has just started (recorded with it, in
    the same transaction)."""

    def _remember(conn: Conn) -> A2ATask:
        if new_context:
            conn.execute(
                "INSERT INTO a2a_contexts(context, agent, created_at) VALUES (?, ?, ?)"
                " ON CONFLICT(context) DO NOTHING",
                (record.context, record.agent, record.created_at),
            )
        conn.execute(
            "INSERT INTO a2a_tasks(task, context, agent, message_id, text, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(task) DO NOTHING",
            (
                record.task,
                record.context,
                record.agent,
                record.message_id,
                record.text,
                record.created_at,
            ),
        )
        row = conn.execute("SELECT * FROM a2a_tasks WHERE task = ?", (record.task,)).fetchone()
        return _task(row)

    return await db.write(_remember)


async def recent_tasks(db: Database, context: str | None, limit: int) -> list[A2ATask]:
    """The newest `limit` tasks (of one context, when named), newest first."""
    if context is None:
        rows = await db.fetchall(
            "SELECT * FROM a2a_tasks ORDER BY created_at DESC, task LIMIT ?", (limit,)
        )
    else:
        rows = await db.fetchall(
            "SELECT * FROM a2a_tasks WHERE context = ? ORDER BY created_at DESC, task LIMIT ?",
            (context, limit),
        )
    return [_task(row) for row in rows]


async def prune(db: Database, before: float) -> None:
    """Drop the records older than `before` (web.db's retention)."""

    def _prune(conn: Conn) -> None:
        conn.execute("DELETE FROM a2a_tasks WHERE created_at < ?", (before,))
        conn.execute("DELETE FROM a2a_contexts WHERE created_at < ?", (before,))

    await db.write(_prune)
