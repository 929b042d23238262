"""A fresh PostgreSQL database per test, on the server the run was given.

The server is `HABAKKUK_TEST_DATABASE_URL` (default: the one .ci/run starts,
postgresql://postgres:postgres@127.0.0.1:5432/postgres). Each test gets a database of
its own, so tests never see each other's rows: created from template0 the first time, and
after a test emptied (its sessions ended, every schema dropped, `public` made anew as
template0 has it) and renamed, so the next test of the worker takes it under a name no one
has seen; CREATE DATABASE costs half a second to a second on a loaded machine, the
emptying a few hundredths. Whatever cannot be emptied so is dropped.
Without a server a PostgreSQL test is skipped, except under CI=true, where it fails:
CI must run both backends.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from habakkuk.engine.home import Home
from habakkuk.engine.storage import PostgresStorage, SqliteStorage, Storage

SERVER_ENV = "HABAKKUK_TEST_DATABASE_URL"
DEFAULT_SERVER = "postgresql://postgres:postgres@127.0.0.1:5432/postgres"


def server_url() -> str:
    """The test server's URL (its maintenance database)."""
    return os.environ.get(SERVER_ENV) or DEFAULT_SERVER


def database_url(server: str, name: str) -> str:
    """`server`'s URL with its database replaced by `name`."""
    parts = urlsplit(server)
    return urlunsplit(parts._replace(path=f"/{name}"))


@pytest.fixture(scope="session")
def pg_server() -> str:
    """The reachable test server's URL; skip (fail under CI=true) when there is none."""
    import psycopg

    url = server_url()
    try:
        psycopg.connect(url, connect_timeout=3).close()
    except psycopg.Error as exc:
        message = f"no PostgreSQL test server at {url}: {str(exc).strip().splitlines()[0]}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return url


def create_database(server: str) -> str:
    """A new empty database on `server`; its URL."""
    import psycopg

    name = f"hk_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
    return database_url(server, name)


def drop_database(server: str, url: str) -> None:
    """Drop the database of `url` (its sessions closed first)."""
    import psycopg

    name = urlsplit(url).path.lstrip("/")
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# The SQL that gives an emptied database template0's `public` (PostgreSQL 15 and later).
_PUBLIC = (
    "CREATE SCHEMA public AUTHORIZATION pg_database_owner",
    "GRANT USAGE ON SCHEMA public TO PUBLIC",
)


def _end_sessions(conn: Any, name: str) -> None:
    conn.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
        " WHERE datname = %s AND pid <> pg_backend_pid()",
        (name,),
    )


def empty_database(server: str, url: str) -> str | None:
    """Empty the database of `url` and rename it; its new name, or None when it could not
    be emptied (a session that would not end, a lock held past ten seconds)."""
    import psycopg

    name = urlsplit(url).path.lstrip("/")
    spare = f"hk_test_{uuid.uuid4().hex[:12]}"
    try:
        with psycopg.connect(server, autocommit=True) as conn:
            _end_sessions(conn, name)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("SET lock_timeout = '10s'")
            schemas = [
                str(row[0])
                for row in conn.execute(
                    "SELECT nspname FROM pg_namespace"
                    " WHERE nspname NOT LIKE 'pg\\_%' AND nspname <> 'information_schema'"
                ).fetchall()
            ]
            if schemas:
                conn.execute("DROP SCHEMA " + ", ".join(f'"{s}"' for s in schemas) + " CASCADE")
            for statement in _PUBLIC:
                conn.execute(statement)
        with psycopg.connect(server, autocommit=True) as conn:
            _end_sessions(conn, name)  # a renamed database has no session
            conn.execute(f'ALTER DATABASE "{name}" RENAME TO "{spare}"')
    except psycopg.Error:
        return None
    return spare


@pytest.fixture(scope="session")
def pg_spares(pg_server: str) -> Iterator[list[str]]:
    """This worker's emptied databases, waiting for the next test; dropped at the end."""
    spares: list[str] = []
    try:
        yield spares
    finally:
        for name in spares:
            drop_database(pg_server, database_url(pg_server, name))


@pytest.fixture
def pg_url(pg_server: str, pg_spares: list[str]) -> Iterator[str]:
    """The URL of a fresh, empty database of the test server, emptied or dropped after."""
    url = database_url(pg_server, pg_spares.pop()) if pg_spares else create_database(pg_server)
    try:
        yield url
    finally:
        spare = empty_database(pg_server, url)
        if spare is None:
            drop_database(pg_server, url)
        else:
            pg_spares.append(spare)


@pytest.fixture(params=["sqlite", "postgres"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Storage:
    """The home's storage on each engine in turn: one contract, both backends."""
    if request.param == "sqlite":
        home = Home(tmp_path / "home")
        home.prepare()
        return SqliteStorage(home)
    return PostgresStorage(request.getfixturevalue("pg_url"))
