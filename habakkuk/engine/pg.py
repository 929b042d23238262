"""The home's databases on PostgreSQL: a `Database` for each, one schema each.

Imported only when `storage.url` names a PostgreSQL server (`engine/storage.py`), so an
SQLite home never loads psycopg. Each of the home's databases (`control`, `state`, ...)
is a schema of one PostgreSQL database, so a statement that names an attached SQLite
file (`control.jobs`) names the same table here, and each `PgDatabase` sets its
connections' `search_path` to its own schema.

The driver is psycopg 3 with its synchronous connections, each owned by one thread
of the database: a store's transaction is a function `fn(conn)` that runs whole on
one thread, exactly as on SQLite, so the stores are written once and an asyncio
caller hops to a thread once per transaction, not once per statement (asyncpg and
psycopg's async pool were measured against it on the queue: benchmarks/pg_queue_bench.py).

Writers. SQLite lets one writer in at a time (BEGIN IMMEDIATE), and every store's
read-then-write was written for that. Here a write transaction first takes a
transaction-scoped advisory lock of its schema (and of each schema it names, in one
order), so those stores keep exactly that guarantee across every process and machine
on the server. Two kinds of write are let in beside others:
- the queue's short writes (`write(fn, inline=True)` or `shared=True`: enqueue, claim,
  complete, heartbeat) take no writer lock: they are written to run beside other
  writers (row locks, `FOR UPDATE SKIP LOCKED`, the lease epoch as a fencing token),
  which is what lets several nodes claim at once;
- a keyed write (`write(fn, keys=(...))`: a transcript's append, a session's state)
  changes only what its keys name (a session), so it waits only for the writes of the
  same keys (an advisory lock per key) and takes its schema's writer lock in shared
  mode: writes of different sessions run side by side on every node, while a write
  still taken whole (retention, a fork, a bulk delete) waits for them all and keeps
  them all out, as on SQLite. A transaction takes every lock it needs with its BEGIN
  (one round trip), its keys sorted (those of every call of a group), so two
  transactions never each hold a key the other waits for.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import hashlib
import queue
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal, TypeVar, cast

import psycopg
import psycopg.adapt
import psycopg.errors
import psycopg.rows
from psycopg import sql as pgsql

from .db_url import redact
from .errors import first_line
from .sql import Conn, Dialect, Migration, Params, Row, Schema
from .store import StoreError

T = TypeVar("T")

# PostgreSQL 14 is the oldest the stores are written for (multirange-free, but
# `pg_stat_statements`-era planner and SKIP LOCKED behaviour we rely on are older).
OLDEST_SERVER = 14
CONNECT_TIMEOUT_S = 5
# The most waiting writes that share one transaction (each in its own savepoint).
GROUP_MAX = 16


class PgStoreError(StoreError):
    """The PostgreSQL server could not be reached or refused the schema."""


# -- SQL spelling --

_TOKEN = re.compile(
    r"""'(?:[^']|'')*'      # a string literal
      | "(?:[^"]|"")*"      # a quoted identifier
      | --[^\n]*            # a comment
      | ::                  # a cast
      | \?                  # a positional parameter
      | (?<![:\w]):[A-Za-z_]\w*  # a named parameter
      | %                   # psycopg's own placeholder character
    """,
    re.VERBOSE,
)
_INSERT_OR_IGNORE = re.compile(r"^\s*INSERT\s+OR\s+IGNORE\s+INTO\b", re.IGNORECASE)
_INSERT_OR_REPLACE = re.compile(r"\bINSERT\s+OR\s+REPLACE\b", re.IGNORECASE)
_RETURNING = re.compile(r"\sRETURNING\s", re.IGNORECASE)
_LIMIT_ALL = re.compile(r"\bLIMIT\s+-1\b", re.IGNORECASE)


@functools.lru_cache(maxsize=4096)
def to_postgres(statement: str) -> str:
    """`statement` as psycopg takes it: `?` and `:name` parameters as `%s` and
    `%(name)s`, a literal `%` doubled, `INSERT OR IGNORE` as `ON CONFLICT DO NOTHING`,
    `LIMIT -1` as `LIMIT ALL`. Only spelling: anything that means something else on
    PostgreSQL (`INSERT OR REPLACE`) is refused, so a store says what it means."""
    if _INSERT_OR_REPLACE.search(statement):
        raise ValueError(f"INSERT OR REPLACE has no PostgreSQL meaning; upsert: {statement!r}")

    def spell(match: re.Match[str]) -> str:
        token = match.group(0)
        if token == "?":
            return "%s"
        if token == "%":
            return "%%"
        if token.startswith(":") and token != "::":
            return f"%({token[1:]})s"
        if token.startswith("'"):
            return token.replace("%", "%%")
        return token

    text = _TOKEN.sub(spell, statement.strip().rstrip(";"))
    if _INSERT_OR_IGNORE.match(text):
        text = _INSERT_OR_IGNORE.sub("INSERT INTO", text, count=1)
        returning = _RETURNING.search(text)
        if returning:
            at = returning.start()
            text = f"{text[:at]} ON CONFLICT DO NOTHING{text[at:]}"
        else:
            text = f"{text} ON CONFLICT DO NOTHING"
    return _LIMIT_ALL.sub("LIMIT ALL", text)


# -- rows and values --


class PgRow(tuple[Any, ...]):
    """A row read by position or by column name, as sqlite3.Row is."""

    __slots__ = ()
    _index: dict[str, int] = {}
    _names: list[str] = []

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            try:
                key = self._index[key]
            except KeyError:
                raise IndexError(f"no column named {key!r}") from None
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        """The column names, in order."""
        return list(self._names)


@functools.lru_cache(maxsize=1024)
def _row_class(names: tuple[str, ...]) -> type[PgRow]:
    index = {name: i for i, name in enumerate(names)}
    return type("PgRow", (PgRow,), {"__slots__": (), "_index": index, "_names": list(names)})


def _row_factory(cursor: Any) -> Callable[[Sequence[Any]], PgRow]:
    description = cursor.description
    if description is None:
        return PgRow
    cls = _row_class(tuple(column.name for column in description))
    return cls


class _NumericLoader(psycopg.adapt.Loader):
    """numeric as int when whole, else float: what SQLite gives for SUM() and friends
    (PostgreSQL answers a bigint's SUM in numeric, which would arrive as Decimal)."""

    def load(self, data: Any) -> int | float:
        value = Decimal(bytes(data).decode())
        return int(value) if value == value.to_integral_value() else float(value)


class _BoolAsInteger(psycopg.adapt.Dumper):
    """Python bools as 0/1 integers: the stores' flag columns are INTEGER, as on SQLite."""

    oid = 20  # int8

    def dump(self, obj: Any) -> bytes:
        return b"1" if obj else b"0"


def _db_error(exc: psycopg.Error) -> sqlite3.Error:
    """The DB-API error class a store catches, with PostgreSQL's message."""
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, psycopg.IntegrityError):
        return sqlite3.IntegrityError(message)
    if isinstance(exc, psycopg.OperationalError):
        return sqlite3.OperationalError(message)
    if isinstance(exc, psycopg.ProgrammingError | psycopg.DataError):
        return sqlite3.ProgrammingError(message)
    return sqlite3.DatabaseError(message)


# -- the connection a store sees --


class PgCursor:
    """A psycopg cursor behind sqlite3's cursor API (what `Conn.execute` returns)."""

    def __init__(self, cursor: psycopg.Cursor[Any]):
        self._cursor = cursor

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    def fetchone(self) -> Any:
        if self._cursor.description is None:
            return None
        return self._cursor.fetchone()

    def fetchall(self) -> list[Any]:
        if self._cursor.description is None:
            return []
        return self._cursor.fetchall()

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())


class PgConnection:
    """One psycopg connection as a store's `Conn`: sqlite3's spelling, PostgreSQL's
    engine. `BEGIN IMMEDIATE` (a store's `transaction`) is BEGIN plus the schema's
    writer lock; a plain `BEGIN` is a REPEATABLE READ snapshot, as a SQLite read
    transaction is."""

    def __init__(self, conn: psycopg.Connection[Any], lock_keys: Sequence[int]):
        self.raw = conn
        self._lock_keys = sorted(lock_keys)

    @property
    def in_transaction(self) -> bool:
        status = self.raw.info.transaction_status
        return status != psycopg.pq.TransactionStatus.IDLE

    def writer_locks(self) -> str:
        """The statement taking the schema's (and the named schemas') writer locks."""
        return locks_sql(exclusive=self._lock_keys)

    def begin(self, locks: str = "") -> None:
        """BEGIN, and the `locks` statement (`writer_locks`, `key_locks`) in the same
        round trip to the server."""
        self.raw.execute(cast(Any, f"BEGIN; {locks}" if locks else "BEGIN"))

    def execute(self, sql: str, parameters: Params = (), /) -> PgCursor:
        verb = sql.strip().upper()
        try:
            if verb in ("BEGIN", "BEGIN DEFERRED"):
                self.raw.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
                return PgCursor(self.raw.cursor())
            if verb in ("BEGIN IMMEDIATE", "BEGIN EXCLUSIVE"):
                self.begin(self.writer_locks())
                return PgCursor(self.raw.cursor())
            return PgCursor(self.raw.execute(to_postgres(sql), parameters))
        except psycopg.Error as exc:
            raise _db_error(exc) from exc

    def executemany(self, sql: str, seq_of_parameters: Iterable[Params], /) -> PgCursor:
        cursor = self.raw.cursor()
        try:
            cursor.executemany(to_postgres(sql), list(seq_of_parameters))
        except psycopg.Error as exc:
            raise _db_error(exc) from exc
        return PgCursor(cursor)

    def executescript(self, sql_script: str, /) -> PgCursor:
        """Several statements without parameters (a schema), sent as one."""
        try:
            return PgCursor(self.raw.execute(cast(Any, sql_script)))
        except psycopg.Error as exc:
            raise _db_error(exc) from exc


# -- the server --


def lock_key(schema: str) -> int:
    """The advisory lock key of `schema`'s writers: stable across processes."""
    digest = hashlib.blake2b(f"habakkuk:{schema}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def write_key(schema: str, key: str) -> int:
    """The advisory lock key of the writes of `schema` keyed `key` (a session)."""
    return lock_key(f"{schema}:{key}")


def locks_sql(*, shared: Sequence[int] = (), exclusive: Sequence[int] = ()) -> str:
    """The statement taking transaction-scoped advisory locks, `shared` ones then
    `exclusive` ones, each list in the order given (a select list is evaluated left to
    right). The keys are written in (integers), so it can share a round trip with BEGIN."""
    calls = [f"pg_advisory_xact_lock_shared({int(key)})" for key in shared]
    calls += [f"pg_advisory_xact_lock({int(key)})" for key in exclusive]
    return f"SELECT {', '.join(calls)}" if calls else ""


def key_locks(schema_key: int, keys: Iterable[int]) -> str:
    """The statement of a keyed write's locks: its schema's writer lock shared, then its
    keys exclusive in one order (every keyed transaction takes its keys sorted, so none
    holds a key another waits for while it waits for one that other holds)."""
    return locks_sql(shared=(schema_key,), exclusive=sorted(set(keys)))


def connect(url: str, schema: str) -> psycopg.Connection[Any]:
    """A connection to `url` whose unqualified names are `schema`'s."""
    try:
        conn = psycopg.connect(
            url,
            autocommit=True,
            connect_timeout=CONNECT_TIMEOUT_S,
            row_factory=cast(Any, _row_factory),
            options=f"-c search_path={schema},public",
        )
    except psycopg.Error as exc:
        raise PgStoreError(
            f"{redact(url)}: cannot connect to PostgreSQL: {first_line(exc)}"
        ) from None
    conn.adapters.register_loader("numeric", _NumericLoader)
    conn.adapters.register_dumper(bool, _BoolAsInteger)
    return conn


def server_version(url: str) -> int:
    """The server's major version; PgStoreError when unreachable or too old."""
    conn = connect(url, "public")
    try:
        major = conn.info.server_version // 10000
    finally:
        conn.close()
    if major < OLDEST_SERVER:
        raise PgStoreError(
            f"{redact(url)}: PostgreSQL {major} is older than {OLDEST_SERVER}; Habakkuk needs"
            f" {OLDEST_SERVER} or newer"
        )
    return major


def migrate(conn: psycopg.Connection[Any], schema: str, migrations: Sequence[Migration]) -> int:
    """Create `schema` if needed and apply its migrations newer than the recorded
    version, each in one transaction under the schema's writer lock (several nodes
    starting together migrate once); returns the new version."""
    ident = pgsql.Identifier(schema)
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key(schema),))
        conn.execute(pgsql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(ident))
        conn.execute(
            pgsql.SQL(
                "CREATE TABLE IF NOT EXISTS {}.schema_migrations"
                " (version BIGINT PRIMARY KEY, applied_at DOUBLE PRECISION NOT NULL)"
            ).format(ident)
        )
    newest = max((m.version for m in migrations), default=0)
    current = 0
    for migration in sorted(migrations, key=lambda m: m.version):
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key(schema),))
            row = conn.execute(
                pgsql.SQL("SELECT coalesce(max(version), 0) FROM {}.schema_migrations").format(
                    ident
                )
            ).fetchone()
            current = int(row[0]) if row else 0
            if current > newest:
                raise PgStoreError(
                    f"schema {schema} is at version {current}, newer than this Habakkuk knows"
                    f" ({newest}); upgrade Habakkuk"
                )
            if migration.version <= current:
                continue
            try:
                conn.execute(cast(Any, migration.sql))
            except psycopg.Error as exc:
                raise PgStoreError(
                    f"schema {schema}: migration {migration.version} failed: {first_line(exc)}"
                ) from None
            conn.execute(
                pgsql.SQL(
                    "INSERT INTO {}.schema_migrations(version, applied_at) VALUES (%s, %s)"
                ).format(ident),
                (migration.version, time.time()),
            )
            current = migration.version
    return current


# -- the Database --


# How a write meets the others (module docstring, "Writers"): under the writer locks,
# beside every writer, or beside the writes of other keys.
WriteMode = Literal["exclusive", "shared", "keyed"]


@dataclass
class _Call:
    fn: Callable[[Conn], Any]
    write: bool
    mode: WriteMode
    loop: asyncio.AbstractEventLoop | None
    future: asyncio.Future[Any] | concurrent.futures.Future[Any]
    outcome: tuple[bool, Any] | None = None
    # A keyed write's advisory lock keys.
    keys: tuple[int, ...] = ()


def _mode(inline: bool, shared: bool, keys: Sequence[str]) -> WriteMode:
    if inline or shared:
        return "shared"
    return "keyed" if keys else "exclusive"


_CLOSE = object()


class PgDatabase:
    """One of the home's databases on PostgreSQL: `threads` connections, each on a
    thread of its own, serving calls in the order they come.

    Waiting writes that one thread picks up together share a transaction, each in a
    savepoint (one that raises rolls back alone), and all hear back after the COMMIT:
    the group commit of `SqliteDatabase`, so a burst costs one flush of the server's
    WAL, not one per call."""

    def __init__(
        self,
        url: str,
        schema: Schema,
        *,
        attached: Sequence[str] = (),
        threads: int = 2,
    ):
        self.url = url
        self.schema = schema
        self.dialect: Dialect = "postgres"
        self._lock_keys = [lock_key(name) for name in (schema.name, *attached)]
        self._schema_key = lock_key(schema.name)
        self._calls: queue.SimpleQueue[_Call | object] = queue.SimpleQueue()
        self._closed = False
        self._threads: list[threading.Thread] = []
        # Opened here, so a server that refuses us is an error of `open`, not of a call.
        conns: list[psycopg.Connection[Any]] = []
        try:
            for _ in range(threads):
                conns.append(connect(url, schema.name))
        except BaseException:
            for opened in conns:  # none leaks when a later one is refused
                opened.close()
            raise
        for number, conn in enumerate(conns):
            thread = threading.Thread(
                target=self._serve, args=(conn,), name=f"pg-{schema.name}-{number}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    @property
    def name(self) -> str:
        return self.schema.name

    @classmethod
    def open_sync(
        cls, url: str, schema: Schema, *, attached: Sequence[str] = (), threads: int = 2
    ) -> PgDatabase:
        """Migrate `schema` and open it (synchronous: CLI commands, and `open`)."""
        conn = connect(url, schema.name)
        try:
            migrate(conn, schema.name, schema.postgres)
        finally:
            conn.close()
        return cls(url, schema, attached=attached, threads=threads)

    @classmethod
    async def open(
        cls, url: str, schema: Schema, *, attached: Sequence[str] = (), threads: int = 2
    ) -> PgDatabase:
        """`open_sync` off the event loop."""
        return await asyncio.to_thread(
            cls.open_sync, url, schema, attached=attached, threads=threads
        )

    # -- calls --

    def _submit(
        self,
        fn: Callable[[Conn], T],
        *,
        write: bool,
        mode: WriteMode = "shared",
        keys: Sequence[str] = (),
    ) -> asyncio.Future[T]:
        if self._closed:
            raise StoreError(f"{self.name}: database is closed")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        locks = tuple(write_key(self.name, key) for key in keys) if mode == "keyed" else ()
        self._calls.put(_Call(fn, write, mode, loop, future, keys=locks))
        return future

    async def run(self, fn: Callable[[Conn], T]) -> T:
        return await self._submit(fn, write=False)

    async def write(
        self,
        fn: Callable[[Conn], T],
        *,
        inline: bool = False,
        shared: bool = False,
        one_statement: bool = False,
        keys: Sequence[str] = (),
    ) -> T:
        return await self._submit(fn, write=True, mode=_mode(inline, shared, keys), keys=keys)

    def write_now(
        self,
        fn: Callable[[Conn], T],
        *,
        inline: bool = False,
        shared: bool = False,
        keys: Sequence[str] = (),
    ) -> asyncio.Future[T]:
        return self._submit(fn, write=True, mode=_mode(inline, shared, keys), keys=keys)

    def write_if_free(
        self,
        fn: Callable[[Conn], T],
        loop: asyncio.AbstractEventLoop | None = None,
        *,
        once: object = None,
        one_statement: bool = False,
    ) -> tuple[bool, Any] | None:
        """Never here and now: every PostgreSQL call is a round trip to the server."""
        return None

    def prepare_inline(self) -> None:
        """Nothing to prepare: the connections are open."""

    def run_sync(self, fn: Callable[[Conn], T]) -> T:
        if self._closed:
            raise StoreError(f"{self.name}: database is closed")
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._calls.put(_Call(fn, False, "shared", None, future))
        return future.result()

    def write_sync(self, fn: Callable[[Conn], T]) -> T:
        """`write` from synchronous code (never from the event loop's thread)."""
        if self._closed:
            raise StoreError(f"{self.name}: database is closed")
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._calls.put(_Call(fn, True, "exclusive", None, future))
        return future.result()

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        return await self.run(lambda conn: conn.execute(sql, params).fetchall())

    async def fetchone(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        return cast("Row | None", await self.run(lambda conn: conn.execute(sql, params).fetchone()))

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for _ in self._threads:
            self._calls.put(_CLOSE)
        await asyncio.to_thread(self._join)

    def close_sync(self) -> None:
        if self._closed:
            return
        self._closed = True
        for _ in self._threads:
            self._calls.put(_CLOSE)
        self._join()

    def _join(self) -> None:
        for thread in self._threads:
            thread.join()

    # -- a connection's thread ---------------------------------------------------------------

    def _serve(self, raw: psycopg.Connection[Any]) -> None:
        conn = PgConnection(raw, self._lock_keys)
        calls = self._calls
        head: _Call | object | None = None
        try:
            while True:
                item = head if head is not None else calls.get()
                head = None
                if item is _CLOSE:
                    return
                assert isinstance(item, _Call)
                if not item.write:
                    self._run_read(conn, item)
                    _answer(item)
                else:
                    # Writes already waiting of the same kind share its transaction;
                    # the first that does not fit runs next, so nothing is reordered.
                    group = [item]
                    while len(group) < GROUP_MAX:
                        try:
                            more = calls.get_nowait()
                        except queue.Empty:
                            break
                        if (
                            not isinstance(more, _Call)
                            or not more.write
                            or (more.mode != item.mode)
                        ):
                            head = more
                            break
                        group.append(more)
                    self._run_group(conn, group)
                    for call in group:
                        _answer(call)
                conn = self._healthy(conn)
        finally:
            with contextlib.suppress(psycopg.Error):
                conn.raw.close()

    def _healthy(self, conn: PgConnection) -> PgConnection:
        """`conn`, or a new connection when the server dropped it (the next call then
        finds a working one; the call that met the drop failed with its error)."""
        if not conn.raw.closed and not conn.raw.broken:
            return conn
        try:
            return PgConnection(connect(self.url, self.schema.name), self._lock_keys)
        except PgStoreError:
            return conn

    def _run_read(self, conn: PgConnection, call: _Call) -> None:
        try:
            call.outcome = (True, call.fn(conn))
        except BaseException as exc:  # the caller gets it, whatever it is
            call.outcome = (False, exc)
        finally:
            if conn.in_transaction and not conn.raw.broken:
                # `fn` left a transaction open (it raised inside its own BEGIN).
                with contextlib.suppress(psycopg.Error):
                    conn.raw.execute("ROLLBACK")
        self._connection_lost(conn, [call])

    def _run_group(self, conn: PgConnection, group: list[_Call]) -> None:
        raw = conn.raw
        try:
            mode = group[0].mode
            if mode == "exclusive":
                conn.begin(conn.writer_locks())
            elif mode == "keyed":
                conn.begin(key_locks(self._schema_key, (k for call in group for k in call.keys)))
            else:
                conn.begin()
        except psycopg.Error as exc:
            for call in group:
                call.outcome = (False, _db_error(exc))
            if conn.in_transaction and not raw.broken:
                # Its locks were refused (a timeout): the next call begins afresh.
                with contextlib.suppress(psycopg.Error):
                    raw.execute("ROLLBACK")
            self._connection_lost(conn, group)
            return
        alone = len(group) == 1
        rolled_back = False
        for call in group:
            try:
                if not alone:
                    raw.execute("SAVEPOINT call")
                value = call.fn(conn)
                if not alone:
                    raw.execute("RELEASE SAVEPOINT call")
                call.outcome = (True, value)
            except BaseException as exc:
                call.outcome = (False, exc)
                if alone:
                    break
                try:
                    raw.execute("ROLLBACK TO SAVEPOINT call")
                    raw.execute("RELEASE SAVEPOINT call")
                except psycopg.Error as undo:
                    # The transaction itself is gone: every call in it failed.
                    rolled_back = True
                    lost = StoreError(f"{self.name}: transaction rolled back: {first_line(undo)}")
                    for other in group:
                        if other.outcome is None or other.outcome[0]:
                            other.outcome = (False, lost)
                    break
        commit = not rolled_back and (not alone or bool(group[0].outcome and group[0].outcome[0]))
        try:
            raw.execute("COMMIT" if commit else "ROLLBACK")
        except psycopg.Error as exc:
            with contextlib.suppress(psycopg.Error):
                raw.execute("ROLLBACK")
            failed = _db_error(exc)
            for call in group:
                if call.outcome is not None and call.outcome[0]:
                    call.outcome = (False, failed)
        self._connection_lost(conn, group)

    def _connection_lost(self, conn: PgConnection, calls: list[_Call]) -> None:
        """Word the failure of calls whose connection the server dropped mid-call."""
        if not conn.raw.broken:
            return
        for call in calls:
            if call.outcome is not None and not call.outcome[0]:
                call.outcome = (
                    False,
                    PgStoreError(f"{redact(self.url)}: lost the connection to PostgreSQL"),
                )


def _answer(call: _Call) -> None:
    ok, value = call.outcome or (False, StoreError("call did not run"))
    if call.loop is None:
        future = call.future
        assert isinstance(future, concurrent.futures.Future)
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)
        return
    with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody to tell
        call.loop.call_soon_threadsafe(_resolve, call.future, ok, value)


def _resolve(
    future: asyncio.Future[Any] | concurrent.futures.Future[Any], ok: bool, value: Any
) -> None:
    if future.done():
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)
