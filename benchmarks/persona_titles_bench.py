"""What /personality and background titles add to a turn, side by side with neither.

Runs N sessions x 1 turn (every turn a session's first) with the mock provider through the
real path, one at a time, in four variants, alternating within one process for R rounds:

  plain     title_model off, no persona (the turn as before both features)
  titled    title_model on: each first turn's final reply also queues the session's title
            job in its transaction (the pool that runs it is not started: only what the
            turn itself pays is timed)
  persona   a persona file under HOME/personalities set on every session: read at each
            turn's start and sent after the frozen prompt
  both      titled and persona

Prints the median turns/s and CPU ms per turn of each, and each one's ratio to plain.

Usage: python benchmarks/persona_titles_bench.py [N] [--rounds R]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from habakkuk.engine.agent.titles import title_job_id
from habakkuk.engine.config import parse_config
from habakkuk.engine.events import EventPayload, JobFinished
from habakkuk.engine.home import Home
from habakkuk.runtime import Runtime

VARIANTS = {"plain": (False, False), "titled": (True, False), "persona": (False, True)}
VARIANTS["both"] = (True, True)
PERSONA = "Answer as a patient teacher: one idea at a time, each with a short example.\n" * 4


def config(titled: bool) -> str:
    """The mock provider answering "ok"; titles on a model of its own, or off."""
    return (
        '\nproviders:\n  mock: {type: mock, script: ["ok"]}\n'
        f"title_model: {'mock/titler' if titled else 'off'}\n"
        "agents:\n  main: {model: mock/bench, mode: read-only}\n"
        "workers:\n  turns: 1\n"
    )


def _done(event: EventPayload) -> bool:
    return isinstance(event, JobFinished) and event.job_kind == "turn"


async def bench(count: int, titled: bool, persona: bool) -> tuple[float, float]:
    """Turns per second of `count` first turns, one at a time, and CPU ms per turn."""
    with tempfile.TemporaryDirectory() as tmp:
        home = Home(Path(tmp))
        text = config(titled)
        runtime = await Runtime.open(home, parse_config(text, home.config_path, home))
        if persona:
            (home.root / "personalities").mkdir()
            (home.root / "personalities" / "teacher.md").write_text(PERSONA, encoding="utf-8")
        sessions = [await runtime.sessions.new_session() for _ in range(count)]
        for session in sessions:
            if persona:
                await runtime.settings.set_session_personality(session.id, "teacher")
        finished = runtime.bus.subscribe(_done, maxsize=count + 10)
        runtime.start_workers(channels=False)
        started, cpu = time.perf_counter(), time.process_time()
        for session in sessions:
            await runtime.turns.submit(session.id, "hello")
            event = await finished.get()
            assert isinstance(event, JobFinished) and event.status == "done", event
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        queued = await runtime.queue.get(title_job_id(sessions[-1].id))
        assert (queued is not None) == titled, "the title job was not queued as configured"
        await runtime.close()
    return count / elapsed, cpu / count * 1000


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("count", nargs="?", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    figures: dict[str, list[tuple[float, float]]] = {name: [] for name in VARIANTS}
    for round_no in range(1, args.rounds + 1):
        line = []
        for name, (titled, persona) in VARIANTS.items():
            rate, cpu = await bench(args.count, titled, persona)
            figures[name].append((rate, cpu))
            line.append(f"{name} {rate:,.0f}")
        print(f"round {round_no}: " + " | ".join(line) + " turns/s", flush=True)
    print(f"\n{args.count} first turns one at a time, mock provider, median of {args.rounds}:")
    base_rate = statistics.median(rate for rate, _ in figures["plain"])
    base_cpu = statistics.median(cpu for _, cpu in figures["plain"])
    for name, runs in figures.items():
        rate = statistics.median(r for r, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        print(
            f"  {name:<8} {rate:>6,.0f} turns/s ({rate / base_rate:.2f}x plain)"
            f"  CPU {cpu:.2f} ms/turn ({cpu / base_cpu:.2f}x plain)"
        )


if __name__ == "__main__":
    asyncio.run(main())
