"""The home's nodes: every process serving the home (a `habakkuk --serve` or the terminal
app), in the `nodes` table of the control database, so any of them can show them all.

A node registers when it starts its workers, heartbeats every few seconds (a
maintenance task) and removes its row on a clean stop; a node that was killed stops
beating and is shown as stale until a later start of any node prunes it (after a day).
Each row says the node's host, pid, the agents it hosts ('*' for all), its version,
when it started and its last heartbeat. The leases a node holds are not stored here:
they are read from the named lease tables (`leases`, `channel_leases`) by host and pid
when the nodes are listed, so they are never out of date.

Clocks. Leases and timed jobs compare times written by different machines, so a node
whose clock is off the database server's cannot be trusted with them. On PostgreSQL
each heartbeat stores both the node's time and the server's `clock_timestamp()` at the
write; their difference is the node's skew, which `habakkuk doctor` and the overview
show, and a process whose skew passes MAX_SKEW_SECONDS refuses to start
(`check_clock`, ClockSkew: exit 2). On SQLite every process shares one machine's
clock: the server's time is the node's own, and the skew is 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .errors import ConfigError
from .hostname import this_host
from .sql import Conn, Database, Dialect

log = logging.getLogger(__name__)

# How often a node writes its heartbeat.
BEAT_SECONDS = 5.0
# A node whose last heartbeat is older than this (by the server's clock) is stale:
# killed, hung, or cut off from the database.
STALE_SECONDS = 3 * BEAT_SECONDS
# A stale node's row is removed when any node starts this long after its last beat.
PRUNE_SECONDS = 86400.0
# The most a node's clock may be off the server's: leases run 30-60 s, and a clock
# this far off would take a live holder's lease or keep a dead one's.
MAX_SKEW_SECONDS = 5.0
# The agents column of a node that hosts every agent.
ALL_AGENTS = "*"
# The named lease tables whose rows say which node holds what (engine/leases.py).
LEASE_TABLES = ("leases", "channel_leases")

_DDL: dict[Dialect, str] = {
    "sqlite": (
        "CREATE TABLE IF NOT EXISTS nodes (id TEXT PRIMARY KEY, host TEXT NOT NULL,"
        " pid INTEGER NOT NULL, agents TEXT NOT NULL, version TEXT NOT NULL,"
        " started_at REAL NOT NULL, beat REAL NOT NULL, server_at REAL NOT NULL)"
    ),
    "postgres": (
        "CREATE TABLE IF NOT EXISTS nodes (id TEXT PRIMARY KEY, host TEXT NOT NULL,"
        " pid BIGINT NOT NULL, agents TEXT NOT NULL, version TEXT NOT NULL,"
        " started_at DOUBLE PRECISION NOT NULL, beat DOUBLE PRECISION NOT NULL,"
        " server_at DOUBLE PRECISION NOT NULL)"
    ),
}
# Which of the named lease tables exist (each is made by its store when first used).
_TABLES: dict[Dialect, str] = {
    "sqlite": "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN (?, ?, ?)",
    "postgres": (
        "SELECT table_name AS name FROM information_schema.tables"
        " WHERE table_schema = current_schema() AND table_name IN (?, ?, ?)"
    ),
}
# The server's clock now (not the transaction's start), in epoch seconds.
_SERVER_NOW = "SELECT extract(epoch FROM clock_timestamp())"


class ClockSkew(ConfigError):
    """This machine's clock is too far off the database server's to hold leases."""


@dataclass(frozen=True)
class Node:
    """One process serving the home, as the overview and doctor show it."""

    id: str  # host:pid:start
    host: str
    pid: int
    agents: tuple[str, ...]  # the agents it hosts; ("*",) for all
    version: str
    started_at: float  # by its own clock
    beat: float  # its last heartbeat, by its own clock
    server_at: float  # the server's clock at that heartbeat
    leases: tuple[str, ...] = ()  # the named leases it holds now
    stale: bool = False  # no heartbeat for STALE_SECONDS (by the server's clock)
    here: bool = False  # this process

    @property
    def skew(self) -> float:
        """How far its clock was ahead of the server's at its last heartbeat (seconds)."""
        return self.beat - self.server_at

    def hosts(self, agent: str) -> bool:
        """Whether the node runs `agent`'s turns."""
        return ALL_AGENTS in self.agents or agent in self.agents


@dataclass(frozen=True)
class ClockReading:
    """This node's clock beside the server's, read in one round trip."""

    local: float  # the middle of the round trip, by this node's clock
    server: float  # the server's clock during it
    round_trip: float

    @property
    def skew(self) -> float:
        """This node's clock minus the server's (seconds)."""
        return self.local - self.server

    def too_far(self, bound: float = MAX_SKEW_SECONDS) -> bool:
        """Off by more than `bound`, even granting the round trip's uncertainty."""
        return abs(self.skew) - self.round_trip / 2 > bound


def read_clock(conn: Conn, dialect: Dialect, clock: Callable[[], float]) -> ClockReading:
    """The server's clock beside `clock` (on SQLite the server's clock is `clock`)."""
    if dialect == "sqlite":
        now = clock()
        return ClockReading(now, now, 0.0)
    before = clock()
    row = conn.execute(_SERVER_NOW).fetchone()
    after = clock()
    return ClockReading((before + after) / 2, float(row[0]), after - before)


def skew_message(reading: ClockReading, host: str) -> str:
    """The one line saying `host`'s clock is off the server's."""
    ahead = "ahead of" if reading.skew > 0 else "behind"
    return (
        f"the clock of {host} is {abs(reading.skew):.1f} s {ahead} the database server's"
        f" (at most {MAX_SKEW_SECONDS:.0f} s: leases depend on it); synchronise it (NTP)"
        " and start again"
    )


async def check_clock(db: Database, *, clock: Callable[[], float] = time.time) -> ClockReading:
    """This node's clock against `db`'s server; ClockSkew (exit 2) past MAX_SKEW_SECONDS.
    Nothing to check on SQLite (one machine, one clock): no trip to the database."""
    if db.dialect == "sqlite":
        now = clock()
        return ClockReading(now, now, 0.0)
    reading = await db.run(lambda conn: read_clock(conn, db.dialect, clock))
    if reading.too_far():
        raise ClockSkew(skew_message(reading, this_host()))
    return reading


class NodeRegistry:
    """This process's row in `nodes`, and the read of every node's."""

    def __init__(
        self,
        db: Database,
        *,
        agents: Sequence[str] | None = None,
        host: str | None = None,
        pid: int | None = None,
        version: str | None = None,
        clock: Callable[[], float] = time.time,
        beat_seconds: float = BEAT_SECONDS,
    ):
        from habakkuk import __version__

        self.db = db
        self.host = host or this_host()
        self.pid = os.getpid() if pid is None else pid
        self.agents = tuple(agents) if agents else (ALL_AGENTS,)
        self.version = version or __version__
        self.clock = clock
        self.beat_seconds = beat_seconds
        self.started_at = clock()
        self.id = f"{self.host}:{self.pid}:{self.started_at:.3f}"
        self.joined = False
        self.last_reading: ClockReading | None = None

    async def ensure(self) -> None:
        """Create the table (idempotent)."""
        ddl = _DDL[self.db.dialect]
        await self.db.write(lambda conn: conn.execute(ddl))

    async def join(self) -> ClockReading:
        """Register this process (and prune nodes dead for a day); ClockSkew, and no row,
        when this clock is off the server's by more than MAX_SKEW_SECONDS."""
        await self.ensure()
        dialect, clock = self.db.dialect, self.clock

        def _join(conn: Conn) -> ClockReading:
            reading = read_clock(conn, dialect, clock)
            if reading.too_far():
                return reading
            conn.execute("DELETE FROM nodes WHERE server_at < ?", (reading.server - PRUNE_SECONDS,))
            self._upsert(conn, reading)
            return reading

        reading = await self.db.write(_join)
        self.last_reading = reading
        if reading.too_far():
            raise ClockSkew(skew_message(reading, self.host))
        self.joined = True
        return reading

    def _upsert(self, conn: Conn, reading: ClockReading) -> None:
        conn.execute(
            "INSERT INTO nodes(id, host, pid, agents, version, started_at, beat, server_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT(id) DO UPDATE SET beat = excluded.beat,"
            " server_at = excluded.server_at, agents = excluded.agents",
            (
                self.id,
                self.host,
                self.pid,
                ",".join(self.agents),
                self.version,
                self.started_at,
                reading.local,
                reading.server,
            ),
        )

    async def beat(self) -> ClockReading:
        """Write this node's heartbeat (its row again if someone removed it)."""
        dialect, clock = self.db.dialect, self.clock

        def _beat(conn: Conn) -> ClockReading:
            reading = read_clock(conn, dialect, clock)
            self._upsert(conn, reading)
            return reading

        # Its own row, by key: safe beside the other writers, as the queue's writes are.
        reading = await self.db.write(_beat, shared=True)
        if reading.too_far() and not (self.last_reading and self.last_reading.too_far()):
            log.warning("%s", skew_message(reading, self.host))
        self.last_reading = reading
        return reading

    async def leave(self) -> None:
        """Remove this node's row (a clean stop)."""
        if not self.joined:
            return
        self.joined = False
        await self.db.write(lambda conn: conn.execute("DELETE FROM nodes WHERE id = ?", (self.id,)))

    async def run(self) -> None:
        """Register, then heartbeat until cancelled; the row goes when cancelled. A
        database that does not answer (or a clock gone off since the start) is logged,
        and the next beat tries again: meanwhile the node shows as stale."""
        try:
            while True:
                try:
                    await (self.beat() if self.joined else self.join())
                except Exception as exc:
                    log.warning("node %s: heartbeat failed: %s", self.id, exc)
                await asyncio.sleep(self.beat_seconds)
        finally:
            # Cancelled (the runtime closing): the row goes, unless the database is gone.
            with contextlib.suppress(Exception):
                await asyncio.shield(self.leave())

    async def nodes(self) -> list[Node]:
        """Every registered node, oldest first, with the leases each holds now; the same
        answer from any node of the home."""
        dialect, clock, here = self.db.dialect, self.clock, self.id

        def _read(conn: Conn) -> list[Node]:
            tables = _existing_tables(conn, dialect)
            if "nodes" not in tables:
                return []
            reading = read_clock(conn, dialect, clock)
            held: dict[tuple[str, int], list[str]] = {}
            for table in LEASE_TABLES:
                if table not in tables:
                    continue
                for row in conn.execute(
                    f"SELECT name, host, pid FROM {table} WHERE until >= ? ORDER BY name",
                    (reading.local,),
                ):
                    held.setdefault((str(row["host"]), int(row["pid"])), []).append(
                        str(row["name"])
                    )
            rows = conn.execute(
                "SELECT id, host, pid, agents, version, started_at, beat, server_at"
                " FROM nodes ORDER BY started_at, id"
            ).fetchall()
            return [
                Node(
                    id=str(row["id"]),
                    host=str(row["host"]),
                    pid=int(row["pid"]),
                    agents=tuple(str(row["agents"]).split(",")),
                    version=str(row["version"]),
                    started_at=float(row["started_at"]),
                    beat=float(row["beat"]),
                    server_at=float(row["server_at"]),
                    leases=tuple(held.get((str(row["host"]), int(row["pid"])), ())),
                    stale=reading.server - float(row["server_at"]) > STALE_SECONDS,
                    here=str(row["id"]) == here,
                )
                for row in rows
            ]

        return await self.db.run(_read)


def _existing_tables(conn: Conn, dialect: Dialect) -> set[str]:
    """Which of `nodes` and the lease tables exist in the control database."""
    names = ("nodes", *LEASE_TABLES)
    return {str(row["name"]) for row in conn.execute(_TABLES[dialect], names)}
