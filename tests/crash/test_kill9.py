"""Crash safety with real processes: SIGKILL mid-tool-call, restart, the turn finishes once."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import eventually_sync

BOUND = 60.0  # the processes are real and cold-started

CONFIG = """
providers:
  mock:
    type: mock
    script:
      - text: "Starting the long job."
        tool_calls:
          - name: exec
            arguments: {command: "echo $$ > started.pid; exec sleep 60"}
      - text: "finished after the restart"
agents:
  main:
    model: mock/script
    mode: full
"""


def habakkuk(home: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "HABAKKUK_HOME": str(home)}
    return subprocess.Popen(
        [sys.executable, "-m", "habakkuk.cli", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def job_rows(home: Path) -> list[sqlite3.Row]:
    with contextlib.closing(sqlite3.connect(home / "control.db")) as conn:
        conn.row_factory = sqlite3.Row
        return conn.execute("SELECT * FROM jobs WHERE kind = 'turn'").fetchall()


def transcript(home: Path) -> list[tuple[str, list[dict[str, Any]]]]:
    with contextlib.closing(sqlite3.connect(home / "transcripts.db")) as conn:
        rows = conn.execute("SELECT role, blocks FROM messages ORDER BY seq").fetchall()
    return [(role, json.loads(blocks)) for role, blocks in rows]


@pytest.mark.timeout(180)
def test_sigkill_mid_tool_call_then_serve_finishes_the_turn_once(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(CONFIG)
    workspace = home / "agents" / "main" / "workspace"
    marker = workspace / "started.pid"

    first = habakkuk(home, "run", "--json", "do the long job")
    try:
        eventually_sync(marker.exists, what="the tool call to start", timeout=BOUND)
        eventually_sync(
            lambda: marker.read_text().strip() != "", what="the tool's pid", timeout=BOUND
        )
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    finally:
        if first.poll() is None:
            first.kill()
        for pipe in (first.stdout, first.stderr):  # unread: closed, not left to the collector
            if pipe is not None:
                pipe.close()
    # The killed process's child (in its own process group) is not ours to keep.
    with contextlib.suppress(ProcessLookupError, ValueError):
        os.killpg(int(marker.read_text().strip()), signal.SIGKILL)

    [job] = job_rows(home)
    assert job["status"] == "running"  # the dead owner still "holds" it
    assert [role for role, _ in transcript(home)] == ["user", "assistant"]

    serve = habakkuk(home, "--serve")
    try:
        eventually_sync(
            lambda: job_rows(home)[0]["status"] == "done",
            what="the resumed turn to finish",
            timeout=BOUND,
        )
    finally:
        serve.send_signal(signal.SIGTERM)
        _, err = serve.communicate(timeout=30)
    assert serve.returncode == 0, err

    [job] = job_rows(home)
    assert job["attempts"] == 2
    assert json.loads(job["result"])["reply"] == "finished after the restart"
    messages = transcript(home)
    assert [role for role, _ in messages] == ["user", "assistant", "user", "assistant"]
    [call] = [b for b in messages[1][1] if b["type"] == "tool_use"]
    [result] = messages[2][1]
    assert result["tool_use_id"] == call["tool_use_id"]
    assert result["is_error"] is True and result["text"].startswith("interrupted")
    assert messages[3][1] == [{"type": "text", "text": "finished after the restart"}]


@pytest.mark.timeout(120)
def test_ctrl_c_on_run_releases_the_turn_and_kills_its_command(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(CONFIG)
    marker = home / "agents" / "main" / "workspace" / "started.pid"
    run = habakkuk(home, "run", "go")
    try:
        eventually_sync(marker.exists, what="the tool call to start", timeout=BOUND)
        eventually_sync(
            lambda: marker.read_text().strip() != "", what="the tool's pid", timeout=BOUND
        )
        run.send_signal(signal.SIGINT)
        _, err = run.communicate(timeout=30)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 130
    assert "Traceback" not in err
    [job] = job_rows(home)
    assert job["status"] == "queued" and job["lease_owner"] is None
    pid = int(marker.read_text().strip())
    eventually_sync(lambda: not _alive(pid), what="the command's process to be gone", timeout=10)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False
