"""Every SQLite database is opened here: WAL, busy timeout, foreign keys, migrations.

A `Database` owns one sqlite3 connection and one thread. Callers hand it a
function that runs a whole transaction on that thread (`await db.run(fn)`), so
a lease check and the write it guards are one atomic unit and the event loop
never blocks on SQLite. (aiosqlite would hop threads once per statement; here
a transaction is one hop.)
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import hashlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from .errors import HabakkukError

T = TypeVar("T")

BUSY_TIMEOUT_MS = 10_000


@dataclass(frozen=True)
class Migration:
    """One numbered schema step; `sql` runs in a transaction with the version bump."""

    version: int
    sql: str


class StoreError(HabakkukError):
    """A database could not be opened or migrated."""


def connect(path: Path, *, attach: dict[str, Path] | None = None) -> sqlite3.Connection:
    """Open `path` with the settings every Habakkuk database uses."""
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not path.exists()
    try:
        conn = sqlite3.connect(
            path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
        )
        if new:
            os.chmod(path, 0o600)
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        for alias, other in (attach or {}).items():
            other.parent.mkdir(parents=True, exist_ok=True)
            conn.execute("ATTACH DATABASE ? AS " + _ident(alias), (str(other),))
            conn.execute(f"PRAGMA {_ident(alias)}.journal_mode = WAL")
            conn.execute(f"PRAGMA {_ident(alias)}.synchronous = NORMAL")
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: cannot open database: {exc}") from None
    return conn


def _ident(name: str) -> str:
    if not name.isidentifier():
        raise ValueError(f"bad SQL identifier {name!r}")
    return name


def migrate(conn: sqlite3.Connection, path: Path, migrations: Sequence[Migration]) -> int:
    """Apply the migrations newer than the recorded version; returns the new version.

    The version lives in the database (`schema_migrations`), each step in its own
    transaction, so a crash mid-migration leaves a consistent earlier version.
    """
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " version INTEGER PRIMARY KEY, applied_at REAL NOT NULL)"
    )
    row = conn.execute("SELECT coalesce(max(version), 0) FROM schema_migrations").fetchone()
    current = int(row[0])
    newest = max((m.version for m in migrations), default=0)
    if current > newest:
        raise StoreError(
            f"{path}: database is at schema version {current}, newer than this Habakkuk "
            f"knows ({newest}); upgrade Habakkuk"
        )
    for migration in sorted(migrations, key=lambda m: m.version):
        if migration.version <= current:
            continue
        try:
            with transaction(conn, immediate=True):
                # Another process may have migrated while we waited for the lock.
                done = conn.execute(
                    "SELECT 1 FROM schema_migrations WHERE version = ?", (migration.version,)
                ).fetchone()
                if done:
                    continue
                for statement in _split_sql(migration.sql):
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO schema_migrations(version, applied_at) VALUES (?, ?)",
                    (migration.version, time.time()),
                )
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{path}: migration {migration.version} failed: {exc}") from None
        current = migration.version
    return current


def _split_sql(script: str) -> list[str]:
    """Split a migration into statements, keeping trigger bodies whole."""
    statements: list[str] = []
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            if buffer.strip():
                statements.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        statements.append(buffer.strip())
    return statements


@contextlib.contextmanager
def transaction(conn: sqlite3.Connection, *, immediate: bool = True) -> Iterator[None]:
    """BEGIN (IMMEDIATE by default, so writers queue on the busy timeout), COMMIT or ROLLBACK."""
    conn.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    else:
        conn.execute("COMMIT")


class Database:
    """One connection and one worker thread; `run(fn)` executes `fn(conn)` on it."""

    def __init__(self, path: Path, conn: sqlite3.Connection):
        self.path = path
        self._conn = conn
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix=f"db-{path.stem}"
        )
        self._closed = False
        self._lock = threading.Lock()

    @classmethod
    async def open(
        cls,
        path: Path,
        migrations: Sequence[Migration],
        *,
        attach: dict[str, Path] | None = None,
    ) -> Database:
        """Open and migrate `path` off the event loop."""

        def _open() -> sqlite3.Connection:
            conn = connect(path, attach=attach)
            try:
                migrate(conn, path, migrations)
            except BaseException:
                conn.close()
                raise
            return conn

        conn = await asyncio.to_thread(_open)
        return cls(path, conn)

    @classmethod
    def open_sync(
        cls, path: Path, migrations: Sequence[Migration], *, attach: dict[str, Path] | None = None
    ) -> Database:
        """Open for synchronous callers (CLI commands that print and exit)."""
        conn = connect(path, attach=attach)
        migrate(conn, path, migrations)
        return cls(path, conn)

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run `fn(conn)` on the database thread and return its result."""
        if self._closed:
            raise StoreError(f"{self.path}: database is closed")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._call, fn)

    def run_sync(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run `fn(conn)` from synchronous code (never from the event loop thread)."""
        return self._executor.submit(self._call, fn).result()

    def _call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            return fn(self._conn)

    async def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run `fn(conn)` inside BEGIN IMMEDIATE ... COMMIT on the database thread."""

        def _tx(conn: sqlite3.Connection) -> T:
            with transaction(conn):
                return fn(conn)

        return await self.run(_tx)

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        """Read rows (outside an explicit transaction: one consistent snapshot)."""
        return await self.run(lambda conn: conn.execute(sql, params).fetchall())

    async def fetchone(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Row | None:
        return await self.run(lambda conn: conn.execute(sql, params).fetchone())

    async def close(self) -> None:
        """Close the connection; pending calls finish first."""
        if self._closed:
            return
        self._closed = True
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, self._conn.close)
        self._executor.shutdown(wait=False)

    def close_sync(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._executor.submit(self._conn.close).result()
        self._executor.shutdown(wait=True)


class BlobStore:
    """Content-addressed files under HOME/blobs/ab/abcdef...: a write is idempotent."""

    def __init__(self, root: Path):
        self.root = root

    def path_for(self, digest: str) -> Path:
        return self.root / digest[:2] / digest

    def put_bytes(self, data: bytes, suffix: str = "") -> Path:
        """Store `data`; returns its path. Same content, same path, written once."""
        digest = hashlib.sha256(data).hexdigest()
        path = self.path_for(digest + suffix)
        if path.exists():
            # Stored again means used again: retention prunes blobs by mtime.
            os.utime(path)
            return path
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
        return path

    async def put(self, data: bytes, suffix: str = "") -> Path:
        """`put_bytes` off the event loop."""
        return await asyncio.to_thread(self.put_bytes, data, suffix)

    def get(self, digest: str) -> bytes:
        return self.path_for(digest).read_bytes()
