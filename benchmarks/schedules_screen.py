"""The Schedules screen opening on 1,000 schedules: time from pushing it to the first
frame that paints the table with its rows.

A fresh home gets --schedules schedules through the real service (control.db): cron
expressions, @every, the shorthands and one-offs, a tenth of them paused. The app runs
headless (Textual's test driver, 120x40). Each run pushes a new SchedulesScreen and
times it to the first frame that paints the schedules table with rows in it (the frame
is encoded as a terminal write would be); every row's next three fire times are worked
out before that frame. Printed: every run, the median and the worst.
Target: <= 150 ms to first paint.

Usage: python benchmarks/schedules_screen.py [--schedules N] [--runs N]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from _harness import milliseconds, mock_config, paint_summary, screen_first_paints

CONFIG = mock_config("main", "ops", timezone="Europe/Paris")

WHEN = [
    "0 8 * * 1-5",
    "*/15 * * * *",
    "30 6 1 * *",
    "@every 2h",
    "@every 45m",
    "@hourly",
    "@daily",
    "@weekly",
    "at 2030-06-01 09:00",
    "0 */3 * * *",
]


async def seed(runtime: Any, count: int) -> None:
    """`count` prompt schedules of every kind of `when`, every tenth paused."""
    from habakkuk.work.schedule_types import NewSchedule

    started = time.perf_counter()
    for number in range(count):
        agent = "main" if number % 3 else "ops"
        new = NewSchedule(
            agent=agent,
            name=f"schedule {number:04d}",
            when=WHEN[number % len(WHEN)],
            prompt=f"Do the task number {number}.",
        )
        added = await runtime.schedules.add(new, by="owner")
        if number % 10 == 9:
            await runtime.schedules.pause(added.id)
    print(f"{count:,} schedules added in {time.perf_counter() - started:.2f} s")


async def measure(count: int, runs: int) -> list[float]:
    from textual.widgets import DataTable

    from habakkuk.screens.schedules import SchedulesScreen

    def check(screen: SchedulesScreen) -> None:
        if len(screen.schedules) != count:
            raise SystemExit(f"listed {len(screen.schedules)} of {count} schedules")

    return await screen_first_paints(
        SchedulesScreen,
        lambda screen: screen.query_one("#schedule-table", DataTable),
        runs,
        size=(120, 40),
        what="the schedules",
        config=CONFIG,
        seed=lambda runtime: seed(runtime, count),
        check=check,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schedules", type=int, default=1_000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    times = asyncio.run(measure(args.schedules, args.runs))
    print(f"first paint, each run: {milliseconds(times)} ms")
    name = f"schedules screen, {args.schedules:,} schedules, push to first paint"
    print(paint_summary(name, times))


if __name__ == "__main__":
    main()
