"""The Board screen opening on 1,000 cards: time from pushing it to the first frame that
paints a card table with its rows.

A fresh home gets --cards unassigned cards (so nothing dispatches them) through the real
board service (control.db), with priorities spread over -5..5. The app runs headless
(Textual's test driver, 160x40: the columns layout). Each run pushes a new BoardScreen
and times it to the first frame that paints the todo column with rows in it (the frame
is encoded as a terminal write would be), and checks the list was one board call.
Printed: every run, the median and the worst. Target: <= 150 ms to first paint.

Usage: python benchmarks/board_screen_bench.py [--cards N] [--runs N]
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


async def seed(runtime: Any, count: int) -> None:
    """`count` unassigned cards of spread priorities."""
    from habakkuk.work.board_types import NewCard

    for number in range(count):
        new = NewCard(
            f"card {number:04d}", f"Do the task number {number}.", priority=number % 11 - 5
        )
        await runtime.board.create(new)


async def measure(count: int, runs: int) -> list[float]:
    from textual._compositor import CompositorUpdate
    from textual.widgets import DataTable

    from habakkuk.app import HabakkukApp
    from habakkuk.engine.home import Home
    from habakkuk.screens.board import BoardScreen

    with tempfile.TemporaryDirectory(prefix="habakkuk-board-bench-") as tmp:
        home = Home(Path(tmp))
        home.prepare()
        home.config_path.write_text(CONFIG, encoding="utf-8")
        app = HabakkukApp(home, animate=False)
        times: list[float] = []
        async with app.run_test(size=(160, 40)) as pilot:
            while app.runtime is None or app.get_chat() is None:
                await asyncio.sleep(0.01)
            started = time.perf_counter()
            await seed(app.runtime, count)
            print(f"{count:,} cards added in {time.perf_counter() - started:.2f} s")
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
                screen = BoardScreen()
                painted.clear()
                watching.clear()
                pushed = time.perf_counter()
                await app.push_screen(screen)
                watching[:] = [screen.query_one("#board-col-todo", DataTable)]
                deadline = pushed + 30
                while not painted and time.perf_counter() < deadline:
                    await asyncio.sleep(0.001)
                if not painted:
                    raise SystemExit("the cards never reached the screen")
                if len(screen.cards) != count:
                    raise SystemExit(f"listed {len(screen.cards)} of {count} cards")
                if screen.list_calls != 1:
                    raise SystemExit(f"the list took {screen.list_calls} board calls, not one")
                times.append(painted[0] - pushed)
                await app.pop_screen()
                await pilot.pause()
        return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cards", type=int, default=1_000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    times = asyncio.run(measure(args.cards, args.runs))
    print("first paint, each run: " + ", ".join(f"{t * 1000:.0f}" for t in times) + " ms")
    print(
        f"board screen, {args.cards:,} cards, push to first paint: median "
        f"{statistics.median(times) * 1000:.0f} ms, worst {max(times) * 1000:.0f} ms "
        "(target <= 150 ms)"
    )


if __name__ == "__main__":
    main()
