"""`habakkuk sessions archive|unarchive|archived|rm`: exact output and exit codes."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Sequence

import pytest

from habakkuk.cli import main
from habakkuk.engine.home import Home
from habakkuk.engine.sessions import SearchHit, Session
from habakkuk.engine.sql import Row
from habakkuk.runtime import Runtime
from tests.cli.test_cli import SCRIPTED
from tests.conftest import WriteConfig


@pytest.fixture
def two_sessions(
    home: Home, write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> list[str]:
    """Two sessions with one exchange each (made by `habakkuk run`)."""
    write_config(SCRIPTED)
    ids = []
    for text in ("first tomatoes", "second basil"):
        assert main(["run", "--json", text]) == 0
        ids.append(json.loads(capsys.readouterr().out.strip().splitlines()[-1])["session"])
    return ids


def listed(capsys: pytest.CaptureFixture[str], *args: str) -> list[str]:
    assert main(["sessions", *args, "--json"]) == 0
    return [s["id"] for s in json.loads(capsys.readouterr().out)]


def test_archive_hides_a_session_and_unarchive_brings_it_back(
    two_sessions: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = two_sessions
    assert main(["sessions", "archive", first]) == 0
    assert capsys.readouterr().out == f"archived {first}\n"
    assert listed(capsys, "list") == [second]
    assert listed(capsys, "archived") == [first]
    assert main(["sessions", "unarchive", first]) == 0
    assert capsys.readouterr().out == f"unarchived {first}\n"
    assert sorted(listed(capsys, "list")) == sorted(two_sessions)
    assert listed(capsys, "archived") == []


def test_unknown_ids_get_one_line_each_and_exit_2(
    two_sessions: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    first, _ = two_sessions
    assert main(["sessions", "archive", "ses_nope", first, "ses_gone"]) == 2
    captured = capsys.readouterr()
    assert captured.out == f"archived {first}\n"
    errors = captured.err.strip().splitlines()
    assert len(errors) == 2
    assert "ses_nope" in errors[0] and "not found" in errors[0]
    assert "ses_gone" in errors[1]
    assert "Traceback" not in captured.err


def test_rm_with_yes_deletes_transcript_search_rows_and_state(
    two_sessions: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = two_sessions

    async def think(session: str) -> None:
        async with await Runtime.open() as runtime:
            await runtime.settings.set_session_thinking(session, "high")

    asyncio.run(think(first))
    assert main(["sessions", "rm", "-y", first]) == 0
    assert capsys.readouterr().out == f"deleted {first}\n"
    assert listed(capsys, "list") == [second]

    async def remains() -> tuple[Session | None, Sequence[Row], str | None, list[SearchHit]]:
        async with await Runtime.open() as runtime:
            session = await runtime.transcripts.get_session(first)
            rows = await runtime.transcripts.db.fetchall(
                "SELECT id FROM messages WHERE session_id = ?", (first,)
            )
            assert runtime.state is not None
            setting = await runtime.state.setting(first, "thinking")
            hits = await runtime.sessions.search_sessions("tomatoes")
            return session, rows, setting, hits

    session, rows, setting, hits = asyncio.run(remains())
    assert session is None and rows == [] and setting is None and hits == []
    # The other session is untouched.
    assert main(["sessions", "search", "basil"]) == 0


def test_rm_without_a_terminal_and_without_yes_refuses(
    two_sessions: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    first, _ = two_sessions
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert main(["sessions", "rm", first]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "-y" in err
    assert first in listed(capsys, "list")


def test_rm_asks_on_a_terminal_and_a_no_keeps_the_session(
    two_sessions: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    first, _ = two_sessions

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stdin", Terminal("n\n"))
    assert main(["sessions", "rm", first]) == 1
    assert "for good" in capsys.readouterr().out
    assert first in listed(capsys, "list")
    monkeypatch.setattr("sys.stdin", Terminal("y\n"))
    assert main(["sessions", "rm", first]) == 0
    assert capsys.readouterr().out.endswith(f"deleted {first}\n")
    assert first not in listed(capsys, "list")


def test_rm_of_an_unknown_id_exits_2(
    two_sessions: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sessions", "rm", "-y", "ses_nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ses_nope" in err
