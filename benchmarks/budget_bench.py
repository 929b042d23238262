"""What the spending limits cost each model call (services/budget.py).

A home's usage.db holds ROWS model calls today (10,000 by default) and a month of older
ones before them; the install has daily, monthly and per-turn limits and the agent has
its own. Each measured call is what the router does around a real call: the budget's
pre-call hook (the worst case of a realistic request: an 8 KB system prompt, 40 tool
specs and 30 messages, priced and held against six limits), then the settle with the
usage reported. The clock moves CALL_GAP seconds between calls, so the spend is read
from usage.db again as often as it would be (only the rows written since, every
REFRESH_SECONDS, and the raises in state.db; today's whole every FULL_READ_SECONDS).

Prints what a call waits for (median, p99, mean: a stale read runs beside the call),
then the wall time and CPU time per call with the reads it started included, and the
cost of one whole read of today's rows.

Usage: python benchmarks/budget_bench.py [--rows N] [--calls N] [--gap SECONDS]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from habakkuk.engine.config import ModelRef, parse_config
from habakkuk.engine.home import Home
from habakkuk.engine.llm.pricing import PriceTable
from habakkuk.engine.llm.router import Caller
from habakkuk.engine.llm.types import Message, ModelRequest, ToolSpec, Usage
from habakkuk.engine.llm.usage import UsageStore
from habakkuk.engine.state import StateStore
from habakkuk.services.budget import Budget

CONFIG = """
providers:
  anthropic:
    type: anthropic
agents:
  main:
    model: anthropic/claude-sonnet-4-5
    budget: {daily: 40, monthly: 900, per_turn: 5}
budget: {daily: 50, monthly: 1000, per_turn: 10}
"""
REF = ModelRef("anthropic", "claude-sonnet-4-5")


def request() -> ModelRequest:
    """A turn's request of realistic size."""
    schema = {
        "type": "object",
        "properties": {f"field_{n}": {"type": "string", "description": "x" * 60} for n in range(6)},
    }
    tools = [ToolSpec(f"tool_{n}", "Does a thing. " * 12, schema) for n in range(40)]
    messages = [
        Message.user_text(("A question about the project? " * 20) if n % 2 == 0 else "")
        if n % 2 == 0
        else Message("assistant", [Message.user_text("An answer. " * 60).blocks[0]])
        for n in range(30)
    ]
    return ModelRequest("", "You are a helpful agent. " * 330, messages, tools)


async def fill(store: UsageStore, rows: int, day_start: float) -> None:
    """`rows` calls today and as many again earlier in the month."""
    older = day_start - 86_400 * 5
    model = ("anthropic", "claude-sonnet-4-5")
    batch = [
        (at, *model, "main" if n % 3 else "helper", "s", "turn", 1000, 200, 5000, 0, 0.002, 0, 0)
        for n in range(rows)
        for at in (day_start + 1 + n * 0.001, older + n * 0.001)
    ]

    def write(conn: object) -> None:
        conn.executemany(  # type: ignore[attr-defined]  # reason: a DB-API connection
            "INSERT INTO calls (at, provider, model, agent, session, purpose, input_tokens,"
            " output_tokens, cache_read_tokens, cache_write_tokens, cost, web_searches,"
            " web_fetches) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            batch,
        )

    await store.db.write(write)


async def bench(rows: int, calls: int, gap: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home = Home(Path(tmp) / "home")
        home.prepare()
        config = parse_config(CONFIG, home.config_path, home)
        store = await UsageStore.open(Path(tmp) / "usage.db", PriceTable(config.pricing))
        clock = [time.time()]
        state = await StateStore.open(Path(tmp) / "state.db")  # where raises are kept
        budget = Budget(config, store, state, clock=lambda: clock[0])
        await fill(store, rows, budget.periods.day_start.timestamp())
        started = time.perf_counter()
        await budget.refresh(force=True)
        whole = (time.perf_counter() - started) * 1e3
        call = request()
        usage = Usage(input_tokens=100, output_tokens=10)
        times: list[float] = []
        cpu = time.process_time()
        wall = time.perf_counter()
        for n in range(calls):
            clock[0] += gap
            started = time.perf_counter()
            settle = await budget.before_call(REF, Caller("main", "s", turn=f"t{n // 5}"), call)
            settle(usage)
            times.append((time.perf_counter() - started) * 1e6)
            await asyncio.sleep(0)  # the model call: the loop runs the reads begun meanwhile
            await budget.settled()  # the read it started counts toward the call
        amortized = (time.perf_counter() - wall) / calls * 1e3
        cpu_per_call = (time.process_time() - cpu) / calls * 1e3
        await store.close()
        await state.close()
    times.sort()
    print(f"usage rows today: {rows:,} (and {rows:,} earlier this month)")
    print(f"calls: {calls:,}, {gap:g} s apart on the budget's clock")
    print(f"budget check a call waits for: median {statistics.median(times):.1f} us,"
          f" p99 {times[int(len(times) * 0.99)]:.1f} us,"
          f" mean {statistics.fmean(times):.1f} us")  # fmt: skip
    print(f"with the reads of usage.db they started: {amortized:.3f} ms a call"
          f" ({cpu_per_call:.3f} ms of CPU; target <= 0.5 ms)")  # fmt: skip
    print(f"one whole read of today's rows: {whole:.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=5_000)
    parser.add_argument("--gap", type=float, default=1.0, help="seconds between calls")
    args = parser.parse_args()
    asyncio.run(bench(args.rows, args.calls, args.gap))


if __name__ == "__main__":
    main()
