"""`habakkuk storage status` on both backends, and `storage migrate`'s refusals: one
line and exit 2, never a traceback, never a password."""

from __future__ import annotations

import asyncio
import io
import re

import pytest

from habakkuk.cli import main
from habakkuk.engine.exit_codes import EXIT_OK, EXIT_USAGE
from habakkuk.engine.home import Home
from habakkuk.engine.storage import URL_ENV, PostgresStorage
from habakkuk.server.webstore import SCHEMA as WEB
from habakkuk.services.storage_move import home_layout
from tests.conftest import WriteConfig, mock_config


def _one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    return lines[0]


def test_status_on_sqlite_shows_the_files_versions_sizes_and_rows(
    home: Home, write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(mock_config("- text: hi"))
    assert main(["run", "hello"]) == EXIT_OK
    capsys.readouterr()

    assert main(["storage", "status"]) == EXIT_OK
    out = capsys.readouterr().out
    assert f"backend: sqlite (SQLite files in {home.root})" in out
    assert re.search(r"^version: SQLite \d+\.\d+\.\d+$", out, re.M), out
    version = max(m.version for m in home_layout().schemas[0].sqlite)
    assert re.search(rf"^control: schema version {version}, [\d.]+ KB; jobs 1", out, re.M), out
    assert re.search(r"^transcripts: schema version \d+, .*sessions 1, messages 2$", out, re.M)
    assert "web: not created" in out  # status creates nothing


def test_status_on_postgres_shows_the_server_and_each_schema(
    home: Home,
    write_config: WriteConfig,
    pg_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    write_config(mock_config())
    layout = home_layout(WEB)

    async def make_schemas() -> None:
        storage = PostgresStorage(pg_url)
        for schema in layout.schemas[:2]:
            db = await storage.open(schema)
            await db.close()

    asyncio.run(make_schemas())
    monkeypatch.setenv(URL_ENV, pg_url)

    assert main(["storage", "status"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "backend: postgres (PostgreSQL at postgresql://postgres:***@127.0.0.1" in out
    assert ":postgres@" not in out  # the password is never shown
    assert re.search(r"^version: PostgreSQL 1\d", out, re.M), out
    control = max((m.version for m in layout.schemas[0].postgres), default=0)
    assert re.search(rf"^control: schema version {control}, [\d.]+ [KM]?B", out, re.M), out
    assert "usage: not created" in out


def test_migrate_to_something_that_is_not_a_postgresql_url_is_one_line(
    home: Home, write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(mock_config())
    assert main(["storage", "migrate", "mysql://me@db/x"]) == EXIT_USAGE
    line = _one_error_line(capsys)
    assert line == (
        "habakkuk: storage migrate: 'mysql://me@db/x' is not a PostgreSQL URL (postgresql://...)"
    )


def test_migrate_to_an_unreachable_server_is_one_line_without_the_password(
    home: Home, write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(mock_config("- text: hi"))
    assert main(["run", "hello"]) == EXIT_OK
    capsys.readouterr()
    # Port 1 on loopback: nothing listens there, the connection is refused at once.
    assert main(["storage", "migrate", "postgresql://me:s3cret@127.0.0.1:1/home"]) == EXIT_USAGE
    line = _one_error_line(capsys)
    assert line.startswith("habakkuk: postgresql://me:***@127.0.0.1:1/home: cannot connect"), line
    assert "s3cret" not in line


def test_migrate_into_a_database_that_holds_rows_is_refused(
    home: Home,
    write_config: WriteConfig,
    pg_url: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import psycopg

    write_config(mock_config("- text: hi"))
    assert main(["run", "hello"]) == EXIT_OK
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA usage; CREATE TABLE usage.calls (id BIGINT)")
        conn.execute("INSERT INTO usage.calls VALUES (1)")
    capsys.readouterr()

    assert main(["storage", "migrate", pg_url]) == EXIT_USAGE
    line = _one_error_line(capsys)
    assert "is not empty (usage.calls hold rows): move into an empty one" in line, line


def test_migrate_back_from_a_home_on_sqlite_asks_for_the_database(
    home: Home,
    write_config: WriteConfig,
    tmp_path: object,
    capsys: pytest.CaptureFixture[str],
) -> None:
    write_config(mock_config())
    assert main(["storage", "migrate", "--to", "sqlite", str(home.root / "x")]) == EXIT_USAGE
    line = _one_error_line(capsys)
    assert "this home is on SQLite: name its PostgreSQL database with --from URL" in line


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_a_bar_redrawn_in_place_on_a_terminal_and_a_line_per_table_otherwise() -> None:
    from habakkuk.cli.storage import ProgressPrinter
    from habakkuk.services.storage_move import Progress, TablePlan

    jobs, empty = TablePlan("control", "jobs", ("seq",)), TablePlan("web", "events", ("seq",))
    steps = [
        Progress(jobs, 0, 4),
        Progress(jobs, 2, 4),
        Progress(jobs, 4, 4),
        Progress(empty, 0, 0),
    ]

    terminal = _Terminal()
    bar = ProgressPrinter(terminal)
    for step in steps:
        bar(step)
    bar.end()
    drawn = terminal.getvalue()
    assert drawn.count("\r") == 4 and drawn.count("\n") == 2  # a line per table, once done
    assert "control.jobs" in drawn and "[" + "#" * 15 + "." * 15 + "] 2/4" in drawn
    assert "[" + "#" * 30 + "] 4/4\n" in drawn

    plain = io.StringIO()
    lines = ProgressPrinter(plain)
    for step in steps:
        lines(step)
    assert plain.getvalue() == "control.jobs: 4 rows copied\nweb.events: 0 rows copied\n"
