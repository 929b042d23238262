"""Turns: N sessions x 1 turn with the mock provider, end to end (target >= 300 turns/s).

Each turn goes through the real path: session row with its frozen prompt, an
idempotent turn job, a leased claim, the user message and the reply appended
under the lease, the job completed.

Usage: python benchmarks/turns_bench.py [N] [--concurrency C]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from _harness import turns_config

from habakkuk.engine.config import parse_config
from habakkuk.engine.events import EventPayload, JobFinished
from habakkuk.engine.home import Home
from habakkuk.runtime import Runtime


def _status(event: EventPayload) -> str:
    assert isinstance(event, JobFinished)
    return event.status


async def bench(count: int, concurrency: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home = Home(Path(tmp))
        text = turns_config(concurrency)
        runtime = await Runtime.open(home, parse_config(text, home.config_path, home))
        sessions = [await runtime.sessions.new_session() for _ in range(count)]
        finished = runtime.bus.subscribe(lambda e: isinstance(e, JobFinished), maxsize=count + 10)
        started = time.perf_counter()
        for session in sessions:
            await runtime.turns.submit(session.id, "hello")
        runtime.start_workers()
        statuses = [_status(await finished.get()) for _ in range(count)]
        elapsed = time.perf_counter() - started
        await runtime.close()
    failed = sum(1 for status in statuses if status != "done")
    print(
        f"turns: {count} sessions x 1 turn in {elapsed:.2f}s = {count / elapsed:,.0f} turns/s"
        f" (mock provider, {concurrency} concurrent turns, {failed} not done)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("count", nargs="?", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    asyncio.run(bench(args.count, args.concurrency))
