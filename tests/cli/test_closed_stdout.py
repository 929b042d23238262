"""A reader that closes the pipe early (`habakkuk sessions | head`) ends the command
quietly, as a program killed by SIGPIPE would: exit 141 and nothing on stderr."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from habakkuk.engine.exit_codes import EXIT_PIPE


def run_into_closed_pipe(home: Path, *args: str) -> tuple[int, str]:
    """Run `habakkuk ARGS` with its stdout a pipe nobody reads any more; its exit code and
    stderr."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before a byte is written
    try:
        done = subprocess.run(
            [sys.executable, "-m", "habakkuk.cli", *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            env={**os.environ, "HABAKKUK_HOME": str(home)},
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)
    return done.returncode, done.stderr.decode(errors="replace")


@pytest.mark.parametrize("args", [("--version",), ("init",)])
def test_a_closed_stdout_ends_the_command_quietly(tmp_path: Path, args: tuple[str, ...]) -> None:
    code, err = run_into_closed_pipe(tmp_path / "home", *args)
    assert err == ""
    assert code == EXIT_PIPE
