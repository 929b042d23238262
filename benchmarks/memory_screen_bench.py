"""The Memory screen opening on 10,000 notes: time from pushing it to the first page.

A fresh home gets --notes notes (written as files with the spec's frontmatter, each
with its own title, tags and a few paragraphs), the index is built once (as `habakkuk
serve` keeps it), and the app runs headless (Textual's test driver, 120x40). Each run
pushes a new MemoryScreen and times it to the first frame that paints the notes table
holding its first page (the frame is encoded as a terminal write would be). Printed:
every run, the median and the worst. Target: <= 150 ms to the first page.

Usage: python benchmarks/memory_screen_bench.py [--notes N] [--runs N]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path
from typing import Any

from _harness import milliseconds, paint_summary, screen_first_paints

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
    from textual.widgets import DataTable

    from habakkuk.screens.memory import MemoryScreen

    async def index(runtime: Any) -> None:
        started = time.perf_counter()
        stats = await runtime.memory.reindex("main")
        print(f"index built: {stats.scanned:,} notes in {time.perf_counter() - started:.2f} s")

    frames: list[float] = []
    times = await screen_first_paints(
        MemoryScreen,
        lambda screen: screen.query_one("#note-table", DataTable),
        runs,
        size=(120, 40),
        what="the first page",
        before=lambda home: write_notes(home.agent_dir("main") / "memory", notes),
        seed=index,
        first_frames=frames,
    )
    return times, frames


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    times, frames = asyncio.run(measure(args.notes, args.runs))
    print(f"first page, each run: {milliseconds(times)} ms")
    print(f"first frame of the screen: {milliseconds(frames)} ms")
    print(paint_summary(f"memory screen, {args.notes:,} notes, push to first page", times))


if __name__ == "__main__":
    main()
