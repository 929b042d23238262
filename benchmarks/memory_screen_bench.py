"""The Memory screen opening on 10,000 notes: time from pushing it to the first page.

A fresh home gets --notes notes (written as files with the spec's frontmatter, each
with its own title, tags and a few paragraphs), the index is built once (as `habakkuk
serve` keeps it), and the app runs headless (Textual's test driver, 120x40). Each run
pushes a new MemoryScreen and times it to the first frame that paints the notes table
holding its first page (the frame is encoded as a terminal write would be). Printed:
every run, the median and the worst. Target: <= 150 ms to the first page.

Usage: python benchmarks/memory_screen_bench.py [--notes N] [--runs N]
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
"""

WORDS = [
    "coffee",
    "garden",
    "travel",
    "invoice",
    "recipe",
    "meeting",
    "project",
    "backup",
    "python",
    "family",
    "music",
    "running",
    "budget",
    "doctor",
    "birthday",
    "keyboard",
    "language",
    "weather",
    "library",
    "train",
]


def write_notes(folder: Path, count: int) -> None:
    """`count` notes as files, updated one minute apart."""
    folder.mkdir(parents=True, exist_ok=True)
    for number in range(count):
        word, other = WORDS[number % len(WORDS)], WORDS[(number * 7) % len(WORDS)]
        minute = number % 60
        hour = (number // 60) % 24
        day = 1 + (number // 1440) % 28
        stamp = f"2026-10-{day:02d}T{hour:02d}:{minute:02d}:00Z"
        body = "\n\n".join(
            f"Paragraph {p} about {word} and {other}, note {number}." for p in range(5)
        )
        (folder / f"note-{number:05d}.md").write_text(
            f"---\ntitle: Note {number} on {word}\ntags: [{word}, {other}]\n"
            f'created: "{stamp}"\nupdated: "{stamp}"\nsource: agent\n---\n\n{body}\n',
            encoding="utf-8",
        )


async def measure(notes: int, runs: int) -> tuple[list[float], list[float]]:
    from textual._compositor import CompositorUpdate
    from textual.widgets import DataTable

    from habakkuk.app import HabakkukApp
    from habakkuk.engine.home import Home
    from habakkuk.screens.memory import MemoryScreen

    with tempfile.TemporaryDirectory(prefix="habakkuk-memory-bench-") as tmp:
        home = Home(Path(tmp))
        home.prepare()
        home.config_path.write_text(CONFIG, encoding="utf-8")
        write_notes(home.agent_dir("main") / "memory", notes)
        app = HabakkukApp(home, animate=False)
        times: list[float] = []
        frames: list[float] = []
        async with app.run_test(size=(120, 40)) as pilot:
            while app.runtime is None or app.get_chat() is None:
                await asyncio.sleep(0.01)
            started = time.perf_counter()
            stats = await app.runtime.memory.reindex("main")
            print(f"index built: {stats.scanned:,} notes in {time.perf_counter() - started:.2f} s")
            painted: list[float] = []
            first_frame: list[float] = []  # the screen's first frame, the list empty or not
            watching: list[Any] = []
            original_display = app._display

            def display(screen: Any, renderable: Any) -> None:
                original_display(screen, renderable)
                if not isinstance(renderable, CompositorUpdate) or not watching or painted:
                    return
                renderable.render_segments(app.console)  # the work of a terminal write
                table = watching[0]
                if not first_frame and screen is table.screen:
                    first_frame.append(time.perf_counter())
                placed = screen._compositor.visible_widgets.get(table)
                if placed is not None and table.row_count > 0:
                    painted.append(time.perf_counter())

            app._display = display
            for _ in range(runs):
                screen = MemoryScreen()
                painted.clear()
                first_frame.clear()
                watching.clear()
                pushed = time.perf_counter()
                await app.push_screen(screen)
                watching[:] = [screen.query_one("#note-table", DataTable)]
                deadline = pushed + 30
                while not painted and time.perf_counter() < deadline:
                    await asyncio.sleep(0.001)
                if not painted:
                    raise SystemExit("the first page never reached the screen")
                times.append(painted[0] - pushed)
                frames.append(first_frame[0] - pushed if first_frame else painted[0] - pushed)
                await app.pop_screen()
                await pilot.pause()
        return times, frames


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    times, frames = asyncio.run(measure(args.notes, args.runs))
    print("first page, each run: " + ", ".join(f"{t * 1000:.0f}" for t in times) + " ms")
    print("first frame of the screen: " + ", ".join(f"{t * 1000:.0f}" for t in frames) + " ms")
    print(
        f"memory screen, {args.notes:,} notes, push to first page: median "
        f"{statistics.median(times) * 1000:.0f} ms, worst {max(times) * 1000:.0f} ms "
        "(target <= 150 ms)"
    )


if __name__ == "__main__":
    main()
