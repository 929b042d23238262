"""Turns: N sessions x 1 turn with the mock provider, end to end (target >= 300 turns/s).

Each turn goes through the real path: session row with its frozen prompt, an
idempotent turn job, a leased claim, the user message and the reply appended
under the lease, the job completed.

Usage: python benchmarks/turns_bench.py [N] [--concurrency C]
       python benchmarks/turns_bench.py [N] --baseline PATH [--rounds R] [--concurrency C]

With --baseline, the same benchmark runs against the code at PATH (a checkout of another
commit, e.g. `git worktree add /tmp/old040 040ffbc`) and against this tree, each in a
process of its own (PYTHONPATH=PATH, then PYTHONPATH=this tree), in alternating rounds,
one turn at a time (concurrency 1) and C at a time; it prints the medians side by side
with their ratios (ours / baseline).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _harness import turns_config

from habakkuk.engine.config import parse_config
from habakkuk.engine.events import EventPayload, JobFinished
from habakkuk.engine.home import Home
from habakkuk.runtime import Runtime

ROOT = Path(__file__).resolve().parents[1]


def _status(event: EventPayload) -> str:
    assert isinstance(event, JobFinished)
    return event.status


async def bench(count: int, concurrency: int) -> tuple[float, float, int]:
    """Turns per second of `count` sessions x 1 turn, `concurrency` at a time, the
    process's CPU time per turn in ms, and how many turns did not end done."""
    with tempfile.TemporaryDirectory() as tmp:
        home = Home(Path(tmp))
        text = turns_config(concurrency)
        runtime = await Runtime.open(home, parse_config(text, home.config_path, home))
        sessions = [await runtime.sessions.new_session() for _ in range(count)]
        finished = runtime.bus.subscribe(lambda e: isinstance(e, JobFinished), maxsize=count + 10)
        started, cpu = time.perf_counter(), time.process_time()
        for session in sessions:
            await runtime.turns.submit(session.id, "hello")
        runtime.start_workers()
        statuses = [_status(await finished.get()) for _ in range(count)]
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        await runtime.close()
    failed = sum(1 for status in statuses if status != "done")
    return count / elapsed, cpu / count * 1000, failed


def _child(code: Path, count: int, concurrency: int) -> tuple[float, float]:
    """One run of this benchmark in a process importing habakkuk from `code`: turns per
    second and CPU ms per turn."""
    env = dict(os.environ, PYTHONPATH=str(code))
    argv = [sys.executable, __file__, str(count), "--concurrency", str(concurrency), "--raw"]
    out = subprocess.run(argv, env=env, check=True, capture_output=True, text=True).stdout
    rate, cpu, where = out.split()
    if not Path(where).resolve().is_relative_to(code.resolve()):
        raise SystemExit(f"turns_bench: the run meant for {code} imported habakkuk from {where}")
    return float(rate), float(cpu)


def compare(baseline: Path, count: int, concurrency: int, rounds: int) -> None:
    """Ours beside `baseline`, one at a time and `concurrency` at a time, alternating."""
    widths = sorted({1, concurrency})
    codes = {"baseline": baseline, "ours": ROOT}
    figures: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for round_no in range(1, rounds + 1):
        line = []
        for width in widths:
            for name, code in codes.items():
                rate, cpu = _child(code, count, width)
                figures.setdefault((name, width), []).append((rate, cpu))
                line.append(f"{name} x{width} {rate:,.0f}")
        print(f"round {round_no}: " + " | ".join(line) + " turns/s", flush=True)
    print(f"\n{count} sessions x 1 turn, mock provider, median of {rounds} rounds:")
    print(f"  baseline = {baseline}")
    for width in widths:
        what = "one at a time" if width == 1 else f"{width} concurrent"
        old, new = figures[("baseline", width)], figures[("ours", width)]
        old_rate = statistics.median(rate for rate, _ in old)
        new_rate = statistics.median(rate for rate, _ in new)
        old_cpu = statistics.median(cpu for _, cpu in old)
        new_cpu = statistics.median(cpu for _, cpu in new)
        print(
            f"  turns {what:<14} baseline {old_rate:>6,.0f}  ours {new_rate:>6,.0f} turns/s"
            f"  ours / baseline = {new_rate / old_rate:.2f}x;  CPU per turn baseline"
            f" {old_cpu:.2f} ms, ours {new_cpu:.2f} ms ({old_cpu / new_cpu:.2f}x)"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("count", nargs="?", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--baseline", type=Path, help="a checkout to compare with")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--raw", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.baseline is not None:
        compare(args.baseline, args.count, args.concurrency, args.rounds)
        return
    rate, cpu, failed = asyncio.run(bench(args.count, args.concurrency))
    if args.raw:  # for `compare`: the figures and where habakkuk came from
        import habakkuk

        print(rate, cpu, Path(habakkuk.__file__).parent)
        return
    print(
        f"turns: {args.count} sessions x 1 turn = {rate:,.0f} turns/s, {cpu:.2f} ms CPU a turn"
        f" (mock provider, {args.concurrency} concurrent turns, {failed} not done)"
    )


if __name__ == "__main__":
    main()
