"""`habakkuk chat` and `habakkuk tui` on a terminal (a pseudo-terminal the test reads):
the full-screen app, quit with ctrl+q; `habakkuk chat` on a dumb one: the plain chat."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time
from types import TracebackType

import pytest

from habakkuk.cli import main
from habakkuk.engine.home import Home
from tests.conftest import WriteConfig, mock_config
from tests.helpers import BOUND

ESC = b"\x1b"


@pytest.fixture
def chat_home(home: Home, write_config: WriteConfig) -> Home:
    write_config(mock_config("- 'echo: {input}'"))
    return home


class Terminal:
    """`habakkuk ARGV` on a 100x40 pseudo-terminal; what it shows, read as it comes."""

    def __init__(self, home: Home, *argv: str, term: str = "xterm-256color") -> None:
        self._leader, follower = pty.openpty()
        fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 100, 0, 0))
        env = {**os.environ, "HABAKKUK_HOME": str(home.root), "TERM": term}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "habakkuk.cli", *argv],
            stdin=follower, stdout=follower, stderr=follower, env=env, start_new_session=True,
        )  # fmt: skip
        os.close(follower)
        self.shown = b""
        self._deadline = time.monotonic() + BOUND

    def __enter__(self) -> Terminal:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        os.close(self._leader)

    def _read(self) -> bool:
        """Read what is there (within 0.1 s); False once the process closed the terminal."""
        if select.select([self._leader], [], [], 0.1)[0]:
            try:
                self.shown += os.read(self._leader, 65536)
            except OSError:  # EIO: nothing holds the terminal open any more
                return False
        return True

    def until(self, wanted: bytes) -> None:
        """Read until `wanted` was shown."""
        while wanted not in self.shown:
            assert time.monotonic() < self._deadline, f"never shown {wanted!r}: {self.shown!r}"
            if not self._read():
                pytest.fail(f"the terminal closed before {wanted!r}: {self.shown!r}")

    def type(self, keys: bytes) -> None:
        os.write(self._leader, keys)

    def ended(self) -> int:
        """Its exit code, reading on while it ends (a full terminal would block its last
        frames)."""
        while self.process.poll() is None:
            assert time.monotonic() < self._deadline + BOUND, f"still running: {self.shown!r}"
            if not self._read():
                return self.process.wait(timeout=BOUND)
        return self.process.returncode


@pytest.mark.parametrize("command", ["chat", "tui"])
def test_chat_and_tui_open_the_terminal_app(chat_home: Home, command: str) -> None:
    with Terminal(chat_home, command) as app:
        app.until(b"main")  # the agent, on the app's screen
        app.type(b"\x11")  # ctrl+q
        assert app.ended() == 0
    assert b"Recent sessions" not in app.shown and b"Plain chat" not in app.shown


@pytest.mark.parametrize("argv", [("chat", "--resume"), ("tui", "--resume"), ("--resume", "chat")])
def test_resume_opens_the_session_picker_first(chat_home: Home, argv: tuple[str, ...]) -> None:
    with Terminal(chat_home, *argv) as app:
        app.until(b"Recent sessions")
        app.type(b"\x11")
        assert app.ended() == 0


def test_chat_on_a_dumb_terminal_is_the_plain_chat_with_a_prompt_and_no_escape(
    chat_home: Home,
) -> None:
    with Terminal(chat_home, "chat", term="dumb") as chat:
        chat.until(b"Plain chat with main.")
        chat.until(b"> ")  # on a terminal it shows when it waits for a message
        chat.type(b"hello\n")
        chat.until(b"Done.")
        chat.type(b"/quit\n")
        chat.until(b"Goodbye.")
        assert chat.ended() == 0
    assert b"echo: hello" in chat.shown and ESC not in chat.shown


def test_agent_and_session_on_the_app_are_one_line(chat_home: Home) -> None:
    with Terminal(chat_home, "chat", "--agent", "main") as app:
        assert app.ended() == 2
    assert app.shown.decode().strip() == (
        "habakkuk: chat: --agent and --session go with the line-mode chat (--plain); "
        "the terminal app picks a session with --resume"
    )


def test_the_help_of_chat_and_tui(chat_home: Home, capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("chat", "tui"):
        with pytest.raises(SystemExit) as exited:
            main([command, "--help"])
        assert exited.value.code == 0
        assert "--resume" in capsys.readouterr().out
