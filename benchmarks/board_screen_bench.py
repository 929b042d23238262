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

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from _harness import milliseconds, mock_config, paint_summary, screen_first_paints

CONFIG = mock_config("main", "ops", timezone="Europe/Paris")


async def seed(runtime: Any, count: int) -> None:
    """`count` unassigned cards of spread priorities."""
    from habakkuk.work.board_types import NewCard

    started = time.perf_counter()
    for number in range(count):
        new = NewCard(
            f"card {number:04d}", f"Do the task number {number}.", priority=number % 11 - 5
        )
        await runtime.board.create(new)
    print(f"{count:,} cards added in {time.perf_counter() - started:.2f} s")


async def measure(count: int, runs: int) -> list[float]:
    from textual.widgets import DataTable

    from habakkuk.screens.board import BoardScreen

    def check(screen: BoardScreen) -> None:
        if len(screen.cards) != count:
            raise SystemExit(f"listed {len(screen.cards)} of {count} cards")
        if screen.list_calls != 1:
            raise SystemExit(f"the list took {screen.list_calls} board calls, not one")

    return await screen_first_paints(
        BoardScreen,
        lambda screen: screen.query_one("#board-col-todo", DataTable),
        runs,
        size=(160, 40),
        what="the cards",
        config=CONFIG,
        seed=lambda runtime: seed(runtime, count),
        check=check,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cards", type=int, default=1_000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    times = asyncio.run(measure(args.cards, args.runs))
    print(f"first paint, each run: {milliseconds(times)} ms")
    print(paint_summary(f"board screen, {args.cards:,} cards, push to first paint", times))


if __name__ == "__main__":
    main()
