"""The doctor's checks of a home on PostgreSQL: the server, each schema's version, the
clocks of this machine and of every node (services/doctor.py runs them).

Read-only: the checks connect as any node would, but migrate nothing and register
nothing, so `habakkuk doctor` can be run against a server in use.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Literal, NamedTuple

from habakkuk.engine.db_url import redact
from habakkuk.engine.errors import first_line
from habakkuk.engine.nodes import MAX_SKEW_SECONDS, STALE_SECONDS


class Check(NamedTuple):
    """One finding, as services/doctor.py's Check takes it (status, name, detail)."""

    status: Literal["ok", "WARN", "FAIL"]
    name: str
    detail: str


_SCHEMAS = (
    "SELECT n.nspname AS name FROM pg_namespace n JOIN pg_class c ON c.relnamespace = n.oid"
    " WHERE c.relname = 'schema_migrations' AND c.relkind = 'r' ORDER BY n.nspname"
)


def known_schemas() -> dict[str, int]:
    """The engine's schemas: name -> the newest PostgreSQL version this Habakkuk knows (a
    schema of another layer, web, is shown with its version alone)."""
    from habakkuk.engine.jobs import SCHEMA as CONTROL
    from habakkuk.engine.llm.usage import SCHEMA as USAGE
    from habakkuk.engine.sessions import SCHEMA as TRANSCRIPTS
    from habakkuk.engine.state import SCHEMA as STATE

    return {
        schema.name: max((m.version for m in schema.postgres), default=0)
        for schema in (CONTROL, STATE, TRANSCRIPTS, USAGE)
    }


def postgres_checks(url: str, *, clock: Callable[[], float] = time.time) -> list[Check]:
    """The server (reachable, version), each schema's version, this machine's clock
    against the server's, and each node's clock as it last wrote it."""
    from habakkuk.engine import pg

    where = redact(url)
    try:
        conn = pg.connect(url, "public")
    except pg.PgStoreError as exc:
        return [Check("FAIL", "postgres", str(exc))]
    try:
        major = conn.info.server_version // 10000
        version = str(_one(conn, "SHOW server_version"))
        checks = [
            Check("ok", "postgres", f"PostgreSQL {version} at {where}")
            if major >= pg.OLDEST_SERVER
            else Check(
                "FAIL",
                "postgres",
                f"PostgreSQL {version} at {where} is older than {pg.OLDEST_SERVER};"
                f" Habakkuk needs {pg.OLDEST_SERVER} or newer",
            )
        ]
        checks += _schema_checks(conn)
        checks += _clock_checks(conn, clock)
    except Exception as exc:  # a server that fails mid-check: said, never a traceback
        checks = [Check("FAIL", "postgres", f"{where}: {first_line(exc)}")]
    finally:
        conn.close()
    return checks


def _schema_checks(conn: Any) -> list[Check]:
    from psycopg import sql as pgsql

    known = known_schemas()
    found: dict[str, int] = {}
    for row in conn.execute(_SCHEMAS).fetchall():
        name = str(row[0])
        statement = pgsql.SQL("SELECT coalesce(max(version), 0) FROM {}.schema_migrations")
        found[name] = int(_one(conn, statement.format(pgsql.Identifier(name))))
    checks = []
    for name in sorted(set(known) | set(found)):
        have, newest = found.get(name), known.get(name)
        label = f"schema {name}"
        if have is None:
            checks.append(Check("WARN", label, "not created yet (the first start creates it)"))
        elif newest is None:
            checks.append(Check("ok", label, f"version {have}"))
        elif have > newest:
            checks.append(
                Check(
                    "FAIL",
                    label,
                    f"version {have}, newer than this Habakkuk knows ({newest}); upgrade Habakkuk",
                )
            )
        elif have < newest:
            checks.append(
                Check("WARN", label, f"version {have} of {newest} (the next start migrates it)")
            )
        else:
            checks.append(Check("ok", label, f"version {have} (up to date)"))
    return checks


def _clock_checks(conn: Any, clock: Callable[[], float]) -> list[Check]:
    from habakkuk.engine.hostname import this_host
    from habakkuk.engine.nodes import ClockReading, read_clock, skew_message

    reading = read_clock(conn, "postgres", clock)
    server = reading.server
    host = this_host()
    checks = [
        Check("FAIL", "clock", skew_message(reading, host))
        if reading.too_far()
        else Check(
            "ok",
            "clock",
            f"{host} is {reading.skew:+.2f} s off the database server"
            f" (at most {MAX_SKEW_SECONDS:.0f} s)",
        )
    ]
    if not _one(conn, "SELECT to_regclass('control.nodes') IS NOT NULL"):
        return checks
    rows = conn.execute(
        "SELECT host, pid, beat, server_at FROM control.nodes ORDER BY started_at, id"
    ).fetchall()
    live = [row for row in rows if server - float(row[3]) <= STALE_SECONDS]
    stale = len(rows) - len(live)
    summary = ", ".join(
        f"{row[0]} (pid {row[1]}, clock {float(row[2]) - float(row[3]):+.1f} s)" for row in live
    )
    detail = f"{len(live)} live: {summary}" if live else "none live"
    checks.append(Check("ok", "nodes", detail + (f"; {stale} stale" if stale else "")))
    for row in live:
        skew = float(row[2]) - float(row[3])
        if abs(skew) > MAX_SKEW_SECONDS:
            reading = ClockReading(float(row[2]), float(row[3]), 0.0)
            checks.append(Check("FAIL", f"node {row[0]}", skew_message(reading, str(row[0]))))
    return checks


def _one(conn: Any, statement: Any) -> Any:
    """The first column of the one row `statement` answers."""
    row = conn.execute(statement).fetchone()
    return row[0] if row is not None else None
