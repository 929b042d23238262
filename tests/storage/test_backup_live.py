"""Backups of a home in use: taken while turns run (a real runtime, the mock model),
restored into a fresh home and opened there; refused restores while a real
`habakkuk --serve` holds the home; the PostgreSQL home's database through pg_dump."""

from __future__ import annotations

import asyncio
import subprocess
import tarfile
import threading
from pathlib import Path

import psycopg
import pytest

from habakkuk.cli import main
from habakkuk.engine.config import parse_config
from habakkuk.engine.exit_codes import EXIT_FAILED, EXIT_OK
from habakkuk.engine.home import Home
from habakkuk.knowledge.memory_types import Provenance
from habakkuk.runtime import Runtime
from habakkuk.services.backup import take_backup
from habakkuk.services.backup_layout import Options
from habakkuk.services.restore import holders
from habakkuk.work.board_types import NewCard
from habakkuk.work.schedule_types import NewSchedule
from tests.conftest import OpenRuntime, mock_config
from tests.helpers import BOUND, PROCESS_BOUND, eventually
from tests.pg_fixtures import create_database, drop_database
from tests.processes import StartServe, stop, until_serving

CONFIG = mock_config("- text: done")


async def _turn_done(runtime: Runtime, turn: str) -> bool:
    job = await runtime.queue.get(turn)
    return job is not None and job.status == "done"


async def _until_done(runtime: Runtime, turn: str) -> None:
    await eventually(lambda: _turn_done(runtime, turn), what=f"turn {turn}")


async def test_a_backup_taken_while_turns_run_restores_every_session_card_schedule_and_note(
    home: Home, runtime_factory: OpenRuntime, tmp_path: Path
) -> None:
    runtime = await runtime_factory(mock_config("- text: done\n" * 200))
    runtime.start_workers(channels=False)
    earlier: list[str] = []
    for i in range(5):
        session = await runtime.sessions.new_session()
        turn = await runtime.turns.submit(session.id, f"hello {i}")
        await _until_done(runtime, turn)
        earlier.append(session.id)
    card = await runtime.board.create(NewCard("Check the ledger totals"), by="user")
    schedule = await runtime.schedules.add(
        NewSchedule(agent="main", name="digest", when="@daily", prompt="summarise"), by="owner"
    )
    saved = await runtime.memory.save(
        "main", "Tea", "The user likes green tea.", provenance=Provenance(by="user")
    )
    # Turns keep running through the whole backup: between any two of its database
    # snapshots at least one more turn has finished (each snapshot waits for one).
    finished = 0
    turned = threading.Condition()

    async def keep_turning() -> None:
        nonlocal finished
        while True:
            session = await runtime.sessions.new_session()
            turn = await runtime.turns.submit(session.id, "more work")
            await _until_done(runtime, turn)
            with turned:
                finished += 1
                turned.notify_all()

    def after_another_turn(name: str) -> None:
        if not name.endswith(".db"):
            return
        with turned:
            seen = finished
            assert turned.wait_for(lambda: finished > seen, timeout=BOUND), "no turn finished"

    turning = asyncio.create_task(keep_turning())
    archive = tmp_path / "live.tar.gz"
    try:
        report = await asyncio.to_thread(
            take_backup, home.root, archive, Options(), on_file=after_another_turn
        )
    finally:
        turning.cancel()
        await asyncio.gather(turning, return_exceptions=True)
    assert finished >= len(report.manifest.databases) >= 5

    target = Home(tmp_path / "restored")
    await asyncio.to_thread(restore_into, archive, target.root)
    config = parse_config(CONFIG, target.config_path, target)
    restored = await Runtime.open(target, config)
    try:
        listed = {s.id for s in await restored.sessions.list_sessions(limit=1000)}
        assert set(earlier) <= listed
        for session_id in earlier:
            messages = await restored.transcripts.messages(session_id)
            assert len(messages) == 2
        assert (await restored.board.get(card.id)).title == "Check the ledger totals"
        assert [s.id for s in await restored.schedules.list_schedules()] == [schedule.id]
        note = await restored.memory.read("main", saved.note.slug)
        assert "green tea" in note.body
    finally:
        await restored.close()


def restore_into(archive: Path, root: Path) -> None:
    from habakkuk.services.restore import restore

    restore(archive, root)


async def test_restore_is_refused_while_a_serve_holds_the_home(
    tmp_path: Path,
    serve_process: StartServe,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = tmp_path / "home"
    home = Home(root)
    home.prepare()
    home.config_path.write_text(CONFIG, encoding="utf-8")
    monkeypatch.setenv("HABAKKUK_HOME", str(root))
    assert await asyncio.to_thread(main, ["run", "hello"]) == EXIT_OK
    archive = tmp_path / "b.tar.gz"
    assert await asyncio.to_thread(main, ["backup", "-o", str(archive)]) == EXIT_OK
    process = await serve_process(root)
    await until_serving(process)
    await eventually(lambda: holders(root), what="the serve to register", timeout=PROCESS_BOUND)
    capsys.readouterr()

    assert await asyncio.to_thread(main, ["restore", "--force", str(archive)]) == EXIT_FAILED

    captured = capsys.readouterr()
    [line] = captured.err.strip().splitlines()
    assert f"is in use (pid {process.pid} on " in line and "stop habakkuk serve" in line
    await stop(process)
    assert holders(root) == []
    assert await asyncio.to_thread(main, ["restore", "--force", str(archive)]) == EXIT_OK


async def test_a_postgresql_home_is_backed_up_with_pg_dump(
    tmp_path: Path,
    home: Home,
    runtime_factory: OpenRuntime,
    pg_server: str,
    pg_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    runtime = await runtime_factory(CONFIG + f"storage:\n  url: {pg_url}\n")
    runtime.start_workers(channels=False)
    session = await runtime.sessions.new_session()
    turn = await runtime.turns.submit(session.id, "hello")
    await eventually(lambda: _turn_done(runtime, turn), what="the turn")
    archive = tmp_path / "pg.tar.gz"

    assert await asyncio.to_thread(main, ["backup", "-o", str(archive)]) == EXIT_OK

    out = capsys.readouterr().out
    assert "is in the archive as postgres.dump" in out and "postgres:postgres@" not in out
    with tarfile.open(archive, "r:gz") as tar:
        names = set(tar.getnames())
        assert "postgres.dump" in names and "config.yaml" in names
        assert not any(n in names for n in ("control.db", "transcripts.db"))
    # Restore writes the dump into the home and says how to load it; loaded, it holds
    # the session.
    target = tmp_path / "restored"
    monkeypatch.setenv("HABAKKUK_HOME", str(target))
    assert await asyncio.to_thread(main, ["restore", str(archive)]) == EXIT_OK
    assert "pg_restore --no-owner -d URL" in capsys.readouterr().out
    fresh = create_database(pg_server)
    try:
        loaded = subprocess.run(
            ["pg_restore", "--no-owner", "-d", fresh, str(target / "postgres.dump")],
            capture_output=True,
            text=True,
            check=False,
        )
        assert loaded.returncode == 0, loaded.stderr
        with psycopg.connect(fresh) as conn:
            row = conn.execute("SELECT id FROM transcripts.sessions").fetchall()
        assert [r[0] for r in row] == [session.id]
    finally:
        drop_database(pg_server, fresh)


async def test_without_pg_dump_the_backup_says_to_run_it(
    tmp_path: Path,
    home: Home,
    runtime_factory: OpenRuntime,
    pg_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    runtime = await runtime_factory(CONFIG + f"storage:\n  url: {pg_url}\n")
    await runtime.sessions.new_session()
    monkeypatch.setenv("PATH", str(tmp_path / "no-programs"))
    archive = tmp_path / "pg.tar.gz"

    assert await asyncio.to_thread(main, ["backup", "-o", str(archive)]) == EXIT_OK

    out = capsys.readouterr().out
    assert "is not in this archive (pg_dump is not installed): back it up with pg_dump" in out
    with tarfile.open(archive, "r:gz") as tar:
        assert "postgres.dump" not in tar.getnames()
