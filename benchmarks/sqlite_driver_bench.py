"""Python's sqlite3 against apsw on the statements our stores run, side by side.

apsw bundles a current SQLite (3.54 here) where sqlite3 links the platform's (3.40 on
Debian 12). This measures whether moving engine/store.py onto apsw would pay: the same
schema (the real migrations), the same SQL, WAL with synchronous=NORMAL, explicit
transactions, rows read by position in both, on one thread (as the store's own database
thread runs them), in alternating rounds:

- queue, one at a time: enqueue one job, claim it (the real claim statement), complete
  it, each its own transaction (the shape of one awaited call after another);
- queue, batched: 100 enqueues a transaction, claims and completions 8 at a time (the
  Pool's dispatcher trips);
- transcript appends: one message a transaction through the real triggers (FTS kept);
- search: the real session search over the appended history.

Then the async side, in wall time (hops between the loop and a database thread are the
cost there): the store's own `Database` (one hop per transaction, writes waiting at one
moment share a commit) against aiosqlite (one hop per statement), on the one-at-a-time
queue cycle, awaited in turn and with 8 callers at once.

Usage: python benchmarks/sqlite_driver_bench.py [--jobs 3000] [--messages 20000]
[--rounds 3] [--wall]   (needs the bench extra: pip install -e '.[bench]')
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

import aiosqlite
import apsw
from _harness import OLD_SESSIONS

from habakkuk.engine import jobs, sessions
from habakkuk.engine.store import Database, Migration, SqliteDatabase, _split_sql


class Driver(Protocol):
    """What the workloads need of a connection: statements and positional rows."""

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...

    def changes(self) -> int: ...

    def close(self) -> None: ...


class Sqlite3Driver:
    """Python's sqlite3, opened the way engine/store.py opens it."""

    name = f"sqlite3 (SQLite {sqlite3.sqlite_version})"

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        for pragma in ("journal_mode = WAL", "synchronous = NORMAL", "foreign_keys = ON"):
            self.conn.execute(f"PRAGMA {pragma}")

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self.conn.execute(sql, params).fetchall()

    def changes(self) -> int:
        return int(self.conn.execute("SELECT changes()").fetchone()[0])

    def close(self) -> None:
        self.conn.close()


class ApswDriver:
    """apsw with its bundled SQLite, the same pragmas."""

    name = f"apsw (SQLite {apsw.sqlite_lib_version()})"

    def __init__(self, path: Path) -> None:
        self.conn = apsw.Connection(str(path))
        for pragma in ("journal_mode = WAL", "synchronous = NORMAL", "foreign_keys = ON"):
            self.conn.execute(f"PRAGMA {pragma}").fetchall()

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self.conn.execute(sql, tuple(params)).fetchall()

    def changes(self) -> int:
        return self.conn.changes()

    def close(self) -> None:
        self.conn.close()


DRIVERS: list[type[Sqlite3Driver] | type[ApswDriver]] = [Sqlite3Driver, ApswDriver]

# CPU time of this process (the database work runs on this thread, and WAL with
# synchronous=NORMAL does not wait on the disk per commit), so a busy machine moves both
# drivers' figures less than wall time would; --wall measures wall time instead.
clock = time.process_time


@contextmanager
def tx(db: Driver) -> Iterator[None]:
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def migrate(db: Driver, migrations: Sequence[Migration]) -> None:
    for migration in migrations:
        with tx(db):
            for statement in _split_sql(migration.sql):
                db.execute(statement)


INSERT_JOB = (
    "INSERT INTO jobs(id, kind, serial_key, payload, max_attempts, run_after,"
    " created_at, updated_at) VALUES (?, ?, ?, ?, 5, ?, ?, ?) ON CONFLICT(id) DO NOTHING"
)
COMPLETE_JOB = (
    "UPDATE jobs SET status = 'done', result = ?, error = NULL, lease_owner = NULL,"
    " lease_until = NULL, updated_at = ? WHERE id = ? AND lease_owner = ? AND status = 'running'"
)
CLAIM = jobs.claim_sql(1)
OWNER = ("bench:1:abc", "bench", 1)
PAYLOAD = json.dumps({"session": "ses_0123456789", "text": "hello there", "n": 1})


def claim(db: Driver, limit: int) -> list[tuple[Any, ...]]:
    now = time.time()
    owner, host, pid = OWNER
    return db.execute(CLAIM, (owner, now + 30, host, pid, now, "k", now, owner, limit))


def queue_one_at_a_time(db: Driver, count: int, tag: str) -> float:
    start = clock()
    for n in range(count):
        now = time.time()
        with tx(db):
            db.execute(INSERT_JOB, (f"{tag}-{n}", "k", "", PAYLOAD, 0.0, now, now))
        with tx(db):
            (row,) = claim(db, 1)
        with tx(db):
            db.execute(COMPLETE_JOB, ('{"ok":true}', time.time(), row[0], OWNER[0]))
    return count / (clock() - start)


def queue_batched(db: Driver, count: int, tag: str) -> float:
    start = clock()
    for base in range(0, count, 100):
        now = time.time()
        with tx(db):
            for n in range(base, min(base + 100, count)):
                db.execute(INSERT_JOB, (f"{tag}-{n}", "k", "", PAYLOAD, 0.0, now, now))
    done = 0
    while done < count:
        with tx(db):
            rows = claim(db, 8)
        with tx(db):
            for row in rows:
                db.execute(COMPLETE_JOB, ('{"ok":true}', time.time(), row[0], OWNER[0]))
        done += len(rows)
    return count / (clock() - start)


WORDS = [
    "deploy",
    "report",
    "python",
    "queue",
    "server",
    "memory",
    "schedule",
    "agent",
    "board",
    "token",
    "window",
    "search",
    "index",
    "budget",
    "model",
    "review",
    "channel",
    "delivery",
    "message",
    "summary",
    "draft",
]


def appends(db: Driver, count: int) -> float:
    now = time.time()
    with tx(db):
        for s in range(100):
            db.execute(
                "INSERT INTO sessions(id, agent, created_at, updated_at) VALUES (?, 'main', ?, ?)",
                (f"ses_{s}", now, now),
            )
    start = clock()
    for n in range(count):
        text = " ".join(WORDS[(n * 7 + k) % len(WORDS)] for k in range(24))
        blocks = json.dumps([{"type": "text", "text": f"{text} number {n}"}])
        with tx(db):
            db.execute(
                "INSERT INTO messages(session_id, seq, role, model, blocks, turn_id, created_at)"
                " VALUES (?, ?, ?, '', ?, '', ?)",
                (f"ses_{n % 100}", n // 100, "user" if n % 2 else "assistant", blocks, now),
            )
            db.execute(
                "UPDATE sessions SET updated_at = ? WHERE id = ?", (time.time(), f"ses_{n % 100}")
            )
    return count / (clock() - start)


SEARCH = OLD_SESSIONS  # the search the drivers were measured on (before issue 27)


def search_ms(db: Driver, repeat: int = 30) -> float:
    times = []
    for n in range(repeat):
        query = f'"{WORDS[n % len(WORDS)]}" "{WORDS[(n + 3) % len(WORDS)]}"'
        start = clock()
        db.execute(SEARCH, (query, sessions.SEARCH_WINDOW, 20, query))
        times.append(clock() - start)
    return statistics.median(times) * 1000


def one_round(
    make: Callable[[Path], Driver], root: Path, args: argparse.Namespace
) -> dict[str, float]:
    folder = Path(tempfile.mkdtemp(dir=root))
    control = make(folder / "control.db")
    transcripts = make(folder / "transcripts.db")
    try:
        migrate(control, jobs.MIGRATIONS)
        migrate(transcripts, sessions.MIGRATIONS)
        return {
            "queue, one at a time (jobs/s)": queue_one_at_a_time(control, args.jobs, "one"),
            "queue, batched (jobs/s)": queue_batched(control, args.jobs, "batch"),
            "transcript appends (msgs/s)": appends(transcripts, args.messages),
            "search, median (ms)": search_ms(transcripts),
        }
    finally:
        control.close()
        transcripts.close()


# -- async: the store's Database against aiosqlite --------------------------------------


async def ours_cycle(db: Database, job_id: str) -> None:
    """One job through the queue with the store's Database: three awaited transactions."""
    owner, host, pid = OWNER

    def enqueue(conn: sqlite3.Connection) -> None:
        now = time.time()
        conn.execute(INSERT_JOB, (job_id, "k", "", PAYLOAD, 0.0, now, now))

    def take(conn: sqlite3.Connection) -> str:
        now = time.time()
        rows = conn.execute(CLAIM, (owner, now + 30, host, pid, now, "k", now, owner, 1)).fetchall()
        return str(rows[0][0])

    await db.write(enqueue)
    claimed = await db.write(take)
    await db.write(
        lambda conn: conn.execute(COMPLETE_JOB, ('{"ok":true}', time.time(), claimed, owner))
    )


async def aiosqlite_cycle(conn: aiosqlite.Connection, lock: asyncio.Lock, job_id: str) -> None:
    """The same three transactions through aiosqlite (one connection: a lock serialises
    the callers' transactions, as one connection must)."""
    owner, host, pid = OWNER
    async with lock:
        now = time.time()
        await conn.execute("BEGIN IMMEDIATE")
        await conn.execute(INSERT_JOB, (job_id, "k", "", PAYLOAD, 0.0, now, now))
        await conn.execute("COMMIT")
    async with lock:
        now = time.time()
        await conn.execute("BEGIN IMMEDIATE")
        cursor = await conn.execute(CLAIM, (owner, now + 30, host, pid, now, "k", now, owner, 1))
        rows = list(await cursor.fetchall())
        await conn.execute("COMMIT")
    async with lock:
        await conn.execute("BEGIN IMMEDIATE")
        await conn.execute(COMPLETE_JOB, ('{"ok":true}', time.time(), rows[0][0], owner))
        await conn.execute("COMMIT")


async def async_round(root: Path, count: int) -> dict[str, float]:
    folder = Path(tempfile.mkdtemp(dir=root))
    out: dict[str, float] = {}
    db = await SqliteDatabase.open(folder / "ours.db", jobs.MIGRATIONS)
    try:
        for callers in (1, 8):
            start = time.perf_counter()
            for base in range(0, count, callers):
                await asyncio.gather(
                    *(ours_cycle(db, f"o{callers}-{n}") for n in range(base, base + callers))
                )
            out[f"ours, {callers} at once"] = count / (time.perf_counter() - start)
    finally:
        await db.close()
    conn = await aiosqlite.connect(folder / "aio.db", isolation_level=None)
    try:
        for pragma in ("journal_mode = WAL", "synchronous = NORMAL", "foreign_keys = ON"):
            await conn.execute(f"PRAGMA {pragma}")
        for migration in jobs.MIGRATIONS:
            for statement in _split_sql(migration.sql):
                await conn.execute(statement)
        lock = asyncio.Lock()
        for callers in (1, 8):
            start = time.perf_counter()
            for base in range(0, count, callers):
                await asyncio.gather(
                    *(
                        aiosqlite_cycle(conn, lock, f"a{callers}-{n}")
                        for n in range(base, base + callers)
                    )
                )
            out[f"aiosqlite, {callers} at once"] = count / (time.perf_counter() - start)
    finally:
        await conn.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--messages", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--wall", action="store_true", help="wall time, not CPU time")
    args = parser.parse_args()
    global clock
    if args.wall:
        clock = time.perf_counter
    results: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.rounds):
            for make in DRIVERS:  # alternating: a loaded moment hurts both alike
                name = make.name
                for measure, value in one_round(make, Path(tmp), args).items():
                    results.setdefault(measure, {}).setdefault(name, []).append(value)
        async_results: dict[str, list[float]] = {}
        for _ in range(args.rounds):
            for line, value in asyncio.run(async_round(Path(tmp), args.jobs)).items():
                async_results.setdefault(line, []).append(value)
    names = [make.name for make in DRIVERS]
    print(
        f"median of {args.rounds} rounds, {'wall' if args.wall else 'CPU'} time; "
        f"{args.jobs} jobs, {args.messages} messages; "
        f"pid {os.getpid()}"
    )
    print(f"{'measure':32} " + " ".join(f"{n:>26}" for n in names) + "   apsw/sqlite3")
    for measure, by_driver in results.items():
        medians = [statistics.median(by_driver[n]) for n in names]
        print(
            f"{measure:32} "
            + " ".join(f"{m:>26,.2f}" for m in medians)
            + f"   {medians[1] / medians[0]:.2f}x"
        )
    print(f"\nthe queue cycle, awaited (wall time, jobs/s; median of {args.rounds} rounds)")
    for line, values in async_results.items():
        print(f"{line:32} {statistics.median(values):>12,.1f}")


if __name__ == "__main__":
    main()
