"""Every SQLite database is opened here: WAL, busy timeout, foreign keys, migrations.

A `Database` owns one sqlite3 connection and one thread. Callers hand it a
function that runs a whole transaction on that thread (`await db.run(fn)`), so
a lease check and the write it guards are one atomic unit and the event loop
never waits on SQLite. (aiosqlite would hop threads once per statement; here
a transaction is one hop, and writes waiting together share one commit.)

What may run on the event loop. A hop costs a caller who awaits one call at a time
about four loop passes and two thread wake-ups, several times what the transaction
itself costs for the queue's short writes; batching pays only when calls pile up. So a
write its caller marks `inline` (the job queue's enqueue, claim, complete and heartbeat
of at most `jobs.INLINE_ROWS` rows, no reaping: statements bounded by index lookups,
never a search, a scan or a long read) runs on the loop's own thread, on a second
connection the database thread opens for it (or `Database.open(inline=True)`, at once),
when that costs the loop no wait:

- nothing this database was asked before is waiting or running (so it overtakes
  nothing: calls keep their order); in a burst from several tasks in one pass the
  first runs at once and the others are collected into one transaction as before
  (inline when at most `INLINE_GROUP_MAX` and all inline, else on the thread);
- the inline connection and this process's write locks of the file are free, taken
  with a try, never waited for;
- SQLite's write lock is free: that connection's busy timeout is 0, so a BEGIN
  IMMEDIATE meeting another process's write answers "busy" at once and the call goes
  to the thread, which waits for the lock with the busy timeout as before;
- it never checkpoints (no automatic checkpoint on it): every `INLINE_CHECKPOINT_EVERY`
  inline commits the thread is asked for a PASSIVE checkpoint and runs it, with its
  fsyncs, beside the inline writes; since these keep appending, the WAL would never
  start over, so once it is past `WAL_LIMIT_FRAMES` a second round copies what they
  appended meanwhile while inline calls go to the thread (`Database._checkpoint`);
  and a thread `CHECKPOINTS_BEHIND` checkpoints behind gets the calls too, after them.

Inline is for a caller that would otherwise only wait: a pool with jobs running asks
for the thread instead (`JobQueue.settle_and_claim(inline=False)`), whose SQLite then
runs beside the loop's work on another core (measured: 16 concurrent turns lost 15 %
of their rate with the pool's trips inline).

What the loop does inline is then a BEGIN IMMEDIATE that does not wait, the caller's
few indexed statements and a COMMIT writing a handful of WAL pages without fsync
(synchronous NORMAL): tens of microseconds, bounded by the rows the caller allows.
Crash safety and group commit are as on the thread: every caller hears back only after
COMMIT (a kill -9 loses nothing committed), a failing call rolls back alone (its own
savepoint in a group) and its caller gets the exception. The caller resumes at once,
but once a pass has run `INLINE_PER_PASS` inline writes the next resumes it after one
loop pass, so a loop of inline calls lets the other tasks run between every few.
A call whose caller says it is one statement (`write(one_statement=True)`: the queue's
enqueue of one job, its complete, a heartbeat of one) runs inline in autocommit, that
statement its own transaction: no BEGIN and COMMIT statements around it (two trips
through the driver fewer, of the ten an enqueue, a claim and a complete made); durability
is the same (SQLite commits it before the statement returns), and another process's
write meets it with "busy" at once, nothing written, as BEGIN IMMEDIATE would.

The driver is Python's own sqlite3, which links the platform's SQLite. The stores need
SQLite 3.35 or newer (RETURNING, MATERIALIZED), FTS5 and the JSON functions; a build
without them is refused at the first open with one line saying what is missing
(`sqlite_problems`), rather than failing later in the middle of a statement. (apsw,
which bundles a current SQLite, was measured against sqlite3 on our own statements in
benchmarks/sqlite_driver_bench.py and did not pay for the move.)
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import os
import queue
import sqlite3
import threading
import time
import types
from collections.abc import Callable, Generator, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar, cast

from .blobs import BlobStore
from .errors import HabakkukError
from .sql import Conn, Database, Dialect, Migration, Row, Schema

__all__ = [
    "BlobStore",
    "Conn",
    "Database",
    "Migration",
    "Row",
    "Schema",
    "SqliteDatabase",
    "StoreError",
    "connect",
    "migrate",
    "transaction",
]

T = TypeVar("T")

BUSY_TIMEOUT_MS = 10_000

# The most calls that run inline as one transaction (more go to the thread).
INLINE_GROUP_MAX = 16
# Inline writes one pass of the loop runs before a `Database.write` yields its caller a
# pass (`write_if_free`, which cannot, runs within it): other tasks run at least every
# fourth short transaction (well under a millisecond of SQLite). A caller taking turns
# (enqueue, claim, complete) then pays one pass per round, not one per write.
INLINE_PER_PASS = 3
# Inline commits between two checkpoints the thread is asked for (the inline connection
# never runs one). The queue's commits write about 2.5 WAL frames each (jobs migration
# 7), so this is about 1,250 frames, where SQLite's automatic checkpoint is at 1,000.
INLINE_CHECKPOINT_EVERY = 500
# The WAL's length (frames of a page each, 4 KB) past which a checkpoint asked for by
# the inline writes holds them off for a second round, so that the WAL starts over
# (`Database._checkpoint`); below it they run on beside it. About 16 MB, reused.
WAL_LIMIT_FRAMES = 4000
# Checkpoints asked for and not yet run past which inline writes stop (they go to the
# thread, behind them): however slow the thread, the WAL stays within about the limit
# and this many checkpoints' worth of commits.
CHECKPOINTS_BEHIND = 4


class StoreError(HabakkukError):
    """A database could not be opened or migrated."""


# RETURNING and `AS MATERIALIZED` came in SQLite 3.35.0.
SQLITE_OLDEST = (3, 35, 0)


def sqlite_problems(version: tuple[int, int, int], *, fts5: bool, json: bool) -> list[str]:
    """What an SQLite build of `version` (with or without FTS5 and the JSON functions)
    lacks for Habakkuk's stores; empty when it has everything."""
    problems = []
    if version < SQLITE_OLDEST:
        oldest = ".".join(map(str, SQLITE_OLDEST))
        problems.append(f"SQLite {'.'.join(map(str, version))} is older than {oldest}")
    if not fts5:
        problems.append("it was built without FTS5 (full-text search)")
    if not json:
        problems.append("it was built without the JSON functions")
    return problems


@functools.cache
def _check_sqlite() -> None:
    """Refuse, once per process, an SQLite this Python links that the stores cannot use."""
    probe = sqlite3.connect(":memory:")
    try:
        try:
            probe.execute("CREATE VIRTUAL TABLE probe USING fts5(text)")
            fts5 = True
        except sqlite3.OperationalError:
            fts5 = False
        try:
            probe.execute("SELECT json_extract('{\"a\": 1}', '$.a')")
            json = True
        except sqlite3.OperationalError:
            json = False
    finally:
        probe.close()
    problems = sqlite_problems(sqlite3.sqlite_version_info, fts5=fts5, json=json)
    if problems:
        raise StoreError(
            f"the SQLite this Python links cannot hold Habakkuk's stores: {'; '.join(problems)}"
            " (use a Python built with SQLite 3.35 or newer, with FTS5)"
        )


def connect(path: Path, *, attach: dict[str, Path] | None = None) -> sqlite3.Connection:
    """Open `path` with the settings every Habakkuk database uses."""
    _check_sqlite()
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
        _to_wal(conn, "main")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        for alias, other in (attach or {}).items():
            other.parent.mkdir(parents=True, exist_ok=True)
            conn.execute("ATTACH DATABASE ? AS " + _ident(alias), (str(other),))
            _to_wal(conn, _ident(alias))
            conn.execute(f"PRAGMA {_ident(alias)}.synchronous = NORMAL")
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: cannot open database: {exc}") from None
    return conn


def _to_wal(conn: sqlite3.Connection, schema: str) -> None:
    """Put `schema` in WAL mode, waiting (up to the busy timeout) for another opener.

    Two processes opening one new database at once both hold a shared lock and want an
    exclusive one to switch it to WAL; SQLite answers one of them "database is locked"
    at once, without its busy handler (that wait could deadlock). So it is tried again:
    by then the other has switched it, and the switch is a no-op.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            conn.execute(f"PRAGMA {schema}.journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.005)


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
def transaction(conn: Conn, *, immediate: bool = True) -> Iterator[None]:
    """BEGIN (IMMEDIATE by default, so writers queue on the busy timeout), COMMIT or ROLLBACK."""
    conn.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    else:
        conn.execute("COMMIT")


class _Call:
    """One call waiting for the database thread: `fn`, and where its outcome goes."""

    __slots__ = ("done", "fn", "future", "inline", "loop", "write")

    def __init__(
        self,
        fn: Callable[[sqlite3.Connection], Any],
        write: bool,
        loop: asyncio.AbstractEventLoop | None,
        future: asyncio.Future[Any] | concurrent.futures.Future[Any],
        inline: bool = False,
    ):
        self.fn = fn
        self.write = write
        # The caller allows it on the loop's thread (`Database.write(inline=True)`).
        self.inline = inline
        self.loop = loop
        self.future = future
        # (ok, value) once the call ran; None while it waits.
        self.done: tuple[bool, Any] | None = None

    def abandoned(self) -> bool:
        """The caller gave up before the call started (an asyncio caller was cancelled)."""
        # Reading an asyncio future's state from another thread is a plain attribute
        # read; a cancel that lands just after this check means the call runs whole
        # and its outcome is dropped, which is the "ran" half of "ran or did not".
        return self.future.cancelled()


_CLOSE = object()
# Asks the thread for a passive checkpoint (the inline connection never checkpoints).
_CHECKPOINT = object()
# Asks the thread to open the inline connection now (`Database.prepare_inline`).
_OPEN_INLINE = object()

# One lock per database file in this process, by its real path.
_FILE_LOCKS: dict[str, threading.Lock] = {}
_FILE_LOCKS_GUARD = threading.Lock()


def write_locks(paths: Sequence[Path]) -> list[threading.Lock]:
    """This process's write locks of `paths`, in one global order (no two threads can
    each hold a lock the other waits for).

    SQLite makes a writer that finds a file locked sleep and retry (1, 2, 5, 10, ...
    25 ms and on, up to the busy timeout), so a write on control.db waiting for a
    transcripts transaction that holds it (attached) slept far past that commit. Taken
    here first, the wait ends the moment the holder commits. Other processes still meet
    SQLite's own locks and the busy timeout.
    """
    keys = sorted({os.path.realpath(path) for path in paths})
    with _FILE_LOCKS_GUARD:
        return [_FILE_LOCKS.setdefault(key, threading.Lock()) for key in keys]


class SqliteDatabase:
    """An SQLite `Database`: one connection and one thread; `run(fn)` executes `fn(conn)` on it.

    The thread reads a queue of calls. When several are waiting it runs them back to
    back without sleeping in between, and it answers each event loop once per batch
    (one `call_soon_threadsafe` for all the calls of that loop), which is what makes a
    hop cheap. Calls made with `write` that wait together share one
    BEGIN IMMEDIATE ... COMMIT (group commit), each in its own SAVEPOINT: one that
    raises rolls back alone and its caller gets the exception, and every caller hears
    back only after the COMMIT.

    A write made with `inline=True` may instead run on the event loop's own thread, on
    a second connection, when that costs the loop no wait (see the module docstring:
    "What may run on the event loop").
    """

    def __init__(
        self,
        path: Path,
        conn: sqlite3.Connection,
        *,
        attached: Sequence[Path] = (),
        inline_conn: sqlite3.Connection | None = None,
    ):
        self.path = path
        self.dialect: Dialect = "sqlite"
        self._conn = conn
        # BEGIN IMMEDIATE takes the write lock of every attached file too, so a write
        # here waits for, and blocks, the writers of each of them in this process.
        self._write_locks = write_locks([path, *attached])
        # The one an inline write takes: a database writing inline has no attached file,
        # so it is this file's.
        self._file_lock = self._write_locks[0]
        self._calls: queue.SimpleQueue[_Call | list[_Call] | object] = queue.SimpleQueue()
        # Calls an event loop made in its current iteration, handed over together at
        # its end (`_hand_over`): the thread then gets the whole batch at once, not a
        # trickle it would run one transaction and one loop wake-up per call for.
        self._pending: dict[asyncio.AbstractEventLoop, list[_Call]] = {}
        self._closed = False
        # -- the inline path (`write(fn, inline=True)`) --
        # Its connection: busy timeout 0 and no automatic checkpoint, opened by the
        # thread after the first inline call it serves; never for a database with
        # others attached (their locks could not all be tried without waiting).
        self._inline_conn = inline_conn if not attached else None
        self._inline_wanted = not attached and inline_conn is None
        # Held by whoever uses the inline connection (a loop thread): tried, never waited.
        self._inline_lock = threading.Lock()
        # Batches handed to the thread and batches it has run: equal when nothing this
        # database was asked is waiting or running, the one moment a call may run
        # inline without overtaking an earlier one.
        self._handed = 0
        self._served = 0
        self._handed_lock = threading.Lock()  # loops on several threads may hand over
        # The task whose write ran inline last, until a loop hands calls over: its next
        # write follows the last (it awaited it), while another task's write in the
        # meantime may be one of a burst, collected to share a transaction as before.
        self._inline_task: asyncio.Task[Any] | None = None
        self._inline_commits = 0
        self._checkpointing = False
        # Checkpoints the inline writes asked the thread for, and those it ran.
        self._checkpoints_asked = 0
        self._checkpoints_done = 0
        # Inline writes run in the pass of `_pass_loop` now running (`_pass_budget_spent`).
        self._pass_writes = 0
        self._pass_loop: asyncio.AbstractEventLoop | None = None
        # The `once` keys of `write_if_free` whose write ran inline in that pass.
        self._pass_once: set[object] = set()
        self._thread = threading.Thread(target=self._serve, name=f"db-{path.stem}", daemon=True)
        self._thread.start()

    @property
    def name(self) -> str:
        """The file's stem: `control` for control.db."""
        return self.path.stem

    @classmethod
    async def open(
        cls,
        path: Path,
        migrations: Sequence[Migration],
        *,
        attach: dict[str, Path] | None = None,
        inline: bool = False,
    ) -> SqliteDatabase:
        """Open and migrate `path` off the event loop. `inline`: open the connection of
        inline writes now too (the job queue's control.db), rather than after the first
        inline write the thread serves; never with `attach`."""

        def _open() -> tuple[sqlite3.Connection, sqlite3.Connection | None]:
            conn = connect(path, attach=attach)
            try:
                migrate(conn, path, migrations)
            except BaseException:
                conn.close()
                raise
            return conn, _inline_connection(path) if inline and not attach else None

        conn, inline_conn = await asyncio.to_thread(_open)
        return cls(path, conn, attached=list((attach or {}).values()), inline_conn=inline_conn)

    @classmethod
    def open_sync(
        cls, path: Path, migrations: Sequence[Migration], *, attach: dict[str, Path] | None = None
    ) -> SqliteDatabase:
        """Open for synchronous callers (CLI commands that print and exit)."""
        conn = connect(path, attach=attach)
        migrate(conn, path, migrations)
        return cls(path, conn, attached=list((attach or {}).values()))

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run `fn(conn)` on the database thread and return its result."""
        return await self._submit(fn, write=False)

    async def write(
        self,
        fn: Callable[[sqlite3.Connection], T],
        *,
        inline: bool = False,
        shared: bool = False,
        one_statement: bool = False,
        keys: Sequence[str] = (),
    ) -> T:
        """Run `fn(conn)` inside BEGIN IMMEDIATE ... COMMIT on the database thread.
        (`shared` and `keys` say what else `fn` may run beside on an engine with
        several writers; SQLite has one, which serialises every write.)

        `fn` may share its transaction with other writes waiting at the same moment
        (each in its own savepoint), so it must not BEGIN or COMMIT itself; the
        result comes back once the transaction committed.

        `inline`: `fn` is a short transaction bounded by index lookups (the queue's
        enqueue, claim, complete, heartbeat), which may run on the event loop's thread
        when that costs no wait (the module docstring says exactly when); otherwise it
        goes to the thread as any write. Never for a search, a scan or a long read.
        `one_statement`: `fn` runs a single statement, a transaction by itself, which
        inline needs no BEGIN and COMMIT of its own (see `_run_statement`).
        """
        if inline:
            loop = asyncio.get_running_loop()
            task = asyncio.current_task(loop)
            if self._inline_task in (None, task) and self._may_inline(loop):
                outcome = self._inline_one(fn, one_statement)
                if outcome is not None:
                    self._inline_task = task
                    if self._pass_budget_spent(loop):
                        # One pass of the loop: other tasks run between a caller's
                        # inline writes, every `INLINE_PER_PASS` of them.
                        await _one_pass()
                    ok, value = outcome
                    if ok:
                        return cast(T, value)
                    raise value
        return await self._submit(fn, write=True, inline=inline)

    def prepare_inline(self) -> None:
        """Have the thread open the inline connection now, not after the first inline
        write it serves (which then waits for the thread): for an owner that will write
        inline (the job queue). Any thread; no effect on a database with others
        attached, which never writes inline."""
        if self._inline_wanted and not self._closed:
            self._calls.put(_OPEN_INLINE)

    def write_if_free(
        self,
        fn: Callable[[sqlite3.Connection], T],
        loop: asyncio.AbstractEventLoop | None = None,
        *,
        once: object = None,
        one_statement: bool = False,
    ) -> tuple[bool, Any] | None:
        """`write(fn, inline=True, one_statement=...)` here and now, when it runs inline
        at once within the pass's budget (`INLINE_PER_PASS`; its caller yields no pass,
        the next `write` does): its outcome, (True, the value) or (False, the exception),
        after COMMIT; None, and nothing ran, otherwise. For a caller with its own way to wait
        meanwhile (the queue's enqueues, collected per pass). On the loop's thread;
        `loop`: the running loop, when the caller has it (asking costs a system call).
        `once`: a key of which one write per pass runs here (the queue's enqueues: the
        first of a pass at once, the others collected into one write)."""
        if loop is None:
            loop = asyncio.get_running_loop()
        if self._pass_loop is loop and (
            self._pass_writes >= INLINE_PER_PASS or (once is not None and once in self._pass_once)
        ):
            return None
        if not self._may_inline(loop):
            return None
        outcome = self._inline_one(fn, one_statement)
        if outcome is not None:
            self._pass_budget_spent(loop)
            if once is not None:
                self._pass_once.add(once)
        return outcome

    def _pass_budget_spent(self, loop: asyncio.AbstractEventLoop) -> bool:
        """Count an inline write in the pass of `loop` now running; True when the pass's
        budget (`INLINE_PER_PASS`) is spent: a `write` caller yields a pass."""
        if self._pass_loop is not loop:  # another loop's count (maybe closed unreset)
            self._pass_writes = 0
            self._pass_once.clear()
        if self._pass_writes == 0:
            self._pass_loop = loop
            loop.call_soon(self._next_pass)  # runs in the next pass
        self._pass_writes += 1
        return self._pass_writes >= INLINE_PER_PASS

    def _next_pass(self) -> None:
        self._pass_writes = 0
        self._pass_once.clear()

    def write_now(
        self,
        fn: Callable[[sqlite3.Connection], T],
        *,
        inline: bool = False,
        shared: bool = False,
        keys: Sequence[str] = (),
    ) -> asyncio.Future[T]:
        """`write` for a caller that collected one loop pass's work itself (the queue's
        enqueues): handed over at once, not at the end of the pass. The future is
        already done when the write ran inline."""
        if self._closed:
            raise StoreError(f"{self.path}: database is closed")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        if loop in self._pending:
            self._hand_over(loop)  # calls made earlier in this pass go first
        if inline and self._may_inline(loop):
            outcome = self._inline_one(fn)
            if outcome is not None:
                ok, value = outcome
                if ok:
                    future.set_result(value)
                else:
                    future.set_exception(value)
                return future
        self._put_batch([_Call(fn, True, loop, future, inline=inline)])
        return future

    async def _submit(
        self, fn: Callable[[sqlite3.Connection], T], *, write: bool, inline: bool = False
    ) -> T:
        if self._closed:
            raise StoreError(f"{self.path}: database is closed")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        pending = self._pending.get(loop)
        if pending is None:
            pending = self._pending[loop] = []
            loop.call_soon(self._hand_over, loop)
        pending.append(_Call(fn, write, loop, future, inline))
        return await future

    def _hand_over(self, loop: asyncio.AbstractEventLoop) -> None:
        """On `loop`: give the thread the calls this loop made since the last hand-over
        (or run them inline, together, when every one of them allows it)."""
        pending = self._pending.pop(loop, None)
        if not pending:
            return
        self._inline_task = None  # a new pass begins: any task may run inline first
        if self._closed:  # closed from another thread after these calls were made
            for call in pending:
                call.done = (False, StoreError(f"{self.path}: database is closed"))
            _resolve(pending)
            return
        if (
            len(pending) <= INLINE_GROUP_MAX
            and all(call.inline for call in pending)
            and self._may_inline(loop)
            and self._try_inline(pending)
        ):
            _resolve(pending)
            return
        self._put_batch(pending)

    def _put_batch(self, calls: list[_Call]) -> None:
        """Give `calls` to the thread, counted (see `_handed`)."""
        with self._handed_lock:
            self._handed += 1
        self._calls.put(calls)

    def _may_inline(self, loop: asyncio.AbstractEventLoop) -> bool:
        """Whether a call made now on `loop` may run inline: nothing of this database is
        waiting or running (it would overtake it)."""
        return (
            self._inline_conn is not None
            and not self._checkpointing
            # The thread that far behind with the checkpoints (starved of CPU): calls go
            # to it, after them, so the WAL outgrows its limit by that much at most.
            and self._checkpoints_asked - self._checkpoints_done < CHECKPOINTS_BEHIND
            and self._handed == self._served
            and loop not in self._pending
            and not self._closed
        )

    def _try_inline(self, calls: list[_Call]) -> bool:
        """Run `calls` as one transaction on the inline connection, here and now; False
        (nothing ran) when that would wait (see `_inline_begin`). True: each call's
        outcome is set, after COMMIT."""
        conn = self._inline_begin()
        if conn is None:
            return False
        try:
            self._run_begun(conn, calls)
        finally:
            self._inline_end()
        return True

    def _inline_one(
        self, fn: Callable[[sqlite3.Connection], T], one_statement: bool = False
    ) -> tuple[bool, Any] | None:
        """`_try_inline` for one call, alone in its transaction: its outcome (ok, value
        or exception) after COMMIT (or ROLLBACK), or None when nothing ran.
        `one_statement`: `fn`'s single statement is the transaction (`_run_statement`)."""
        conn = self._inline_begin(begin=not one_statement)
        if conn is None:
            return None
        try:
            return _run_statement(conn, fn) if one_statement else _commit_alone(conn, fn)
        finally:
            self._inline_end()

    def _inline_begin(self, *, begin: bool = True) -> sqlite3.Connection | None:
        """The inline connection inside a BEGIN IMMEDIATE taken here and now, holding it
        and this process's write lock of the file; None (nothing held) when that would
        wait: the connection in use, the file's write lock held in this process, or
        another process writing (BEGIN IMMEDIATE answers "busy" at once: the busy
        timeout is 0). End it with `_inline_end` once COMMIT or ROLLBACK ran.
        `begin=False`: the connection and the locks only, for a single statement that
        is its own transaction (and meets another process's write as BEGIN would)."""
        if not self._inline_lock.acquire(blocking=False):
            return None
        conn = self._inline_conn  # read under the lock: the thread closes it under it
        file_lock = self._file_lock
        if conn is not None and file_lock.acquire(blocking=False):
            try:
                if begin:
                    conn.execute("BEGIN IMMEDIATE")
                return conn
            except sqlite3.Error:
                pass  # the thread will wait for the lock (or report the error)
            file_lock.release()
        self._inline_lock.release()
        return None

    def _inline_end(self) -> None:
        """Release what `_inline_begin` took, counting the commit towards the next
        checkpoint (which the thread runs: the inline connection never does)."""
        self._inline_commits += 1
        if self._inline_commits >= INLINE_CHECKPOINT_EVERY:
            self._inline_commits = 0
            self._checkpoints_asked += 1
            self._calls.put(_CHECKPOINT)
        self._file_lock.release()
        self._inline_lock.release()

    def run_sync(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run `fn(conn)` from synchronous code (never from the event loop thread)."""
        if self._closed:
            raise StoreError(f"{self.path}: database is closed")
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._calls.put(_Call(fn, False, None, future))
        return future.result()

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        """Read rows (outside an explicit transaction: one consistent snapshot)."""
        return await self.run(lambda conn: conn.execute(sql, params).fetchall())

    async def fetchone(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Row | None:
        return await self.run(lambda conn: conn.execute(sql, params).fetchone())

    async def close(self) -> None:
        """Close the connection; pending calls finish first."""
        if self._closed:
            return
        self._hand_over(asyncio.get_running_loop())  # calls made just before: they run first
        self._closed = True
        self._calls.put(_CLOSE)
        await asyncio.to_thread(self._thread.join)

    def close_sync(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._calls.put(_CLOSE)
        self._thread.join()

    # -- the database thread ---------------------------------------------------------

    def _serve(self) -> None:
        calls = self._calls
        while True:
            batch: list[_Call | object] = []
            handed = 0
            item = calls.get()
            # Take everything already waiting: it runs back to back, without sleeping.
            while True:
                if isinstance(item, list):
                    batch.extend(item)
                    handed += 1
                else:
                    batch.append(item)
                try:
                    item = calls.get_nowait()
                except queue.Empty:
                    break
            closing = False
            inline = False
            ready: list[_Call] = []
            group: list[_Call] = []
            for item in batch:
                if item is _CLOSE:
                    closing = True
                    continue
                if item is _CHECKPOINT:
                    self._checkpoint()
                    continue
                if item is _OPEN_INLINE:  # asked for before the calls after it: now
                    if self._inline_wanted and self._inline_conn is None:
                        self._open_inline()
                    continue
                assert isinstance(item, _Call)
                inline = inline or item.inline
                if item.abandoned():
                    continue
                if item.write:
                    group.append(item)
                    continue
                if group:
                    self._run_group(group)
                    ready.extend(group)
                    group = []
                self._run_one(item)
                ready.append(item)
            if group:
                self._run_group(group)
                ready.extend(group)
            # Counted before the answers go out: a caller that hears back may find the
            # thread idle at once.
            self._served += handed
            _answer(ready)
            if closing:
                with self._inline_lock:
                    if self._inline_conn is not None:
                        self._inline_conn.close()
                        self._inline_conn = None
                self._conn.close()
                return
            if inline and self._inline_wanted and self._inline_conn is None:
                self._open_inline()

    def _open_inline(self) -> None:
        """Open the inline connection (here, off the loop); on failure inline calls keep
        going to the thread."""
        self._inline_wanted = False
        self._inline_conn = _inline_connection(self.path)

    def _checkpoint(self) -> None:
        """Copy the WAL back into the database (PASSIVE: waiting for nobody) beside the
        inline writes; and when the WAL was longer than `WAL_LIMIT_FRAMES`, once more
        with them held off, so that it starts over.

        A checkpoint copies the frames committed before it began, and SQLite starts the
        WAL over at the first write after one that left nothing uncopied. Inline writes
        appending while it runs leave it something every time, so the WAL would grow
        without end; held off for every checkpoint (two fsyncs, the WAL's worth of
        pages), they would cost their callers a trip to this thread and that long, every
        time. So most checkpoints run beside them, and once in several (the WAL past its
        limit) a second one, copying what they appended during the first, runs with
        them held off: they come to this thread meanwhile, in order, and wait for it."""
        conn = self._conn
        try:
            with contextlib.suppress(sqlite3.Error):
                frames = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1]
                if frames <= WAL_LIMIT_FRAMES:
                    return
                self._checkpointing = True  # inline calls come here, not try the lock
                try:
                    with self._inline_lock:
                        conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                finally:
                    self._checkpointing = False
        finally:
            self._checkpoints_done += 1

    def _run_one(self, call: _Call) -> None:
        try:
            call.done = (True, call.fn(self._conn))
        except BaseException as exc:  # the caller gets it, whatever it is
            call.done = (False, exc)

    def _run_group(self, group: list[_Call]) -> None:
        """Run writes in one transaction, each in a savepoint; outcomes after COMMIT.

        The transaction holds this process's write locks of its files (see
        `write_locks`) from before BEGIN to after its end.
        """
        for lock in self._write_locks:
            lock.acquire()
        try:
            self._run_group_locked(group)
        finally:
            for lock in reversed(self._write_locks):
                lock.release()

    def _run_group_locked(self, group: list[_Call]) -> None:
        conn = self._conn
        try:
            conn.execute("BEGIN IMMEDIATE")
        except BaseException as exc:
            for call in group:
                call.done = (False, exc)
            return
        self._run_begun(conn, group)

    def _run_begun(self, conn: sqlite3.Connection, group: list[_Call]) -> None:
        """The group's calls inside the BEGIN IMMEDIATE just taken on `conn`, each in a
        savepoint (none for a group of one), then COMMIT; every outcome is final after."""
        if len(group) == 1:
            # Alone in its transaction: no savepoint needed, a failure rolls it all back.
            _run_alone(conn, group[0])
            return
        for index, call in enumerate(group):
            try:
                conn.execute("SAVEPOINT call")
                value = call.fn(conn)
                conn.execute("RELEASE call")
            except BaseException as exc:
                call.done = (False, exc)
                if not _undo_savepoint(conn):
                    # The whole transaction is gone (SQLite rolled it back on disk full
                    # or I/O error, or `fn` ended it itself): the calls before this one
                    # lost their writes; the ones after it never ran and get a fresh one.
                    lost = StoreError(f"{self.path}: transaction rolled back: {exc}")
                    for earlier in group[:index]:
                        earlier.done = (False, lost)
                    with contextlib.suppress(sqlite3.Error):
                        if conn.in_transaction:
                            conn.execute("ROLLBACK")
                    rest = group[index + 1 :]
                    if rest:
                        try:
                            conn.execute("BEGIN IMMEDIATE")
                        except BaseException as begin:
                            for call_after in rest:
                                call_after.done = (False, begin)
                        else:
                            self._run_begun(conn, rest)
                    return
            else:
                call.done = (True, value)
        try:
            conn.execute("COMMIT")
        except BaseException as exc:
            with contextlib.suppress(sqlite3.Error):
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
            for call in group:
                if call.done is not None and call.done[0]:
                    call.done = (False, exc)


def _inline_connection(path: Path) -> sqlite3.Connection | None:
    """A connection for inline writes to `path`, or None when it cannot be opened: busy
    timeout 0, so a BEGIN that would wait for another process answers at once; no
    automatic checkpoint, so a COMMIT never runs one (and its fsyncs) on the loop."""
    try:
        conn = connect(path)
        conn.execute("PRAGMA busy_timeout = 0")
        conn.execute("PRAGMA wal_autocheckpoint = 0")
    except (sqlite3.Error, StoreError, OSError):
        return None
    return conn


def _run_alone(conn: sqlite3.Connection, call: _Call) -> None:
    """The group of one, inside its BEGIN IMMEDIATE: COMMIT, or ROLLBACK on failure."""
    call.done = _commit_alone(conn, call.fn)


def _commit_alone(
    conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T]
) -> tuple[bool, Any]:
    """`fn(conn)` alone inside the BEGIN IMMEDIATE just taken on `conn`, then COMMIT, or
    ROLLBACK on failure: (True, its value) or (False, the exception)."""
    try:
        value = fn(conn)
        conn.execute("COMMIT")
    except BaseException as exc:
        with contextlib.suppress(sqlite3.Error):
            if conn.in_transaction:
                conn.execute("ROLLBACK")
        return False, exc
    return True, value


def _run_statement(
    conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T]
) -> tuple[bool, Any] | None:
    """`fn(conn)`, whose one statement is a transaction by itself (autocommit: no BEGIN
    and COMMIT statements around it, one fewer trip through the driver each): (True, its
    value) once committed, (False, the exception) when it failed and wrote nothing, or
    None, and nothing written, when it met another process's write (the busy timeout is
    0, so SQLite answers "busy" at once, as to BEGIN IMMEDIATE): the call goes to the
    thread, which waits for the lock."""
    try:
        return True, fn(conn)
    except sqlite3.OperationalError as exc:
        if exc.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY and not conn.in_transaction:
            return None
        return _rolled_back(conn, exc)
    except BaseException as exc:
        return _rolled_back(conn, exc)


def _rolled_back(conn: sqlite3.Connection, exc: BaseException) -> tuple[bool, Any]:
    """(False, `exc`), with no transaction left open on `conn`."""
    with contextlib.suppress(sqlite3.Error):
        if conn.in_transaction:
            conn.execute("ROLLBACK")
    return False, exc


@types.coroutine
def _one_pass() -> Generator[None, None, None]:
    """Let the event loop run one pass (what `asyncio.sleep(0)` does, one frame less)."""
    yield


def _undo_savepoint(conn: sqlite3.Connection) -> bool:
    """Roll back to the call's savepoint; False when the transaction itself is gone."""
    if not conn.in_transaction:
        return False
    try:
        conn.execute("ROLLBACK TO call")
        conn.execute("RELEASE call")
    except sqlite3.Error:
        return False
    return True


def _answer(calls: list[_Call]) -> None:
    """Hand each outcome to its caller: one wake-up per event loop, not per call."""
    by_loop: dict[asyncio.AbstractEventLoop, list[_Call]] = {}
    for call in calls:
        if call.loop is None:
            future = call.future
            assert isinstance(future, concurrent.futures.Future)
            ok, value = call.done or (False, StoreError("call did not run"))
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)
        else:
            by_loop.setdefault(call.loop, []).append(call)
    for loop, waiting in by_loop.items():
        # The loop may have closed while its calls ran; nobody is left to tell.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(_resolve, waiting)


def _resolve(calls: list[_Call]) -> None:
    """On the caller's loop: settle the futures still waiting (a cancelled one is done)."""
    for call in calls:
        future = call.future
        if future.done():
            continue
        ok, value = call.done or (False, StoreError("call did not run"))
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)
