"""Creating the work layer's tables in control, on either engine.

The schedules, the board and delegation keep their tables out of the queue's numbered
migrations: each store creates its own, IF NOT EXISTS, when it first opens. On SQLite
that is a script run as is. On PostgreSQL the same tables are spelled in its types,
and the script runs as a write (under the schema's writer lock, engine/pg.py): two
nodes starting together would otherwise race on CREATE TABLE IF NOT EXISTS, which
PostgreSQL does not make atomic (the loser fails on its catalog's unique index). A
script whose last object (`marker`) exists already is not sent again, so a store
that opens often does not queue DDL behind the writers.
"""

from __future__ import annotations

from dataclasses import dataclass

from habakkuk.engine.sql import Conn, Database


@dataclass(frozen=True)
class Tables:
    """One store's DDL on each engine; `marker` is the last object the PostgreSQL
    script creates (a table or index name), present only once the whole script ran."""

    sqlite: str
    postgres: str
    marker: str

    def script(self, db: Database) -> str:
        """The DDL for `db`'s engine."""
        return self.postgres if db.dialect == "postgres" else self.sqlite


async def ensure_tables(db: Database, tables: Tables) -> None:
    """Create `tables` in `db` if needed (idempotent; safe with other processes and,
    on PostgreSQL, with other nodes)."""
    if db.dialect == "sqlite":
        await db.run(lambda conn: conn.executescript(tables.sqlite))
        return

    def _create(conn: Conn) -> None:
        row = conn.execute("SELECT to_regclass(?) IS NOT NULL", (tables.marker,)).fetchone()
        if row is None or not row[0]:
            conn.executescript(tables.postgres)

    present = await db.fetchone("SELECT to_regclass(?) IS NOT NULL", (tables.marker,))
    if present is None or not present[0]:
        await db.write(_create)
