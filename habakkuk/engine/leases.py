"""Named leases in control.db: one holder of a name at a time across a home's processes.

A lease is (name, owner, host, pid, until, beat). `acquire` takes a free lease or
renews our own; a lease held by a dead process on this host is taken at once (a
`kill -9` never holds a name until it expires), any other one when it runs out. The
host is `hostname.this_host()` (HABAKKUK_HOSTNAME), so on a database several machines
share, a holder on another host is judged by its lease time alone, never by a pid that
means nothing here.

The same statements run on SQLite and PostgreSQL: the take is one upsert whose
condition (free, ours, or its holder found dead) is checked on the row as it is when
the statement runs, so two nodes asking at once cannot both get the name.
`beat` is when the holder last renewed it, so a new holder can tell how long nobody
held the name (the scheduler's "Habakkuk was down").

Channel adapters (one poller per account: table channel_leases), the HTTP listener and
the scheduler (one ticker per home) use it.
"""

from __future__ import annotations

import os
import time

from habakkuk.engine.sql import Conn

from .hostname import this_host
from .store import Database

# Per engine, the same table: PostgreSQL's types, and no PRAGMA to find an older table.
_CREATE = {
    "sqlite": (
        "CREATE TABLE IF NOT EXISTS {table} (name TEXT PRIMARY KEY, owner TEXT NOT NULL,"
        " host TEXT NOT NULL, pid INTEGER NOT NULL, until REAL NOT NULL,"
        " beat REAL NOT NULL DEFAULT 0)"
    ),
    "postgres": (
        "CREATE TABLE IF NOT EXISTS {table} (name TEXT PRIMARY KEY, owner TEXT NOT NULL,"
        " host TEXT NOT NULL, pid BIGINT NOT NULL, until DOUBLE PRECISION NOT NULL,"
        " beat DOUBLE PRECISION NOT NULL DEFAULT 0)"
    ),
}


def process_alive(pid: int) -> bool:
    """Whether process `pid` exists on this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class NamedLeases:
    """The leases of one table of control.db (`table`: channel_leases, leases)."""

    def __init__(self, db: Database, table: str = "leases"):
        if not table.isidentifier():
            raise ValueError(f"bad table name {table!r}")
        self.db = db
        self.table = table

    async def ensure(self) -> None:
        """Create the table, or add `beat` to an older one (idempotent)."""
        table = self.table
        dialect = self.db.dialect

        def _create(conn: Conn) -> None:
            conn.execute(_CREATE[dialect].format(table=table))
            if dialect == "postgres":
                return  # created with `beat`: no PostgreSQL home predates it
            columns = {row["name"] for row in conn.execute(f"PRAGMA table_info({table})")}
            if "beat" not in columns:
                conn.execute(f"ALTER TABLE {table} ADD COLUMN beat REAL NOT NULL DEFAULT 0")

        await self.db.write(_create)

    async def acquire(
        self,
        name: str,
        owner: str,
        seconds: float,
        *,
        now: float | None = None,
        pid: int | None = None,
    ) -> str | None:
        """Take or renew lease `name`; None when we hold it now, else the holder.

        `now` and `pid` default to the clock and this process (tests inject both)."""
        host = this_host()
        our_pid = os.getpid() if pid is None else pid
        table = self.table
        take = (
            f"INSERT INTO {table}(name, owner, host, pid, until, beat) VALUES (?, ?, ?, ?, ?, ?)"
            " ON CONFLICT(name) DO UPDATE SET owner = excluded.owner, host = excluded.host,"
            " pid = excluded.pid, until = excluded.until, beat = excluded.beat"
            f" WHERE {table}.owner = excluded.owner OR {table}.until < excluded.beat"
            f" OR ({table}.host = excluded.host AND {table}.pid = ?)"
            " RETURNING owner"
        )

        def _take(conn: Conn) -> str | None:
            at = time.time() if now is None else now
            row = conn.execute(
                f"SELECT owner, host, pid, until FROM {table} WHERE name = ?", (name,)
            ).fetchone()
            # A live holder's lease on this host whose process died: its pid, which the
            # take may replace (-1: none; pids are positive). Found here, checked again
            # by the upsert against the row as it is then.
            dead = -1
            if (
                row is not None
                and row["owner"] != owner
                and row["until"] >= at
                and row["host"] == host
                and not process_alive(int(row["pid"]))
            ):
                dead = int(row["pid"])
            taken = conn.execute(
                take, (name, owner, host, our_pid, at + seconds, at, dead)
            ).fetchone()
            if taken is not None:
                return None
            holder = conn.execute(f"SELECT owner FROM {table} WHERE name = ?", (name,)).fetchone()
            return str(holder["owner"]) if holder is not None else ""

        return await self.db.write(_take)

    async def release(self, name: str, owner: str) -> None:
        """Give the lease up (only if we hold it); the last beat is kept."""
        table = self.table
        await self.db.write(
            lambda conn: conn.execute(
                f"UPDATE {table} SET until = 0 WHERE name = ? AND owner = ?", (name, owner)
            )
        )

    async def holder(self, name: str, *, now: float | None = None) -> str | None:
        """Who holds `name` now, or None."""
        row = await self.db.fetchone(
            f"SELECT owner FROM {self.table} WHERE name = ? AND until >= ?",
            (name, time.time() if now is None else now),
        )
        return str(row["owner"]) if row else None

    async def last_beat(self, name: str) -> float | None:
        """When any holder of `name` last took or renewed it, or None (never held)."""
        row = await self.db.fetchone(f"SELECT beat FROM {self.table} WHERE name = ?", (name,))
        return float(row["beat"]) if row and row["beat"] else None

    async def live_holders(self, *, now: float | None = None) -> dict[str, str]:
        """Every lease held now by a live process (as `live_holder` judges), by name."""
        rows = await self.db.fetchall(
            f"SELECT name, owner, host, pid FROM {self.table} WHERE until >= ?",
            (time.time() if now is None else now,),
        )
        host = this_host()
        return {
            str(row["name"]): str(row["owner"])
            for row in rows
            if row["host"] != host or process_alive(int(row["pid"]))
        }

    async def live_holder(self, name: str, *, now: float | None = None) -> str | None:
        """Who holds `name` now and is alive, or None: a lease whose holder died on this
        host (`kill -9`) is as good as free, as `acquire` treats it."""
        row = await self.db.fetchone(
            f"SELECT owner, host, pid FROM {self.table} WHERE name = ? AND until >= ?",
            (name, time.time() if now is None else now),
        )
        if row is None:
            return None
        if row["host"] == this_host() and not process_alive(int(row["pid"])):
            return None
        return str(row["owner"])
