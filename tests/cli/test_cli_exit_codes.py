"""One exit-code rule for every command group (engine/exit_codes.py): a name that matches
nothing is exit 2, in one line that says where once."""

from __future__ import annotations

import itertools

import pytest

from habakkuk.cli import main
from habakkuk.engine.exit_codes import EXIT_NOT_FOUND, EXIT_USAGE, error_line
from habakkuk.engine.home import Home
from tests.conftest import WriteConfig, mock_config

NOT_FOUND = {
    "memory show": (["memory", "show", "ghost"], "habakkuk: memory show: no note 'ghost'"),
    "memory history": (
        ["memory", "history", "abcd1234"],
        "habakkuk: memory history: no change 'abcd1234' in main's history",
    ),
    "sessions export": (["sessions", "export", "ses_ghost"], "session 'ses_ghost' not found"),
    "sessions compact": (["sessions", "compact", "ses_ghost"], "session 'ses_ghost' not found"),
    "sessions archive": (["sessions", "archive", "ses_ghost"], "session 'ses_ghost' not found"),
    "sessions rm": (["sessions", "rm", "-y", "ses_ghost"], "session 'ses_ghost' not found"),
    "run --session": (["run", "--session", "ses_ghost", "hi"], "session 'ses_ghost' not found"),
    "run --skill": (["run", "--skill", "ghost", "hi"], "habakkuk: run --skill: no skill named"),
    "board show": (["board", "show", "card_ffffffffff"], "habakkuk: board show: no card"),
    "schedules show": (["schedules", "show", "sch_ghost"], "habakkuk: schedules show: "),
    "skills show": (["skills", "show", "ghost"], "habakkuk: skills show: "),
    "plugins show": (["plugins", "show", "ghost"], "habakkuk: plugins show: no plugin 'ghost'"),
}


def doubled(line: str) -> bool:
    """Whether a prefix is said twice: "memory show: memory: ...", "board: board: ..."."""
    parts = line.split(": ")
    return any(
        len(b.split()) == 1 and a.split()[0].removesuffix("s") == b.removesuffix("s")
        for a, b in itertools.pairwise(parts)
    )


@pytest.mark.parametrize("argv,says", NOT_FOUND.values(), ids=NOT_FOUND.keys())
def test_a_name_that_matches_nothing_exits_2_in_one_line_in_every_command_group(
    home: Home,
    write_config: WriteConfig,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    says: str,
) -> None:
    write_config(mock_config("- text: hi"))
    assert main(argv) == EXIT_NOT_FOUND == EXIT_USAGE
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    assert lines[0].startswith("habakkuk: ") and says in lines[0], lines[0]
    assert not doubled(lines[0]), lines[0]


@pytest.mark.parametrize(
    ("where", "message", "line"),
    [
        ("memory show", "memory: no note 'x'", "habakkuk: memory show: no note 'x'"),
        ("board show", "board: no card 'x'", "habakkuk: board show: no card 'x'"),
        ("schedules add", "schedule: name is empty", "habakkuk: schedules add: name is empty"),
        ("skills show", "skills: agent 'x' is not configured", "habakkuk: skills show: agent"),
        ("memory show", "memoryless: x", "habakkuk: memory show: memoryless: x"),
        ("", "memory: no note 'x'", "habakkuk: memory: no note 'x'"),
    ],
)
def test_an_error_line_says_where_once(where: str, message: str, line: str) -> None:
    assert error_line(where, message).startswith(line)
    assert not doubled(error_line(where, message))
