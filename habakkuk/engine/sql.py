"""What a store sees of its database, whichever engine holds it: SQLite or PostgreSQL.

A store is written once. Its transactions are functions `fn(conn)` that a `Database`
runs on a connection of its own (`await db.write(fn)`), and `conn` is either Python's
sqlite3 connection or `habakkuk.engine.pg.PgConnection`, which speaks the same
DB-API subset: `execute`, `executemany`, `executescript`, rows read by position or by
column name, and the DB-API's error classes (a PostgreSQL unique violation is raised
as `sqlite3.IntegrityError`, so a store's `except sqlite3.IntegrityError` means "a
constraint refused it" on both). The statements themselves are the store's: written
in the SQL both engines share (upserts with ON CONFLICT, RETURNING, `?` parameters),
and where the engines differ (full-text search, JSON, dates) the store picks its text
by `db.dialect`. `PgConnection` rewrites only what is purely spelling (`?` to `%s`,
`INSERT OR IGNORE`, `LIMIT -1`); it never guesses at meaning.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar

T = TypeVar("T")

Dialect = Literal["sqlite", "postgres"]

Params = Sequence[Any] | Mapping[str, Any]


class Row(Protocol):
    """One result row: by position (`row[0]`) or by column name (`row["id"]`)."""

    def __getitem__(self, key: int | str, /) -> Any: ...

    def keys(self) -> list[str]: ...

    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator[Any]: ...


class Cursor(Protocol):
    """What a statement returns: its rows and how many it changed."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Conn(Protocol):
    """The connection a store's transaction function is given."""

    def execute(self, sql: str, parameters: Params = (), /) -> Cursor: ...

    def executemany(self, sql: str, seq_of_parameters: Iterable[Params], /) -> Cursor: ...

    def executescript(self, sql_script: str, /) -> Cursor: ...

    @property
    def in_transaction(self) -> bool: ...


@dataclass(frozen=True)
class Migration:
    """One numbered schema step; `sql` runs in a transaction with the version bump."""

    version: int
    sql: str


@dataclass(frozen=True)
class Schema:
    """One of the home's databases: its name (the SQLite file `<name>.db`, the
    PostgreSQL schema `<name>`) and its migrations on each engine.

    The two lists are numbered on their own: PostgreSQL's history starts at the schema
    SQLite had reached when the port was made, so its first step is today's tables."""

    name: str
    sqlite: Sequence[Migration]
    postgres: Sequence[Migration] = field(default_factory=tuple)


class Database(Protocol):
    """A database a store runs its transactions on (`store.SqliteDatabase`,
    `pg.PgDatabase`)."""

    dialect: Dialect

    @property
    def name(self) -> str:
        """The database's name within the home (`control`, `state`, ...)."""
        ...

    async def run(self, fn: Callable[[Conn], T]) -> T:
        """Run `fn(conn)` outside a transaction (each statement commits on its own);
        for reads, and for a function that opens its own with `transaction`."""
        ...

    async def write(
        self,
        fn: Callable[[Conn], T],
        *,
        inline: bool = False,
        shared: bool = False,
        one_statement: bool = False,
        keys: Sequence[str] = (),
    ) -> T:
        """Run `fn(conn)` in one transaction that serialises with the database's other
        writers; the result after COMMIT. `inline`: a short index-bounded queue write
        (SQLite may run it on the loop's thread). `inline` or `shared`: `fn` is written
        to run beside other writers (row locks, SKIP LOCKED, fencing), so an engine
        with several writers (PostgreSQL) lets it in without the store's writer lock.
        `one_statement`: `fn` runs one statement, a transaction by itself (SQLite inline
        runs it without BEGIN and COMMIT around it). `keys`: `fn` reads and changes only
        what these names stand for (a session id), so such an engine serialises it only
        with the writes of the same keys and with the writes taken whole (those without
        keys); SQLite's one writer holds them all."""
        ...

    def write_now(
        self,
        fn: Callable[[Conn], T],
        *,
        inline: bool = False,
        shared: bool = False,
        keys: Sequence[str] = (),
    ) -> asyncio.Future[T]:
        """`write`, handed over at once (for a caller that collected a pass's work)."""
        ...

    def write_if_free(
        self,
        fn: Callable[[Conn], T],
        loop: asyncio.AbstractEventLoop | None = None,
        *,
        once: object = None,
        one_statement: bool = False,
    ) -> tuple[bool, Any] | None:
        """`fn` written here and now when that costs no wait: its outcome, (True, the
        value) or (False, the exception); None, and nothing ran, otherwise. `loop`: the
        running loop, when the caller has it; `once`: a key of which at most one write
        per pass of the loop runs here."""
        ...

    def prepare_inline(self) -> None:
        """Get ready for inline writes now rather than at the first one."""
        ...

    def run_sync(self, fn: Callable[[Conn], T]) -> T:
        """`run` from synchronous code (never from the event loop's thread)."""
        ...

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> Sequence[Row]:
        """The rows of one read."""
        ...

    async def fetchone(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        """The first row of one read, or None."""
        ...

    async def close(self) -> None:
        """Close; calls made before finish first."""
        ...

    def close_sync(self) -> None:
        """`close` from synchronous code."""
        ...
