"""A fresh PostgreSQL database per test, on the server the run was given.

The server is `HABAKKUK_TEST_DATABASE_URL` (default: the one .ci/run starts,
postgresql://postgres:postgres@127.0.0.1:5432/postgres). Each test gets a database of
its own, created from template0 and dropped after, so tests never see each other's rows.
Without a server a PostgreSQL test is skipped, except under CI=true, where it fails:
CI must run both backends.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
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


@pytest.fixture
def pg_url(pg_server: str) -> Iterator[str]:
    """The URL of a fresh, empty database of the test server, dropped after the test."""
    url = create_database(pg_server)
    try:
        yield url
    finally:
        drop_database(pg_server, url)


@pytest.fixture(params=["sqlite", "postgres"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Storage:
    """The home's storage on each engine in turn: one contract, both backends."""
    if request.param == "sqlite":
        home = Home(tmp_path / "home")
        home.prepare()
        return SqliteStorage(home)
    return PostgresStorage(request.getfixturevalue("pg_url"))
