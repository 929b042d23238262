"""/steer and /btw from the shell: `habakkuk run --session S "/steer ..."` with nothing
running refuses (exit 2) and says how to send a message; `"/btw ..."` runs its aside turn
here and prints the answer, leaving the session's transcript alone. The plain chat: /steer
with nothing running is the message; /btw prints the answer. (/steer reaching a turn
another process runs: tests/crash/test_steer_kill9.py.)"""

from __future__ import annotations

import json

import pytest

from habakkuk.cli import main
from habakkuk.engine.home import Home
from tests.cli.test_plain_chat import EXEC
from tests.conftest import WriteConfig, mock_config


def test_run_steer_refuses_when_idle_and_btw_prints_the_aside_answer(
    home: Home, write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(mock_config("- 'echo: {input}'"))
    assert main(["run", "--json", "remember 42"]) == 0
    session = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["session"]
    assert main(["run", "--session", session, "/steer be brief"]) == 2
    assert "Nothing is running in this session" in capsys.readouterr().err
    assert main(["run", "--json", "--session", session, "/btw which number?"]) == 0
    body = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert body["error"] is False and body["session"] == session
    assert "remember 42" in body["reply"] and "which number?" in body["reply"]
    assert main(["sessions", "export", session, "--format", "json"]) == 0
    exported = json.loads(capsys.readouterr().out)
    assert "which number?" not in json.dumps(exported)  # nothing added to the session


def test_the_plain_chat_steers_when_idle_as_a_message_and_prints_btws_answer(
    home: Home, write_config: WriteConfig
) -> None:
    from tests.cli.test_plain_chat import lines_of, plain_chat

    write_config(mock_config("- 'echo: {input}'"))
    lines = lines_of(plain_chat(home, "/steer remember 42\n/btw which number?\n"))
    # /steer with nothing running: the message (its turn echoes it); /btw acts at once,
    # beside that turn: its answer is the aside's echo of its message, ending with the
    # question.
    assert "echo: remember 42" in lines and "which number?" in lines


@pytest.fixture
def exec_home(home: Home, write_config: WriteConfig) -> Home:
    """A home whose model calls exec, which asks first (mode "ask")."""
    write_config(mock_config(EXEC, mode="ask"))
    return home


def test_the_plain_chat_steers_a_turn_waiting_for_approval_at_once(exec_home: Home) -> None:
    from tests.cli.test_plain_chat import in_order, lines_of, only_transcript, plain_chat

    typed = "run it\n/steer use the new API\ny\n"
    lines = lines_of(plain_chat(exec_home, typed))
    # /steer acts at once, while the turn is queued or waits for approval (not read as the
    # answer, not held as a message);
    # the guidance goes to the model with the tool's result, in the same turn.
    in_order(lines, "Guidance queued: the running turn reads it after its next tool call.",
             "Allowed.", "It ran.", "Done.")  # fmt: skip
    assert "Thinking…" not in lines[lines.index("Allowed.") :]  # no second turn
    assert "use the new API" in only_transcript(exec_home)
