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

# The measurement watches frames: there is no event to await for them.
# ruff: noqa: ASYNC110

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

CONFIG = """\
providers:
  mock:
    type: mock
agents:
  main:
    model: mock/demo
    mode: ask
  ops:
    model: mock/demo
    mode: ask
timezone: Europe/Paris
"""

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


async def measure(count: int, runs: int) -> list[float]:
    from textual._compositor import CompositorUpdate
    from textual.widgets import DataTable

    from habakkuk.app import HabakkukApp
    from habakkuk.engine.home import Home
    from habakkuk.screens.schedules import SchedulesScreen

    with tempfile.TemporaryDirectory(prefix="habakkuk-schedules-bench-") as tmp:
        home = Home(Path(tmp))
        home.prepare()
        home.config_path.write_text(CONFIG, encoding="utf-8")
        app = HabakkukApp(home, animate=False)
        times: list[float] = []
        async with app.run_test(size=(120, 40)) as pilot:
            while app.runtime is None or app.get_chat() is None:
                await asyncio.sleep(0.01)
            started = time.perf_counter()
            await seed(app.runtime, count)
            print(f"{count:,} schedules added in {time.perf_counter() - started:.2f} s")
            painted: list[float] = []
            watching: list[Any] = []
            original_display = app._display

            def display(screen: Any, renderable: Any) -> None:
                original_display(screen, renderable)
                if not isinstance(renderable, CompositorUpdate) or not watching or painted:
                    return
                renderable.render_segments(app.console)  # the work of a terminal write
                table = watching[0]
                placed = screen._compositor.visible_widgets.get(table)
                if placed is not None and table.row_count > 0:
                    painted.append(time.perf_counter())

            app._display = display
            for _ in range(runs):
                screen = SchedulesScreen()
                painted.clear()
                watching.clear()
                pushed = time.perf_counter()
                await app.push_screen(screen)
                watching[:] = [screen.query_one("#schedule-table", DataTable)]
                deadline = pushed + 30
                while not painted and time.perf_counter() < deadline:
                    await asyncio.sleep(0.001)
                if not painted:
                    raise SystemExit("the schedules never reached the screen")
                if len(screen.schedules) != count:
                    raise SystemExit(f"listed {len(screen.schedules)} of {count} schedules")
                times.append(painted[0] - pushed)
                await app.pop_screen()
                await pilot.pause()
        return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schedules", type=int, default=1_000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    times = asyncio.run(measure(args.schedules, args.runs))
    print("first paint, each run: " + ", ".join(f"{t * 1000:.0f}" for t in times) + " ms")
    print(
        f"schedules screen, {args.schedules:,} schedules, push to first paint: median "
        f"{statistics.median(times) * 1000:.0f} ms, worst {max(times) * 1000:.0f} ms "
        "(target <= 150 ms)"
    )


if __name__ == "__main__":
    main()
