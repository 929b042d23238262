"""Moving a home's databases between SQLite files and PostgreSQL, every row verified.

`habakkuk storage migrate` (cli/storage.py) is a thin surface over this module, which
prints nothing: it reports progress through a callback and returns typed results.

The copy is generic, so a store that gains a table needs nothing here:

1. Both sides are opened through the stores themselves (`HomeLayout`: each Schema's
   migrations, then the `ensure()` of the stores whose tables are made on demand), so
   every table exists on both, in this Habakkuk's newest shape.
2. The tables are listed on the SQLite side (less SQLite's own, the FTS5 indexes and
   their shadow tables, and `schema_migrations`), parents before children, and each is
   copied to the table of the same name in the database of the same name, by column
   name: the columns both have. A column SQLite has and PostgreSQL lacks stops the move
   before a row is written (it would be lost); a PostgreSQL table's `rowid` column
   (what a store that reads SQLite's rowid has there) takes SQLite's rowid.
3. Rows go in batches (COPY into PostgreSQL), each batch in one transaction with the
   table's progress in the target's `habakkuk_migration` table, so a move that was
   stopped resumes where it stopped. Rows the target's triggers made while earlier
   tables were copied (message_text from messages) are cleared when their own table's
   copy starts: the source's rows are the truth. Derived data (SQLite's FTS index,
   PostgreSQL's search vectors) is built by the target's own triggers and generated
   columns as the rows arrive.
4. Identity counters are carried over (PostgreSQL's sequences, SQLite's
   sqlite_sequence), so an id handed out before the move is never handed out again.
5. Verify: each table's row count and a content hash over the copied columns, worked
   out the same way on both sides (`fingerprint`).

The agents' folders (memory notes, skills, workspace), config.yaml and .env are files
of the home and are not moved. The blob files stay in blobs/; where PostgreSQL keeps a
shared copy of each (control.blobs, so every machine sees every attachment), the move
there fills it from the files, and the move back writes its rows as files again.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import re
import sqlite3
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from habakkuk.engine.db_url import redact
from habakkuk.engine.errors import BadInput, ConfigError, HabakkukError, first_line
from habakkuk.engine.sql import Database, Schema
from habakkuk.engine.storage import PostgresStorage, SqliteStorage, Storage

if TYPE_CHECKING:
    import psycopg

T = TypeVar("T")

PROGRESS_TABLE = "habakkuk_migration"
BATCH_ROWS = 2000
# What is never copied: SQLite's own tables, the migrations' bookkeeping, our progress.
_INTERNAL = ("schema_migrations", PROGRESS_TABLE)
_FTS_SHADOWS = ("_data", "_idx", "_content", "_docsize", "_config")
_HASH_MOD = 1 << 256
# On PostgreSQL, control.blobs holds each blob file's bytes for every node (engine's
# BlobStore); on SQLite the files are the blobs.
SHARED_BLOBS = ("control", "blobs")
_BLOB_FILE = re.compile(r"([0-9a-f]{64})(\.[A-Za-z0-9]{1,16})?")


class MoveError(HabakkukError):
    """The move cannot go on without losing something (exit 1)."""


# -- the home's databases ------------------------------------------------------------------


async def ensure_control_tables(databases: Mapping[str, Database]) -> None:
    """Make the tables of control that their stores make on demand (channels, leases,
    schedules, board, sub-agent stops, nodes; on PostgreSQL the shared blobs), as each store
    makes them."""
    from habakkuk.channels.store import ChannelStore
    from habakkuk.engine.blobs import PG_BLOBS_TABLE
    from habakkuk.engine.leases import NamedLeases
    from habakkuk.engine.nodes import NodeRegistry
    from habakkuk.work.board_schema import ensure_board_tables
    from habakkuk.work.delegation_store import DelegationStore
    from habakkuk.work.store import ScheduleStore

    control = databases["control"]
    await ChannelStore(control).ensure()
    await ScheduleStore(control).ensure()
    await ensure_board_tables(control)
    await NamedLeases(control).ensure()
    await DelegationStore(control).ensure()
    await NodeRegistry(control).ensure()
    if control.dialect == "postgres":
        await control.write(lambda conn: conn.executescript(PG_BLOBS_TABLE))


def home_layout(*more: Schema) -> HomeLayout:
    """The home's databases of the engine (control, state, transcripts, usage), then
    `more` (the web chat's, which a layer above this one declares)."""
    from habakkuk.engine.jobs import SCHEMA as CONTROL
    from habakkuk.engine.llm.usage import SCHEMA as USAGE
    from habakkuk.engine.sessions import SCHEMA as TRANSCRIPTS
    from habakkuk.engine.state import SCHEMA as STATE

    return HomeLayout((CONTROL, STATE, TRANSCRIPTS, USAGE, *more), ensure_control_tables)


# -- what the caller gives and gets ---------------------------------------------------------


@dataclass(frozen=True)
class HomeLayout:
    """The home's databases and how to make every table of them on a storage:
    `schemas` migrated in order, then `ensure(databases)` with each opened by name."""

    schemas: Sequence[Schema]
    ensure: Callable[[Mapping[str, Database]], Awaitable[None]]

    @property
    def names(self) -> list[str]:
        """The databases' names, in order."""
        return [schema.name for schema in self.schemas]


@dataclass(frozen=True)
class TablePlan:
    """One table to copy: its database, its name, and the columns copied."""

    database: str
    table: str
    columns: tuple[str, ...]

    @property
    def label(self) -> str:
        """`database.table`."""
        return f"{self.database}.{self.table}"


@dataclass(frozen=True)
class Progress:
    """Where a table's copy is: `done` of `total` rows."""

    table: TablePlan
    done: int
    total: int


@dataclass(frozen=True)
class TableCheck:
    """One table verified: rows and content hash on each side."""

    label: str
    source_rows: int
    target_rows: int
    source_hash: str
    target_hash: str

    @property
    def ok(self) -> bool:
        """The same rows on both sides."""
        return self.source_rows == self.target_rows and self.source_hash == self.target_hash


@dataclass(frozen=True)
class MoveReport:
    """What a move did: `resumed` an interrupted one, or found it `already_done`
    (and only verified it again), and the per-table checks."""

    checks: list[TableCheck]
    resumed: bool
    already_done: bool
    blobs_shared: bool = False  # PostgreSQL keeps the blob files' bytes as rows too

    @property
    def ok(self) -> bool:
        """Every table verified."""
        return all(check.ok for check in self.checks)


OnProgress = Callable[[Progress], None]


# -- the content hash -----------------------------------------------------------------------


# Values the hash takes as they are; any other type is made one of them first.
_PLAIN = frozenset((str, int, bytes, type(None)))


def _normal(value: Any) -> str | int | float | bytes | None:
    """One value as the hash sees it: the same on both engines for the same value
    (a whole float is its integer: SQLite keeps 5 in a REAL column as an integer,
    PostgreSQL's double precision gives 5.0 back; a flag is 0 or 1)."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float):
        return int(value) if value.is_integer() and abs(value) < 2**63 else value
    if isinstance(value, str | int | bytes) or value is None:
        return value
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    raise MoveError(f"cannot compare a value of type {type(value).__name__}")


def row_digest(row: Sequence[Any]) -> int:
    """sha256 of one row's values, as an integer: of the repr of the tuple of its
    normal values (a repr quotes and escapes each, so no two rows share one)."""
    values = (
        tuple(row)
        if all(type(value) in _PLAIN for value in row)
        else tuple(_normal(value) for value in row)
    )
    data = repr(values).encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.sha256(data).digest(), "big")


def fingerprint(batches: Iterator[list[tuple[Any, ...]]]) -> tuple[int, str]:
    """(rows, content hash) of a table's rows in any order: the sum of the rows'
    digests, so the two engines' orders (collations differ) do not matter."""
    count = 0
    total = 0
    for batch in batches:
        for row in batch:
            total = (total + row_digest(row)) % _HASH_MOD
            count += 1
    return count, f"{total:064x}"


# -- the two sides --------------------------------------------------------------------------


class Side(Protocol):
    """A home's databases on one engine, as the copy reads and writes them."""

    def count(self, table: TablePlan) -> int:
        """The table's rows."""
        ...

    def rows(self, table: TablePlan, skip: int = 0) -> Iterator[list[tuple[Any, ...]]]:
        """The table's rows (its copied columns) in batches, in a fixed order; `skip`
        the first so many."""
        ...

    def id_floor(self, table: TablePlan) -> int:
        """The highest id the table's counter has handed out (0: none known)."""
        ...

    def progress(self, table: TablePlan) -> tuple[int, bool]:
        """(rows copied, done) recorded for `table`."""
        ...

    def start(self, source: str, tables: Sequence[TablePlan]) -> None:
        """Record the move of `tables` from `source` (kept where recorded already)."""
        ...

    def clear(self, table: TablePlan) -> None:
        """Delete the rows the table has before its copy starts."""
        ...

    def write(self, table: TablePlan, rows: list[tuple[Any, ...]], done: int) -> None:
        """Insert `rows` and record `done` rows copied, in one transaction."""
        ...

    def finish(self, table: TablePlan, floor: int) -> None:
        """Set the table's id counter past `floor` and its rows, and mark it done."""
        ...

    def close(self) -> None:
        """Close the connections."""
        ...


def _quote(name: str) -> str:
    """An identifier quoted for SQL (both engines quote the same way)."""
    return '"' + name.replace('"', '""') + '"'


@dataclass(frozen=True)
class _SqliteTable:
    name: str
    columns: tuple[str, ...]
    has_rowid: bool
    autoincrement: bool
    parents: tuple[str, ...]


class SqliteSide:
    """The home's databases as SQLite files `<root>/<name>.db`."""

    def __init__(self, root: Path, names: Sequence[str]):
        self.root = root
        self.names = list(names)
        self._conns: dict[str, sqlite3.Connection] = {}

    def path(self, database: str) -> Path:
        """The file of `database`."""
        return self.root / f"{database}.db"

    def databases(self) -> list[str]:
        """The home's databases that exist as files here."""
        return [name for name in self.names if self.path(name).is_file()]

    def conn(self, database: str) -> sqlite3.Connection:
        """The connection to `database` (foreign keys off: tables arrive in any order)."""
        conn = self._conns.get(database)
        if conn is None:
            conn = sqlite3.connect(
                self.path(database), isolation_level=None, timeout=30, check_same_thread=False
            )
            conn.execute("PRAGMA busy_timeout = 30000")
            self._conns[database] = conn
        return conn

    def tables(self, database: str) -> list[_SqliteTable]:
        """`database`'s tables to copy, parents before children (then creation order)."""
        conn = self.conn(database)
        entries = conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY rowid"
        ).fetchall()
        virtual = [
            name for name, sql in entries if str(sql or "").upper().startswith("CREATE VIRTUAL")
        ]
        shadows = {f"{name}{suffix}" for name in virtual for suffix in _FTS_SHADOWS}
        found: list[_SqliteTable] = []
        for name, sql in entries:
            if (
                name.startswith("sqlite_")
                or name in _INTERNAL
                or name in virtual
                or name in shadows
            ):
                continue
            text = str(sql or "").upper()
            columns = tuple(
                str(row[1])
                for row in conn.execute(f"PRAGMA table_xinfo({_quote(name)})")
                if int(row[6]) == 0  # hidden: generated or a virtual table's
            )
            parents = tuple(
                dict.fromkeys(
                    str(row[2])
                    for row in conn.execute(f"PRAGMA foreign_key_list({_quote(name)})")
                    if str(row[2]) != name
                )
            )
            found.append(
                _SqliteTable(
                    name, columns, "WITHOUT ROWID" not in text, "AUTOINCREMENT" in text, parents
                )
            )
        return _parents_first(found)

    def table_names(self, database: str) -> set[str]:
        """Every table of `database` (SQLite's own and FTS ones too)."""
        rows = self.conn(database).execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        return {str(row[0]) for row in rows}

    def _info(self, table: TablePlan) -> _SqliteTable:
        for entry in self.tables(table.database):
            if entry.name == table.table:
                return entry
        raise MoveError(f"{table.label}: no such table in {self.path(table.database)}")

    def count(self, table: TablePlan) -> int:
        row = self.conn(table.database).execute(f"SELECT count(*) FROM {_quote(table.table)}")
        return int(row.fetchone()[0])

    def rows(self, table: TablePlan, skip: int = 0) -> Iterator[list[tuple[Any, ...]]]:
        info = self._info(table)
        order = "rowid" if info.has_rowid else ", ".join(_quote(c) for c in info.columns)
        columns = ", ".join(_quote(c) for c in table.columns)
        cursor = self.conn(table.database).execute(
            f"SELECT {columns} FROM {_quote(table.table)} ORDER BY {order} LIMIT -1 OFFSET ?",
            (skip,),
        )
        while batch := cursor.fetchmany(BATCH_ROWS):
            yield [tuple(row) for row in batch]

    def id_floor(self, table: TablePlan) -> int:
        conn = self.conn(table.database)
        if "sqlite_sequence" not in self.table_names(table.database):
            return 0
        row = conn.execute(
            "SELECT seq FROM sqlite_sequence WHERE name = ?", (table.table,)
        ).fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    # -- as the target --

    def _ensure_progress(self, database: str) -> None:
        self.conn(database).execute(
            f"CREATE TABLE IF NOT EXISTS {PROGRESS_TABLE} (table_name TEXT PRIMARY KEY,"
            " source TEXT NOT NULL, rows_done INTEGER NOT NULL DEFAULT 0,"
            " done INTEGER NOT NULL DEFAULT 0)"
        )

    def recorded(self) -> tuple[set[str], bool]:
        """The sources of a move recorded here, and whether every table of it is done."""
        sources: set[str] = set()
        done = True
        for database in self.databases():
            if PROGRESS_TABLE not in self.table_names(database):
                continue
            for source, finished in self.conn(database).execute(
                f"SELECT source, done FROM {PROGRESS_TABLE}"
            ):
                sources.add(str(source))
                done = done and bool(finished)
        return sources, done

    def nonempty(self) -> list[str]:
        """`database.table` of every table here holding rows (not our bookkeeping)."""
        full: list[str] = []
        for database in self.databases():
            for name in sorted(self.table_names(database)):
                if name.startswith("sqlite_") or name in _INTERNAL:
                    continue
                if self.conn(database).execute(f"SELECT 1 FROM {_quote(name)} LIMIT 1").fetchone():
                    full.append(f"{database}.{name}")
        return full

    def progress(self, table: TablePlan) -> tuple[int, bool]:
        self._ensure_progress(table.database)
        row = (
            self.conn(table.database)
            .execute(
                f"SELECT rows_done, done FROM {PROGRESS_TABLE} WHERE table_name = ?", (table.table,)
            )
            .fetchone()
        )
        return (int(row[0]), bool(row[1])) if row else (0, False)

    def start(self, source: str, tables: Sequence[TablePlan]) -> None:
        for table in tables:
            self._ensure_progress(table.database)
            self.conn(table.database).execute(
                f"INSERT INTO {PROGRESS_TABLE}(table_name, source) VALUES (?, ?)"
                " ON CONFLICT(table_name) DO NOTHING",
                (table.table, source),
            )

    def clear(self, table: TablePlan) -> None:
        self.conn(table.database).execute(f"DELETE FROM {_quote(table.table)}")

    def write(self, table: TablePlan, rows: list[tuple[Any, ...]], done: int) -> None:
        conn = self.conn(table.database)
        columns = ", ".join(_quote(c) for c in table.columns)
        marks = ", ".join("?" for _ in table.columns)
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany(
                f"INSERT INTO {_quote(table.table)} ({columns}) VALUES ({marks})", rows
            )
            conn.execute(
                f"UPDATE {PROGRESS_TABLE} SET rows_done = ? WHERE table_name = ?",
                (done, table.table),
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def finish(self, table: TablePlan, floor: int) -> None:
        conn = self.conn(table.database)
        conn.execute("BEGIN IMMEDIATE")
        try:
            if floor and self._info(table).autoincrement:
                # Inserting ids already set the counter to the highest; a higher one the
                # source handed out (to rows since deleted) is kept too.
                updated = conn.execute(
                    "UPDATE sqlite_sequence SET seq = max(seq, ?) WHERE name = ?",
                    (floor, table.table),
                ).rowcount
                if not updated:
                    conn.execute(
                        "INSERT INTO sqlite_sequence(name, seq) VALUES (?, ?)",
                        (table.table, floor),
                    )
            conn.execute(
                f"UPDATE {PROGRESS_TABLE} SET done = 1 WHERE table_name = ?", (table.table,)
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def forget_progress(self) -> None:
        """Drop the bookkeeping once the move is verified: the files are a plain home."""
        for database in self.databases():
            self.conn(database).execute(f"DROP TABLE IF EXISTS {PROGRESS_TABLE}")

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()


def _parents_first(tables: list[_SqliteTable]) -> list[_SqliteTable]:
    """`tables` with each after the tables its foreign keys name (else in order)."""
    names = {table.name for table in tables}
    placed: list[_SqliteTable] = []
    seen: set[str] = set()

    def place(table: _SqliteTable, path: tuple[str, ...]) -> None:
        if table.name in seen or table.name in path:
            return
        for parent in table.parents:
            if parent in names:
                place(next(t for t in tables if t.name == parent), (*path, table.name))
        seen.add(table.name)
        placed.append(table)

    for table in tables:
        place(table, ())
    return placed


@dataclass(frozen=True)
class _PgColumn:
    name: str
    generated: bool
    type: str
    sequence: str | None


class PgSide:
    """The home's databases as schemas of one PostgreSQL database."""

    def __init__(self, url: str, names: Sequence[str]):
        from habakkuk.engine.storage import pg_driver

        pg = pg_driver(url)
        self.url = url
        self.names = list(names)
        self._path = "public"
        try:
            self.conn: psycopg.Connection[Any] = pg.connect(url, "public")
        except pg.PgStoreError as exc:
            raise ConfigError(str(exc)) from None

    def _ident(self, table: TablePlan) -> Any:
        from psycopg import sql

        return sql.Identifier(table.database, table.table)

    def _use(self, database: str) -> None:
        """Unqualified names mean `database`'s, as on the stores' own connections (a
        trigger's function names its tables so)."""
        from psycopg import sql

        if self._path != database:
            self.conn.execute(
                sql.SQL("SET search_path TO {}, public").format(sql.Identifier(database))
            )
            self._path = database

    def databases(self) -> list[str]:
        """The home's databases that exist as schemas here."""
        rows = self.conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname = ANY(%s)", (self.names,)
        ).fetchall()
        present = {str(row[0]) for row in rows}
        return [name for name in self.names if name in present]

    def has_table(self, database: str, table: str) -> bool:
        """Whether schema `database` has `table`."""
        return table in self.table_names(database)

    def table_names(self, database: str) -> set[str]:
        """The tables of schema `database`."""
        rows = self.conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s", (database,)
        ).fetchall()
        return {str(row[0]) for row in rows}

    def columns(self, database: str, table: str) -> list[_PgColumn]:
        """The columns of `database.table`, in order."""
        rows = self.conn.execute(
            "SELECT a.attname, a.attgenerated <> '', format_type(a.atttypid, a.atttypmod),"
            " pg_get_serial_sequence("
            "quote_ident(n.nspname) || '.' || quote_ident(c.relname), a.attname)"
            " FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s AND c.relname = %s AND a.attnum > 0 AND NOT a.attisdropped"
            " ORDER BY a.attnum",
            (database, table),
        ).fetchall()
        return [_PgColumn(str(r[0]), bool(r[1]), str(r[2]), r[3]) for r in rows]

    def _primary_key(self, table: TablePlan) -> list[str]:
        rows = self.conn.execute(
            "SELECT a.attname FROM pg_index i JOIN pg_attribute a"
            " ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)"
            " WHERE i.indrelid = %s::regclass AND i.indisprimary ORDER BY a.attnum",
            (f"{_quote(table.database)}.{_quote(table.table)}",),
        ).fetchall()
        return [str(row[0]) for row in rows]

    def count(self, table: TablePlan) -> int:
        from psycopg import sql

        row = self.conn.execute(
            sql.SQL("SELECT count(*) FROM {}").format(self._ident(table))
        ).fetchone()
        return int(row[0]) if row else 0

    def rows(self, table: TablePlan, skip: int = 0) -> Iterator[list[tuple[Any, ...]]]:
        from psycopg import sql

        key = self._primary_key(table) or list(table.columns)
        # "C": byte order, as SQLite sorts text; any fixed order serves a resume.
        order = sql.SQL(", ").join(
            sql.SQL('{} COLLATE "C"').format(sql.Identifier(c))
            if self._is_text(table, c)
            else sql.Identifier(c)
            for c in key
        )
        query = sql.SQL("SELECT {} FROM {} ORDER BY {} OFFSET %s").format(
            sql.SQL(", ").join(sql.Identifier(c) for c in table.columns), self._ident(table), order
        )
        with self.conn.transaction(), self.conn.cursor(name="habakkuk_move") as cursor:
            cursor.itersize = BATCH_ROWS
            cursor.execute(query, (skip,))
            while batch := cursor.fetchmany(BATCH_ROWS):
                yield [tuple(row) for row in batch]

    def _is_text(self, table: TablePlan, column: str) -> bool:
        for entry in self.columns(table.database, table.table):
            if entry.name == column:
                return entry.type in ("text", "character varying") or entry.type.startswith(
                    ("character", "varchar")
                )
        return False

    def id_floor(self, table: TablePlan) -> int:
        from psycopg import sql

        floor = 0
        for column in self.columns(table.database, table.table):
            if column.sequence is None or column.name not in table.columns:
                continue
            row = self.conn.execute(
                sql.SQL("SELECT last_value, is_called FROM {}").format(
                    sql.Identifier(*column.sequence.split(".", 1))
                )
            ).fetchone()
            if row and row[1]:
                floor = max(floor, int(row[0]))
        return floor

    # -- as the target --

    def _ensure_progress(self) -> None:
        self.conn.execute(
            f"CREATE TABLE IF NOT EXISTS public.{PROGRESS_TABLE} (database TEXT NOT NULL,"
            " table_name TEXT NOT NULL, source TEXT NOT NULL,"
            " rows_done BIGINT NOT NULL DEFAULT 0, done INTEGER NOT NULL DEFAULT 0,"
            " PRIMARY KEY (database, table_name))"
        )

    def recorded(self) -> tuple[set[str], bool]:
        """The sources of a move recorded here, and whether every table of it is done."""
        row = self.conn.execute("SELECT to_regclass(%s)", (f"public.{PROGRESS_TABLE}",)).fetchone()
        if not row or row[0] is None:
            return set(), True
        rows = self.conn.execute(f"SELECT source, done FROM public.{PROGRESS_TABLE}").fetchall()
        return {str(r[0]) for r in rows}, all(bool(r[1]) for r in rows)

    def nonempty(self) -> list[str]:
        """`schema.table` of every home table here holding rows."""
        from psycopg import sql

        full: list[str] = []
        for database in self.databases():
            for name in sorted(self.table_names(database)):
                if name in _INTERNAL:
                    continue
                query = sql.SQL("SELECT 1 FROM {} LIMIT 1").format(sql.Identifier(database, name))
                if self.conn.execute(query).fetchone():
                    full.append(f"{database}.{name}")
        return full

    def progress(self, table: TablePlan) -> tuple[int, bool]:
        self._ensure_progress()
        row = self.conn.execute(
            f"SELECT rows_done, done FROM public.{PROGRESS_TABLE}"
            " WHERE database = %s AND table_name = %s",
            (table.database, table.table),
        ).fetchone()
        return (int(row[0]), bool(row[1])) if row else (0, False)

    def start(self, source: str, tables: Sequence[TablePlan]) -> None:
        self._ensure_progress()
        with self.conn.cursor() as cursor:
            cursor.executemany(
                f"INSERT INTO public.{PROGRESS_TABLE}(database, table_name, source)"
                " VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                [(t.database, t.table, source) for t in tables],
            )

    def clear(self, table: TablePlan) -> None:
        from psycopg import sql

        self._use(table.database)
        self.conn.execute(sql.SQL("DELETE FROM {}").format(self._ident(table)))

    def write(self, table: TablePlan, rows: list[tuple[Any, ...]], done: int) -> None:
        from psycopg import sql

        copy = sql.SQL("COPY {} ({}) FROM STDIN").format(
            self._ident(table), sql.SQL(", ").join(sql.Identifier(c) for c in table.columns)
        )
        self._use(table.database)
        with self.conn.transaction(), self.conn.cursor() as cursor:
            with cursor.copy(copy) as stream:
                for row in rows:
                    stream.write_row(row)
            cursor.execute(
                f"UPDATE public.{PROGRESS_TABLE} SET rows_done = %s"
                " WHERE database = %s AND table_name = %s",
                (done, table.database, table.table),
            )

    def finish(self, table: TablePlan, floor: int) -> None:
        from psycopg import sql

        self._use(table.database)
        with self.conn.transaction():
            for column in self.columns(table.database, table.table):
                if column.sequence is None:
                    continue
                row = self.conn.execute(
                    sql.SQL("SELECT max({}) FROM {}").format(
                        sql.Identifier(column.name), self._ident(table)
                    )
                ).fetchone()
                highest = max(int(row[0]) if row and row[0] is not None else 0, floor)
                if highest > 0:
                    self.conn.execute("SELECT setval(%s, %s, true)", (column.sequence, highest))
            self.conn.execute(
                f"UPDATE public.{PROGRESS_TABLE} SET done = 1"
                " WHERE database = %s AND table_name = %s",
                (table.database, table.table),
            )

    def close(self) -> None:
        self.conn.close()


# -- the plan -------------------------------------------------------------------------------


def plan_tables(lite: SqliteSide, pg: PgSide, *, to_postgres: bool) -> list[TablePlan]:
    """The tables to copy and their columns; MoveError naming what the target cannot
    hold (a table or column with rows that the other side lacks). A table without
    rows that the other side cannot hold is left out: nothing of it is lost."""
    plans: list[TablePlan] = []
    problems: list[str] = []
    for database in lite.databases():
        pg_tables = pg.table_names(database)
        lite_tables = lite.tables(database)
        for entry in lite_tables:
            label = f"{database}.{entry.name}"
            if entry.name not in pg_tables:
                if to_postgres and lite.count(TablePlan(database, entry.name, ())):
                    problems.append(f"{label}: PostgreSQL has no such table")
                continue
            pg_columns = {c.name: c for c in pg.columns(database, entry.name)}
            copyable = {name for name, c in pg_columns.items() if not c.generated}
            source: SqliteSide | PgSide = lite if to_postgres else pg
            if to_postgres:
                lacking = [c for c in entry.columns if c not in copyable]
                if lacking:
                    # Nothing is lost where there is nothing to copy.
                    if source.count(TablePlan(database, entry.name, ())):
                        problems.append(f"{label}: PostgreSQL lacks column(s) {', '.join(lacking)}")
                    continue
            else:
                extra = [
                    name
                    for name, c in pg_columns.items()
                    if name not in entry.columns
                    and not c.generated
                    and c.type != "tsvector"
                    and not (name == "rowid" and entry.has_rowid)
                ]
                if extra:
                    if source.count(TablePlan(database, entry.name, ())):
                        problems.append(f"{label}: SQLite lacks column(s) {', '.join(extra)}")
                    continue
            columns = [c for c in entry.columns if c in copyable]
            if "rowid" in copyable and "rowid" not in entry.columns and entry.has_rowid:
                columns.insert(0, "rowid")
            plans.append(TablePlan(database, entry.name, tuple(columns)))
        if not to_postgres:
            known = {entry.name for entry in lite_tables}
            for name in sorted(pg_tables - known - set(_INTERNAL)):
                if (database, name) == SHARED_BLOBS:
                    continue  # the blob files' shared copies: written back as files
                if pg.count(TablePlan(database, name, ())):
                    problems.append(f"{database}.{name}: SQLite has no such table")
    if problems:
        raise MoveError("cannot move without losing rows: " + "; ".join(problems))
    return plans


# -- copy and verify ------------------------------------------------------------------------


def _db_errors() -> tuple[type[Exception], ...]:
    """The drivers' error classes (psycopg's only when it is loaded)."""
    import sys

    found: list[type[Exception]] = [sqlite3.Error]
    psycopg = sys.modules.get("psycopg")
    if psycopg is not None:
        found.append(psycopg.Error)
    return tuple(found)


def copy_tables(
    source: Side,
    target: Side,
    tables: Sequence[TablePlan],
    *,
    source_id: str,
    on_progress: OnProgress | None = None,
) -> None:
    """Copy `tables` from `source` to `target`, resuming where the target's record of
    this move says it stopped; MoveError naming the table a database refused."""
    target.start(source_id, tables)
    for table in tables:
        try:
            _copy_table(source, target, table, on_progress)
        except _db_errors() as exc:
            raise MoveError(
                f"{table.label}: {first_line(exc)} (what was copied is kept: run the same"
                " command again to resume)"
            ) from None


def _copy_table(
    source: Side, target: Side, table: TablePlan, on_progress: OnProgress | None
) -> None:
    done, finished = target.progress(table)
    total = source.count(table)
    if finished:
        if on_progress is not None:
            on_progress(Progress(table, total, total))
        return
    if done == 0:
        target.clear(table)
    if on_progress is not None:
        on_progress(Progress(table, done, total))
    for batch in source.rows(table, skip=done):
        done += len(batch)
        target.write(table, batch, done)
        if on_progress is not None:
            on_progress(Progress(table, done, total))
    target.finish(table, source.id_floor(table))


def verify_tables(
    source: Side,
    target: Side,
    tables: Sequence[TablePlan],
) -> list[TableCheck]:
    """Each table's rows and content hash on both sides."""
    checks: list[TableCheck] = []
    for table in tables:
        source_rows, source_hash = fingerprint(source.rows(table))
        target_rows, target_hash = fingerprint(target.rows(table))
        checks.append(TableCheck(table.label, source_rows, target_rows, source_hash, target_hash))
    return checks


# -- the moves ------------------------------------------------------------------------------


async def prepare(storage: Storage, layout: HomeLayout) -> None:
    """Open every database of `layout` on `storage` (migrating it) and make the tables
    the stores make on demand; closed again after."""
    opened: dict[str, Database] = {}
    try:
        for schema in layout.schemas:
            opened[schema.name] = await storage.open(schema)
        await layout.ensure(opened)
    except _db_errors() as exc:
        raise MoveError(
            f"{storage.describe()}: cannot make the home's tables: {first_line(exc)}"
        ) from None
    finally:
        for db in opened.values():
            await db.close()


def _check_target(target: SqliteSide | PgSide, source_id: str, where: str) -> bool:
    """Whether `target` holds this very move, interrupted or done (resume or verify);
    BadInput when it holds anything else."""
    sources, _ = target.recorded()
    if sources and sources != {source_id}:
        raise BadInput(f"{where} holds another move (from {', '.join(sorted(sources))})")
    if sources:
        return True
    full = target.nonempty()
    if full:
        shown = ", ".join(full[:3]) + (f" and {len(full) - 3} more" if len(full) > 3 else "")
        raise BadInput(f"{where} is not empty ({shown} hold rows): move into an empty one")
    return False


async def move_to_postgres(
    home_root: Path,
    url: str,
    layout: HomeLayout,
    *,
    on_progress: OnProgress | None = None,
) -> MoveReport:
    """Copy the SQLite home at `home_root` into the PostgreSQL database `url` and verify."""
    from habakkuk.engine.home import Home

    lite = SqliteSide(home_root, layout.names)
    if not lite.databases():
        raise BadInput(f"{home_root}: no SQLite databases to move")
    source_id = f"sqlite:{home_root.resolve()}"
    pg = await asyncio.to_thread(PgSide, url, layout.names)
    try:
        known = await asyncio.to_thread(_check_target, pg, source_id, redact(url))
        _, already = pg.recorded() if known else (set(), False)
        lite.close()  # the stores open the files themselves now
        await prepare(SqliteStorage(Home(home_root)), layout)
        await prepare(PostgresStorage(url), layout)
        return await _in_thread(
            lambda stop: _copy_and_verify(
                lite, pg, source_id, True, known, already, _stoppable(on_progress, stop)
            )
        )
    finally:
        lite.close()
        pg.close()


async def move_to_sqlite(
    url: str,
    path: Path,
    layout: HomeLayout,
    *,
    on_progress: OnProgress | None = None,
) -> MoveReport:
    """Copy the PostgreSQL home at `url` into a new SQLite home folder `path` and verify."""
    from habakkuk.engine.home import Home

    pg = await asyncio.to_thread(PgSide, url, layout.names)
    lite = SqliteSide(path, layout.names)
    try:
        if not pg.databases():
            raise BadInput(f"{redact(url)}: no Habakkuk schemas to move")
        source_id = f"postgres:{redact(url)}"
        known = _check_target(lite, source_id, str(path))
        _, already = lite.recorded() if known else (set(), False)
        lite.close()
        home = Home(path)
        home.prepare()
        await prepare(SqliteStorage(home), layout)
        await prepare(PostgresStorage(url), layout)
        report = await _in_thread(
            lambda stop: _copy_and_verify(
                pg, lite, source_id, False, known, already, _stoppable(on_progress, stop)
            )
        )
        if report.ok:
            lite.forget_progress()
        return report
    finally:
        lite.close()
        pg.close()


class MoveStopped(Exception):
    """The copy stopped between two batches because its caller was cancelled."""


def _stoppable(on_progress: OnProgress | None, stop: threading.Event) -> OnProgress:
    """`on_progress`, raising MoveStopped once `stop` is set (after each batch)."""

    def report(progress: Progress) -> None:
        if stop.is_set():
            raise MoveStopped
        if on_progress is not None:
            on_progress(progress)

    return report


async def _in_thread(work: Callable[[threading.Event], T]) -> T:
    """`work(stop)` on a thread. Cancelled (Ctrl+C), it sets `stop` and waits for the
    thread to stop at its next batch (what it committed is kept), so the connections
    are closed only once nothing uses them."""
    stop = threading.Event()
    task = asyncio.ensure_future(asyncio.to_thread(work, stop))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        stop.set()
        with contextlib.suppress(MoveStopped, Exception):
            await task
        raise


def _copy_and_verify(
    source: SqliteSide | PgSide,
    target: SqliteSide | PgSide,
    source_id: str,
    to_postgres: bool,
    resumed: bool,
    already: bool,
    on_progress: OnProgress | None,
) -> MoveReport:
    lite, pg = (source, target) if to_postgres else (target, source)
    assert isinstance(lite, SqliteSide) and isinstance(pg, PgSide)
    tables = plan_tables(lite, pg, to_postgres=to_postgres)
    blobs = lite.root / "blobs"
    shared = pg.has_table(*SHARED_BLOBS)
    if not already:
        copy_tables(source, target, tables, source_id=source_id, on_progress=on_progress)
        if shared and to_postgres:
            share_blob_files(blobs, pg)
    checks = verify_tables(source, target, tables)
    if shared:
        if not to_postgres:
            restore_blob_files(pg, blobs)
        checks.append(check_blobs(blobs, pg, to_postgres=to_postgres))
    return MoveReport(
        checks, resumed=resumed and not already, already_done=already, blobs_shared=shared
    )


# -- blobs ----------------------------------------------------------------------------------


def blob_files(root: Path) -> dict[str, tuple[str, Path]]:
    """The blob files under `root` (`ab/<sha256><suffix>`) by file name, the key of
    PostgreSQL's shared rows (engine/blobs.py): name -> (digest, path)."""
    found: dict[str, tuple[str, Path]] = {}
    if not root.is_dir():
        return found
    for path in sorted(root.glob("??/*")):
        match = _BLOB_FILE.fullmatch(path.name)
        if match and path.is_file() and path.parent.name == match.group(1)[:2]:
            found[path.name] = (match.group(1), path)
    return found


def _sound(path: Path, digest: str) -> bytes | None:
    """The file's bytes when they are what its name says, else None (a torn file)."""
    data = path.read_bytes()
    return data if hashlib.sha256(data).hexdigest() == digest else None


def share_blob_files(root: Path, pg: PgSide) -> None:
    """Put each sound blob file under `root` into PostgreSQL's shared blobs (a row per
    content, kept when there: a resumed move writes each once)."""
    statement = (
        "INSERT INTO control.blobs(digest, data, size, created_at) VALUES (%s, %s, %s, %s)"
        " ON CONFLICT (digest) DO NOTHING"
    )
    pending = 0
    for name, (digest, path) in blob_files(root).items():
        data = _sound(path, digest)
        if data is None:
            continue
        if pending == 0:
            pg.conn.execute("BEGIN")
        pg.conn.execute(statement, (name, data, len(data), path.stat().st_mtime))
        pending += len(data) + 1
        if pending > 32 << 20:
            pg.conn.execute("COMMIT")
            pending = 0
    if pending:
        pg.conn.execute("COMMIT")


def restore_blob_files(pg: PgSide, root: Path) -> None:
    """Write each shared blob as a file under `root` by its name (the row's key, what
    the home's rows refer to), 0600 in 0700 folders."""
    with pg.conn.transaction(), pg.conn.cursor(name="habakkuk_blobs") as cursor:
        cursor.itersize = 16
        cursor.execute("SELECT digest, data FROM control.blobs")
        for name, data in cursor:
            if not _BLOB_FILE.fullmatch(str(name)):
                continue  # not a blob's name: never a path outside root
            path = root / str(name)[:2] / str(name)
            if path.exists():
                continue
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(bytes(data))


def check_blobs(root: Path, pg: PgSide, *, to_postgres: bool) -> TableCheck:
    """The blob files under `root` against PostgreSQL's shared rows: (digest, size)
    of each sound file's content beside each row's (on the way there, the rows of
    the files; on the way back, every row)."""
    files: list[tuple[Any, ...]] = []
    for name, (digest, path) in blob_files(root).items():
        data = _sound(path, digest)
        if data is not None:
            files.append((name, len(data)))
    if to_postgres:
        query = "SELECT digest, size FROM control.blobs WHERE digest = ANY(%s)"
        rows = pg.conn.execute(query, ([d for d, _ in files],)).fetchall()
    else:
        rows = pg.conn.execute("SELECT digest, size FROM control.blobs").fetchall()
    shared = [tuple(row) for row in rows]
    source, target = (files, shared) if to_postgres else (shared, files)
    source_rows, source_hash = fingerprint(iter([source]))
    target_rows, target_hash = fingerprint(iter([target]))
    label = "blobs/ -> control.blobs" if to_postgres else "control.blobs -> blobs/"
    return TableCheck(label, source_rows, target_rows, source_hash, target_hash)


# -- status ---------------------------------------------------------------------------------

# The tables whose rows `habakkuk storage status` counts, per database (when present).
MAIN_TABLES: dict[str, tuple[str, ...]] = {
    "control": ("jobs", "schedules", "board_cards", "channel_bindings"),
    "state": ("todos", "session_settings"),
    "transcripts": ("sessions", "messages"),
    "usage": ("calls",),
    "web": ("conversations", "events"),
    "nodes": ("nodes",),  # the paired device nodes (protocols/nodes/store.py)
}


@dataclass(frozen=True)
class DatabaseStatus:
    """One of the home's databases: its schema version (None: not created), its size
    on disk (or on the server) and the rows of its main tables."""

    name: str
    version: int | None
    size_bytes: int
    rows: list[tuple[str, int]]


@dataclass(frozen=True)
class StorageStatus:
    """Where the home's databases are and in what state."""

    backend: Literal["sqlite", "postgres"]
    where: str
    server_version: str
    databases: list[DatabaseStatus]


def sqlite_status(root: Path, names: Sequence[str]) -> StorageStatus:
    """The status of the SQLite files in `root` (read only: nothing is created)."""
    databases: list[DatabaseStatus] = []
    for name in names:
        path = root / f"{name}.db"
        if not path.is_file():
            databases.append(DatabaseStatus(name, None, 0, []))
            continue
        size = sum(
            p.stat().st_size for p in (path, path.with_name(path.name + "-wal")) if p.is_file()
        )
        conn = sqlite3.connect(path.as_uri() + "?mode=ro", uri=True)
        try:
            present = {
                str(r[0])
                for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            }
            version = None
            if "schema_migrations" in present:
                row = conn.execute("SELECT coalesce(max(version), 0) FROM schema_migrations")
                version = int(row.fetchone()[0])
            rows = [
                (table, int(conn.execute(f"SELECT count(*) FROM {_quote(table)}").fetchone()[0]))
                for table in MAIN_TABLES.get(name, ())
                if table in present
            ]
        except sqlite3.DatabaseError as exc:
            raise MoveError(f"{path}: cannot read: {exc}") from None
        finally:
            conn.close()
        databases.append(DatabaseStatus(name, version, size, rows))
    return StorageStatus("sqlite", f"SQLite files in {root}", sqlite3.sqlite_version, databases)


def postgres_status(url: str, names: Sequence[str]) -> StorageStatus:
    """The status of the home's schemas on the PostgreSQL database `url`."""
    from psycopg import sql

    side = PgSide(url, names)
    try:
        conn = side.conn
        row = conn.execute("SHOW server_version").fetchone()
        server = str(row[0]).split()[0] if row else "?"
        present = set(side.databases())
        databases: list[DatabaseStatus] = []
        for name in names:
            if name not in present:
                databases.append(DatabaseStatus(name, None, 0, []))
                continue
            tables = side.table_names(name)
            version = None
            if "schema_migrations" in tables:
                got = conn.execute(
                    sql.SQL("SELECT coalesce(max(version), 0) FROM {}").format(
                        sql.Identifier(name, "schema_migrations")
                    )
                ).fetchone()
                version = int(got[0]) if got else 0
            size_row = conn.execute(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
                " JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE n.nspname = %s AND c.relkind IN ('r', 'm')",
                (name,),
            ).fetchone()
            rows = [
                (table, side.count(TablePlan(name, table, ())))
                for table in MAIN_TABLES.get(name, ())
                if table in tables
            ]
            databases.append(
                DatabaseStatus(name, version, int(size_row[0]) if size_row else 0, rows)
            )
    finally:
        side.close()
    return StorageStatus("postgres", f"PostgreSQL at {redact(url)}", server, databases)
