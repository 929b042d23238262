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
    # /steer with nothing running: the message; then /btw's answer (the aside's echo of
    # its message: the conversation, then the question).
    at = lines.index("echo: remember 42")
    assert lines.index("user: remember 42") > at and lines[-1] == "which number?"
