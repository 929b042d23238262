"""Delegation's SQL on control: why children were stopped, and children read off jobs.

`subturn_stops` holds one row per sub-turn job stopped on purpose (`stopped` by
/subagents stop, `timed out` by the foreground wait), written before the child is
stopped, so its report says why even when another process ran it. The table is
created on first use, spelled for the engine that holds control (work/tables.py).

The children of a session, and the ended children whose parent's notice is still
owed, are read off the sub-turn jobs' JSON payloads (a DelegateRun: `spec.
parent_session`, `spec.background`) with each engine's JSON functions.
"""

from __future__ import annotations

from collections.abc import Sequence

from habakkuk.engine.sql import Conn, Database, Dialect, Row
from habakkuk.work.tables import Tables, ensure_tables

SCHEMA = """
CREATE TABLE IF NOT EXISTS subturn_stops (
    job TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    error TEXT NOT NULL DEFAULT '',
    at REAL NOT NULL
);
"""
PG_SCHEMA = """
CREATE TABLE IF NOT EXISTS subturn_stops (
    job TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    error TEXT NOT NULL DEFAULT '',
    at DOUBLE PRECISION NOT NULL
);
"""
TABLES = Tables(SCHEMA, PG_SCHEMA, marker="subturn_stops")

# A sub-turn job's payload fields in SQL: its parent session (text), and whether it runs
# in the background (true when so, else false or NULL). The payload is JSON text on both
# engines (`::jsonb` would be a no-op should the column ever be jsonb).
_PARENT: dict[Dialect, str] = {
    "sqlite": "json_extract(payload, '$.spec.parent_session')",
    "postgres": "(payload::jsonb #>> '{spec,parent_session}')",
}
_BACKGROUND: dict[Dialect, str] = {
    "sqlite": "json_extract(j.payload, '$.spec.background')",
    "postgres": "(j.payload::jsonb #>> '{spec,background}') = 'true'",
}
ACTIVE = "('queued', 'running')"
ENDED = "('done', 'failed', 'cancelled')"
ANY = "('queued', 'running', 'done', 'failed', 'cancelled')"


class DelegationStore:
    """Delegation's reads and writes on control (the queue's database)."""

    def __init__(self, db: Database):
        self.db = db
        self._ready = False

    async def ensure(self) -> None:
        """Create subturn_stops if needed (once per store; idempotent)."""
        if not self._ready:
            await ensure_tables(self.db, TABLES)
            self._ready = True

    async def record_stop(self, job: str, status: str, error: str, at: float) -> None:
        """Record why `job` stops; the first reason recorded stays."""
        await self.ensure()

        def _insert(conn: Conn) -> None:
            conn.execute(
                "INSERT INTO subturn_stops(job, status, error, at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT(job) DO NOTHING",
                (job, status, error, at),
            )

        await self.db.write(_insert)

    async def stop_of(self, job: str) -> tuple[str, str] | None:
        """(status, error) recorded for `job`, or None when it was not stopped on purpose."""
        await self.ensure()
        row = await self.db.fetchone(
            "SELECT status, error FROM subturn_stops WHERE job = ?", (job,)
        )
        return None if row is None else (str(row["status"]), str(row["error"]))

    async def children(self, kind: str, parent_session: str, *, active_only: bool) -> Sequence[Row]:
        """The job rows of `kind` whose payload names `parent_session` as parent (queued
        or running only, with `active_only`), oldest first."""
        statuses = ACTIVE if active_only else ANY
        return await self.db.fetchall(
            f"SELECT * FROM jobs WHERE kind = ? AND status IN {statuses}"
            f" AND {_PARENT[self.db.dialect]} = ? ORDER BY seq",
            (kind, parent_session),
        )

    async def notices_owed(self, kind: str, notice_prefix: str) -> Sequence[Row]:
        """The ended job rows of `kind` whose parent is owed a notice (a background child,
        or one stopped with /subagents stop) and has no job `notice_prefix + id` yet."""
        await self.ensure()
        return await self.db.fetchall(
            "SELECT j.* FROM jobs j LEFT JOIN subturn_stops s ON s.job = j.id"
            f" WHERE j.kind = ? AND j.status IN {ENDED}"
            f" AND ({_BACKGROUND[self.db.dialect]} OR s.status = 'stopped')"
            " AND NOT EXISTS (SELECT 1 FROM jobs n WHERE n.id = CAST(? AS TEXT) || j.id)",
            (kind, notice_prefix),
        )
