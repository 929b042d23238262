"""A script slot runs at most once, with real processes: `habakkuk --serve` killed (-9,
or stopped with SIGTERM) while a schedule's script runs never starts that slot again on
its next start, the script's process group does not outlive the stop, and the slot
reads as interrupted, with why, in `habakkuk schedules runs` and the schedules service.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from habakkuk.engine.home import Home
from habakkuk.runtime import Runtime
from habakkuk.work.schedule_types import SlotRun
from tests.conftest import mock_config
from tests.helpers import eventually_sync

BOUND = 60.0  # the processes are real and cold-started

# Each start writes its process group's id (its leader is the shell: $$) to starts.txt,
# then sleeps as the same process (exec) unless the file `quick` exists.
SCRIPT = 'echo "$$" >> starts.txt; [ -e quick ] || exec sleep 600'


def env_of(home: Path) -> dict[str, str]:
    return {**os.environ, "HABAKKUK_HOME": str(home)}


def cli(home: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "habakkuk.cli", *args],
        env=env_of(home),
        capture_output=True,
        text=True,
        timeout=BOUND,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def serve(home: Path, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "habakkuk.cli", "--serve"],
            env=env_of(home),
            stdout=subprocess.DEVNULL,
            stderr=err,
        )


def slot_rows(home: Path, schedule: str) -> dict[str, tuple[str, str]]:
    """job -> (status, reason) of the schedule's slots, read as another process would."""
    with contextlib.closing(sqlite3.connect(home / "control.db", timeout=5)) as conn:
        rows = conn.execute(
            "SELECT job, status, reason FROM schedule_runs WHERE schedule = ?", (schedule,)
        ).fetchall()
    return {str(job): (str(status), str(reason)) for job, status, reason in rows}


def job_row(home: Path, job: str) -> tuple[str, int]:
    with contextlib.closing(sqlite3.connect(home / "control.db", timeout=5)) as conn:
        status, attempts = conn.execute(
            "SELECT status, attempts FROM jobs WHERE id = ?", (job,)
        ).fetchone()
    return str(status), int(attempts)


def group_alive(pgid: int) -> bool:
    """Whether process group `pgid` has a member that is not a zombie."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if fields[0] != b"Z" and int(fields[2]) == pgid:
            return True
    return False


def starts(workspace: Path) -> list[int]:
    path = workspace / "starts.txt"
    return [int(line) for line in path.read_text().split()] if path.exists() else []


async def service_runs(root: Path, schedule: str) -> list[SlotRun]:
    async with await Runtime.open(Home(root)) as runtime:
        return await runtime.schedules.runs(schedule)


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=BOUND)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=BOUND)


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads process groups in /proc")
@pytest.mark.timeout(300)
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM], ids=["kill-9", "sigterm"])
def test_a_script_slot_cut_short_by_a_stop_is_interrupted_never_started_again(
    tmp_path: Path, how: signal.Signals
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(mock_config("- text: hi"))
    workspace = home / "agents" / "main" / "workspace"
    log = tmp_path / "serve.log"
    # A one-off a year away: the test's runs are the extra ones it asks for.
    later = dt.datetime.now() + dt.timedelta(days=365)
    added = cli(
        home, "schedules", "add", "--name", "probe", "--when", later.strftime("at %Y-%m-%d %H:%M"),
        "--run", SCRIPT, "--on-output", "silent",
    )  # fmt: skip
    schedule = added.splitlines()[0]

    first = serve(home, log)
    try:
        job = cli(home, "schedules", "run", schedule).strip()
        eventually_sync(lambda: starts(workspace), what="the script to start", timeout=BOUND)
        eventually_sync(
            lambda: any((home / "run" / "scripts").glob("*.json")),
            what="its process group on record",
            timeout=BOUND,
        )
        [group] = starts(workspace)
        first.send_signal(how)
        first.wait(timeout=BOUND)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(timeout=BOUND)
    if how == signal.SIGKILL:
        # What the defect was made of: the script outlives a killed server.
        assert group_alive(group)
    else:
        assert first.returncode == 0, log.read_text()
        # A clean stop kills it, and records why before it exits.
        assert not group_alive(group)
        status, reason = slot_rows(home, schedule)[job]
        assert status == "interrupted" and "shutdown" in reason, reason

    (workspace / "quick").touch()  # a script started from here on ends at once
    second = serve(home, log)
    try:
        eventually_sync(
            lambda: not group_alive(group), what="the left-over script killed", timeout=BOUND
        )
        eventually_sync(
            lambda: slot_rows(home, schedule)[job][0] == "interrupted",
            what="the slot recorded interrupted",
            timeout=BOUND,
        )
        # Another run of the same schedule: its serial key takes the oldest queued run
        # first, so had the interrupted one been queued again it would start before.
        probe = cli(home, "schedules", "run", schedule).strip()
        eventually_sync(
            lambda: slot_rows(home, schedule).get(probe, ("",))[0] == "ran",
            what="the next run to finish",
            timeout=BOUND,
        )
        shown = json.loads(cli(home, "schedules", "runs", schedule, "--json"))["runs"]
        text = cli(home, "schedules", "runs", schedule)
    finally:
        stop(second)
    assert second.returncode == 0, log.read_text()
    assert "Traceback" not in log.read_text(), log.read_text()

    assert len(starts(workspace)) == 2  # the interrupted run once, the probe once
    assert starts(workspace)[0] == group
    assert job_row(home, job) == ("failed", 1)
    why = "not started again: it runs at most once"
    cause = "died mid-run" if how == signal.SIGKILL else "a shutdown stopped it mid-run"
    by_job: dict[str, Any] = {run["job"]: run for run in shown}
    assert by_job[job]["status"] == "interrupted"
    assert cause in by_job[job]["reason"] and why in by_job[job]["reason"]
    assert by_job[job]["outcome"].startswith("interrupted: ")
    assert by_job[probe]["status"] == "ran"
    assert "interrupted: " in text and why in text
    runs = {run.job: run for run in asyncio.run(service_runs(home, schedule))}
    assert runs[job].status == "interrupted" and cause in runs[job].reason
    assert not list((home / "run" / "scripts").glob("*.json"))  # nothing left on record
