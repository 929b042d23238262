"""Schedules: one scheduler tick with 10,000 schedules in control.db (target <= 50 ms),
when none is due and when 100 are due (each queues its job and advances by CAS).

Usage: python benchmarks/schedules_tick.py [N] [--due D] [--runs R]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from habakkuk.engine.config import parse_config
from habakkuk.engine.home import Home
from habakkuk.engine.jobs import MIGRATIONS, JobQueue
from habakkuk.engine.store import SqliteDatabase
from habakkuk.work.schedule_types import Schedule
from habakkuk.work.scheduler import Scheduler
from habakkuk.work.service import Schedules

CONFIG = "providers:\n  mock:\n    type: mock\nagents:\n  main:\n    model: mock/scripted\n"
SPECS = ("*/5 * * * *", "0 8 * * 1-5", "@every 2h", "@every 90s", "@daily")


def schedule(i: int, now: float) -> Schedule:
    return Schedule(
        id=f"sch_{i:08x}",
        agent="main",
        name=f"bench {i}",
        spec=SPECS[i % len(SPECS)],
        prompt="go",
        command=None if i % 4 else "true",
        on_output="deliver",
        deliver_to=None,
        workdir=None,
        timeout_seconds=120.0,
        missed="skip",
        enabled=True,
        next_run=now + 86400 + i,
        last_run=None,
        last_status="",
        last_output="",
        fail_streak=0,
        created_at=now,
    )


async def bench(count: int, due: int, runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home = Home(Path(tmp))
        home.prepare()
        home.config_path.write_text(CONFIG, encoding="utf-8")
        config = parse_config(CONFIG, home.config_path, home)
        db = await SqliteDatabase.open(home.db_path("control"), MIGRATIONS)
        queue = JobQueue(db)
        schedules = Schedules(db, queue, config)
        await schedules.store.ensure()
        now = time.time()
        for i in range(count):
            await schedules.store.insert(schedule(i, now))
        ticker = Scheduler(schedules)
        await ticker.tick()  # first tick: tables ensured, lease taken

        idle = []
        for _ in range(runs):
            started = time.perf_counter()
            await ticker.tick()
            idle.append(time.perf_counter() - started)

        busy = []
        for r in range(runs):
            ids = [f"sch_{(r * due + k) % count:08x}" for k in range(due)]
            marks = ",".join("?" for _ in ids)
            at = time.time() - 1
            await db.write(
                lambda conn, ids=ids, marks=marks, at=at: conn.execute(
                    f"UPDATE schedules SET next_run = ? WHERE id IN ({marks})", (at, *ids)
                )
            )
            started = time.perf_counter()
            report = await ticker.tick()
            busy.append(time.perf_counter() - started)
            assert report.queued == due, report
        await db.close()

    def show(label: str, times: list[float]) -> str:
        return (
            f"{label}: median {statistics.median(times) * 1000:.1f} ms,"
            f" max {max(times) * 1000:.1f} ms"
        )

    print(f"schedules tick, {count:,} schedules, {runs} runs each (target <= 50 ms):")
    print("  " + show("none due", idle))
    print("  " + show(f"{due} due", busy))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("count", nargs="?", type=int, default=10_000)
    parser.add_argument("--due", type=int, default=100)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    asyncio.run(bench(args.count, args.due, args.runs))
