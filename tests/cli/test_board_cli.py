"""`habakkuk board ...`: every action through habakkuk.cli.main on a tmp home, and one
end-to-end run as real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from habakkuk.cli import main
from habakkuk.engine.home import Home
from habakkuk.work.board_types import WAKE_FILE
from tests.conftest import WriteConfig, mock_config

AGENTS = "  other:\n    model: mock/scripted\n"
CHANNELS = "channels:\n  tg: {type: telegram, token_env: A_BOT_TOKEN, agent: main}\n"


@pytest.fixture
def board_home(home: Home, write_config: WriteConfig, monkeypatch: pytest.MonkeyPatch) -> Home:
    monkeypatch.setenv("A_BOT_TOKEN", "123:abc")
    write_config(mock_config("- text: hi", extra=AGENTS + CHANNELS))
    return home


def out_json(capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    assert main(["board", *args, "--json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str], code: int = 2) -> str:
    assert main(argv) == code
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    return lines[0]


def add(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["board", "add", *args]) == 0, capsys.readouterr().err
    captured = capsys.readouterr()
    (card_id,) = captured.out.split()
    assert card_id.startswith("card_")
    assert captured.err.startswith(f"{card_id} is todo")
    return card_id


def said(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["board", *args]) == 0, capsys.readouterr().err
    return capsys.readouterr().out.strip()


def test_add_then_every_action_reads_the_card_back(
    board_home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    card = add(capsys, "--to", "other", "--priority", "7", "--body", "Q3 numbers", "Report")
    shown = out_json(capsys, "show", card)
    assert (shown["title"], shown["assignee"], shown["priority"], shown["body"]) == (
        "Report",
        "other",
        7,
        "Q3 numbers",
    )
    assert (shown["created_by"], shown["status"]) == ("user", "todo")
    assert [e["kind"] for e in shown["events"]][:1] == ["created"]

    assert said(capsys, "assign", card, "main") == f"{card} is todo, assigned to main"
    assert said(capsys, "assign", card, "").startswith(f"{card} is todo; unassigned")
    assert said(capsys, "priority", card, "-4").startswith(f"{card} is todo")
    assert out_json(capsys, "show", card)["priority"] == -4
    said(capsys, "comment", card, "use the new template")
    comments = out_json(capsys, "show", card)["comments"]
    assert [(c["author"], c["text"]) for c in comments] == [("user", "use the new template")]
    assert said(capsys, "cancel", card) == f"{card} is cancelled"
    assert said(capsys, "reopen", card).startswith(f"{card} is todo")
    assert out_json(capsys, "show", card)["status"] == "todo"


def test_a_unique_prefix_is_enough(board_home: Home, capsys: pytest.CaptureFixture[str]) -> None:
    card = add(capsys, "Prefix me")
    prefix = card[len("card_") : len("card_") + 8]
    assert said(capsys, "cancel", prefix) == f"{card} is cancelled"


def test_list_is_an_aligned_table_within_80_columns(
    board_home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    first = add(capsys, "--to", "other", "A first card with a rather long title to cut")
    second = add(capsys, "--depends-on", first, "--priority", "3", "Second")
    done_later = add(capsys, "Gone")
    said(capsys, "cancel", done_later)
    assert main(["board", "list"]) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0].split() == ["ID", "STATUS", "PRI", "ASSIGNEE", "TITLE", "WHY"]
    assert all(len(line) <= 80 for line in lines), lines
    assert [line.split()[0] for line in lines[1:]] == [second, first]  # priority first
    assert f"waiting on {first}" in lines[1] or "waiting on" in lines[1]
    assert lines[1].index("Second") == lines[0].index("TITLE")
    assert captured.err.strip() == "2 card(s)"
    listed = out_json(capsys, "list", "--status", "all")
    assert {c["id"] for c in listed["cards"]} == {first, second, done_later}
    assert "comments" not in listed["cards"][0]
    mine = out_json(capsys, "list", "--agent", "other")
    assert [c["id"] for c in mine["cards"]] == [first]
    cancelled = out_json(capsys, "list", "--status", "cancelled")
    assert [c["id"] for c in cancelled["cards"]] == [done_later]


def test_add_with_deliver_keeps_the_address(
    board_home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    card = add(capsys, "--deliver", "tg:42:7", "Ping")
    assert out_json(capsys, "show", card)["status"] == "todo"
    assert main(["board", "show", card]) == 0
    assert "delivers to: tg:42:7" in capsys.readouterr().out


def test_add_touches_the_wake_file_for_a_running_serve(
    board_home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    wake = board_home.root / WAKE_FILE
    before = wake.stat().st_mtime_ns if wake.exists() else None
    add(capsys, "Wake up")
    assert wake.exists() and wake.stat().st_mtime_ns != before


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["add", "--priority", "high", "t"], "--priority 'high': not a whole number"),
        (["add", "--priority", "500", "t"], "--priority 500: must be from -100 to 100"),
        (["add", "  "], "TITLE is empty"),
        (["add", "--depends-on", "card_1,,card_2", "t"], "--depends-on"),
        (["add", "--deliver", "tg", "t"], "not CHANNEL:CHAT[:THREAD]"),
        (["add", "--deliver", "slack:C1", "t"], "no channel account 'slack' (tg)"),
        (["add", "--to", "nobody", "t"], "nobody"),
        (["add", "--parent", "card_ffffffffff", "t"], "card_ffffffffff"),
        (["list", "--status", "sideways"], "--status 'sideways'"),
        (["priority", "card_x", "many"], "N 'many': not a whole number"),
        (["comment", "card_x", " "], "TEXT is empty"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    board_home: Home, capsys: pytest.CaptureFixture[str], argv: list[str], says: str
) -> None:
    error = one_line_error(capsys, ["board", *argv], code=2)
    assert error.startswith(f"habakkuk: board {argv[0]}: ") and says in error, error
    assert out_json(capsys, "list", "--status", "all") == {"cards": []}


def test_no_such_card_is_one_line_and_exit_2(
    board_home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (
        ["show", "card_ffffffffff"],
        ["assign", "card_ffffffffff", "other"],
        ["priority", "card_ffffffffff", "1"],
        ["comment", "card_ffffffffff", "hi"],
        ["cancel", "card_ffffffffff"],
        ["reopen", "card_ffffffffff"],
    ):
        error = one_line_error(capsys, ["board", *argv], code=2)
        assert error == f"habakkuk: board {argv[0]}: no card 'card_ffffffffff'", error


def test_a_refused_change_is_one_line_and_exit_2(
    board_home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    card = add(capsys, "Finish me")
    said(capsys, "cancel", card)
    error = one_line_error(capsys, ["board", "cancel", card])
    assert error.startswith("habakkuk: board cancel: ")


def test_board_without_an_action_names_the_actions(
    board_home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    error = one_line_error(capsys, ["board"])
    assert "add, list, show, assign, priority, comment, cancel, reopen" in error


def test_the_cli_end_to_end_as_processes(board_home: Home) -> None:
    env = {**os.environ, "HABAKKUK_HOME": str(board_home.root)}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "habakkuk.cli", "board", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )

    added = run("add", "--to", "other", "Process card")
    assert added.returncode == 0, added.stderr
    card = added.stdout.strip()
    listed = run("list")
    assert listed.returncode == 0 and card in listed.stdout
    shown = json.loads(run("show", card, "--json").stdout)
    assert (shown["id"], shown["assignee"]) == (card, "other")
    assert run("assign", card, "main").stdout.strip() == f"{card} is todo, assigned to main"
    assert run("comment", card, "hello").returncode == 0
    assert run("cancel", card).stdout.strip() == f"{card} is cancelled"
    assert run("reopen", card).returncode == 0
    final = json.loads(run("show", card, "--json").stdout)
    assert final["status"] == "todo" and [c["text"] for c in final["comments"]] == ["hello"]
    missing = run("show", "card_ffffffffff")
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1
