"""Hot reload (services/hot_reload.py): how soon an edit is acted on, and what following
the home costs the turns.

1. Latency: config.yaml edited (a hooks: change) -> the ConfigReloaded event, and a note
   edited by hand -> the edit in memory.db's index, each the median of N edits. Beside
   them, the spec's bound: a poll every 3 s (1.5 s on average).
2. Cost: N sessions x 1 turn with the maintenance workers running (as under `serve`),
   with the hot reload and without it, in alternating rounds in this one process; turns
   per second, CPU ms per turn and how many times the hot reload woke.

Usage: python benchmarks/hot_reload_bench.py [--edits N] [--turns N] [--rounds R]
"""

# The index is read until it holds the edit: there is no event to await for it.
# ruff: noqa: ASYNC110

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from _harness import turns_config

import habakkuk.services.maintenance as maintenance
from habakkuk.engine.config import parse_config
from habakkuk.engine.events import ConfigReloaded, JobFinished
from habakkuk.engine.home import Home
from habakkuk.runtime import Runtime
from habakkuk.services.hot_reload import HotReload

WAKES = [0]
_check = HotReload.check


async def counted_check(self: HotReload) -> None:
    WAKES[0] += 1
    await _check(self)


HotReload.check = counted_check  # type: ignore[method-assign]  # counts the wakes
REAL_START = maintenance.start_hot_reload


def idle_task(host: Any, **_: Any) -> asyncio.Task[None]:
    """Stands in for the hot reload when it is off: a task that only waits."""

    async def wait() -> None:
        await asyncio.Event().wait()

    return asyncio.create_task(wait())


async def open_runtime(root: Path, text: str) -> Runtime:
    home = Home(root)
    home.prepare()
    home.config_path.write_text(text, encoding="utf-8")
    return await Runtime.open(home, parse_config(text, home.config_path, home))


async def latencies(edits: int) -> tuple[list[float], list[float]]:
    """Seconds from each config.yaml edit to its event, and from each note edit to the
    index holding it."""
    maintenance.start_hot_reload = REAL_START
    with tempfile.TemporaryDirectory() as tmp:
        text = turns_config(1)
        runtime = await open_runtime(Path(tmp), text)
        runtime.start_workers(maintenance=True)
        await runtime.memory.opened_ahead()
        config: list[float] = []
        with runtime.bus.subscribe(lambda e: isinstance(e, ConfigReloaded)) as reloads:
            for number in range(edits):
                hooks = f"hooks:\n  - {{event: turn_end, command: 'true {number}'}}\n"
                started = time.perf_counter()
                runtime.home.config_path.write_text(text + hooks, encoding="utf-8")
                await asyncio.wait_for(reloads.get(), 30)
                config.append(time.perf_counter() - started)
        notes: list[float] = []
        db = await runtime.memory.database("main")
        note = runtime.home.agent_dir("main") / "memory" / "bench.md"
        query = "SELECT count(*) FROM notes_fts WHERE notes_fts MATCH ?"
        for number in range(edits):
            word = f"word{number}x"
            started = time.perf_counter()
            note.write_text(f"A note about {word}.\n", encoding="utf-8")
            while not await db.run(lambda c, w=word: c.execute(query, (w,)).fetchone()[0]):
                await asyncio.sleep(0.001)
            notes.append(time.perf_counter() - started)
        await runtime.close()
    return config, notes


async def turns(count: int, hot: bool) -> tuple[float, float, int]:
    """Turns per second, CPU ms per turn and hot reload wakes, for `count` turns."""
    maintenance.start_hot_reload = REAL_START if hot else idle_task
    with tempfile.TemporaryDirectory() as tmp:
        runtime = await open_runtime(Path(tmp), turns_config(8))
        sessions = [await runtime.sessions.new_session() for _ in range(count)]
        finished = runtime.bus.subscribe(lambda e: isinstance(e, JobFinished), maxsize=count * 4)
        runtime.start_workers(maintenance=True)
        await runtime.memory.opened_ahead()
        WAKES[0] = 0
        started, cpu = time.perf_counter(), time.process_time()
        for session in sessions:
            await runtime.turns.submit(session.id, "hello")
        done = 0
        while done < count:
            event = await finished.get()
            assert isinstance(event, JobFinished)
            done += event.job_kind == "turn"
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        wakes = WAKES[0]
        await runtime.close()
    return count / elapsed, cpu / count * 1000, wakes


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--edits", type=int, default=20)
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    config, notes = asyncio.run(latencies(args.edits))
    print(f"latency, median of {args.edits} edits (spec's poll: 3 s, 1.5 s on average):")
    print(f"  config.yaml edit -> ConfigReloaded  {statistics.median(config) * 1000:7.1f} ms")
    print(f"  note edit -> indexed                {statistics.median(notes) * 1000:7.1f} ms")
    figures: dict[bool, list[tuple[float, float, int]]] = {False: [], True: []}
    for round_no in range(1, args.rounds + 1):
        line = []
        for hot in (False, True):
            figure = asyncio.run(turns(args.turns, hot))
            figures[hot].append(figure)
            line.append(f"{'on' if hot else 'off'} {figure[0]:,.0f} turns/s ({figure[2]} wakes)")
        print(f"round {round_no}: " + " | ".join(line), flush=True)
    off, on = figures[False], figures[True]
    off_rate, on_rate = (statistics.median(f[0] for f in x) for x in (off, on))
    off_cpu, on_cpu = (statistics.median(f[1] for f in x) for x in (off, on))
    wakes = statistics.median(f[2] for f in on)
    print(f"{args.turns} turns x {args.rounds} rounds, 8 concurrent, maintenance workers on:")
    print(
        f"  hot reload off {off_rate:6,.0f} turns/s {off_cpu:.2f} ms CPU/turn | on {on_rate:6,.0f}"
        f" turns/s {on_cpu:.2f} ms CPU/turn | on / off = {on_rate / off_rate:.2f}x;"
        f" {wakes:.0f} wakes"
    )


if __name__ == "__main__":
    main()
