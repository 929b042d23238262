"""`habakkuk doctor` on a home whose databases are on PostgreSQL: the server, each
schema's version, this machine's clock and every node's."""

from __future__ import annotations

import time

import pytest

from habakkuk.cli import main
from habakkuk.engine.config import load_config
from habakkuk.engine.databases import open_databases
from habakkuk.engine.home import Home
from habakkuk.engine.nodes import NodeRegistry
from habakkuk.services.doctor_pg import postgres_checks
from tests.conftest import WriteConfig, mock_config


def doctor_lines(capsys: pytest.CaptureFixture[str], *names: str) -> tuple[int, list[str]]:
    code = main(["doctor"])
    out = capsys.readouterr().out.splitlines()
    return code, [line for line in out if any(f"  {name}" in line for name in names)]


def test_doctor_shows_the_server_and_schemas_not_created_yet(
    home: Home, write_config: WriteConfig, pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(mock_config(extra=f"storage: {{url: '{pg_url}'}}\n"))
    code, lines = doctor_lines(capsys, "storage", "postgres", "schema", "clock", "nodes")
    assert lines[0] == "ok    storage: PostgreSQL"
    assert lines[1].startswith("ok    postgres: PostgreSQL 1") and "***@" in lines[1]
    assert "postgres:postgres@" not in "\n".join(lines)  # never the password
    assert "WARN  schema control: not created yet (the first start creates it)" in lines
    assert any(line.startswith("ok    clock: ") for line in lines)
    assert not any("  nodes:" in line for line in lines)  # no node has registered
    assert not (home.root / "control.db").exists()  # the doctor looked at PostgreSQL only
    assert code == 0


async def test_doctor_shows_each_node_and_fails_one_whose_clock_is_off(
    home: Home, write_config: WriteConfig, pg_url: str
) -> None:
    write_config(mock_config(extra=f"storage: {{url: '{pg_url}'}}\n"))
    dbs = await open_databases(home, load_config(home))
    try:
        alpha = NodeRegistry(dbs.control, host="alpha", pid=11)
        beta = NodeRegistry(dbs.control, host="beta", pid=22)
        await alpha.join()
        await beta.join()
        # beta's clock has run 9 s ahead since it joined: its beats say so.
        await dbs.control.write(
            lambda conn: conn.execute("UPDATE nodes SET beat = beat + 9 WHERE host = 'beta'")
        )
    finally:
        for db in (dbs.control, dbs.state.db, dbs.transcripts.db, dbs.usage.db):
            await db.close()
    checks = {check.name: check for check in postgres_checks(pg_url)}
    assert checks["schema control"].status == "ok"
    assert "up to date" in checks["schema control"].detail
    assert checks["nodes"].status == "ok"
    assert checks["nodes"].detail.startswith("2 live: alpha (pid 11, clock ")
    assert checks["nodes"].detail.endswith("beta (pid 22, clock +9.0 s)")
    assert checks["node beta"].status == "FAIL"
    assert "the clock of beta is 9.0 s ahead of the database server's" in checks["node beta"].detail


def test_doctor_fails_this_machines_clock_when_it_is_off_the_servers(pg_url: str) -> None:
    checks = {c.name: c for c in postgres_checks(pg_url, clock=lambda: time.time() - 40)}
    assert checks["clock"].status == "FAIL"
    assert "40.0 s behind the database server's" in checks["clock"].detail


def test_doctor_fails_a_server_it_cannot_reach_in_one_line(pg_server: str) -> None:
    url = "postgresql://nobody:secret@127.0.0.1:1/none"
    [check] = postgres_checks(url)
    assert check.status == "FAIL" and check.name == "postgres"
    assert "cannot connect" in check.detail and "secret" not in check.detail
