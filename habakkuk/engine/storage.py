"""Where the home's databases live, chosen once at start: SQLite files or PostgreSQL.

Without a setting, every database is a file of the home (`control.db`, ...), as it has
always been. `storage: {url: postgresql://...}` in config.yaml, or
`HABAKKUK_DATABASE_URL`, puts them all in one PostgreSQL database instead (a schema
each), which several `habakkuk --serve` on several machines may share. The choice is
made here once and never falls back: a configured server that cannot be reached, or
a missing driver, is one line and exit 2 (ConfigError), never a quiet SQLite home.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Protocol

from .db_url import redact
from .errors import ConfigError
from .sql import Database, Dialect, Schema

if TYPE_CHECKING:
    from .config import Config
    from .home import Home

URL_ENV = "HABAKKUK_DATABASE_URL"
INSTALL_HINT = "pip install 'habakkuk[postgres]'"
_SCHEMES = ("postgresql://", "postgres://")


class Storage(Protocol):
    """Opens the home's databases on one engine."""

    @property
    def dialect(self) -> Dialect:
        """Which engine: `sqlite` or `postgres`."""
        ...

    def describe(self) -> str:
        """Where, for people: the home's folder, or the server's URL without password."""
        ...

    async def open(
        self, schema: Schema, *, attach: Sequence[str] = (), inline: bool = False
    ) -> Database:
        """Open (and migrate) `schema`; `attach`: the other databases its statements
        name (`control.jobs`); `inline`: it carries the job queue's short writes."""
        ...

    def open_sync(self, schema: Schema, *, attach: Sequence[str] = ()) -> Database:
        """`open` for synchronous callers (CLI commands that print and exit)."""
        ...


@dataclass(frozen=True)
class SqliteStorage:
    """Each database a file of the home: `<home>/<name>.db`."""

    home: Home

    @property
    def dialect(self) -> Dialect:
        return "sqlite"

    def describe(self) -> str:
        return f"SQLite files in {self.home.root}"

    async def open(
        self, schema: Schema, *, attach: Sequence[str] = (), inline: bool = False
    ) -> Database:
        from .store import SqliteDatabase

        attached = {name: self.home.db_path(name) for name in attach}
        return await SqliteDatabase.open(
            self.home.db_path(schema.name), schema.sqlite, attach=attached or None, inline=inline
        )

    def open_sync(self, schema: Schema, *, attach: Sequence[str] = ()) -> Database:
        from .store import SqliteDatabase

        attached = {name: self.home.db_path(name) for name in attach}
        return SqliteDatabase.open_sync(
            self.home.db_path(schema.name), schema.sqlite, attach=attached or None
        )


@dataclass(frozen=True)
class PostgresStorage:
    """Every database a schema of one PostgreSQL database."""

    url: str

    @property
    def dialect(self) -> Dialect:
        return "postgres"

    def describe(self) -> str:
        return f"PostgreSQL at {redact(self.url)}"

    async def open(
        self, schema: Schema, *, attach: Sequence[str] = (), inline: bool = False
    ) -> Database:
        from .pg import PgDatabase

        # The queue's database serves the pool's trips and every worker's writes.
        return await PgDatabase.open(self.url, schema, attached=attach, threads=4 if inline else 2)

    def open_sync(self, schema: Schema, *, attach: Sequence[str] = ()) -> Database:
        from .pg import PgDatabase

        return PgDatabase.open_sync(self.url, schema, attached=attach, threads=1)


def storage_url(config: Config) -> str | None:
    """The configured PostgreSQL URL (HABAKKUK_DATABASE_URL first), or None for SQLite;
    ConfigError naming the setting when it is not a PostgreSQL URL."""
    explicit = os.environ.get(URL_ENV, "").strip()
    if explicit:
        url, where = explicit, URL_ENV
    elif config.storage.url:
        url, where = str(config.storage.url).strip(), f"{config.path}: storage.url"
    else:
        return None
    if not url.startswith(_SCHEMES):
        raise ConfigError(
            f"{where}: {redact(url)!r} is not a PostgreSQL URL"
            " (postgresql://USER:PASSWORD@HOST:PORT/DATABASE)"
        )
    return url


def open_storage(home: Home, config: Config) -> Storage:
    """The storage `config` names, checked now: for PostgreSQL, the driver is installed
    and the server answers and is new enough; ConfigError (exit 2) otherwise."""
    url = storage_url(config)
    if url is None:
        return SqliteStorage(home)
    return postgres_storage(url)


def pg_driver(url: str) -> ModuleType:
    """habakkuk.engine.pg, imported: ConfigError (one line, the install command) when
    psycopg is missing or cannot load (a missing libpq)."""
    try:
        from . import pg
    except ImportError:
        raise ConfigError(
            f"storage is PostgreSQL ({redact(url)}) but its driver is not installed: {INSTALL_HINT}"
        ) from None
    return pg


def postgres_storage(url: str) -> PostgresStorage:
    """`PostgresStorage(url)` once the driver imports and the server answers."""
    pg = pg_driver(url)
    try:
        pg.server_version(url)
    except pg.PgStoreError as exc:
        raise ConfigError(str(exc)) from None
    return PostgresStorage(url)
