"""A /goal survives kill -9 with real processes: after the restart the goal goes on, no
step is doubled, and one session never has two of its turns queued or running at once."""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import sqlite3
import subprocess
from pathlib import Path

import pytest

from habakkuk.engine.goals import follow_up_id
from tests.crash.test_kill9 import BOUND, habakkuk, job_rows
from tests.helpers import eventually_sync

# Turns 1 and 2 write a part; turn 3 starts a long command (killed mid-way), then says
# the goal is reached when it runs again after the restart.
CONFIG = """
providers:
  mock:
    type: mock
    script:
      - match: "turn 3 of"
        steps:
          - text: "Starting the long part."
            tool_calls:
              - name: exec
                arguments: {command: "echo $$ > started.pid; exec sleep 60"}
          - text: "the third part is done. GOAL DONE"
      - steps: ["part written"]
agents:
  main:
    model: mock/script
    mode: full
"""


def goal_rows(home: Path) -> tuple[list[sqlite3.Row], list[sqlite3.Row]]:
    with contextlib.closing(sqlite3.connect(home / "state.db")) as conn:
        conn.row_factory = sqlite3.Row
        goals = conn.execute("SELECT * FROM goals").fetchall()
        turns = conn.execute("SELECT * FROM goal_turns ORDER BY queued_at").fetchall()
    return goals, turns


def closed(process: subprocess.Popen[str]) -> None:
    """Kill `process` if it still runs, and close its pipes (unread)."""
    if process.poll() is None:
        process.kill()
        process.wait(timeout=30)
    for pipe in (process.stdout, process.stderr):
        if pipe is not None:
            pipe.close()


@pytest.mark.timeout(240)
def test_a_goal_killed_mid_turn_goes_on_after_the_restart_without_doubling_a_step(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(CONFIG)
    marker = home / "agents" / "main" / "workspace" / "started.pid"

    first = habakkuk(home, "run", "/goal --turns 5 write the three parts")
    try:
        eventually_sync(marker.exists, what="turn 3's long command to start", timeout=BOUND)
        eventually_sync(
            lambda: marker.read_text().strip() != "", what="the command's pid", timeout=BOUND
        )
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    finally:
        closed(first)
    with contextlib.suppress(ProcessLookupError, ValueError):  # the killed run's child
        os.killpg(int(marker.read_text().strip()), signal.SIGKILL)

    [goal], counted = goal_rows(home)
    assert (goal["status"], goal["counted"], len(counted)) == ("running", 2, 2)
    assert [job["status"] for job in job_rows(home)] == ["done", "done", "running"]

    serve = habakkuk(home, "--serve")
    try:
        eventually_sync(
            lambda: goal_rows(home)[0][0]["status"] == "done",
            what="the goal to be reached after the restart",
            timeout=BOUND,
        )
    finally:
        serve.send_signal(signal.SIGTERM)
        _, err = serve.communicate(timeout=30)
    assert serve.returncode == 0, err

    [goal], counted = goal_rows(home)
    assert (goal["status"], goal["counted"], goal["told"]) == ("done", 3, 1)
    turns = sorted(job_rows(home), key=lambda job: job["seq"])
    assert [job["status"] for job in turns] == ["done", "done", "done"]
    assert [row["turn"] for row in counted] == [job["id"] for job in turns]  # each once
    assert turns[2]["attempts"] == 2  # the killed turn ran again; no new turn was made
    # Each follow-up is derived from the turn before it and was queued after that one
    # ended: never two turns of the session at once.
    for before, after in itertools.pairwise(turns):
        assert after["id"] == follow_up_id(before["id"])
        assert after["created_at"] >= before["updated_at"]


FAST = """
providers:
  mock:
    type: mock
    script: ["part written"]
agents:
  main:
    model: mock/script
    mode: full
"""


BUDGET = 30  # far more than the turns before the kill: the goal is killed mid-way


def done_turns(home: Path) -> int:
    """Turns done so far (0 before the run has made control.db: read-only, so never
    created here)."""
    try:
        with contextlib.closing(
            sqlite3.connect(f"file:{home / 'control.db'}?mode=ro", uri=True)
        ) as conn:
            done = "SELECT count(*) FROM jobs WHERE kind = 'turn' AND status = 'done'"
            return int(conn.execute(done).fetchone()[0])
    except sqlite3.OperationalError:  # not there yet, or its tables not yet made
        return 0


@pytest.mark.timeout(240)
@pytest.mark.parametrize("after", [2, 5])
def test_a_goal_killed_between_fast_turns_is_spent_exactly_after_the_restart(
    tmp_path: Path, after: int
) -> None:
    """Killed at whatever instant the `after`th turn's end finds the process in (its step,
    the follow-up's enqueue, the next turn), the goal still takes its turns, once each."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(FAST)
    first = habakkuk(home, "run", f"/goal --turns {BUDGET} tidy up")
    try:
        eventually_sync(
            lambda: done_turns(home) >= after, what=f"{after} turns to end", timeout=BOUND
        )
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    finally:
        closed(first)
    [goal], _ = goal_rows(home)
    assert goal["status"] == "running"  # killed mid-goal
    serve = habakkuk(home, "--serve")
    try:
        eventually_sync(
            lambda: goal_rows(home)[0][0]["status"] == "spent",
            what="the goal's turns to be spent after the restart",
            timeout=BOUND,
        )
    finally:
        serve.send_signal(signal.SIGTERM)
        _, err = serve.communicate(timeout=30)
    assert serve.returncode == 0, err
    [goal], counted = goal_rows(home)
    assert (goal["counted"], len(counted)) == (BUDGET, BUDGET)
    turns = sorted(job_rows(home), key=lambda job: job["seq"])
    assert [row["turn"] for row in counted] == [job["id"] for job in turns]
    for before, later in itertools.pairwise(turns):
        assert later["id"] == follow_up_id(before["id"])
        assert later["created_at"] >= before["updated_at"]
