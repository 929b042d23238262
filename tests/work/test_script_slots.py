"""Script slots run at most once: a slot the queue ended because its worker died reads
as interrupted (prompt slots are tried again), the process groups a killed Habakkuk
left running are killed by the next one (a recycled pid never), and a process that
stops when its own turn is done never takes a script."""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import stat
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from habakkuk.cli import main
from habakkuk.engine.home import Home
from habakkuk.work.schedule_types import NewSchedule
from habakkuk.work.script_groups import ScriptGroups, process_start
from habakkuk.work.service import PROMPT_KIND, SCRIPT_KIND
from tests.conftest import mock_config
from tests.work.schedules_env import Control, FakeClock, config_in, open_control

START = dt.datetime(2026, 6, 1, 10, 0, tzinfo=dt.UTC).timestamp()


def dead_pid() -> int:
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(done.stdout)


@pytest.fixture
async def two(home: Home) -> AsyncIterator[tuple[Control, Control]]:
    """control.db as a process that died holds it, and as a live one."""
    config = config_in(home)
    clock = FakeClock(START)
    dead = await open_control(home.db_path("control"), config, clock, pid=dead_pid())
    live = await open_control(home.db_path("control"), config, clock)
    yield dead, live
    await dead.close()
    await live.close()


def script(**changes: Any) -> NewSchedule:
    fields: dict[str, Any] = {"agent": "main", "name": "sync", "when": "@daily"}
    fields.update(changes)
    return NewSchedule(**fields)


# -- the queue's end of a slot whose worker died ------------------------------------------


async def test_a_script_slot_whose_worker_died_is_interrupted_and_not_run_again(
    two: tuple[Control, Control],
) -> None:
    dead, live = two
    added = await live.schedules.add(script(command="./sync.sh"), by="owner")
    job = await live.schedules.run_now(added.id)
    assert await dead.queue.claim([SCRIPT_KIND]) is not None  # its worker, now dead
    assert await live.queue.claim([SCRIPT_KIND]) is None
    [row] = await live.schedules.runs(added.id)
    assert (row.job, row.status) == (job, "interrupted")
    assert row.reason == (
        "the process running it died mid-run; not started again: it runs at most once"
    )
    schedule = await live.schedules.get(added.id)
    assert schedule.last_status == f"interrupted: {row.reason}"
    assert schedule.last_run is not None and schedule.fail_streak == 0


async def test_a_prompt_slot_whose_worker_died_runs_again_while_attempts_remain(
    two: tuple[Control, Control],
) -> None:
    dead, live = two
    added = await live.schedules.add(script(prompt="check the news"), by="owner")
    job = await live.schedules.run_now(added.id)
    assert await dead.queue.claim([PROMPT_KIND]) is not None
    again = await live.queue.claim([PROMPT_KIND])
    assert again is not None and (again.job.id, again.job.attempts) == (job, 2)
    [row] = await live.schedules.runs(added.id)
    assert row.status == "queued"  # nothing to record: it runs again


# -- the process groups a killed Habakkuk left -------------------------------------------


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A process leading its own group, as a script does."""
    process = subprocess.Popen(["sleep", "600"], start_new_session=True)
    yield process
    if process.poll() is None:
        process.kill()
    process.wait(timeout=30)


def record(groups: ScriptGroups, job: str, pgid: int, start: str, owner: int) -> Path:
    """A group's file as a Habakkuk process `owner` would have written it."""
    groups.folder.mkdir(parents=True, exist_ok=True)
    path = groups.folder / f"{job}.json"
    body = {
        "job": job,
        "pgid": pgid,
        "start": start,
        "owner_pid": owner,
        "owner_start": str(process_start(owner)),
        "host": socket.gethostname(),
    }
    path.write_text(json.dumps(body))
    return path


needs_proc = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="Linux /proc")


@needs_proc
def test_a_group_left_by_a_habakkuk_that_died_is_killed_and_forgotten(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    groups = ScriptGroups(tmp_path / "run" / "scripts")
    start = process_start(sleeper.pid)
    assert start is not None
    path = record(groups, "sch_a_1", sleeper.pid, start, owner=dead_pid())
    assert groups.kill_orphans() == ["sch_a_1"]
    assert sleeper.wait(timeout=30) == -9
    assert not path.exists()


@needs_proc
def test_a_group_whose_habakkuk_is_alive_is_left_running(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    groups = ScriptGroups(tmp_path / "run" / "scripts")
    start = process_start(sleeper.pid)
    assert start is not None
    path = record(groups, "sch_a_1", sleeper.pid, start, owner=os.getpid())
    assert groups.kill_orphans() == []
    assert sleeper.poll() is None and path.exists()


@needs_proc
def test_a_pid_given_to_another_process_since_is_never_signalled(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    groups = ScriptGroups(tmp_path / "run" / "scripts")
    # The record's leader started at another time: the pid now belongs to a stranger.
    path = record(groups, "sch_a_1", sleeper.pid, "1", owner=dead_pid())
    assert groups.kill_orphans() == []
    assert sleeper.poll() is None
    assert not path.exists()  # nothing left to do for it


@needs_proc
def test_a_running_script_is_on_record_privately_until_it_ends(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    folder = tmp_path / "run" / "scripts"
    groups = ScriptGroups(folder)
    groups.started("sch_a_1", sleeper.pid)
    [path] = folder.glob("*.json")
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    kept = json.loads(path.read_text())
    assert (kept["job"], kept["pgid"], kept["owner_pid"]) == ("sch_a_1", sleeper.pid, os.getpid())
    assert groups.kill_orphans() == []  # ours, and we are alive
    groups.ended("sch_a_1")
    assert list(folder.iterdir()) == []


def test_an_unreadable_record_is_removed_and_the_others_still_looked_at(tmp_path: Path) -> None:
    groups = ScriptGroups(tmp_path / "scripts")
    groups.folder.mkdir()
    (groups.folder / "bad.json").write_text("{not json")
    gone = record(groups, "sch_b_1", 2**22 + 7, "1", owner=dead_pid())
    assert groups.kill_orphans() == []
    assert list(groups.folder.iterdir()) == [] and not gone.exists()


# -- who runs scripts ----------------------------------------------------------------------


def test_a_one_shot_run_never_takes_a_queued_script_slot(
    home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    home.config_path.write_text(mock_config("- text: done"), encoding="utf-8")
    workspace = home.default_workspace("main")
    command = f'echo "$$" >> {workspace / "started"}; exec sleep 600'
    argv = ["schedules", "add", "--name", "s", "--when", "@daily", "--run", command]
    assert main(argv) == 0
    schedule = capsys.readouterr().out.splitlines()[0]
    assert main(["schedules", "run", schedule]) == 0
    job = capsys.readouterr().out.strip()
    # `habakkuk run` works until its own turn is done, then stops: a script it took
    # would be cut short (and, running at most once, never run).
    assert main(["run", "hi"]) == 0
    assert capsys.readouterr().out.strip() == "done"
    assert not (workspace / "started").exists()
    assert main(["schedules", "runs", schedule, "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)["runs"]
    assert (row["job"], row["status"]) == (job, "queued")
