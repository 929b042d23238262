"""The limit holds under concurrency: 50 parallel turns, a turn fanning out to 8
sub-agents and a burst of 10 schedule runs, all against a $1.00 daily limit, with a
model whose prices are known (config `pricing:`). Whatever the interleaving, the day's
spend in usage.db never passes $1.00 plus one call's reservation, and the limit is
actually reached (turns end paused, schedule runs are skipped with the reason).

The model is the offline mock provider streaming its replies in small pieces with a
short pause between them, so the calls overlap for real on the event loop; every
reservation the budget holds is observed to know the largest one."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from habakkuk.engine.config import ModelRef
from habakkuk.engine.llm.budget import Hold, Ledger
from habakkuk.runtime import Runtime
from habakkuk.work.schedule_types import NewSchedule
from tests.conftest import OpenRuntime
from tests.helpers import eventually

LIMIT = 1.00
FAN_OUT = 8
TURNS = 50
SCHEDULES = 10

CALLS = ", ".join(f"{{name: delegate, arguments: {{task: 'part {n}'}}}}" for n in range(FAN_OUT))
CONFIG = f"""
providers:
  mock:
    type: mock
    script:
      - match: "^fan out"
        steps:
          - tool_calls: [{CALLS}]
          - text: all parts delegated
      - steps:
          - text: "ok: {{input}}"
agents:
  main:
    model: mock/scripted
    mode: full
title_model: "off"
workers: {{turns: {TURNS}, subturns: {FAN_OUT}, schedules: 4}}
# Dollars per million tokens: a call costs about $0.025 and reserves about $0.36.
pricing:
  scripted: {{input: 60.0, output: 2.0}}
budget:
  daily: {LIMIT}
"""


def watch_holds(runtime: Runtime) -> list[float]:
    """Every amount the budget holds, as it holds it (the ledger observed, not changed)."""
    amounts: list[float] = []
    ledger: Ledger = runtime.budget.ledger
    hold = ledger.hold

    def observed(amount: float, keys: Any, turn: str) -> Hold:
        amounts.append(amount)
        return hold(amount, keys, turn)

    ledger.hold = observed  # type: ignore[method-assign]  # reason: observe every hold
    return amounts


async def spent_today(runtime: Runtime) -> float:
    await runtime.budget.refresh(force=True)
    return (await runtime.budget.status()).install.today.spent


@pytest.mark.parametrize("round_", range(2))
async def test_parallel_turns_sub_agents_and_schedules_never_overshoot_the_daily_limit(
    runtime_factory: OpenRuntime, round_: int
) -> None:
    runtime = await runtime_factory(CONFIG)
    provider: Any = runtime.providers.provider(ModelRef("mock", "scripted"))
    provider.chunk_delay = 0.001 * (round_ + 1)  # the calls overlap while they stream
    amounts = watch_holds(runtime)
    runtime.start_workers(channels=False)
    schedules = [
        await runtime.schedules.add(
            NewSchedule(agent="main", name=f"digest {n}", when="@daily", prompt=f"digest {n}"),
            by="owner",
        )
        for n in range(SCHEDULES)
    ]
    sessions = [await runtime.sessions.new_session("main") for _ in range(TURNS + 1)]
    fan_out = await runtime.turns.submit(sessions[0].id, "fan out the work")
    turns = [await runtime.turns.submit(s.id, f"question {n}") for n, s in enumerate(sessions[1:])]
    slots = await asyncio.gather(*(runtime.schedules.run_now(s.id) for s in schedules))
    outcomes = await asyncio.gather(*(runtime.turns.wait_turn(t) for t in [fan_out, *turns]))

    async def slots_settled() -> bool:
        for schedule, job in zip(schedules, slots, strict=True):
            rows = [r for r in await runtime.schedules.runs(schedule.id) if r.job == job]
            if not rows or rows[0].status in ("queued", "running"):
                return False
        return True

    await eventually(slots_settled, what="every schedule run to settle", timeout=60)
    spent = await spent_today(runtime)
    largest = max(amounts)
    assert spent <= LIMIT + largest, (spent, largest)
    # The limit was reached: nothing ran past it, and what could not run says why.
    paused = [o for o in outcomes if o.status == "failed"]
    assert paused and all((o.error or "").startswith("Paused: the daily budget") for o in paused)
    assert any(o.status == "done" for o in outcomes)
    assert spent >= LIMIT / 2, spent  # the limit, not something else, stopped the work
    runs = [r for s in schedules for r in await runtime.schedules.runs(s.id)]
    skipped = [r for r in runs if r.status == "skipped"]
    assert skipped and all(r.reason.startswith("Paused: the daily budget") for r in skipped)
    assert not [r for r in runs if r.status == "failed"], [r.reason for r in runs]
    assert not runtime.budget.ledger.held or max(runtime.budget.ledger.held.values()) < 1e-9
