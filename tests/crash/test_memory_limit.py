"""Self-protection under memory pressure, with real processes: a `habakkuk --serve` past
limits.max_rss_mb stops claiming, hands its running turn back and exits with
EXIT_MEMORY; the restart finishes the turn, whose reply is there once."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

import pytest

from habakkuk.engine.exit_codes import EXIT_MEMORY
from habakkuk.engine.home import Home
from tests.helpers import eventually
from tests.processes import BOUND, StartServe, query, stop, until_serving

SCRIPT = """
providers:
  mock:
    type: mock
    script:
      - text: "Starting the long job."
        tool_calls:
          - name: exec
            arguments: {command: "echo started > started.txt; exec sleep 60"}
      - text: "finished after the restart"
agents:
  main:
    model: mock/script
    mode: full
"""
# Any process is past 1 MiB: the guard trips at its first reading, 3 s after the pools
# start (the queued turn is claimed at once, so it is running by then).
LIMIT = "limits:\n  max_rss_mb: 1\n  check_seconds: 3\n  grace_seconds: 0.5\n"


def turn_rows(home: Home) -> list[Any]:
    return query(home.db_path("control"), "SELECT * FROM jobs WHERE kind = 'turn'")


def replies(home: Home) -> list[str]:
    rows = query(home.db_path("transcripts"), "SELECT role, blocks FROM messages ORDER BY seq")
    return [
        block["text"]
        for row in rows
        if row["role"] == "assistant"
        for block in json.loads(row["blocks"])
        if block["type"] == "text"
    ]


@pytest.mark.timeout(180)
async def test_past_its_memory_limit_serve_hands_back_its_turn_and_exits_for_a_restart(
    home: Home, runtime_factory: Any, serve_process: StartServe
) -> None:
    # The turn is queued before serve starts, so it runs when the limit trips.
    runtime = await runtime_factory(SCRIPT + LIMIT)
    session = await runtime.sessions.new_session("main")
    await runtime.turns.submit(session.id, "do the long job")
    await runtime.close()
    started = home.root / "agents" / "main" / "workspace" / "started.txt"

    first = await serve_process(home.root)
    _, err = await asyncio.wait_for(first.communicate(), BOUND)
    said = err.decode(errors="replace")
    assert first.returncode == EXIT_MEMORY, said
    assert "Traceback" not in said
    assert "limits.max_rss_mb" in said  # the log line and the exit line say why
    assert "handed back: 1" in said, said
    # The turn was running (its tool had started) and is queued again, its lease let go.
    assert started.exists()
    [job] = turn_rows(home)
    assert job["status"] == "queued" and job["lease_owner"] is None
    assert "finished after the restart" not in replies(home)

    # The supervisor restarts it (here without the limit): the turn finishes, once.
    home.config_path.write_text(SCRIPT, encoding="utf-8")
    second = await serve_process(home.root)
    await until_serving(second)

    async def done() -> bool:
        rows = turn_rows(home)
        return bool(rows) and rows[0]["status"] == "done"

    await eventually(done, what="the restarted serve to finish the turn", timeout=BOUND)
    await stop(second)
    assert replies(home).count("finished after the restart") == 1
    [job] = turn_rows(home)
    assert json.loads(job["result"])["reply"] == "finished after the restart"


@dataclass(frozen=True)
class Job:
    id: str


class Work:
    """The turns service as the guard sees it: jobs that finish after a while."""

    def __init__(self, jobs: int) -> None:
        self.jobs = [Job(f"turn-{n}") for n in range(jobs)]
        self.drained = False

    def drain(self) -> None:
        self.drained = True

    def running_jobs(self) -> list[Any]:
        return list(self.jobs)


async def test_the_guard_lets_running_jobs_finish_within_the_grace_period() -> None:
    from habakkuk.engine.config import LimitsConfig
    from habakkuk.services.memory_guard import MemoryGuard, rss_mb

    assert rss_mb() > 1  # this process's resident memory, read for real
    readings = iter([50.0, 80.0, 120.0])
    work = Work(2)
    limits = LimitsConfig(max_rss_mb=100, grace_seconds=30, check_seconds=0.1)
    guard = asyncio.create_task(MemoryGuard(limits, work, read=lambda: next(readings)).watch())
    await eventually(lambda: work.drained, what="the guard to drain past the limit")
    assert not guard.done()  # the running jobs have their grace period
    work.jobs = []  # they finish
    tripped = await asyncio.wait_for(guard, 10)
    assert (tripped.rss_mb, tripped.limit_mb, tripped.finished, tripped.handed_back) == (
        120.0, 100, 2, 0,
    )  # fmt: skip
