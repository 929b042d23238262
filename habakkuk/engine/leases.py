"""Named leases in control.db: one holder of a name at a time across a home's processes.

A lease is (name, owner, host, pid, until, beat). `acquire` takes a free lease or
renews our own; a lease held by a dead process on this host is taken at once (a
`kill -9` never holds a name until it expires), any other one when it runs out.
`beat` is when the holder last renewed it, so a new holder can tell how long nobody
held the name (the scheduler's "Habakkuk was down").

Channel adapters (one poller per account: table channel_leases), the HTTP listener and
the scheduler (one ticker per home) use it.
"""

from __future__ import annotations

import os
import socket
import time

from habakkuk.engine.sql import Conn

from .store import Database


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

        def _create(conn: Conn) -> None:
            if self.db.dialect == "postgres":
                conn.execute(
                    f"CREATE TABLE IF NOT EXISTS {table} (name TEXT PRIMARY KEY,"
                    " owner TEXT NOT NULL, host TEXT NOT NULL, pid BIGINT NOT NULL,"
                    " until DOUBLE PRECISION NOT NULL, beat DOUBLE PRECISION NOT NULL DEFAULT 0)"
                )
                return
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {table} (name TEXT PRIMARY KEY, owner TEXT NOT NULL,"
                " host TEXT NOT NULL, pid INTEGER NOT NULL, until REAL NOT NULL,"
                " beat REAL NOT NULL DEFAULT 0)"
            )
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
        host = socket.gethostname()
        our_pid = os.getpid() if pid is None else pid
        table = self.table

        def _take(conn: Conn) -> str | None:
            at = time.time() if now is None else now
            row = conn.execute(
                f"SELECT owner, host, pid, until FROM {table} WHERE name = ?", (name,)
            ).fetchone()
            free = (
                row is None
                or row["owner"] == owner
                or row["until"] < at
                or (row["host"] == host and not process_alive(int(row["pid"])))
            )
            if not free:
                return str(row["owner"])
            conn.execute(
                f"INSERT INTO {table}(name, owner, host, pid, until, beat)"
                " VALUES (?, ?, ?, ?, ?, ?)"
                " ON CONFLICT(name) DO UPDATE SET owner = excluded.owner, host = excluded.host,"
                " pid = excluded.pid, until = excluded.until, beat = excluded.beat",
                (name, owner, host, our_pid, at + seconds, at),
            )
            return None

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

    async def live_holder(self, name: str, *, now: float | None = None) -> str | None:
        """Who holds `name` now and is alive, or None: a lease whose holder died on this
        host (`kill -9`) is as good as free, as `acquire` treats it."""
        row = await self.db.fetchone(
            f"SELECT owner, host, pid FROM {self.table} WHERE name = ? AND until >= ?",
            (name, time.time() if now is None else now),
        )
        if row is None:
            return None
        if row["host"] == socket.gethostname() and not process_alive(int(row["pid"])):
            return None
        return str(row["owner"])
