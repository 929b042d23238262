"""`habakkuk chat --plain` driven through a pipe: a real process on a home whose mock model
is scripted to call a tool that needs an approval, its standard input a script of lines."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys

import pytest

from habakkuk.cli import main
from habakkuk.engine.home import Home
from tests.conftest import WriteConfig, mock_config
from tests.helpers import BOUND

# The model says something, calls exec (which asks in mode "ask"), then says how it went.
EXEC = """
- text: "Running it."
  tool_calls:
    - name: exec
      arguments: {command: "echo approved-output"}
- after: {ok: "It ran.", denied: "It was refused."}
  text: "?"
"""
ECHO = "- 'echo: {input}'"
ESC = "\x1b"
ASKED = "Allow it? Type y for yes, a for always in this session, n for no."


@pytest.fixture
def exec_home(home: Home, write_config: WriteConfig) -> Home:
    write_config(mock_config(EXEC, mode="ask"))
    return home


def environment(home: Home) -> dict[str, str]:
    # A colour terminal's TERM: the plain chat must still write no escape into a pipe.
    return {**os.environ, "HABAKKUK_HOME": str(home.root), "TERM": "xterm-256color"}


def plain_chat(home: Home, typed: str, *flags: str) -> subprocess.CompletedProcess[str]:
    """`habakkuk chat --plain` with `typed` as its whole standard input (then its end)."""
    return subprocess.run(
        [sys.executable, "-m", "habakkuk.cli", "chat", "--plain", *flags],
        input=typed,
        capture_output=True,
        text=True,
        env=environment(home),
        timeout=120,
    )


def lines_of(result: subprocess.CompletedProcess[str]) -> list[str]:
    """The lines the chat printed, after checking it ended well and wrote no escape."""
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert ESC not in result.stdout + result.stderr
    return result.stdout.splitlines()


def in_order(lines: list[str], *expected: str) -> None:
    """Each of `expected` is a line of `lines`, in that order (others may come between)."""
    at = 0
    for want in expected:
        assert want in lines[at:], f"{want!r} not after line {at} in {lines}"
        at = lines.index(want, at) + 1


def test_an_approval_answered_y_runs_the_tool_and_every_state_is_a_line(
    exec_home: Home,
) -> None:
    lines = lines_of(plain_chat(exec_home, "run it\ny\n"))
    in_order(
        lines,
        "Plain chat with main.",
        "Thinking…",
        # Streamed: the text before the tool call is out before the tool's line.
        "Running it.",
        "[tool] exec: echo approved-output",
        "Waiting for your approval: exec: echo approved-output",
        ASKED,
        "Allowed.",
        "It ran.",
        "Done.",
    )
    assert lines.count("Thinking…") == 1 and lines.count("Running it.") == 1


def test_an_approval_answered_n_denies_the_tool(exec_home: Home) -> None:
    lines = lines_of(plain_chat(exec_home, "run it\nn\n"))
    in_order(lines, ASKED, "Denied.", "It was refused.", "Done.")
    assert "It ran." not in lines


def test_a_line_that_answers_nothing_is_asked_again(exec_home: Home) -> None:
    lines = lines_of(plain_chat(exec_home, "run it\nmaybe\ny\n"))
    in_order(lines, "Please answer y, a or n.", "Allowed.", "It ran.")


def test_the_end_of_input_denies_the_waiting_approval_and_exits_0(exec_home: Home) -> None:
    lines = lines_of(plain_chat(exec_home, "run it\n"))
    in_order(lines, "Waiting for your approval: exec: echo approved-output",
             "Denied.", "It was refused.", "Done.")  # fmt: skip


def test_lines_typed_during_a_turn_wait_for_it(home: Home, write_config: WriteConfig) -> None:
    write_config(mock_config(ECHO))
    lines = lines_of(plain_chat(home, "one\ntwo\n/title\n"))
    in_order(lines, "echo: one", "Done.", "echo: two", "Done.", "Title: one")


FAILING = """
- match: "fail"
  steps: [{error: bad_request}]
- steps: ["Hello from the script."]
"""


def test_a_failed_turn_is_a_line_and_the_chat_goes_on(
    home: Home, write_config: WriteConfig
) -> None:
    write_config(mock_config(FAILING))
    lines = lines_of(plain_chat(home, "fail now\nhi\n"))
    in_order(lines, "Thinking…", "Failed: mock: bad_request: scripted bad_request",
             "Thinking…", "Hello from the script.", "Done.")  # fmt: skip


CLARIFY = """
- text: "One question first."
  tool_calls:
    - name: clarify
      arguments: {questions: [{question: "Which colour?", choices: ["red", "blue"]}]}
- "painted"
"""


def only_transcript(home: Home) -> str:
    """The JSON transcript of the one session on `home` (`habakkuk sessions export`)."""
    import json

    def habakkuk(*argv: str) -> str:
        result = subprocess.run(
            [sys.executable, "-m", "habakkuk.cli", *argv],
            capture_output=True,
            text=True,
            env=environment(home),
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        return result.stdout

    (session,) = json.loads(habakkuk("sessions", "list", "--json"))
    return habakkuk("sessions", "export", session["id"], "--format", "json")


@pytest.mark.parametrize(
    ("typed", "answered"),
    [("blue\n", "the user answered:\\nblue"), ("", "No answer: the person's input ended.")],
)
def test_a_question_is_asked_and_the_next_line_answers_it(
    home: Home, write_config: WriteConfig, typed: str, answered: str
) -> None:
    write_config(mock_config(CLARIFY))
    lines = lines_of(plain_chat(home, f"paint the shed\n{typed}"))
    in_order(lines, "[tool] clarify: Which colour?", "The agent asks:", "1. Which colour?",
             "Type your answer and press Enter.", "Answer sent.", "painted", "Done.")  # fmt: skip
    assert answered in only_transcript(home)


def test_help_lists_the_commands_with_quit_and_quit_ends_the_chat(exec_home: Home) -> None:
    lines = lines_of(plain_chat(exec_home, "/help\n/quit\nrun it\n"))
    assert "/quit — end the chat (also /exit)" in lines
    assert any(line.startswith("/new ") for line in lines)
    assert lines[-1] == "Goodbye."
    assert "Thinking…" not in lines  # nothing after /quit ran


def test_chat_through_a_pipe_is_the_plain_chat_without_asking(exec_home: Home) -> None:
    """`habakkuk chat` alone on a pipe: the full-screen app could not be shown."""
    result = subprocess.run(
        [sys.executable, "-m", "habakkuk.cli", "chat"],
        input="/help\n/quit\n",
        capture_output=True,
        text=True,
        env=environment(exec_home),
        timeout=120,
    )
    lines = lines_of(result)
    assert lines[0] == "Plain chat with main." and lines[-1] == "Goodbye."


def test_exit_ends_the_chat_too(exec_home: Home) -> None:
    lines = lines_of(plain_chat(exec_home, "/exit\nrun it\n"))
    assert lines[-1] == "Goodbye." and "Thinking…" not in lines


def test_the_end_of_input_at_once_exits_0(exec_home: Home) -> None:
    lines = lines_of(plain_chat(exec_home, ""))
    assert lines[0] == "Plain chat with main."


def test_a_session_is_continued_with_its_history(home: Home, write_config: WriteConfig) -> None:
    write_config(mock_config(ECHO))
    first = lines_of(plain_chat(home, "hello\n/status\n"))
    session = next(word for line in first for word in line.split() if word.startswith("ses_"))
    lines = lines_of(plain_chat(home, "/title\n", "--session", session))
    assert lines[0] == f"Plain chat with main, continuing session {session}."
    assert "Title: hello" in lines


@pytest.mark.parametrize(
    ("flags", "says", "code"),
    [
        (("--plain", "--session", "ses_nowhere"), "ses_nowhere", 2),
        (("--plain", "--agent", "nobody"), "nobody", 2),
        (("--plain", "--resume"), "--resume goes with the terminal app", 2),
    ],
)
def test_bad_options_are_one_line(
    exec_home: Home, flags: tuple[str, ...], says: str, code: int
) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "habakkuk.cli", "chat", *flags],
        input="",
        capture_output=True,
        text=True,
        env=environment(exec_home),
        timeout=120,
    )
    assert result.returncode == code, result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], lines


def test_quit_is_a_command_of_the_plain_chat_only(
    exec_home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "/help"]) == 0
    assert "/quit" not in capsys.readouterr().out
    assert main(["run", "/quit"]) == 2  # not a command of `habakkuk run`


async def until_line(stream: asyncio.StreamReader, wanted: str, seen: list[str]) -> None:
    """Read lines into `seen` until `wanted` is one of them."""

    async def read() -> None:
        while wanted not in seen:
            line = await stream.readline()
            assert line, f"the output ended before {wanted!r}: {seen}"
            seen.append(line.decode().rstrip("\n"))

    await asyncio.wait_for(read(), BOUND)


async def test_ctrl_c_stops_the_turn_and_a_second_one_quits(exec_home: Home) -> None:
    chat = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "habakkuk.cli", "chat", "--plain",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env=environment(exec_home),
    )  # fmt: skip
    assert chat.stdin is not None and chat.stdout is not None and chat.stderr is not None
    seen: list[str] = []
    try:
        chat.stdin.write(b"run it\n")
        await until_line(chat.stdout, ASKED, seen)
        chat.send_signal(signal.SIGINT)
        await until_line(chat.stdout, "Stopped.", seen)
        # Still chatting: a command is answered after the stopped turn.
        chat.stdin.write(b"/stop\n")
        await until_line(chat.stdout, "Nothing is running.", seen)
        chat.send_signal(signal.SIGINT)  # at the prompt: quit
        code = await asyncio.wait_for(chat.wait(), BOUND)
    finally:
        if chat.returncode is None:
            chat.kill()
            await chat.wait()
    errors = (await chat.stderr.read()).decode()
    assert code == 0, errors
    assert "Stopping the turn. Press Ctrl-C again to quit." in seen
    assert "It ran." not in seen and "Traceback" not in errors


@pytest.mark.parametrize("argv", [("chat", "--plain"), ("chat",), ("tui",)])
def test_a_broken_config_is_one_line_before_anything_opens(
    home: Home, write_config: WriteConfig, argv: tuple[str, ...]
) -> None:
    write_config("- providers\n- agents\n")
    result = subprocess.run(
        [sys.executable, "-m", "habakkuk.cli", *argv],
        input="",
        capture_output=True,
        text=True,
        env=environment(home),
        timeout=120,
    )
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == f"habakkuk: {home.config_path}:1: must be a mapping, not a list\n"
