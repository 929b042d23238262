"""Two real `habakkuk --serve` processes on one home: each slot of a schedule runs once.

The schedule is `@every 15s` (the shortest `when`, the scheduler's own poll), created a
period ago, so its first slot is due as the processes start; both tick and run workers on
the same control.db. Every run fires the schedule_run hook, which appends the run's job id to a
file: a slot run twice (by both processes) would show its job id twice.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from pathlib import Path

import pytest

from habakkuk.engine.config import parse_config
from habakkuk.engine.home import Home
from habakkuk.runtime import Runtime
from habakkuk.work.schedule_types import NewSchedule
from habakkuk.work.service import Schedules
from tests.conftest import mock_config
from tests.helpers import eventually
from tests.processes import StartServe, stop, until_serving


def ran_jobs(db: Path, schedule: str) -> list[str]:
    """Slot jobs of `schedule` that ran, read from control.db as another process would."""
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)) as conn:
        rows = conn.execute(
            "SELECT job FROM schedule_runs WHERE schedule = ? AND status = 'ran'", (schedule,)
        ).fetchall()
    return [str(job) for (job,) in rows]


def hook_jobs(path: Path) -> list[str]:
    if not path.exists():
        return []
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    return [str(json.loads(line)["job"]) for line in lines]


@pytest.mark.timeout(180)
async def test_two_serve_processes_run_each_slot_once(
    tmp_path: Path, serve_process: StartServe
) -> None:
    root = tmp_path / "home"
    root.mkdir()
    runs = tmp_path / "runs.jsonl"
    hooks = f"hooks:\n  - event: schedule_run\n    command: cat >> {runs}; echo >> {runs}\n"
    config_text = mock_config("- text: 'Checked.'", extra=hooks)
    home = Home(root)
    home.config_path.write_text(config_text, encoding="utf-8")
    async with await Runtime.open(home, parse_config(config_text, home.config_path, home)) as rt:
        # Created on a whole second: work/when.py's EveryWhen.next_epoch can return the same
        # slot for an anchor with sub-microsecond digits (the tick then never ends). And one
        # period ago, so its first slot is due as the processes start: both tick it on
        # their first tick (the test waited up to 15 s for it).
        whole = Schedules(
            rt.queue.db, rt.queue, rt.config, clock=lambda: float(int(time.time())) - 15
        )
        schedule = await whole.add(
            NewSchedule(agent="main", name="pair", when="@every 15s", prompt="check"),
            by="owner",
        )
    processes = [await serve_process(root) for _ in range(2)]
    for process in processes:
        await until_serving(process)
    db = home.db_path("control")
    await eventually(
        lambda: ran_jobs(db, schedule.id),
        what="a slot of the schedule to run",
        timeout=120,
        ignore=(sqlite3.OperationalError,),
    )
    for process in processes:
        await stop(process)  # cleanly: exit 0, no traceback
    ran = ran_jobs(db, schedule.id)
    fired = hook_jobs(runs)
    assert ran, "no slot ran"
    assert len(fired) == len(set(fired)), f"a slot ran twice: {fired}"
    assert set(ran) <= set(fired)
    with contextlib.closing(sqlite3.connect(db)) as conn:
        turns = conn.execute(
            "SELECT id, attempts, status FROM jobs WHERE kind = 'turn' AND id LIKE 'turn_sch_%'"
        ).fetchall()
    done = [t for t in turns if t[2] == "done"]
    assert len(done) >= len(ran) and all(attempts == 1 for _, attempts, _ in done)
