"""End to end in a real terminal: tmux runs `habakkuk`, keys go in, the pane is read back."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

TMUX = shutil.which("tmux")
pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed")

CONFIG = """\
providers:
  mock:
    type: mock
    script:
      - match: "nap"
        steps:
          - text: "Napping."
            tool_calls:
              - name: exec
                arguments: {command: "sleep 30"}
          - text: "rested"
      - match: "run"
        steps:
          - text: "Running it."
            tool_calls:
              - name: exec
                arguments: {command: "echo e2e-ok"}
          - text: "All done after approval."
      - steps:
          - text: "Hello from the mock; you said {input}"
agents:
  main:
    model: mock/scripted
    mode: ask
"""
WAIT_SECONDS = 30.0


class Pane:
    """One tmux server (own socket) running one command in a 100x30 window."""

    def __init__(self, socket: str) -> None:
        self.socket = socket

    def tmux(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        assert TMUX is not None
        return subprocess.run(
            [TMUX, "-L", self.socket, *args], capture_output=True, text=True, check=check
        )

    def text(self) -> str:
        result = self.tmux("capture-pane", "-p", "-t", "hab", check=False)
        return result.stdout

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "hab", *keys)

    def alive(self) -> bool:
        return self.tmux("has-session", "-t", "hab", check=False).returncode == 0

    def wait(self, condition: Callable[[str], bool], what: str) -> str:
        """Poll the pane (bounded) until `condition(text)` holds."""
        deadline = time.monotonic() + WAIT_SECONDS
        text = ""
        while time.monotonic() < deadline:
            text = self.text()
            if condition(text):
                return text
            time.sleep(0.05)  # a terminal has no event to wait on; poll the screen
        pytest.fail(f"timed out waiting for {what}; the pane shows:\n{text}")


@pytest.fixture
def pane(tmp_path: Path) -> Iterator[Pane]:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(CONFIG, encoding="utf-8")
    executable = Path(sys.executable).with_name("habakkuk")
    command = [str(executable)] if executable.exists() else [sys.executable, "-m", "habakkuk"]
    env = {
        "HABAKKUK_HOME": str(home),
        "NO_COLOR": "1",
        "TERM": "xterm-256color",
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
    }
    shell = " ".join(
        ["env", "-i", *(f"{k}={v}" for k, v in env.items()), *command, ";", "sleep", "60"]
    )
    found = Pane(f"habakkuk-test-{uuid.uuid4().hex[:8]}")
    found.tmux("new-session", "-d", "-s", "hab", "-x", "100", "-y", "30", shell)
    try:
        yield found
    finally:
        found.tmux("kill-server", check=False)


def _composer_lines(text: str) -> list[str]:
    """The lines of text inside the composer's box (between its left and right edges)."""
    return [
        line.strip("▊▎ ")
        for line in text.splitlines()
        if line.startswith("▊ ") and line.rstrip().endswith("▎")
    ]


def test_habakkuk_in_tmux_chats_approves_with_one_key_and_stops_with_ctrl_c(pane: Pane) -> None:
    pane.wait(lambda t: "idle" in t and "mock/scripted" in t, "the chat to be ready")
    # Keys sent in one go, faster than frames, land in order (Ctrl+J is a new line).
    pane.keys("one", "C-j", "two", "C-j", "three")
    screen = pane.wait(lambda t: "three" in t, "the typed lines")
    assert _composer_lines(screen)[-3:] == ["one", "two", "three"], screen
    pane.keys("Enter")
    pane.wait(lambda t: "you said one" in t, "the reply to the three lines")
    pane.keys("-l", "hello there")
    pane.keys("Enter")
    pane.wait(lambda t: "Hello from the mock; you said hello there" in t, "the streamed reply")
    pane.keys("-l", "run the command")
    pane.keys("Enter")
    screen = pane.wait(lambda t: "Approve exec?" in t, "the approval prompt")
    assert "echo e2e-ok" in screen
    pane.keys("y")
    pane.wait(lambda t: "All done after approval." in t, "the reply after approval")
    pane.keys("-l", "take a nap")
    pane.keys("Enter")
    pane.wait(lambda t: "Approve exec?" in t and "sleep 30" in t, "the second approval")
    pane.keys("a")
    pane.wait(lambda t: "sleep 30  running" in t, "the call to run")
    pane.keys("C-c")
    pane.wait(lambda t: "Turn stopped." in t, "Ctrl+C to stop the turn")
    pane.keys("C-q")
    # After quitting, the shell's `sleep` keeps the pane: the app's screen is gone.
    pane.wait(lambda t: "mock/scripted" not in t, "the app to quit")
