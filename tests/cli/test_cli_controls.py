"""Control characters through the CLI: a clear one-line error, nothing written."""

from __future__ import annotations

import io

import pytest

from habakkuk.cli import main
from habakkuk.engine.home import Home
from tests.conftest import WriteConfig, mock_config


@pytest.fixture
def cli_home(home: Home, write_config: WriteConfig) -> Home:
    write_config(mock_config("- text: hi"))
    return home


def test_a_note_with_a_nul_from_stdin_is_refused_with_its_position(
    cli_home: Home, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("first line\nsecond\x00line\n"))
    assert main(["memory", "add", "Logs"]) == 2  # bad input
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "U+0000 (NUL) at line 2, column 7" in err
    assert main(["memory", "add", "Shown as\u202etxt.exe", "body"]) == 2
    assert "U+202E (RIGHT-TO-LEFT OVERRIDE)" in capsys.readouterr().err
    memory = cli_home.agent_dir("main") / "memory"
    assert not memory.exists() or not list(memory.glob("*.md"))


def test_a_card_with_an_escape_sequence_is_refused(
    cli_home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["board", "add", "Clear \x1b[2J the screen"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "U+001B (ESC) at position 7" in err
    assert main(["board", "add", "Fine title", "--body", "bidi \u2066isolate\u2069"]) != 0
    assert "board add: the body has the control character U+2066" in capsys.readouterr().err
    assert main(["board", "list", "--json"]) == 0
    assert '"cards": []' in capsys.readouterr().out
