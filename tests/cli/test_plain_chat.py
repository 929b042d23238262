"""`habakkuk chat --plain` driven through a pipe: a real process on a home whose mock model
is scripted to call a tool that needs an approval, its standard input a script of lines."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

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
        (("--agent", "main"), "--agent and --session go with --plain", 2),
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


# -- `habakkuk chat` and `habakkuk tui`: the terminal app ------------------------------------


def app_on_a_terminal(home: Home, *argv: str, shows: bytes) -> bytes:
    """Start `habakkuk ARGV` on a pseudo-terminal, wait until its screen shows `shows`,
    quit it with ctrl+q; what it drew (the exit code checked)."""
    import fcntl
    import pty
    import select
    import struct
    import termios
    import time

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 100, 0, 0))
    app = subprocess.Popen(
        [sys.executable, "-m", "habakkuk.cli", *argv],
        stdin=follower, stdout=follower, stderr=follower,
        env=environment(home), start_new_session=True,
    )  # fmt: skip
    os.close(follower)
    drawn = b""
    try:
        deadline = time.monotonic() + BOUND
        while shows not in drawn:
            assert time.monotonic() < deadline, f"the app never showed {shows!r}: {drawn!r}"
            if select.select([leader], [], [], 0.1)[0]:
                drawn += os.read(leader, 65536)
        os.write(leader, b"\x11")  # ctrl+q
        # Read on while it ends: a full terminal would block its last frames.
        while app.poll() is None:
            assert time.monotonic() < deadline + BOUND, "the app did not quit on ctrl+q"
            if select.select([leader], [], [], 0.1)[0]:
                try:
                    drawn += os.read(leader, 65536)
                except OSError:  # the app closed the terminal: its end is near
                    app.wait(timeout=BOUND)
        assert app.returncode == 0, drawn[-2000:]
    finally:
        if app.poll() is None:
            app.kill()
            app.wait()
        os.close(leader)
    return drawn


@pytest.mark.parametrize("command", ["chat", "tui"])
def test_chat_and_tui_open_the_terminal_app(exec_home: Home, command: str) -> None:
    drawn = app_on_a_terminal(exec_home, command, shows=b"main")
    assert b"Recent sessions" not in drawn


@pytest.mark.parametrize("argv", [("chat", "--resume"), ("tui", "--resume"), ("--resume", "chat")])
def test_resume_opens_the_session_picker_first(exec_home: Home, argv: tuple[str, ...]) -> None:
    app_on_a_terminal(exec_home, *argv, shows=b"Recent sessions")


def test_the_help_of_chat_and_tui(exec_home: Home, capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("chat", "tui"):
        with pytest.raises(SystemExit) as exited:
            main([command, "--help"])
        assert exited.value.code == 0
        assert "--resume" in capsys.readouterr().out


def test_the_plain_chat_on_a_dumb_terminal_prompts_without_escapes(
    home: Home, write_config: WriteConfig, tmp_path: Path
) -> None:
    """On a terminal the chat shows "> " when it waits; TERM=dumb or not, no escape."""
    import pty
    import select
    import time

    write_config(mock_config(ECHO))
    leader, follower = pty.openpty()
    chat = subprocess.Popen(
        [sys.executable, "-m", "habakkuk.cli", "chat", "--plain"],
        stdin=follower, stdout=follower, stderr=follower,
        env={**environment(home), "TERM": "dumb"}, start_new_session=True,
    )  # fmt: skip
    os.close(follower)
    shown = b""
    try:
        deadline = time.monotonic() + BOUND

        def until(wanted: bytes) -> None:
            nonlocal shown
            while wanted not in shown:
                assert time.monotonic() < deadline, f"never shown {wanted!r}: {shown!r}"
                if select.select([leader], [], [], 0.1)[0]:
                    shown += os.read(leader, 65536)

        until(b"> ")
        os.write(leader, b"hello\n")
        until(b"Done.")
        os.write(leader, b"/quit\n")
        until(b"Goodbye.")
        assert chat.wait(timeout=BOUND) == 0
    finally:
        if chat.poll() is None:
            chat.kill()
            chat.wait()
        os.close(leader)
    assert b"echo: hello" in shown and ESC.encode() not in shown


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
